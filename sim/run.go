package sim

import (
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// NodeStats is the ground truth the simulator knows about one service or
// virtual node, independently of any trace analysis. Counts include requests
// made inside fragment traces.
type NodeStats struct {
	// Requests: SERVER spans of a service, or attempts received by a
	// virtual node.
	Requests int
	// Failures: failed requests (failed SERVER spans / failed attempts).
	Failures int
	// InternalFailures: requests in which the node's own error fired
	// (ErrorRate or a Fault), whether or not a call failed too.
	InternalFailures int
	// Owned: failed requests with no failed fail-close call (§4.1 owner, by
	// the ground-truth FailOpen). For a virtual node, equal to Failures.
	// A ContextDrop service's calls are counted although a trace analysis
	// cannot see them from its hop.
	Owned int
	// Propagated: failed requests with at least one failed fail-close call.
	Propagated int
	// Claimed, Unclaimed, Invalid: claims the node answered (failed requests
	// only). Failures minus these answered no claim (missing).
	Claimed, Unclaimed, Invalid int
	// Calls: outbound calls made as a caller (first attempts).
	Calls int
	// Attempts: outbound attempts made (CLIENT spans).
	Attempts int
	// Retries: attempts that were retries (Attempts - Calls).
	Retries int
	// Suppressed: retries declined because the error was unclaimed.
	Suppressed int
	// FailedCalls: outbound calls whose last attempt failed.
	FailedCalls int
	// ContextDrops: fragment traces rooted in this service.
	ContextDrops int
}

// Stats is the ground truth of a whole run.
type Stats struct {
	Requests       int // user requests simulated (Scenario.Traces)
	FailedRequests int // requests whose root hop failed
	Traces         int // trace ids emitted: Requests + Fragments
	Fragments      int // fragment traces (ContextDrop)
	Spans          int // spans emitted
	// Nodes holds per service / virtual node counters, by name.
	Nodes map[string]NodeStats
}

// Trace is one emitted trace.
type Trace struct {
	ID   pcommon.TraceID
	Data ptrace.Traces // one ResourceSpans per service present in the trace
	// Request is the index (0-based) of the user request the trace belongs
	// to; fragments share their request's index.
	Request  int
	Root     string // service that emitted the root span
	Fragment bool   // root is a parentless CLIENT span (ContextDrop)
	Spans    int
	Failed   bool // the root span failed
	// FailedSpans counts the trace's failed spans (a trace with a failure
	// event has at least one).
	FailedSpans int
	// FaultActive: a persistent fault was active during the request.
	FaultActive bool
	// FaultFired: a fault (persistent or transient) failed at least one
	// request during the request.
	FaultFired bool
}

// Result is the output of Run.
type Result struct {
	// Traces in emission order: each request's trace followed by its
	// fragments in creation order.
	Traces []Trace
	Stats  Stats
}

// Run simulates the scenario and returns all traces. It validates the
// scenario first: unknown callees or roots, cycles, duplicate names or edges
// and out-of-range rates are errors.
func Run(s Scenario) (*Result, error) {
	r := &Result{}
	st, err := Generate(s, func(t Trace) error {
		r.Traces = append(r.Traces, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.Stats = *st
	return r, nil
}

// Generate simulates the scenario and hands every trace to emit as soon as
// its request is complete, without retaining it: use it to stream millions
// of spans. An error from emit stops the run and is returned.
func Generate(s Scenario, emit func(Trace) error) (*Stats, error) {
	var pb *pdataBuilder
	return simulate(s, func(g *gen) {
		pb = newPdataBuilder(g.nodes)
		g.sink = func(meta Trace, b *builder) error {
			meta.Data = pb.build(b)
			g.recycle(b)
			return emit(meta)
		}
	})
}

// simulate runs the scenario; setup installs g.sink.
func simulate(s Scenario, setup func(g *gen)) (*Stats, error) {
	nodes, roots, err := compile(&s)
	if err != nil {
		return nil, err
	}
	start := s.Start
	if start.IsZero() {
		start = DefaultStart
	}
	spacing := s.Spacing
	if spacing == 0 {
		spacing = DefaultSpacing
	}
	t0 := start.UnixNano()
	g := &gen{
		s:     &s,
		nodes: nodes,
		roots: roots,
		rng:   rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15)),
		// Ids depend on the seed and the start, so that two runs with the
		// same seed at different times can share a store.
		idKey:    mix64(s.Seed^0x5851f42d4c957f2d) ^ mix64(uint64(t0)),
		active:   make([]bool, len(s.Faults)),
		inWindow: make([]bool, len(s.Faults)),
		free:     make(chan *builder, 1024),
	}
	setup(g)
	for i := 0; i < s.Traces; i++ {
		g.beginRequest(i)
		root := nodes[roots[i%len(roots)]]
		g.main = g.newBuilder(root.idx)
		_, failed, _ := g.serve(root, g.main, 0, t0+int64(i)*int64(spacing))
		g.stats.Requests++
		if failed {
			g.stats.FailedRequests++
		}
		if err := g.flush(); err != nil {
			return nil, err
		}
	}
	g.stats.Nodes = make(map[string]NodeStats, len(nodes))
	for _, n := range nodes {
		g.stats.Nodes[n.name] = n.stats
	}
	return &g.stats, nil
}

type claim uint8

const (
	claimMissing claim = iota
	claimClaimed
	claimUnclaimed
	claimInvalid
)

var claimValues = [...]string{"", "claimed", "unclaimed", "bogus"}

const (
	kindServer = iota
	kindClient
)

// rec is one span, before it is written as pdata.
type rec struct {
	id, parent uint64
	start, end int64
	edge       *edgeC // CLIENT
	node       int32  // emitting node (resource)
	callee     int32  // CLIENT: callee node
	seq        int32  // CLIENT: sequential index
	resend     int32  // CLIENT: attempt number - 1
	kind       uint8
	failed     bool
	claim      claim // SERVER: answered; CLIENT: received
	criteria   bool
	suppressed bool
}

type builder struct {
	id   pcommon.TraceID
	root int32
	recs []rec
}

type gen struct {
	s      *Scenario
	nodes  []*node
	roots  []int32
	rng    *rand.Rand
	idKey  uint64
	spanN  uint64
	traceN uint64

	req         int
	active      []bool // per fault: persistent fault active in this request
	inWindow    []bool // per fault: request index within the fault's window
	faultActive bool
	faultFired  bool

	main  *builder
	frags []*builder

	// sink takes ownership of a finished trace builder (main trace or
	// fragment) with its metadata.
	sink func(meta Trace, b *builder) error
	free chan *builder // recycled builders

	stats Stats
}

const golden = 0x9e3779b97f4a7c15

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (g *gen) newSpanID() uint64 {
	g.spanN++
	v := mix64(g.idKey + g.spanN*golden)
	if v == 0 {
		v = 1
	}
	return v
}

func (g *gen) newBuilder(root int32) *builder {
	var b *builder
	select {
	case b = <-g.free:
		b.recs = b.recs[:0]
	default:
		b = &builder{}
	}
	g.traceN++
	hi := mix64(g.idKey ^ 0x243f6a8885a308d3 + g.traceN*golden)
	lo := mix64(hi ^ g.idKey)
	if lo == 0 {
		lo = 1
	}
	binary.BigEndian.PutUint64(b.id[:8], hi)
	binary.BigEndian.PutUint64(b.id[8:], lo)
	b.root = root
	return b
}

func (g *gen) beginRequest(i int) {
	g.req = i
	g.faultActive, g.faultFired = false, false
	for fi := range g.s.Faults {
		f := &g.s.Faults[fi]
		g.inWindow[fi] = i >= f.FromTrace && (f.ToTrace == 0 || i < f.ToTrace)
		g.active[fi] = false
		if f.Persistent && g.inWindow[fi] {
			switch {
			case f.Rate >= 1:
				g.active[fi] = true
			case f.Rate > 0:
				g.active[fi] = g.rng.Float64() < f.Rate
			}
			if g.active[fi] {
				g.faultActive = true
			}
		}
	}
}

// ownError draws whether node n's own error fires for one request.
func (g *gen) ownError(n *node) bool {
	fired := false
	if n.svc != nil && n.svc.ErrorRate > 0 && g.rng.Float64() < n.svc.ErrorRate {
		fired = true
	}
	for _, fi := range n.faults {
		if !g.inWindow[fi] {
			continue
		}
		f := &g.s.Faults[fi]
		if f.Persistent {
			if g.active[fi] {
				fired = true
				g.faultFired = true
			}
		} else if f.Rate > 0 && g.rng.Float64() < f.Rate {
			fired = true
			g.faultFired = true
		}
	}
	return fired
}

// serve handles one request at service n: its SERVER span has parent
// parent in trace b and starts at t.
func (g *gen) serve(n *node, b *builder, parent uint64, t int64) (end int64, failed bool, answer claim) {
	id := g.newSpanID()
	ri := len(b.recs)
	b.recs = append(b.recs, rec{id: id, parent: parent, start: t, node: n.idx, callee: -1, kind: kindServer})
	st := &n.stats
	st.Requests++
	own := g.ownError(n)
	t += int64(HopWork / 2)
	failedFC, failedAny := 0, 0
	satFC, satAll := true, true
	for ci := range n.calls {
		ec := &n.calls[ci]
		for seq := 0; seq < ec.sequential; seq++ {
			groupEnd := t
			for p := 0; p < ec.parallel; p++ {
				r := g.call(n, ec, seq, b, id, t)
				groupEnd = max(groupEnd, r.end)
				if !r.failed {
					continue
				}
				failedAny++
				if !r.satisfied {
					satAll = false
				}
				if !ec.FailOpen {
					failedFC++
					if !r.satisfied {
						satFC = false
					}
				}
			}
			t = groupEnd
		}
	}
	end = t + int64(HopWork/2)
	failed = own || failedFC > 0
	if own {
		st.InternalFailures++
	}
	if failed {
		st.Failures++
		if failedFC > 0 {
			st.Propagated++
		} else {
			st.Owned++
		}
		p := &n.svc.Policy
		switch p.Claims {
		case ClaimsNone:
			answer = claimMissing
		case ClaimsAlways:
			answer = claimClaimed
		case ClaimsInvalid:
			answer = claimInvalid
		case ClaimsHonest:
			answer = claimClaimed
			if !p.ContextDrop && failedFC > 0 && satFC {
				answer = claimUnclaimed
			}
		case ClaimsNaiveAttribution:
			answer = claimClaimed
			if !p.ContextDrop && failedAny > 0 && satAll {
				answer = claimUnclaimed
			}
		}
		switch answer {
		case claimClaimed:
			st.Claimed++
		case claimUnclaimed:
			st.Unclaimed++
		case claimInvalid:
			st.Invalid++
		}
	}
	r := &b.recs[ri]
	r.end, r.failed, r.claim = end, failed, answer
	return end, failed, answer
}

type callResult struct {
	end       int64
	failed    bool
	satisfied bool // retry criteria satisfied (§4.2), as the middleware knows it
}

// call makes one call (one or more attempts) from caller along ec.
func (g *gen) call(caller *node, ec *edgeC, seq int, b *builder, parent uint64, t int64) callResult {
	p := &caller.svc.Policy
	callee := g.nodes[ec.to]
	cs := &caller.stats
	cs.Calls++
	if caller.earn > 0 {
		caller.tokens = min(caller.tokens+caller.earn, caller.tcap)
	}
	useBudget := p.Retry == RetryBudget || (p.Retry == RetryOwnership && p.Budget > 0)
	var res callResult
	var last claim
	criteriaSeen := false
	for attempt := 1; ; attempt++ {
		cs.Attempts++
		ab, apar := b, parent
		if p.ContextDrop {
			ab, apar = g.newBuilder(caller.idx), 0
			g.frags = append(g.frags, ab)
			cs.ContextDrops++
		}
		id := g.newSpanID()
		ci := len(ab.recs)
		ab.recs = append(ab.recs, rec{id: id, parent: apar, start: t, edge: ec, node: caller.idx,
			callee: ec.to, seq: int32(seq), resend: int32(attempt - 1), kind: kindClient})
		var end int64
		var failed bool
		var got claim
		if callee.virtual {
			cst := &callee.stats
			cst.Requests++
			if g.ownError(callee) {
				failed = true
				cst.InternalFailures++
				cst.Failures++
				cst.Owned++
			}
			end = t + int64(VirtualLatency)
		} else {
			end, failed, got = g.serve(callee, ab, id, t+int64(NetworkDelay))
			end += int64(NetworkDelay)
		}
		// eligible: the retry policy covers this error (retries configured
		// and left); the retry criteria is then satisfied even when the
		// budget or an unclaimed answer stops the retry.
		retry, suppressed, criteria := false, false, false
		if failed && p.Retry != RetryNone && attempt <= p.Retries {
			criteria = true
			budgetOK := !useBudget || caller.tokens >= microTokens
			if p.Retry == RetryOwnership && got == claimUnclaimed {
				suppressed = budgetOK
			} else {
				retry = budgetOK
			}
			if retry && useBudget {
				caller.tokens -= microTokens
			}
		}
		criteriaSeen = criteriaSeen || criteria
		r := &ab.recs[ci]
		r.end, r.failed, r.claim = end, failed, got
		r.criteria, r.suppressed = criteria, suppressed
		last = got
		if suppressed {
			cs.Suppressed++
		}
		if !retry {
			res.end, res.failed = end, failed
			res.satisfied = attempt >= 2 || criteriaSeen || last == claimUnclaimed
			break
		}
		cs.Retries++
		t = end + int64(RetryBackoff)
	}
	if res.failed {
		cs.FailedCalls++
	}
	return res
}

// flush hands the request's main trace and its fragments to the sink.
func (g *gen) flush() error {
	var err error
	for i := -1; i < len(g.frags); i++ {
		b := g.main
		if i >= 0 {
			b = g.frags[i]
		}
		if err != nil {
			g.recycle(b)
			continue
		}
		nf := 0
		for j := range b.recs {
			if b.recs[j].failed {
				nf++
			}
		}
		meta := Trace{
			ID:          b.id,
			Request:     g.req,
			Root:        g.nodes[b.root].name,
			Fragment:    i >= 0,
			Spans:       len(b.recs),
			Failed:      b.recs[0].failed,
			FailedSpans: nf,
			FaultActive: g.faultActive,
			FaultFired:  g.faultFired,
		}
		g.stats.Traces++
		g.stats.Spans += len(b.recs)
		if i >= 0 {
			g.stats.Fragments++
		}
		err = g.sink(meta, b)
	}
	g.main, g.frags = nil, g.frags[:0]
	return err
}

// recycle returns a builder for reuse (any goroutine).
func (g *gen) recycle(b *builder) {
	select {
	case g.free <- b:
	default:
	}
}
