package graph

import "cmp"

// Trace is one assembled trace: its spans turned into a forest of hops
// (services handling requests), attempts (one request from a hop to a
// callee) and calls (the attempts of one logical request, i.e. a first
// attempt and its retries). Everything a per-trace analysis needs is here;
// nothing in it depends on other traces.
//
// Hops are stored parents-first: the caller of hop i always has a smaller
// index, so top-down passes iterate forwards and bottom-up passes backwards.
type Trace struct {
	ID TraceID
	// Spans are the distinct spans, deduplicated by span id: the slice given
	// to Assemble, compacted. Batch analyses drop them once assembled.
	Spans []Span
	// SpanCount is the number of distinct spans.
	SpanCount int

	Hops     []Hop
	Calls    []Call
	Attempts []Attempt

	// Roots are the hops that root a tree of the trace, earliest first.
	Roots []int32
	// Root is the root hop (docs/SPEC.md §3): the earliest parentless span that is
	// not a CLIENT span, or, when no span is parentless, the earliest SERVER
	// span whose parent is outside the trace; -1 when every tree of the
	// trace is a fragment.
	Root int32
	// RemoteParent reports that the root hop's parent is outside the trace:
	// the trace entered the traced system from an uninstrumented or
	// unsampled caller.
	RemoteParent bool
	// APIName is the root API, "service operation" of Root, "" without one.
	APIName string

	Duplicates int // spans dropped as duplicates of an earlier span id
	Fragments  int // tree roots that are fragments (docs/SPEC.md §3)

	// AdjustedCount is how many traces of the traffic the trace stands
	// for, 1/p of the probability it was sampled with (docs/SPEC.md §2,
	// "sampling"; 1 when unsampled, at most MaxAdjustedCount), and
	// Weight the same rounded to an integer without bias (RoundWeight):
	// what every count the trace adds to is multiplied by. Weight 0 means
	// 1 (W). AdjustedCount is not encoded; Weight is.
	AdjustedCount float64
	Weight        int64
	// SamplingFlags: SamplingConflict, SamplingUnusable.
	SamplingFlags uint8
}

// Hop is one service handling one request: a SERVER span, the root span of
// a tree (of any kind), or a virtual node (an uninstrumented callee).
type Hop struct {
	// The fields are laid out for size: names first, then the numbers,
	// then the flags (96 bytes, the names' pointers together).
	Service   string
	Operation string
	// Version is the service.version of the hop's service ("" for a
	// virtual node): what a rollout gate compares.
	Version string
	Start   int64
	End     int64

	Span int32 // index in Trace.Spans; for a virtual node, its CLIENT span
	// In is the attempt that reached this hop, -1 for roots and detached hops.
	In    int32
	Depth int32
	// CallStart and CallEnd delimit the hop's calls in Trace.Calls.
	CallStart, CallEnd int32

	Failed  bool
	Virtual bool // uninstrumented callee seen only through a CLIENT span
	// Client marks a root hop whose span is a CLIENT span (a fragment left
	// by a context drop): it stands for the calling service, but what that
	// service answered its own caller is not in this trace.
	Client bool
	Claim  Claim

	// Root marks the root of a tree; Fragment a root that is not the
	// trace's root hop (docs/SPEC.md §3: a CLIENT span without a parent, a span whose
	// parent is missing while the trace has a root, a broken parent link).
	// Detached marks a CONSUMER hop: reached asynchronously, so it has no
	// incoming attempt and its errors do not propagate to the producer.
	Root     bool
	Fragment bool
	Detached bool
	// First reports the hop was reached through first attempts only at
	// every level from its root.
	First bool
}

// Key returns the hop's node identity in call graphs.
func (h *Hop) Key() Node { return Node{Service: h.Service, Operation: h.Operation} }

// Call is the attempts one hop made to one callee (service, operation) for
// one logical request.
type Call struct {
	Caller          int32 // hop
	CalleeService   string
	CalleeOperation string

	// AttemptStart and AttemptEnd delimit the call's attempts in
	// Trace.Attempts, in start order.
	AttemptStart, AttemptEnd int32

	Failed     bool  // the last attempt failed
	Claim      Claim // the claim of the last response
	Criteria   bool  // an attempt carried retry.criteria_satisfied=true
	Suppressed bool  // an attempt carried retry.suppressed=true
	FailOpen   Tri   // dependency.fail_open as declared by an attempt
	Virtual    bool  // the callee is a virtual node
}

// Attempts returns the number of attempts of the call.
func (c *Call) Attempts() int { return int(c.AttemptEnd - c.AttemptStart) }

// Retried reports whether the call has two attempts or more.
func (c *Call) Retried() bool { return c.AttemptEnd-c.AttemptStart >= 2 }

// Last returns the index of the call's last attempt.
func (c *Call) Last() int32 { return c.AttemptEnd - 1 }

// Attempt is one request from a hop to a callee.
type Attempt struct {
	Call   int32 // index in Trace.Calls
	Index  int32 // position in its call: 0 for the first attempt
	Callee int32 // hop; a virtual hop when the callee is uninstrumented
	Client int32 // CLIENT span index, -1 when a SERVER span was called directly
	Start  int64
	End    int64

	Failed   bool
	Claim    Claim // the claim received (CLIENT side trusted over SERVER side)
	Mismatch bool  // both sides carried a valid claim and they differ

	Criteria   bool
	Suppressed bool
	FailOpen   Tri
}

// Node is a vertex of a call graph: one operation of one service.
type Node struct {
	Service   string `json:"service"`
	Operation string `json:"operation"`
}

// Compare orders nodes by service, then operation.
func (n Node) Compare(o Node) int {
	return cmp.Or(cmp.Compare(n.Service, o.Service), cmp.Compare(n.Operation, o.Operation))
}

// String returns "service operation".
func (n Node) String() string {
	if n.Operation == "" {
		return n.Service
	}
	return n.Service + " " + n.Operation
}

// API returns the root API ("service operation") of the trace, or "" when
// the trace is a fragment.
func (t *Trace) API() string { return t.APIName }

// Caller returns the hop that made the attempt reaching hop h, or -1.
func (t *Trace) Caller(h int32) int32 {
	in := t.Hops[h].In
	if in < 0 {
		return -1
	}
	return t.Calls[t.Attempts[in].Call].Caller
}

// ObservedClaim returns the claim hop h was seen to answer: what its caller
// received when a CLIENT span recorded it, else what its own span carried.
func (t *Trace) ObservedClaim(h int32) Claim {
	hop := &t.Hops[h]
	switch {
	case hop.In >= 0:
		return t.Attempts[hop.In].Claim
	case hop.Client:
		return ClaimMissing // its span carries what it received, not what it answered
	}
	return hop.Claim
}

// Audited reports whether hop h's answers are audited: an instrumented
// service's hop, not a virtual node nor a CLIENT-span fragment root.
func (h *Hop) Audited() bool { return !h.Virtual && !h.Client }

// Start returns the earliest start of the trace's roots (its root hop and
// any fragment roots), 0 when empty: the instant its window is chosen by.
func (t *Trace) Start() int64 {
	var s int64
	for i := range t.Roots {
		h := &t.Hops[t.Roots[i]]
		if i == 0 || h.Start < s {
			s = h.Start
		}
	}
	return s
}
