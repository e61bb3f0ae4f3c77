package analysis

import (
	"maps"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/stormradius/stormradius/graph"
)

// Default caps of Limits: far above what a real fleet shows in one window
// (thousands of services, each with a handful of root operations), low
// enough that a window's state, summary and rollup rows stay a few tens of
// megabytes whatever names a client invents.
const (
	DefaultMaxAPIs       = 5_000
	DefaultMaxServices   = 10_000
	DefaultMaxOperations = 50_000
	DefaultMaxVersions   = 10_000
)

// Limits bound the distinct names one window (docs/SPEC.md §4.3) admits, so that
// names a client invents cannot grow the window states, rollups, lists and
// metric series without bound. A window admits each name the first time a
// trace brings it, while it has room; a name it admitted stays admitted
// (a trace re-opened by late spans keeps its names). Past a cap, a trace's
// names are folded (Folder.Fold) into the reserved buckets graph.OtherAPI,
// graph.OtherService, graph.OtherOperation and graph.OtherVersion, and
// the trace is analysed under them: nothing is dropped, and the figures
// of traces made only of admitted names do not change. Zero fields take
// the defaults.
type Limits struct {
	// APIs caps the distinct root APIs (DefaultMaxAPIs).
	APIs int
	// Services caps the distinct services, uninstrumented callees
	// (virtual nodes) included (DefaultMaxServices).
	Services int
	// Operations caps the distinct (service, operation) nodes of admitted
	// services (DefaultMaxOperations).
	Operations int
	// Versions caps the distinct (service, service.version) pairs
	// (DefaultMaxVersions).
	Versions int
}

// OrDefaults returns l with its zero (or negative) fields set to the
// defaults.
func (l Limits) OrDefaults() Limits {
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	return Limits{APIs: def(l.APIs, DefaultMaxAPIs), Services: def(l.Services, DefaultMaxServices),
		Operations: def(l.Operations, DefaultMaxOperations), Versions: def(l.Versions, DefaultMaxVersions)}
}

// Folded says which kinds of a trace's names were past its window's caps.
type Folded uint8

// Kinds of folded names.
const (
	// FoldedAPI: the trace's root API is graph.OtherAPI (its own was past
	// the cap, or its root service or operation was folded).
	FoldedAPI Folded = 1 << iota
	// FoldedService: a hop's service is graph.OtherService.
	FoldedService
	// FoldedOperation: a hop of an admitted service has the operation
	// graph.OtherOperation.
	FoldedOperation
	// FoldedVersion: a hop's version is graph.OtherVersion.
	FoldedVersion
)

// FoldedOf returns what was folded in t, read from its names (the
// reserved names are never a span's: see graph.CapName).
func FoldedOf(t *graph.Trace) Folded {
	var f Folded
	if t.APIName == graph.OtherAPI {
		f |= FoldedAPI
	}
	for i := range t.Hops {
		h := &t.Hops[i]
		switch {
		case h.Service == graph.OtherService:
			f |= FoldedService
		case h.Operation == graph.OtherOperation:
			f |= FoldedOperation
		}
		if h.Version == graph.OtherVersion {
			f |= FoldedVersion
		}
	}
	return f
}

// FoldCounts counts traces by the kinds of names folded in them.
type FoldCounts struct {
	APIs, Services, Operations, Versions int64
}

// Add adds sign × one trace whose folds are f.
func (c *FoldCounts) Add(f Folded, sign int64) {
	if f&FoldedAPI != 0 {
		c.APIs += sign
	}
	if f&FoldedService != 0 {
		c.Services += sign
	}
	if f&FoldedOperation != 0 {
		c.Operations += sign
	}
	if f&FoldedVersion != 0 {
		c.Versions += sign
	}
}

// Merge adds o to c.
func (c *FoldCounts) Merge(o FoldCounts) {
	c.APIs += o.APIs
	c.Services += o.Services
	c.Operations += o.Operations
	c.Versions += o.Versions
}

// Admitted is the set of names one window admitted: at most Limits of
// each kind, never fewer as time goes on. A State keeps its window's
// (State.Admitted); analyses that split a window's traces among
// goroutines share one through Admissions.
type Admitted struct {
	// derived: the names the counts of the state it belongs to hold were
	// added (State.Admitted); until then it holds only those the counts
	// no longer do, as decoded.
	derived  bool
	apis     map[string]struct{}
	services map[string]struct{}
	nodes    map[graph.Node]struct{}
	versions map[ServiceVersion]struct{}
}

func newAdmitted() *Admitted {
	return &Admitted{apis: map[string]struct{}{}, services: map[string]struct{}{},
		nodes: map[graph.Node]struct{}{}, versions: map[ServiceVersion]struct{}{}}
}

// admit reports whether k is in m, adding it if m holds fewer than limit.
func admit[K comparable](m map[K]struct{}, k K, limit int) bool {
	if _, ok := m[k]; ok {
		return true
	}
	if len(m) >= limit {
		return false
	}
	m[k] = struct{}{}
	return true
}

// A hop's outcome: which of its names the window admits.
const (
	okService uint8 = 1 << iota
	okNode
	okVersion
	okAll = okService | okNode | okVersion
)

// hop admits what it can of a hop's names. A folded service spends no
// room on its operation or version.
func (a *Admitted) hop(service, operation, version string, lim *Limits) uint8 {
	if !admit(a.services, service, lim.Services) {
		return 0
	}
	out := okService
	if admit(a.nodes, graph.Node{Service: service, Operation: operation}, lim.Operations) {
		out |= okNode
	}
	if version == "" || admit(a.versions, ServiceVersion{Service: service, Version: version}, lim.Versions) {
		out |= okVersion
	}
	return out
}

// addCounted adds the names s's counts hold (not the reserved ones).
func (a *Admitted) addCounted(s *State) {
	for n := range s.Nodes {
		if graph.IsReserved(n.Service) {
			continue
		}
		a.services[n.Service] = struct{}{}
		if !graph.IsReserved(n.Operation) {
			a.nodes[n] = struct{}{}
		}
	}
	for api := range s.APIs {
		if !graph.IsReserved(api) {
			a.apis[api] = struct{}{}
		}
	}
}

// extras returns the names of a that s's counts do not hold (every
// version: counts keep none), nil when there are none: what a stored
// state must carry besides its counts for its window to admit the same
// names after a restart.
func (a *Admitted) extras(s *State) *Admitted {
	if a == nil {
		return nil
	}
	out := newAdmitted()
	services := make(map[string]struct{}, len(a.services))
	for n := range s.Nodes {
		services[n.Service] = struct{}{}
	}
	for k := range a.services {
		if _, ok := services[k]; !ok {
			out.services[k] = struct{}{}
		}
	}
	for k := range a.nodes {
		if _, ok := s.Nodes[k]; !ok {
			out.nodes[k] = struct{}{}
		}
	}
	for k := range a.apis {
		if _, ok := s.APIs[k]; !ok {
			out.apis[k] = struct{}{}
		}
	}
	for k := range a.versions {
		out.versions[k] = struct{}{}
	}
	if len(out.apis)+len(out.services)+len(out.nodes)+len(out.versions) == 0 {
		return nil
	}
	return out
}

// admittedJSON is the serialised form of a state's extra names, sorted.
type admittedJSON struct {
	APIs     []string         `json:"apis,omitempty"`
	Services []string         `json:"services,omitempty"`
	Nodes    []graph.Node     `json:"nodes,omitempty"`
	Versions []ServiceVersion `json:"versions,omitempty"`
}

func (a *Admitted) toJSON() *admittedJSON {
	if a == nil {
		return nil
	}
	return &admittedJSON{
		APIs:     slices.Sorted(maps.Keys(a.apis)),
		Services: slices.Sorted(maps.Keys(a.services)),
		Nodes:    slices.SortedFunc(maps.Keys(a.nodes), graph.Node.Compare),
		Versions: slices.SortedFunc(maps.Keys(a.versions), ServiceVersion.Compare),
	}
}

func (j *admittedJSON) admitted() *Admitted {
	if j == nil || len(j.APIs)+len(j.Services)+len(j.Nodes)+len(j.Versions) == 0 {
		return nil
	}
	return &Admitted{apis: setOf(j.APIs), services: setOf(j.Services), nodes: setOf(j.Nodes), versions: setOf(j.Versions)}
}

// setOf returns the set of ks.
func setOf[K comparable](ks []K) map[K]struct{} {
	m := make(map[K]struct{}, len(ks))
	for _, k := range ks {
		m[k] = struct{}{}
	}
	return m
}

// Admitted returns the names the window of s admitted, for Folder.Fold:
// those its counts hold and those it admitted before that the counts no
// longer hold (kept with the state when it is stored). It is built the
// first time it is asked for, then kept with s.
func (s *State) Admitted() *Admitted {
	if s.admitted == nil {
		s.admitted = newAdmitted()
	}
	if !s.admitted.derived {
		s.admitted.addCounted(s)
		s.admitted.derived = true
	}
	return s.admitted
}

// KeepAdmitted gives s the admitted names of o: a state rebuilt from its
// window's records (o the state it replaces) keeps what its window had
// admitted.
func (s *State) KeepAdmitted(o *State) { s.admitted = o.admitted }

// Folder folds the names of traces past their window's caps (Limits). It
// remembers, for the names it last saw (by where their bytes are: names
// are interned, so a name mostly arrives as the same string), what each
// window admitted of them, so that a trace whose names were all seen
// before costs a few comparisons per hop, no map lookup. Not safe for
// concurrent use.
type Folder struct {
	lim   Limits
	slots []foldSlot // a power of two long
}

// foldSlot is a hop's names (where their bytes are) and what window ad
// admitted of them. Outcomes never change: a name admitted stays
// admitted, and a name refused was refused because its set was full,
// which it stays.
type foldSlot struct {
	ad                *Admitted
	service, op, ver  *byte
	serviceN, opN, vN int
	out               uint8
}

// foldSlots is the size of a Folder's cache of hop names.
const foldSlots = 4096

// NewFolder returns a Folder for the limits (zero fields: the defaults).
func NewFolder(lim Limits) *Folder {
	return &Folder{lim: lim.OrDefaults(), slots: make([]foldSlot, foldSlots)}
}

// Limits returns the caps f applies.
func (f *Folder) Limits() Limits { return f.lim }

// Fold admits what window ad has room for of trace t's names (t was just
// assembled from spans: its names are those spans carried), folds the
// rest in place into the reserved names, and reports what it folded. A
// folded service's hops get graph.OtherService, graph.OtherOperation and
// no version; a folded operation graph.OtherOperation; a folded version
// graph.OtherVersion; the calls follow their callees. The root API
// becomes graph.OtherAPI when the root hop's service or operation was
// folded, or when the window has no room for it.
func (f *Folder) Fold(ad *Admitted, t *graph.Trace) Folded {
	var folded Folded
	rootFolded := false
	for i := range t.Hops {
		h := &t.Hops[i]
		out := f.outcome(ad, h)
		if out == okAll {
			continue
		}
		if out&okService == 0 {
			h.Service, h.Operation, h.Version = graph.OtherService, graph.OtherOperation, ""
			folded |= FoldedService
		} else {
			if out&okNode == 0 {
				h.Operation = graph.OtherOperation
				folded |= FoldedOperation
			}
			if out&okVersion == 0 {
				h.Version = graph.OtherVersion
				folded |= FoldedVersion
			}
		}
		if int32(i) == t.Root && out&(okService|okNode) != okService|okNode {
			rootFolded = true
		}
	}
	if folded&(FoldedService|FoldedOperation) != 0 {
		for i := range t.Calls {
			c := &t.Calls[i]
			if c.AttemptEnd > c.AttemptStart {
				callee := &t.Hops[t.Attempts[c.AttemptStart].Callee]
				c.CalleeService, c.CalleeOperation = callee.Service, callee.Operation
			}
		}
	}
	if t.APIName != "" && (rootFolded || !admit(ad.apis, t.APIName, f.lim.APIs)) {
		t.APIName = graph.OtherAPI
		folded |= FoldedAPI
	}
	return folded
}

// outcome returns what ad admits of hop h's names, from the cache when
// the same strings were seen with ad before.
func (f *Folder) outcome(ad *Admitted, h *graph.Hop) uint8 {
	sp, op, vp := unsafe.StringData(h.Service), unsafe.StringData(h.Operation), unsafe.StringData(h.Version)
	k := uint64(uintptr(unsafe.Pointer(ad))) ^ uint64(uintptr(unsafe.Pointer(sp)))*0x9e3779b97f4a7c15 ^
		uint64(uintptr(unsafe.Pointer(op)))*0xc2b2ae3d27d4eb4f ^ uint64(uintptr(unsafe.Pointer(vp)))*0x165667b19e3779f9 ^
		uint64(len(h.Service))<<32 ^ uint64(len(h.Operation))<<16 ^ uint64(len(h.Version))
	k ^= k >> 29
	k *= 0xbf58476d1ce4e5b9
	s := &f.slots[(k>>32)&uint64(len(f.slots)-1)]
	if s.ad == ad && s.service == sp && s.op == op && s.ver == vp &&
		s.serviceN == len(h.Service) && s.opN == len(h.Operation) && s.vN == len(h.Version) {
		return s.out
	}
	out := ad.hop(h.Service, h.Operation, h.Version, &f.lim)
	*s = foldSlot{ad: ad, service: sp, op: op, ver: vp, serviceN: len(h.Service), opN: len(h.Operation), vN: len(h.Version), out: out}
	return out
}

// Admissions keeps the admitted names of every window for an analysis
// that spreads one window's traces over goroutines (`analyze`'s shards,
// Batch's workers): one Folder and one Admitted per window, under a lock.
type Admissions struct {
	mu      sync.Mutex
	size    time.Duration
	folder  *Folder
	windows map[int64]*Admitted
}

// NewAdmissions returns empty admissions for cfg's windows and limits.
func NewAdmissions(cfg Config) *Admissions {
	return &Admissions{size: cfg.Window, folder: NewFolder(cfg.Limits), windows: map[int64]*Admitted{}}
}

// Fold folds t's names past its window's caps (Folder.Fold).
func (a *Admissions) Fold(t *graph.Trace) Folded {
	w := WindowOf(t.Start(), a.size)
	a.mu.Lock()
	defer a.mu.Unlock()
	ad := a.windows[w]
	if ad == nil {
		ad = newAdmitted()
		ad.derived = true
		a.windows[w] = ad
	}
	return a.folder.Fold(ad, t)
}
