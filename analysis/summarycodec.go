package analysis

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/graph/wire"
)

// The binary form of a WindowSummary starts with summaryMagic, a byte
// that never starts UTF-8 text (so that text stored by mistake is told
// apart at once), then the codec's version.
const (
	summaryMagic        = 0xF7
	summaryCodecVersion = 1
)

// ErrCorruptSummary is returned (wrapped) by DecodeSummary for data that
// is not an encoded summary.
var ErrCorruptSummary = errors.New("corrupt encoded window summary")

// Counts of an EdgeStats in the order the binary form numbers them: the
// ones most edges have first, so that a typical edge's presence mask
// (one bit per nonzero count) fits a byte or two.
const (
	esCalls         = 0
	esAttempts      = 1
	esByAttempts0   = 2 // ByAttempts[0], then [1]
	esByAttempts1   = 3
	esRetried       = 4
	esFailed        = 5
	esFailedBy      = 6 // FailedBy[0..3]
	esCallerFailed  = 10
	esSuppressed    = 11
	esDeclaredOpen  = 12
	esDeclaredClose = 13
	esByAttempts2   = 14                                          // ByAttempts[2..]
	esFields        = esByAttempts2 + graph.MaxAttemptBuckets - 2 // 44
)

// The NodeStats counts: Hops, Failed, FailedBy[0..3].
const nsFields = 6

func edgeFields(e *graph.EdgeStats, f *[esFields]int64) {
	f[esCalls], f[esAttempts], f[esByAttempts0], f[esByAttempts1] = e.Calls, e.Attempts, e.ByAttempts[0], e.ByAttempts[1]
	f[esRetried], f[esFailed] = e.Retried, e.Failed
	copy(f[esFailedBy:esFailedBy+4], e.FailedBy[:])
	f[esCallerFailed], f[esSuppressed], f[esDeclaredOpen], f[esDeclaredClose] = e.CallerFailed, e.Suppressed, e.DeclaredOpen, e.DeclaredClose
	copy(f[esByAttempts2:], e.ByAttempts[2:])
}

func setEdgeFields(e *graph.EdgeStats, f *[esFields]int64) {
	e.Calls, e.Attempts, e.ByAttempts[0], e.ByAttempts[1] = f[esCalls], f[esAttempts], f[esByAttempts0], f[esByAttempts1]
	e.Retried, e.Failed = f[esRetried], f[esFailed]
	copy(e.FailedBy[:], f[esFailedBy:esFailedBy+4])
	e.CallerFailed, e.Suppressed, e.DeclaredOpen, e.DeclaredClose = f[esCallerFailed], f[esSuppressed], f[esDeclaredOpen], f[esDeclaredClose]
	copy(e.ByAttempts[2:], f[esByAttempts2:])
}

// summaryEncoder numbers a summary's strings and nodes in the order the
// encoding first meets them.
type summaryEncoder struct {
	strs  map[string]uint64
	table []string
	nodes map[graph.Node]uint64
	ntab  []graph.Node
}

func (e *summaryEncoder) str(s string) uint64 {
	i, ok := e.strs[s]
	if !ok {
		i = uint64(len(e.table))
		e.strs[s] = i
		e.table = append(e.table, s)
	}
	return i
}

func (e *summaryEncoder) node(n graph.Node) uint64 {
	i, ok := e.nodes[n]
	if !ok {
		i = uint64(len(e.ntab))
		e.nodes[n] = i
		e.ntab = append(e.ntab, n)
		e.str(n.Service)
		e.str(n.Operation)
	}
	return i
}

type summaryEdge struct {
	caller string
	callee graph.Node
	st     *graph.EdgeStats
}

type summaryPair struct {
	p  graph.Pair
	st *graph.EdgeStats
}

type summaryNode struct {
	n  graph.Node
	st *graph.NodeStats
}

type summaryGraph struct {
	api   string
	g     *graph.APIGraph
	nodes []summaryNode
	edges []summaryPair
}

// AppendBinary appends the compact binary form of w to dst: what stores
// keep per window. Every name is written once, in a table that records
// refer to by index; nodes (service, operation) likewise; numbers are
// varints, and a count that is zero is not written (a presence mask says
// which are). The output is deterministic: equal summaries give equal
// bytes. DecodeSummary reads it back.
//
// Layout (u: uvarint, v: zigzag varint):
//
//	magic 0xF7, version 1
//	v window
//	u strings; u length of each; then their bytes, concatenated
//	u nodes; per node: u service, u operation (string indexes)
//	u edge stats, u node stats (totals over the sections below)
//	u edges; per edge: u caller (string), u callee (node), stats
//	u APIs; per API: u name (string), v with, v without
//	u graphs; per graph: u API (string), v traces,
//	    u nodes; per node: u node, node stats
//	    u edges; per edge: u from (node), u to (node), edge stats
//
// Edge stats are a u mask of their nonzero counts (bit order: calls,
// attempts, by attempts 1 and 2, retried, failed, failed by claim 0–3,
// caller failed, suppressed, declared open, declared close, by attempts
// 3–32), then a v per bit set; node stats likewise (hops, failed, failed
// by claim 0–3).
func (w *WindowSummary) AppendBinary(dst []byte) []byte {
	e := &summaryEncoder{strs: make(map[string]uint64, 64), nodes: make(map[graph.Node]uint64, 64)}

	edges := make([]summaryEdge, 0, len(w.Edges))
	for k, st := range w.Edges {
		edges = append(edges, summaryEdge{k.Caller, k.Callee, st})
	}
	slices.SortFunc(edges, func(x, y summaryEdge) int {
		return cmp.Or(cmp.Compare(x.caller, y.caller), x.callee.Compare(y.callee))
	})
	apis := make([]string, 0, len(w.APIs))
	for k := range w.APIs {
		apis = append(apis, k)
	}
	slices.Sort(apis)
	graphs, nEdgeStats, nNodeStats := sortedGraphs(w.Graphs)
	nEdgeStats += len(edges)

	// Number the names and nodes in the order the records below meet them.
	for i := range edges {
		e.str(edges[i].caller)
		e.node(edges[i].callee)
	}
	for _, a := range apis {
		e.str(a)
	}
	for i := range graphs {
		e.str(graphs[i].api)
		for _, n := range graphs[i].nodes {
			e.node(n.n)
		}
		for _, p := range graphs[i].edges {
			e.node(p.p.From)
			e.node(p.p.To)
		}
	}

	uv, v := binary.AppendUvarint, binary.AppendVarint
	b := append(dst, summaryMagic, summaryCodecVersion)
	b = v(b, w.Window)
	b = uv(b, uint64(len(e.table)))
	for _, s := range e.table {
		b = uv(b, uint64(len(s)))
	}
	for _, s := range e.table {
		b = append(b, s...)
	}
	b = uv(b, uint64(len(e.ntab)))
	for _, n := range e.ntab {
		b = uv(b, e.strs[n.Service])
		b = uv(b, e.strs[n.Operation])
	}
	b = uv(b, uint64(nEdgeStats))
	b = uv(b, uint64(nNodeStats))
	b = uv(b, uint64(len(edges)))
	for i := range edges {
		b = uv(b, e.strs[edges[i].caller])
		b = uv(b, e.nodes[edges[i].callee])
		b = appendEdgeStats(b, edges[i].st)
	}
	b = uv(b, uint64(len(apis)))
	for _, a := range apis {
		p := w.APIs[a]
		b = uv(b, e.strs[a])
		b = v(b, int64(p.With))
		b = v(b, int64(p.Without))
	}
	b = uv(b, uint64(len(graphs)))
	for i := range graphs {
		sg := &graphs[i]
		b = uv(b, e.strs[sg.api])
		var traces int64
		if sg.g != nil {
			traces = sg.g.Traces
		}
		b = v(b, traces)
		b = uv(b, uint64(len(sg.nodes)))
		for _, n := range sg.nodes {
			b = uv(b, e.nodes[n.n])
			b = appendNodeStats(b, n.st)
		}
		b = uv(b, uint64(len(sg.edges)))
		for _, p := range sg.edges {
			b = uv(b, e.nodes[p.p.From])
			b = uv(b, e.nodes[p.p.To])
			b = appendEdgeStats(b, p.st)
		}
	}
	return b
}

// sortedGraphs returns the call graphs by API, their nodes and edges
// sorted, with the number of edge and node stats they hold.
func sortedGraphs(gs map[string]*graph.APIGraph) (graphs []summaryGraph, nEdgeStats, nNodeStats int) {
	graphs = make([]summaryGraph, 0, len(gs))
	for k, g := range gs {
		sg := summaryGraph{api: k, g: g}
		if g != nil {
			sg.nodes = make([]summaryNode, 0, len(g.Nodes))
			for n, st := range g.Nodes {
				sg.nodes = append(sg.nodes, summaryNode{n, st})
			}
			slices.SortFunc(sg.nodes, func(x, y summaryNode) int { return x.n.Compare(y.n) })
			sg.edges = make([]summaryPair, 0, len(g.Edges))
			for p, st := range g.Edges {
				sg.edges = append(sg.edges, summaryPair{p, st})
			}
			slices.SortFunc(sg.edges, func(x, y summaryPair) int { return x.p.Compare(y.p) })
		}
		nEdgeStats += len(sg.edges)
		nNodeStats += len(sg.nodes)
		graphs = append(graphs, sg)
	}
	slices.SortFunc(graphs, func(x, y summaryGraph) int { return cmp.Compare(x.api, y.api) })
	return graphs, nEdgeStats, nNodeStats
}

// MarshalBinary returns the binary form of w (AppendBinary).
func (w *WindowSummary) MarshalBinary() ([]byte, error) { return w.AppendBinary(nil), nil }

// UnmarshalBinary decodes the binary form of a summary into w (DecodeSummary).
func (w *WindowSummary) UnmarshalBinary(b []byte) error {
	d, err := DecodeSummary(b)
	if err != nil {
		return err
	}
	*w = *d
	return nil
}

func appendEdgeStats(b []byte, st *graph.EdgeStats) []byte {
	if st == nil {
		return append(b, 0)
	}
	var f [esFields]int64
	edgeFields(st, &f)
	var mask uint64
	for i, x := range f {
		if x != 0 {
			mask |= 1 << i
		}
	}
	b = binary.AppendUvarint(b, mask)
	for _, x := range f {
		if x != 0 {
			b = binary.AppendVarint(b, x)
		}
	}
	return b
}

func appendNodeStats(b []byte, st *graph.NodeStats) []byte {
	if st == nil {
		return append(b, 0)
	}
	f := [nsFields]int64{st.Hops, st.Failed, st.FailedBy[0], st.FailedBy[1], st.FailedBy[2], st.FailedBy[3]}
	var mask byte
	for i, x := range f {
		if x != 0 {
			mask |= 1 << i
		}
	}
	b = append(b, mask)
	for _, x := range f {
		if x != 0 {
			b = binary.AppendVarint(b, x)
		}
	}
	return b
}

// summaryReader reads an encoded summary, remembering the first error.
type summaryReader struct{ wire.Reader }

func corruptSummary(what string) error {
	return fmt.Errorf("analysis: decode window summary: %w: %s", ErrCorruptSummary, what)
}

// node reads an index into the node table.
func (r *summaryReader) node(nodes []graph.Node, what string) graph.Node {
	i := r.Uvarint(what)
	if i >= uint64(len(nodes)) {
		r.Fail(what + " out of range")
		return graph.Node{}
	}
	return nodes[i]
}

func (r *summaryReader) int(what string) int {
	x := r.Varint(what)
	if int64(int(x)) != x {
		r.Fail(what + " out of range")
		return 0
	}
	return int(x)
}

func (r *summaryReader) edgeStats(st *graph.EdgeStats) {
	mask := r.Uvarint("edge stats")
	if mask >= 1<<esFields {
		r.Fail("edge stats mask")
		return
	}
	if mask == 0 {
		return
	}
	var f [esFields]int64
	for m := mask; m != 0; m &= m - 1 {
		f[bits.TrailingZeros64(m)] = r.Varint("edge count")
	}
	setEdgeFields(st, &f)
}

func (r *summaryReader) nodeStats(st *graph.NodeStats) {
	mask := r.Uvarint("node stats")
	if mask >= 1<<nsFields {
		r.Fail("node stats mask")
		return
	}
	for m := mask; m != 0; m &= m - 1 {
		x := r.Varint("node count")
		switch i := bits.TrailingZeros64(m); i {
		case 0:
			st.Hops = x
		case 1:
			st.Failed = x
		default:
			st.FailedBy[i-2] = x
		}
	}
}

// strings reads the string table: the strings' lengths, then their
// bytes, kept in one string.
func (r *summaryReader) strings() []string {
	nStrs := r.Count(1, "strings")
	lens := make([]uint64, nStrs)
	var total uint64
	for i := range lens {
		lens[i] = r.Uvarint("string length")
		if lens[i] > uint64(len(r.B)) {
			r.Fail("string length")
			break
		}
		total += lens[i]
	}
	if total > uint64(len(r.B)) {
		r.Fail("strings")
	}
	if r.Err != nil {
		return nil
	}
	all := string(r.B[:total])
	r.B = r.B[total:]
	strs := make([]string, nStrs)
	var at uint64
	for i, n := range lens {
		strs[i] = all[at : at+n]
		at += n
	}
	return strs
}

// DecodeSummary decodes a summary encoded by AppendBinary. Any input is
// safe: data that is not such a summary (its JSON included) gives an
// error wrapping ErrCorruptSummary, never a panic.
func DecodeSummary(b []byte) (*WindowSummary, error) {
	if len(b) < 2 || b[0] != summaryMagic {
		return nil, fmt.Errorf("analysis: decode window summary: %w: not the binary form", ErrCorruptSummary)
	}
	if b[1] != summaryCodecVersion {
		return nil, fmt.Errorf("analysis: decode window summary: %w: version %d, want %d", ErrCorruptSummary, b[1], summaryCodecVersion)
	}
	r := &summaryReader{wire.Reader{B: b[2:], Corrupt: corruptSummary}}
	w := &WindowSummary{Window: r.Varint("window")}

	strs := r.strings()
	if r.Err != nil {
		return nil, r.Err
	}

	nodes := make([]graph.Node, r.Count(2, "nodes"))
	for i := range nodes {
		nodes[i] = graph.Node{Service: r.Str(strs, "node service"), Operation: r.Str(strs, "node operation")}
	}
	// Every edge's record takes three bytes at least, every node's two.
	edgeSlab := make([]graph.EdgeStats, r.Count(3, "edge stats"))
	nodeSlab := make([]graph.NodeStats, r.Count(2, "node stats"))
	nextEdge := func() *graph.EdgeStats {
		if len(edgeSlab) == 0 {
			r.Fail("more edge stats than declared")
			return &graph.EdgeStats{}
		}
		st := &edgeSlab[0]
		edgeSlab = edgeSlab[1:]
		r.edgeStats(st)
		return st
	}

	n := r.Count(3, "edges")
	w.Edges = make(map[graph.Edge]*graph.EdgeStats, n)
	for i := 0; i < n && r.Err == nil; i++ {
		k := graph.Edge{Caller: r.Str(strs, "edge caller"), Callee: r.node(nodes, "edge callee")}
		w.Edges[k] = nextEdge()
	}
	if r.Err == nil && len(w.Edges) != n {
		r.Fail("duplicate edge")
	}

	n = r.Count(3, "apis")
	w.APIs = make(map[string]APIPotential, n)
	for i := 0; i < n && r.Err == nil; i++ {
		api := r.Str(strs, "api")
		w.APIs[api] = APIPotential{With: r.int("potential with"), Without: r.int("potential without")}
	}
	if r.Err == nil && len(w.APIs) != n {
		r.Fail("duplicate api")
	}

	n = r.Count(4, "graphs")
	w.Graphs = make(map[string]*graph.APIGraph, n)
	for i := 0; i < n && r.Err == nil; i++ {
		api := r.Str(strs, "graph api")
		g := &graph.APIGraph{API: api, Traces: r.Varint("graph traces")}
		nn := r.Count(2, "graph nodes")
		g.Nodes = make(map[graph.Node]*graph.NodeStats, nn)
		for j := 0; j < nn && r.Err == nil; j++ {
			k := r.node(nodes, "graph node")
			if len(nodeSlab) == 0 {
				r.Fail("more node stats than declared")
				break
			}
			st := &nodeSlab[0]
			nodeSlab = nodeSlab[1:]
			r.nodeStats(st)
			g.Nodes[k] = st
		}
		if r.Err == nil && len(g.Nodes) != nn {
			r.Fail("duplicate graph node")
		}
		ne := r.Count(3, "graph edges")
		g.Edges = make(map[graph.Pair]*graph.EdgeStats, ne)
		for j := 0; j < ne && r.Err == nil; j++ {
			k := graph.Pair{From: r.node(nodes, "graph edge from"), To: r.node(nodes, "graph edge to")}
			g.Edges[k] = nextEdge()
		}
		if r.Err == nil && len(g.Edges) != ne {
			r.Fail("duplicate graph edge")
		}
		w.Graphs[api] = g
	}
	if r.Err == nil && len(w.Graphs) != n {
		r.Fail("duplicate graph")
	}
	if r.Err != nil {
		return nil, r.Err
	}
	if len(edgeSlab) != 0 || len(nodeSlab) != 0 {
		return nil, fmt.Errorf("analysis: decode window summary: %w: fewer stats than declared", ErrCorruptSummary)
	}
	if len(r.B) != 0 {
		return nil, fmt.Errorf("analysis: decode window summary: %w: %d trailing bytes", ErrCorruptSummary, len(r.B))
	}
	return w, nil
}
