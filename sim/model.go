// Package sim is a deterministic service-mesh simulator that produces
// OpenTelemetry traces (pdata) following the span conventions of docs/SPEC.md §2.
//
// A Scenario describes services, their outbound calls (edges), their retry
// middleware and error-ownership middleware (Policy), and faults. Run plays
// Scenario.Traces user requests through the mesh, exactly as real retry and
// claim middleware would behave, and returns one ptrace.Traces per trace
// (plus fragment traces when a service drops context) together with ground
// truth counters that tests can cross-check against trace analysis.
// Sample then samples those traces as fleets do (the collector's
// probabilistic_sampler, head sampling at the roots, Jaeger's sampler,
// tail sampling, spoiled records), the unsampled ones staying the truth.
//
// Everything is deterministic for a given Scenario: random draws come from a
// PCG source seeded by Seed in a fixed order, trace and span ids are derived
// from Seed, Start and counters (so runs with the same seed and different
// starts do not collide in a store), timestamps from Start and the timing
// constants below, and no output depends on map iteration order.
package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Timing constants of the simulated mesh. Every duration in a trace is built
// from them, so tests can predict exact timestamps.
const (
	// HopWork is a hop's own work: half of it before its first outbound
	// call, half after its last.
	HopWork = time.Millisecond
	// NetworkDelay separates a CLIENT span's start from its callee's SERVER
	// span start, and the SERVER span's end from the CLIENT span's end.
	NetworkDelay = 50 * time.Microsecond
	// VirtualLatency is the duration of a CLIENT span to a virtual
	// (uninstrumented) node.
	VirtualLatency = 200 * time.Microsecond
	// RetryBackoff is the gap between the end of a failed attempt and the
	// start of its retry.
	RetryBackoff = 100 * time.Microsecond
	// DefaultSpacing is the gap between the starts of consecutive traces
	// when Scenario.Spacing is zero.
	DefaultSpacing = 10 * time.Millisecond
	// BudgetCap is the maximum number of retry tokens a caller service can
	// accumulate (RetryBudget and RetryOwnership with a budget).
	BudgetCap = 10
	// DefaultClaimHeader is the claim header name used when
	// Scenario.ClaimHeader is empty.
	DefaultClaimHeader = "x-error-claim"
	// ScopeName is the instrumentation scope name of every emitted span.
	ScopeName = "github.com/stormradius/stormradius/sim"
)

// DefaultStart is the start of the first trace when Scenario.Start is zero.
var DefaultStart = time.Date(2025, 11, 18, 0, 0, 0, 0, time.UTC)

// Protocol is the protocol a service is served over.
type Protocol uint8

// Protocols.
const (
	// HTTP services carry http.* / url.* attributes and answer 503 on
	// failure.
	HTTP Protocol = iota
	// GRPC services carry rpc.* attributes and answer UNAVAILABLE (14) on
	// failure.
	GRPC
)

// RetryKind is the retry behaviour of a caller's retry middleware.
type RetryKind uint8

// Retry kinds.
const (
	// RetryNone never retries.
	RetryNone RetryKind = iota
	// RetryNaive retries every failed attempt while attempts ≤ Policy.Retries.
	RetryNaive
	// RetryBudget is RetryNaive where every retry also spends one token of
	// the caller's token bucket (earning Policy.Budget per call).
	RetryBudget
	// RetryOwnership retries only when the response claim is claimed or
	// missing (invalid counts as missing), up to Policy.Retries, subject to
	// the token bucket when Policy.Budget > 0. An unclaimed error it would
	// otherwise have retried (retries left, a token available) is
	// suppressed (retry.suppressed=true).
	RetryOwnership
)

// ClaimMode is the behaviour of a service's error-ownership middleware: what
// claim it answers with when it returns an error.
type ClaimMode uint8

// Claim modes.
const (
	// ClaimsNone means no middleware: failed responses carry no claim
	// (missing).
	ClaimsNone ClaimMode = iota
	// ClaimsHonest implements the protocol with a failure memory (it knows
	// which dependencies are fail-open): own errors are claimed; errors
	// propagated from failed fail-close calls are unclaimed when the retry
	// criteria was satisfied for every such call, else claimed (at least
	// once). A service with Policy.ContextDrop cannot correlate and claims
	// every error.
	ClaimsHonest
	// ClaimsNaiveAttribution blames any failed downstream (no memory):
	// failed fail-open calls are treated as fail-close, so a coincidental
	// internal error is unclaimed when the failed calls' retry criteria
	// were satisfied.
	ClaimsNaiveAttribution
	// ClaimsAlways claims every error (a dishonest or compromised service).
	ClaimsAlways
	// ClaimsInvalid answers a value that is neither claimed nor unclaimed
	// ("bogus"); callers treat it as missing.
	ClaimsInvalid
)

// ClaimPlacement is where a service's claim is written, on its own SERVER
// span and on its callers' CLIENT spans.
type ClaimPlacement uint8

// Claim placements.
const (
	// ClaimAttribute writes the span attribute error.claim (a string).
	ClaimAttribute ClaimPlacement = iota
	// ClaimHeader writes the captured header
	// http.response.header.<Scenario.ClaimHeader> (a string array).
	ClaimHeader
	// ClaimMetadata writes the captured gRPC metadata
	// rpc.response.metadata.<Scenario.ClaimHeader> (a string array).
	ClaimMetadata
)

// Policy is the middleware configuration of one service: the retry
// middleware on its outbound calls and the claim middleware on its inbound
// requests.
type Policy struct {
	Retry   RetryKind
	Retries int     // R: maximum retries per call
	Budget  float64 // B: tokens earned per call (first attempt); a retry spends 1
	Claims  ClaimMode
	// Placement is where this service writes its claims (and where its
	// callers' CLIENT spans record them).
	Placement ClaimPlacement
	// ResendAttr: CLIENT spans of retries carry the resend number
	// (http.request.resend_count for HTTP callees, retry.attempt for gRPC
	// and virtual callees), absent on first attempts. When false, retries
	// carry no resend attribute at all (like Jaeger HotROD).
	ResendAttr bool
	// CriteriaAttr: failed attempts' CLIENT spans carry
	// retry.criteria_satisfied=true when the retry policy covers the error
	// (Retry is not RetryNone and retries are left), whether it retried or
	// an unclaimed answer or an empty token bucket stopped it, and
	// retry.suppressed=true when an unclaimed answer stopped a retry.
	CriteriaAttr bool
	// ContextDrop: the service loses trace context; each of its outbound
	// attempts starts a new trace whose root is the (parentless) CLIENT span.
	// Unable to correlate its inbound and outbound errors, it claims every
	// error it returns under ClaimsHonest and ClaimsNaiveAttribution.
	ContextDrop bool
}

// Service is one instrumented service. It handles one operation.
type Service struct {
	Name    string
	Version string // resource service.version; omitted when empty
	// Operation is "METHOD /route" for HTTP (default "GET /<Name>") or
	// "pkg.Service/Method" for gRPC (default "sim.<Name>/Handle").
	Operation string
	Protocol  Protocol
	// Calls are the outbound calls made, in order, for every request the
	// service handles (even when it is going to fail).
	Calls  []Edge
	Policy Policy
	// ErrorRate is the probability that a request fails with the service's
	// own internal error, independently per request.
	ErrorRate float64
}

// Edge is one outbound call of a service.
type Edge struct {
	To string // callee: a Service name, or a virtual node name when Virtual
	// FailOpen is the ground truth: the caller absorbs this callee's failure.
	FailOpen bool
	// DeclareFailOpen makes the CLIENT spans carry dependency.fail_open=true.
	DeclareFailOpen bool
	// Parallel > 1 makes that many concurrent calls to the callee, starting
	// at the same instant (fan-out, never retries of each other).
	Parallel int
	// Sequential > 1 makes that many calls one after the other, with
	// distinct url.full (or db.query.text). With Parallel > 1 too, each
	// sequential step is a group of parallel calls.
	Sequential int
	// Virtual marks an uninstrumented callee (database, cache): no SERVER
	// span; the CLIENT span names it via NameAttr and carries db.query.text.
	// It fails only through Faults on its name.
	Virtual bool
	// Op is the CLIENT span name of a virtual call (default "SELECT").
	Op string
	// NameAttr is the attribute carrying the virtual node's name (default
	// "peer.service"; e.g. "db.system.name", "server.address").
	NameAttr string
}

// Fault makes a service or a virtual node fail.
type Fault struct {
	Service string // service or virtual node name
	// Rate: for a persistent fault, the probability (per trace) that the
	// fault is active during the trace, failing every request to Service in
	// it; for a transient fault, the per-request failure probability.
	Rate       float64
	Persistent bool
	// FromTrace and ToTrace restrict the fault to requests with index in
	// [FromTrace, ToTrace); ToTrace 0 means until the end.
	FromTrace, ToTrace int
}

// Scenario is a complete simulation input.
type Scenario struct {
	Services []Service
	Root     string   // the root service (user-facing API)
	Roots    []string // further root services; trace i uses ([Root]+Roots)[i % n]
	Faults   []Fault
	Traces   int // number of user requests (non-fragment traces)
	Seed     uint64
	Start    time.Time     // first trace's start (default DefaultStart)
	Spacing  time.Duration // start-to-start gap between traces (default DefaultSpacing)
	// ClaimHeader is the claim header / metadata name (default
	// DefaultClaimHeader), used by ClaimHeader and ClaimMetadata placements.
	ClaimHeader string
}

// Chain returns the services of a call chain names[0] → names[1] → … (HTTP,
// fail-close, version "1.0.0", operation "GET /<name>"), all with policy p.
func Chain(names []string, p Policy) []Service {
	out := make([]Service, len(names))
	for i, n := range names {
		out[i] = Service{Name: n, Version: "1.0.0", Operation: "GET /" + n, Policy: p}
		if i+1 < len(names) {
			out[i].Calls = []Edge{{To: names[i+1]}}
		}
	}
	return out
}

// node is a service or a virtual node, with precomputed strings.
type node struct {
	name    string
	idx     int32
	virtual bool
	svc     *Service

	serverName         string // SERVER span name
	method, route      string // HTTP
	rpcSvc, rpcMethod  string // gRPC
	clientName         string // CLIENT span name when calling this service
	claimKey           string // attribute key of claims it answers
	claimArray         bool   // claim written as a string array
	faults             []int
	calls              []edgeC
	tokens, earn, tcap int64 // retry budget in micro-tokens
	stats              NodeStats
}

// edgeC is a compiled edge.
type edgeC struct {
	Edge
	to         int32
	parallel   int
	sequential int
	targets    []string // per sequential index: url.full or db.query.text
	clientName string
	nameAttr   string
	resendKey  string
}

const microTokens = 1_000_000

// compile checks a scenario and turns it into nodes (the services, then
// the virtual nodes they call) and the indexes of its roots.
func compile(s *Scenario) ([]*node, []int32, error) {
	if s.Traces < 0 {
		return nil, nil, errors.New("sim: negative Traces")
	}
	header := s.ClaimHeader
	if header == "" {
		header = DefaultClaimHeader
	}
	byName := map[string]int32{}
	var nodes []*node
	for i := range s.Services {
		sv := &s.Services[i]
		if sv.Name == "" {
			return nil, nil, fmt.Errorf("sim: service %d has no name", i)
		}
		if _, dup := byName[sv.Name]; dup {
			return nil, nil, fmt.Errorf("sim: duplicate service %q", sv.Name)
		}
		n, err := compileService(sv, int32(len(nodes)), header)
		if err != nil {
			return nil, nil, err
		}
		byName[sv.Name] = n.idx
		nodes = append(nodes, n)
	}
	nServices := len(nodes)
	// Edges; virtual nodes are created on first reference.
	for i := 0; i < nServices; i++ {
		var err error
		if nodes, err = compileCalls(nodes, i, byName); err != nil {
			return nil, nil, err
		}
	}
	if err := checkAcyclic(nodes, nServices); err != nil {
		return nil, nil, err
	}
	for fi, f := range s.Faults {
		idx, ok := byName[f.Service]
		if !ok {
			return nil, nil, fmt.Errorf("sim: fault %d on unknown node %q", fi, f.Service)
		}
		if f.Rate < 0 || f.Rate > 1 {
			return nil, nil, fmt.Errorf("sim: fault %d on %q: Rate %v outside [0,1]", fi, f.Service, f.Rate)
		}
		nodes[idx].faults = append(nodes[idx].faults, fi)
	}
	roots, err := compileRoots(s, nodes, byName)
	if err != nil {
		return nil, nil, err
	}
	return nodes, roots, nil
}

// compileService checks service sv (but its name) and returns its node,
// index idx, with its span names and claim key (claims in header when
// they travel in a header). Its calls are compiled later (compileCalls),
// once every service has a node.
func compileService(sv *Service, idx int32, header string) (*node, error) {
	if sv.ErrorRate < 0 || sv.ErrorRate > 1 {
		return nil, fmt.Errorf("sim: service %q: ErrorRate %v outside [0,1]", sv.Name, sv.ErrorRate)
	}
	p := sv.Policy
	if p.Retries < 0 || p.Budget < 0 {
		return nil, fmt.Errorf("sim: service %q: negative Retries or Budget", sv.Name)
	}
	if p.Retry > RetryOwnership || p.Claims > ClaimsInvalid || p.Placement > ClaimMetadata || sv.Protocol > GRPC {
		return nil, fmt.Errorf("sim: service %q: unknown enum value in policy or protocol", sv.Name)
	}
	n := &node{name: sv.Name, idx: idx, svc: sv}
	op := sv.Operation
	switch sv.Protocol {
	case HTTP:
		if op == "" {
			op = "GET /" + sv.Name
		}
		n.method, n.route = "GET", op
		if m, r, ok := strings.Cut(op, " "); ok {
			n.method, n.route = m, r
		}
		n.serverName = n.method + " " + n.route
		n.clientName = n.method
	case GRPC:
		if op == "" {
			op = "sim." + sv.Name + "/Handle"
		}
		n.rpcSvc, n.rpcMethod = op, ""
		if i := strings.LastIndexByte(op, '/'); i >= 0 {
			n.rpcSvc, n.rpcMethod = op[:i], op[i+1:]
		}
		n.serverName = op
		n.clientName = op
	}
	switch p.Placement {
	case ClaimAttribute:
		n.claimKey = "error.claim"
	case ClaimHeader:
		n.claimKey, n.claimArray = "http.response.header."+header, true
	case ClaimMetadata:
		n.claimKey, n.claimArray = "rpc.response.metadata."+header, true
	}
	n.earn = int64(p.Budget*microTokens + 0.5)
	n.tcap = BudgetCap * microTokens
	return n, nil
}

// compileCalls checks and compiles the calls of service nodes[i],
// creating the virtual nodes they name first (appended to nodes, which it
// returns).
func compileCalls(nodes []*node, i int, byName map[string]int32) ([]*node, error) {
	n := nodes[i]
	seen := map[string]bool{}
	for ei, e := range n.svc.Calls {
		if e.To == "" {
			return nil, fmt.Errorf("sim: service %q: edge %d has no callee", n.name, ei)
		}
		if seen[e.To] {
			return nil, fmt.Errorf("sim: service %q calls %q twice; use Sequential", n.name, e.To)
		}
		seen[e.To] = true
		if e.Parallel < 0 || e.Sequential < 0 {
			return nil, fmt.Errorf("sim: service %q: negative Parallel or Sequential", n.name)
		}
		to, ok := byName[e.To]
		if e.Virtual {
			if ok && !nodes[to].virtual {
				return nil, fmt.Errorf("sim: virtual node %q has the name of a service", e.To)
			}
			if !ok {
				to = int32(len(nodes))
				nodes = append(nodes, &node{name: e.To, idx: to, virtual: true})
				byName[e.To] = to
			}
		} else {
			if !ok {
				return nil, fmt.Errorf("sim: service %q calls unknown service %q", n.name, e.To)
			}
			if nodes[to].virtual {
				return nil, fmt.Errorf("sim: service %q calls virtual node %q without Virtual", n.name, e.To)
			}
		}
		n.calls = append(n.calls, compileEdge(e, to, nodes[to]))
	}
	return nodes, nil
}

// compileEdge compiles a checked edge to callee (index to): its client
// span name, the attribute that counts resends, and the target of each of
// its sequential calls.
func compileEdge(e Edge, to int32, callee *node) edgeC {
	ec := edgeC{Edge: e, to: to, parallel: max(1, e.Parallel), sequential: max(1, e.Sequential)}
	ec.targets = make([]string, ec.sequential)
	if e.Virtual {
		ec.clientName = e.Op
		if ec.clientName == "" {
			ec.clientName = "SELECT"
		}
		ec.nameAttr = e.NameAttr
		if ec.nameAttr == "" {
			ec.nameAttr = "peer.service"
		}
		ec.resendKey = "retry.attempt"
		for k := range ec.targets {
			ec.targets[k] = ec.clientName + " " + e.To + " WHERE shard = " + strconv.Itoa(k)
		}
		return ec
	}
	ec.clientName = callee.clientName
	if callee.svc.Protocol == HTTP {
		ec.resendKey = "http.request.resend_count"
		base := "http://" + e.To + ":8080" + callee.route
		for k := range ec.targets {
			ec.targets[k] = base
			if ec.sequential > 1 {
				ec.targets[k] = base + "?seq=" + strconv.Itoa(k)
			}
		}
		return ec
	}
	// gRPC spans have no url.full; sequential calls get one anyway so that
	// they are not mistaken for retries.
	ec.resendKey = "retry.attempt"
	if ec.sequential > 1 {
		for k := range ec.targets {
			ec.targets[k] = "grpc://" + e.To + ":50051/" + callee.serverName + "?seq=" + strconv.Itoa(k)
		}
	}
	return ec
}

// checkAcyclic returns an error naming a node on a cycle of calls, if
// there is one (a depth-first search from each of the first nServices
// nodes).
func checkAcyclic(nodes []*node, nServices int) error {
	state := make([]uint8, len(nodes))
	var visit func(i int32) error
	visit = func(i int32) error {
		switch state[i] {
		case 1:
			return fmt.Errorf("sim: cycle in topology through %q", nodes[i].name)
		case 2:
			return nil
		}
		state[i] = 1
		for _, ec := range nodes[i].calls {
			if err := visit(ec.to); err != nil {
				return err
			}
		}
		state[i] = 2
		return nil
	}
	for i := 0; i < nServices; i++ {
		if err := visit(int32(i)); err != nil {
			return err
		}
	}
	return nil
}

// compileRoots returns the node indexes of the scenario's roots (Root
// first, then Roots), which must be services.
func compileRoots(s *Scenario, nodes []*node, byName map[string]int32) ([]int32, error) {
	var roots []int32
	names := s.Roots
	if s.Root != "" {
		names = append([]string{s.Root}, s.Roots...)
	}
	if len(names) == 0 {
		return nil, errors.New("sim: no Root")
	}
	for _, r := range names {
		idx, ok := byName[r]
		if !ok || nodes[idx].virtual {
			return nil, fmt.Errorf("sim: unknown root service %q", r)
		}
		roots = append(roots, idx)
	}
	return roots, nil
}
