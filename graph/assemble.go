package graph

import (
	"bytes"
	"slices"
)

// maxRetryCandidates bounds how many open failed calls a new attempt is
// matched against when retries are inferred from timing, so that a hop with
// thousands of parallel failing calls stays linear.
const maxRetryCandidates = 64

// Assembler builds Traces from spans (docs/SPEC.md §3). It keeps scratch memory
// between calls and is not safe for concurrent use: use one per goroutine.
// The zero value is ready to use.
type Assembler struct {
	index    spanIndex
	parent   []int32
	orphan   []uint8 // why a span roots a tree although it has a parent id
	state    []uint8
	path     []int32
	childOff []int32
	children []int32
	order    []int32
	clientBe []bool
	stack    []int32
	pend     []pending
	hops     []Hop
	callsOut []Call
	attempts []Attempt
	roots    []int32
	callOf   []int32
	calls    []pendingCall
	open     []int32
	// trace is the trace AssembleTransient returns; apis the root APIs'
	// names by where their service's and operation's bytes are.
	trace Trace
	apis  AddrCache[string]
	napis int
	// copied holds the spans AssembleIn mends.
	copied []Span
}

// pending is an attempt collected for a hop, before it is grouped into calls.
type pending struct {
	svc, op   string
	callee    int32
	client    int32
	start     int64
	end       int64
	tie       SpanID
	target    uint64
	resend    int32
	hasResend bool
	failed    bool
}

// pendingCall is a call being grouped: the first and last of its attempts
// in pend, chained through callOf, and how many attempts it has.
type pendingCall struct {
	first, last int32
	n           int32
}

// Assemble builds the trace made of spans, which must all belong to one
// trace. It takes ownership of spans: they are deduplicated in place and the
// returned Trace keeps the compacted slice. Any input is accepted: cycles,
// self-parents, missing parents and duplicate ids produce fragments, never a
// panic or a loop.
func (a *Assembler) Assemble(spans []Span) *Trace {
	t := new(Trace)
	*t = *a.AssembleTransient(spans)
	// The forest was built in scratch memory: hand the trace exact-size
	// copies, so a trace costs one allocation per kind of record.
	t.Hops = slices.Clone(t.Hops)
	t.Calls = slices.Clone(t.Calls)
	t.Attempts = slices.Clone(t.Attempts)
	t.Roots = slices.Clone(t.Roots)
	return t
}

// Arena holds the records of many traces in large blocks: for a batch
// that keeps every trace it assembles until it drops them all
// (AssembleIn), a few allocations for thousands of traces instead of
// five a trace, and fewer objects for the collector to scan. A trace's
// slices have exact capacities: appending to one copies it out. The zero
// Arena is ready; it is not safe for concurrent use.
type Arena struct {
	traces   []Trace
	hops     []Hop
	calls    []Call
	attempts []Attempt
	roots    []int32
}

// arenaBlock is how many records of a kind an Arena allocates at once.
const arenaBlock = 4096

// take copies src into the next len(src) records of *block, allocating a
// block when it has too few left.
func take[T any](block *[]T, src []T) []T {
	if len(src) == 0 {
		return src[:0:0]
	}
	if len(*block) < len(src) {
		*block = make([]T, max(arenaBlock, len(src)))
	}
	out := (*block)[:len(src):len(src)]
	*block = (*block)[len(src):]
	copy(out, src)
	return out
}

// AssembleIn is Assemble with the trace and its records in ar, of spans
// it reads but neither modifies nor keeps (the trace's Spans is nil):
// spans with duplicate ids or ends before their starts are mended in a
// copy of the assembler's.
func (a *Assembler) AssembleIn(ar *Arena, spans []Span) *Trace {
	t := a.assemble(spans, true)
	t.Spans = nil
	if len(ar.traces) == 0 {
		ar.traces = make([]Trace, arenaBlock/8)
	}
	out := &ar.traces[0]
	ar.traces = ar.traces[1:]
	*out = *t
	out.Hops = take(&ar.hops, t.Hops)
	out.Calls = take(&ar.calls, t.Calls)
	out.Attempts = take(&ar.attempts, t.Attempts)
	out.Roots = take(&ar.roots, t.Roots)
	return out
}

// AssembleTransient is Assemble without the copies: the trace and its
// hops, calls, attempts and roots are the assembler's scratch memory,
// valid until its next call. For callers that are done with a trace
// before they assemble the next (adding it to a window, encoding its
// facts).
func (a *Assembler) AssembleTransient(spans []Span) *Trace { return a.assemble(spans, false) }

// assemble assembles spans, modified in place (deduplicated, mended)
// unless readOnly.
func (a *Assembler) assemble(spans []Span, readOnly bool) *Trace {
	t := &a.trace
	*t = Trace{Root: -1, AdjustedCount: 1, Weight: 1}
	if len(spans) == 0 {
		return t
	}
	t.ID = spans[0].TraceID
	// Spans lent read-only and clean are as dedup would leave them, and
	// so is the span index clean built: they are not deduplicated again.
	switch {
	case !readOnly:
		spans = a.dedup(t, spans)
	case !a.clean(spans):
		a.copied = append(a.copied[:0], spans...)
		spans = a.dedup(t, a.copied)
	}
	t.Spans, t.SpanCount = spans, len(spans)
	a.link(spans)
	a.breakCycles(spans)
	a.buildChildren(spans)
	a.buildHops(t)
	a.finish(t)
	if t.Root >= 0 {
		t.APIName = a.apiName(&t.Hops[t.Root])
	}
	resolveSampling(t)
	return t
}

// apiName returns the root API of root hop h (Node.String), one string
// per API while the assembler's cache holds it: names are interned, so
// where their bytes are finds it without building it again.
func (a *Assembler) apiName(h *Hop) string {
	k := AddrOf(h.Service, h.Operation, "", "")
	if name, ok := a.apis.Get(&k); ok {
		return name
	}
	name := h.Key().String()
	a.napis++
	a.apis.Put(&k, name, a.napis)
	return name
}

// clean reports whether dedup would leave spans as they are: no end
// before its start, no span id twice. It indexes the span ids as dedup
// does (a clean trace's index is dedup's).
func (a *Assembler) clean(spans []Span) bool {
	a.index.reset(len(spans))
	for i := range spans {
		s := &spans[i]
		if s.End < s.Start {
			return false
		}
		if !s.SpanID.IsZero() {
			if _, dup := a.index.put(s.SpanID, int32(i)); dup {
				return false
			}
		}
	}
	return true
}

// dedup drops spans whose id was already seen, keeping, whatever the input
// order, the one that sorts first under preferSpan.
func (a *Assembler) dedup(t *Trace, spans []Span) []Span {
	a.index.reset(len(spans))
	n := 0
	for i := range spans {
		s := &spans[i]
		if s.End < s.Start {
			s.End = s.Start
		}
		if !s.SpanID.IsZero() {
			if j, dup := a.index.put(s.SpanID, int32(n)); dup {
				if preferSpan(s, &spans[j]) {
					spans[j] = *s
				}
				t.Duplicates++
				continue
			}
		}
		if n != i {
			spans[n] = *s
		}
		n++
	}
	return spans[:n]
}

// preferSpan reports whether a should replace b, its duplicate: a total
// order on the fields that matter, so that the survivor does not depend on
// arrival order.
func preferSpan(a, b *Span) bool {
	switch {
	case a.End != b.End:
		return a.End > b.End
	case a.Start != b.Start:
		return a.Start < b.Start
	case a.Failed != b.Failed:
		return a.Failed
	case a.Claim != b.Claim:
		return a.Claim > b.Claim
	case a.Kind != b.Kind:
		return a.Kind > b.Kind
	case a.ParentID != b.ParentID:
		return bytes.Compare(a.ParentID[:], b.ParentID[:]) < 0
	case a.Service != b.Service:
		return a.Service < b.Service
	case a.Name != b.Name:
		return a.Name < b.Name
	case a.Sampling != b.Sampling:
		return a.Sampling < b.Sampling
	}
	return a.AdjustedCount < b.AdjustedCount
}

// Reasons a span with a parent id roots a tree (Assembler.orphan).
const (
	notOrphan    uint8 = iota
	remoteParent       // the parent is not in the trace: it may be outside the traced system
	brokenParent       // the span is its own parent, or was cut from a parent cycle
)

// link resolves parent ids. A parent id that is absent from the trace makes
// the span an orphan with a remote parent; the span's own id makes it an
// orphan with a broken parent.
func (a *Assembler) link(spans []Span) {
	n := len(spans)
	a.parent = grow(a.parent, n)
	a.orphan = grow(a.orphan, n)
	for i := range spans {
		a.parent[i] = -1
		a.orphan[i] = notOrphan
		p := spans[i].ParentID
		if p.IsZero() {
			continue
		}
		j, ok := a.index.get(p)
		switch {
		case !ok:
			a.orphan[i] = remoteParent
		case int(j) == i:
			a.orphan[i] = brokenParent
		default:
			a.parent[i] = j
		}
	}
}

// breakCycles cuts every parent cycle at its span with the smallest id,
// which becomes an orphan.
func (a *Assembler) breakCycles(spans []Span) {
	n := len(spans)
	a.state = grow(a.state, n)
	clear(a.state)
	for i := 0; i < n; i++ {
		if a.state[i] != 0 {
			continue
		}
		path := a.path[:0]
		j := int32(i)
		for j >= 0 && a.state[j] == 0 {
			a.state[j] = 1
			path = append(path, j)
			j = a.parent[j]
		}
		if j >= 0 && a.state[j] == 1 {
			k := slices.Index(path, j)
			m := path[k]
			for _, v := range path[k+1:] {
				if bytes.Compare(spans[v].SpanID[:], spans[m].SpanID[:]) < 0 {
					m = v
				}
			}
			a.parent[m] = -1
			a.orphan[m] = brokenParent
		}
		for _, v := range path {
			a.state[v] = 2
		}
		a.path = path
	}
}

// buildChildren lays the children of every span out contiguously, each list
// sorted by start time then span id, computes a parents-first order of all
// spans and, bottom-up, which spans have a CLIENT span below them (through
// anything but SERVER spans).
func (a *Assembler) buildChildren(spans []Span) {
	n := len(spans)
	a.childOff = grow(a.childOff, n+1)
	clear(a.childOff)
	for i := 0; i < n; i++ {
		if p := a.parent[i]; p >= 0 {
			a.childOff[p+1]++
		}
	}
	for i := 1; i <= n; i++ {
		a.childOff[i] += a.childOff[i-1]
	}
	a.children = grow(a.children, n)
	fill := a.path[:0]
	fill = append(fill, a.childOff[:n]...)
	roots := a.order[:0]
	for i := 0; i < n; i++ {
		if p := a.parent[i]; p >= 0 {
			a.children[fill[p]] = int32(i)
			fill[p]++
		} else {
			roots = append(roots, int32(i))
		}
	}
	a.path = fill
	bySpan := func(x, y int32) int { return compareSpans(&spans[x], &spans[y]) }
	for i := 0; i < n; i++ {
		if c := a.children[a.childOff[i]:a.childOff[i+1]]; len(c) > 1 {
			sortSmall(c, bySpan)
		}
	}
	sortSmall(roots, bySpan)
	// Parents-first order: roots, then children breadth-first.
	order := roots
	for k := 0; k < len(order); k++ {
		s := order[k]
		order = append(order, a.children[a.childOff[s]:a.childOff[s+1]]...)
	}
	a.order = order
	a.clientBe = grow(a.clientBe, n)
	for k := len(order) - 1; k >= 0; k-- {
		s := order[k]
		below := false
		for _, c := range a.children[a.childOff[s]:a.childOff[s+1]] {
			if spans[c].Kind == KindClient || (spans[c].Kind != KindServer && a.clientBe[c]) {
				below = true
				break
			}
		}
		a.clientBe[s] = below
	}
}

// compareSpans orders spans by start time, then span id.
func compareSpans(x, y *Span) int {
	switch {
	case x.Start < y.Start:
		return -1
	case x.Start > y.Start:
		return 1
	}
	return bytes.Compare(x.SpanID[:], y.SpanID[:])
}

// sortSmall sorts s with cmp, by insertion for the short lists that
// dominate (most spans have a handful of children).
func sortSmall(s []int32, cmp func(x, y int32) int) {
	if len(s) > 12 {
		slices.SortFunc(s, cmp)
		return
	}
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && cmp(s[j-1], s[j]) > 0; j-- {
			s[j-1], s[j] = s[j], s[j-1]
		}
	}
}

func (a *Assembler) kids(s int32) []int32 {
	return a.children[a.childOff[s]:a.childOff[s+1]]
}

// buildHops makes the hop forest: tree roots first, then every hop's
// attempts, breadth-first, so that callers precede callees.
func (a *Assembler) buildHops(t *Trace) {
	spans := t.Spans
	t.Hops, t.Calls, t.Attempts, t.Roots = a.hops[:0], a.callsOut[:0], a.attempts[:0], a.roots[:0]
	defer func() {
		a.hops, a.callsOut, a.attempts, a.roots = t.Hops, t.Calls, t.Attempts, t.Roots
	}()
	primary := a.primaryRoot(spans)
	for _, s := range a.order {
		if a.parent[s] >= 0 {
			break // a.order lists roots first
		}
		h := a.newHop(t, s)
		hop := &t.Hops[h]
		hop.Root = true
		hop.Client = spans[s].Kind == KindClient
		hop.Fragment = s != primary
		if s == primary {
			t.RemoteParent = a.orphan[s] == remoteParent
		}
		t.Roots = append(t.Roots, h)
	}
	for h := int32(0); int(h) < len(t.Hops); h++ {
		if t.Hops[h].Virtual {
			continue
		}
		a.collect(t, h)
		a.group(t, h)
	}
}

// primaryRoot returns the span that is the trace's root hop (docs/SPEC.md §3), -1
// when every tree of the trace is a fragment: the earliest parentless span
// that is not a CLIENT span (a CLIENT span without a parent is a service
// that dropped its context); when no span is parentless, the earliest
// SERVER span whose parent is not in the trace (its caller is outside the
// traced system: a load balancer, a browser, an unsampled client). Spans
// cut from parent cycles or naming themselves as parent are never roots.
func (a *Assembler) primaryRoot(spans []Span) int32 {
	remote, parentless := int32(-1), false
	for _, s := range a.order { // roots first, earliest first
		if a.parent[s] >= 0 {
			break
		}
		sp := &spans[s]
		switch {
		case a.orphan[s] == notOrphan:
			parentless = true
			if sp.Kind != KindClient {
				return s
			}
		case a.orphan[s] == remoteParent && sp.Kind == KindServer && remote < 0:
			remote = s
		}
	}
	if parentless {
		return -1
	}
	return remote
}

func (a *Assembler) newHop(t *Trace, s int32) int32 {
	sp := &t.Spans[s]
	t.Hops = append(t.Hops, Hop{
		Span:      s,
		Service:   sp.Service,
		Operation: sp.Operation,
		Version:   sp.Version,
		Start:     sp.Start,
		End:       sp.End,
		Failed:    sp.Failed,
		Claim:     sp.Claim,
		In:        -1,
	})
	return int32(len(t.Hops) - 1)
}

// collect gathers the attempts hop h made: CLIENT spans below its span
// (through INTERNAL and other non-hop spans) and SERVER spans reached
// without a CLIENT span. A hop whose own span is a CLIENT span (a fragment
// root) makes the attempt that span records.
func (a *Assembler) collect(t *Trace, h int32) {
	a.pend = a.pend[:0]
	stack := a.stack[:0]
	root := t.Hops[h].Span
	if t.Spans[root].Kind == KindClient {
		stack = a.client(t, h, root, stack)
	} else {
		stack = pushReversed(stack, a.kids(root))
	}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch t.Spans[s].Kind {
		case KindServer:
			a.addPending(t, -1, a.newHop(t, s))
		case KindConsumer:
			d := a.newHop(t, s)
			t.Hops[d].Detached = true
		case KindClient:
			stack = a.client(t, h, s, stack)
		default:
			stack = pushReversed(stack, a.kids(s))
		}
	}
	a.stack = stack
}

// pushReversed pushes kids so that they pop in start order.
func pushReversed(stack, kids []int32) []int32 {
	for i := len(kids) - 1; i >= 0; i-- {
		stack = append(stack, kids[i])
	}
	return stack
}

// client handles CLIENT span c of hop h: an attempt to its SERVER child, or
// to a virtual node when it has none. A CLIENT span that only wraps other
// CLIENT spans (a logical call around its transport attempts) is
// transparent.
func (a *Assembler) client(t *Trace, h, c int32, stack []int32) []int32 {
	kids := a.kids(c)
	server := int32(-1)
	for i := len(kids) - 1; i >= 0; i-- {
		if t.Spans[kids[i]].Kind != KindServer {
			stack = append(stack, kids[i])
		}
	}
	for _, k := range kids {
		if t.Spans[k].Kind != KindServer {
			continue
		}
		if server < 0 {
			server = k
		} else {
			a.addPending(t, -1, a.newHop(t, k))
		}
	}
	switch {
	case server >= 0:
		a.addPending(t, c, a.newHop(t, server))
	case a.clientBe[c]:
		// transparent wrapper: its CLIENT descendants are the attempts
	default:
		sp := &t.Spans[c]
		v := a.newHop(t, c)
		hop := &t.Hops[v]
		hop.Virtual = true
		hop.Service = sp.Peer
		hop.Version = ""
		if hop.Service == "" {
			hop.Service = "unknown"
		}
		hop.Operation = sp.Name
		hop.Claim = ClaimMissing
		a.addPending(t, c, v)
	}
	return stack
}

func (a *Assembler) addPending(t *Trace, client, callee int32) {
	hop := &t.Hops[callee]
	p := pending{
		svc:    hop.Service,
		op:     hop.Operation,
		callee: callee,
		client: client,
		start:  hop.Start,
		end:    hop.End,
		failed: hop.Failed,
		tie:    t.Spans[hop.Span].SpanID,
	}
	if client >= 0 {
		cs := &t.Spans[client]
		p.start, p.end, p.tie = cs.Start, cs.End, cs.SpanID
		p.target = cs.Target
		p.resend, p.hasResend = cs.Resend, cs.HasResend
	}
	a.pend = append(a.pend, p)
}

// group turns hop h's pending attempts into calls (docs/SPEC.md §3) and appends them
// to the trace.
func (a *Assembler) group(t *Trace, h int32) {
	pend := a.pend
	t.Hops[h].CallStart = int32(len(t.Calls))
	t.Hops[h].CallEnd = int32(len(t.Calls))
	if len(pend) == 0 {
		return
	}
	slices.SortFunc(pend, func(x, y pending) int {
		if x.svc != y.svc {
			if x.svc < y.svc {
				return -1
			}
			return 1
		}
		if x.op != y.op {
			if x.op < y.op {
				return -1
			}
			return 1
		}
		switch {
		case x.start < y.start:
			return -1
		case x.start > y.start:
			return 1
		}
		return bytes.Compare(x.tie[:], y.tie[:])
	})
	a.callOf = grow(a.callOf, len(pend))
	a.calls = a.calls[:0]
	for lo := 0; lo < len(pend); {
		hi := lo + 1
		exact := pend[lo].hasResend
		for hi < len(pend) && pend[hi].svc == pend[lo].svc && pend[hi].op == pend[lo].op {
			exact = exact || pend[hi].hasResend
			hi++
		}
		if exact {
			a.groupExact(lo, hi)
		} else {
			a.groupByTiming(lo, hi)
		}
		lo = hi
	}
	calls := a.calls
	slices.SortFunc(calls, func(x, y pendingCall) int {
		px, py := &pend[x.first], &pend[y.first]
		switch {
		case px.start < py.start:
			return -1
		case px.start > py.start:
			return 1
		}
		return bytes.Compare(px.tie[:], py.tie[:])
	})
	for ci := range calls {
		c := &calls[ci]
		callIdx := int32(len(t.Calls))
		aStart := int32(len(t.Attempts))
		call := Call{Caller: h, AttemptStart: aStart}
		for p := c.first; p >= 0; p = a.next(p) {
			pe := &pend[p]
			at := Attempt{
				Call:   callIdx,
				Index:  int32(len(t.Attempts)) - aStart,
				Callee: pe.callee,
				Client: pe.client,
				Start:  pe.start,
				End:    pe.end,
				Failed: pe.failed,
			}
			callee := &t.Hops[pe.callee]
			server := callee.Claim
			if callee.Virtual {
				server = ClaimMissing
			}
			at.Claim = server
			if pe.client >= 0 {
				cs := &t.Spans[pe.client]
				at.Claim, at.Mismatch = effectiveClaim(cs.Claim, server)
				at.Criteria, at.Suppressed, at.FailOpen = cs.CriteriaSatisfied, cs.Suppressed, cs.FailOpen
			}
			callee.In = int32(len(t.Attempts))
			t.Attempts = append(t.Attempts, at)
			call.Criteria = call.Criteria || at.Criteria
			call.Suppressed = call.Suppressed || at.Suppressed
			if at.FailOpen == True || (at.FailOpen == False && call.FailOpen == Unset) {
				call.FailOpen = at.FailOpen
			}
		}
		call.AttemptEnd = int32(len(t.Attempts))
		last := &t.Attempts[call.AttemptEnd-1]
		call.Failed, call.Claim = last.Failed, last.Claim
		first := &t.Hops[t.Attempts[aStart].Callee]
		call.CalleeService, call.CalleeOperation, call.Virtual = first.Service, first.Operation, first.Virtual
		t.Calls = append(t.Calls, call)
	}
	t.Hops[h].CallEnd = int32(len(t.Calls))
}

// next returns the pending attempt that follows p in its call, or -1. The
// chain is kept in callOf: callOf[p] is the next attempt's index + 1.
func (a *Assembler) next(p int32) int32 { return a.callOf[p] - 1 }

// groupExact groups pend[lo:hi] (one callee, by start time) by resend
// number: resend 0 (or none) starts a new call; resend k continues a call
// that has k attempts so far — among several (parallel calls retried in
// parallel), the one whose last attempt ended latest before this one
// started, else the latest one. A resend number that continues no call
// (numbers that skip, e.g. when redirects are counted) continues the latest
// call of the group.
func (a *Assembler) groupExact(lo, hi int) {
	first := len(a.calls)
	for p := lo; p < hi; p++ {
		a.callOf[p] = 0
		pe := &a.pend[p]
		if pe.resend <= 0 || len(a.calls) == first {
			a.calls = append(a.calls, pendingCall{first: int32(p), last: int32(p), n: 1})
			continue
		}
		best, bestFits := -1, false
		for k := max(first, len(a.calls)-maxRetryCandidates); k < len(a.calls); k++ { // oldest first
			c := &a.calls[k]
			if c.n != pe.resend {
				continue
			}
			end := a.pend[c.last].end
			fits := end <= pe.start
			switch {
			case best < 0 || (fits && !bestFits):
				best, bestFits = k, fits
			case fits && end > a.pend[a.calls[best].last].end:
				best = k // ended later: the closer predecessor
			case !fits && !bestFits:
				best = k // overlapping candidates only: the latest
			}
		}
		if best < 0 {
			best = len(a.calls) - 1
		}
		c := &a.calls[best]
		a.callOf[c.last] = int32(p) + 1
		c.last = int32(p)
		c.n++
	}
}

// groupByTiming groups pend[lo:hi] (one callee, by start time) without
// resend numbers: an attempt that starts after a failed attempt of the same
// callee ended continues that attempt's call, unless both name a target
// (url.full, db.query.text) and the targets differ. Among several such
// calls it continues the one whose last attempt ended latest. Overlapping
// attempts are never retries of each other.
func (a *Assembler) groupByTiming(lo, hi int) {
	open := a.open[:0] // calls whose last attempt failed, oldest first
	for p := lo; p < hi; p++ {
		a.callOf[p] = 0
		pe := &a.pend[p]
		best := -1 // position in open
		var bestEnd int64
		floor := max(0, len(open)-maxRetryCandidates)
		for k := len(open) - 1; k >= floor; k-- {
			last := &a.pend[a.calls[open[k]].last]
			if last.end > pe.start || (last.target != 0 && pe.target != 0 && last.target != pe.target) {
				continue
			}
			// Latest end wins; on a tie the older call (scanned later) wins.
			if best < 0 || last.end >= bestEnd {
				best, bestEnd = k, last.end
			}
		}
		if best < 0 {
			a.calls = append(a.calls, pendingCall{first: int32(p), last: int32(p), n: 1})
			if pe.failed {
				open = append(open, int32(len(a.calls)-1))
			}
			continue
		}
		c := &a.calls[open[best]]
		a.callOf[c.last] = int32(p) + 1
		c.last = int32(p)
		c.n++
		if !pe.failed {
			open = slices.Delete(open, best, best+1)
		}
	}
	a.open = open
}

// effectiveClaim combines the claim a CLIENT span received with the one the
// callee's SERVER span returned: the CLIENT side is trusted when valid.
func effectiveClaim(client, server Claim) (Claim, bool) {
	switch {
	case client.Valid():
		return client, server.Valid() && server != client
	case server.Valid():
		return server, false
	case client == ClaimInvalid || server == ClaimInvalid:
		return ClaimInvalid, false
	}
	return ClaimMissing, false
}

// finish computes First and Depth top-down and picks the primary root.
func (a *Assembler) finish(t *Trace) {
	for i := range t.Hops {
		hop := &t.Hops[i]
		if hop.In < 0 {
			hop.First = true
			continue
		}
		at := &t.Attempts[hop.In]
		parent := &t.Hops[t.Calls[at.Call].Caller]
		hop.First = parent.First && at.Index == 0
		hop.Depth = parent.Depth + 1
	}
	for _, r := range t.Roots {
		if t.Hops[r].Fragment {
			t.Fragments++
		} else if t.Root < 0 {
			t.Root = r
		}
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
