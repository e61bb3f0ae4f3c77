package storetest

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/attribution"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/radius"
	"github.com/stormradius/stormradius/store"
)

// figureTraces are three hand-built trace results whose figures are
// worked out by hand in figureCases: a failed trace of api-a (A), a
// failed trace of api-a a minute later (B), and a fragment trace (C, no
// root API) between them, and a trace of api-a without a failure (D,
// whose figures show apart: 1 span, 1 hop, 1 counterfactual request,
// standing for itself). B and C were sampled: B stands for 2 traces
// of the traffic (W = 2), C for 3, A for itself (its spans recorded
// conflicting probabilities and its root's was unusable: counted once),
// so every count below is A's value + 2 × B's + 3 × C's + D's.
func figureTraces() []*analysis.TraceResult {
	db := graph.Node{Service: "db", Operation: "q"}
	cache := graph.Node{Service: "cache", Operation: "get"}
	front := graph.Node{Service: "front", Operation: "GET /a"}
	at := func(mm, ss int) int64 { return time.Date(2026, 3, 1, 10, mm, ss, 0, time.UTC).UnixNano() }
	a := &analysis.TraceResult{
		TraceID: graph.TraceID{0xf1, 1}, API: "api-a", Start: at(0, 10), Spans: 7, Fragments: 1,
		RootFailed: true, RemoteParent: true,
		Events: []analysis.Event{{Owner: db, Radius: 3}, {Owner: cache, Radius: 2}}, Radius: 3,
		// Amplifications 4/2 = 2 and 1/1 = 1.
		Owners:     []radius.OwnerStat{{Node: cache, Hops: 1, First: 1, Spurious: 2}, {Node: db, Hops: 4, First: 2, Spurious: 5}},
		Suppressed: 6, Hops: 11, Counterfactual: 18,
		Services: []analysis.ServiceResult{
			{Service: "db", OwnedFailures: 1, Requests: 6, VirtualRequests: 2, Counterfactual: 9, Spurious: 5},
			{Service: "front", Claims: attribution.Counts{0, 1, 2, 3, 4, 5}, Mismatches: 6, Misattributed: 7,
				NaiveMisattributed: 8, Eligible: 9, ContextDrops: 10, OwnedFailures: 11, Requests: 12, VirtualRequests: 13,
				Counterfactual: 14, Spurious: 15},
		},
		Nodes:    []analysis.NodeCount{{Node: db, Requests: 6, Owned: 1}, {Node: front, Requests: 5}},
		Versions: []analysis.ServiceVersion{{Service: "db", Version: "1.2"}},
		VersionClaims: []analysis.VersionClaims{{ServiceVersion: analysis.ServiceVersion{Service: "db", Version: "1.2"},
			FailedHops: 3, ClaimedHops: 2, UnclaimedAnswers: 5, RetriedUnclaimed: 4, Suppressed: 1}},
		SamplingFlags: graph.SamplingConflict | graph.SamplingUnusable,
	}
	b := &analysis.TraceResult{
		TraceID: graph.TraceID{0xf1, 2}, API: "api-a", Start: at(1, 20), Spans: 4, RootFailed: true,
		Events: []analysis.Event{{Owner: db, Radius: 2}}, Radius: 2,
		Owners:     []radius.OwnerStat{{Node: db, Hops: 3, First: 1, Spurious: 4}}, // amplification 3
		Suppressed: 2, Hops: 5, Counterfactual: 9,
		Services: []analysis.ServiceResult{{Service: "db", Claims: attribution.Counts{attribution.AuditCorrect: 1},
			Misattributed: 1, NaiveMisattributed: 1, Eligible: 2, OwnedFailures: 1, Requests: 3, Counterfactual: 7, Spurious: 4}},
		Nodes:    []analysis.NodeCount{{Node: db, Requests: 3, Owned: 1}},
		Versions: []analysis.ServiceVersion{{Service: "db", Version: "1.2"}, {Service: "front", Version: "9"}},
		VersionClaims: []analysis.VersionClaims{
			{ServiceVersion: analysis.ServiceVersion{Service: "db", Version: "1.2"}, FailedHops: 1, ClaimedHops: 1, Suppressed: 2},
			{ServiceVersion: analysis.ServiceVersion{Service: "front", Version: "9"}, FailedHops: 6, UnclaimedAnswers: 7, RetriedUnclaimed: 8},
		},
		Weight: 2,
	}
	c := &analysis.TraceResult{
		TraceID: graph.TraceID{0xf1, 3}, Start: at(0, 40), Spans: 2, Fragments: 2,
		Services: []analysis.ServiceResult{{Service: "lost", ContextDrops: 2, Requests: 2}},
		Nodes:    []analysis.NodeCount{{Node: graph.Node{Service: "lost", Operation: "op"}, Requests: 2}},
		Weight:   3,
	}
	// D: a trace of api-a without a failure, standing for itself, whose
	// id the tail sampling policy's hash puts below 1/16 (tailID).
	d := &analysis.TraceResult{TraceID: tailID(), API: "api-a", Start: at(0, 50), Spans: 1, Hops: 1, Counterfactual: 1}
	// E: a trace whose spans reached two partitions, set aside: it counts
	// in traces_split alone.
	e := &analysis.TraceResult{TraceID: graph.TraceID{0xf1, 5}, Start: at(1, 30), Split: true}
	return []*analysis.TraceResult{a, b, c, d, e}
}

// tailHash is the tail_sampling probabilistic policy's hash of id over
// 2^64 (FNV-1a of its default salt, then the id), from the standard
// library: what analysis.TailHash must agree with.
func tailHash(id graph.TraceID) float64 {
	h := fnv.New64a()
	h.Write([]byte("default-hash-seed"))
	h.Write(id[:])
	return float64(h.Sum64()) / (1 << 64)
}

// tailID returns the first of the ids 0xf1, 0xd0, n… whose tailHash is
// below 1/16.
func tailID() graph.TraceID {
	for n := byte(0); ; n++ {
		id := graph.TraceID{0xf1, 0xd0, n}
		if tailHash(id) < 1.0/16 {
			return id
		}
	}
}

// below returns 1 when x < b, else 0.
func below(x, b float64) int64 {
	if x < b {
		return 1
	}
	return 0
}

// figureCase is what a figure must read back as: got reads it from a
// report (by field, not through the figure's accessor), want is worked
// out by hand from figureTraces.
type figureCase struct {
	got  func(r *analysis.Report) any
	want any
}

// Readers of a report's aggregates, empty where the report has none.
func apiOf(r *analysis.Report) *analysis.APIAgg {
	if a := r.APIs["api-a"]; a != nil {
		return a
	}
	return &analysis.APIAgg{}
}

func ownerOf(r *analysis.Report, svc, op string) *analysis.OwnerAgg {
	if o := apiOf(r).Owners[graph.Node{Service: svc, Operation: op}]; o != nil {
		return o
	}
	return &analysis.OwnerAgg{}
}

func svcOf(r *analysis.Report, name string) *analysis.ServiceResult {
	if s := r.Services[name]; s != nil {
		return s
	}
	return &analysis.ServiceResult{}
}

func nodeOf(r *analysis.Report, svc, op string) *analysis.NodeAgg {
	if n := r.Nodes[graph.Node{Service: svc, Operation: op}]; n != nil {
		return n
	}
	return &analysis.NodeAgg{}
}

func versionOf(r *analysis.Report, svc, v string) *analysis.VersionAgg {
	if a := r.Versions[analysis.VersionKey{API: "api-a", Service: svc, Version: v}]; a != nil {
		return a
	}
	return &analysis.VersionAgg{}
}

// figureCases has a case for every figure of analysis.Figures, by name:
// A's value + 2 × B's + 3 × C's + D's (figureTraces).
var figureCases = map[string][]figureCase{
	// 7 + 2×4 + 3×2 + 1 spans, 1 + 2 + 3 + 1 traces, 1 + 0 + 3×2
	// fragment roots.
	"spans":     {{func(r *analysis.Report) any { return r.Spans }, int64(22)}},
	"traces":    {{func(r *analysis.Report) any { return r.Traces }, int64(7)}},
	"fragments": {{func(r *analysis.Report) any { return r.Fragments }, int64(7)}},
	// What weighting added: (2−1) + (3−1) traces, (2−1)×4 + (3−1)×2
	// spans; W(W−1): 2×1 + 3×2; A's flags.
	"traces_excess":      {{func(r *analysis.Report) any { return r.TracesExcess }, int64(3)}},
	"spans_excess":       {{func(r *analysis.Report) any { return r.SpansExcess }, int64(8)}},
	"traces_var":         {{func(r *analysis.Report) any { return r.TracesVar }, int64(8)}},
	"sampling_conflicts": {{func(r *analysis.Report) any { return r.SamplingConflicts }, int64(1)}},
	"sampling_unusable":  {{func(r *analysis.Report) any { return r.SamplingUnusable }, int64(1)}},
	"traces_split":       {{func(r *analysis.Report) any { return r.TracesSplit }, int64(1)}}, // E
	// api-a: A and B, both failed with failed roots, A had a remote
	// parent; D.
	"api_traces":         {{func(r *analysis.Report) any { return apiOf(r).Traces }, int64(1 + 2 + 1)}},
	"api_failed":         {{func(r *analysis.Report) any { return apiOf(r).Failed }, int64(1 + 2)}},
	"api_root_errors":    {{func(r *analysis.Report) any { return apiOf(r).RootErrors }, int64(1 + 2)}},
	"api_remote_parent":  {{func(r *analysis.Report) any { return apiOf(r).RemoteParent }, int64(1)}},
	"api_radius_sum":     {{func(r *analysis.Report) any { return apiOf(r).RadiusSum }, int64(3 + 2*2)}},
	"api_suppressed":     {{func(r *analysis.Report) any { return apiOf(r).Suppressed }, int64(6 + 2*2)}},
	"api_hops":           {{func(r *analysis.Report) any { return apiOf(r).Hops }, int64(11 + 2*5 + 1)}},
	"api_counterfactual": {{func(r *analysis.Report) any { return apiOf(r).Counterfactual }, int64(18 + 2*9 + 1)}},
	// Summed over the services of A (front) and B (db).
	"api_misattributed": {{func(r *analysis.Report) any { return apiOf(r).Misattributed }, int64(7 + 2*1)}},
	"api_naive":         {{func(r *analysis.Report) any { return apiOf(r).Naive }, int64(8 + 2*1)}},
	"api_eligible":      {{func(r *analysis.Report) any { return apiOf(r).Eligible }, int64(9 + 2*2)}},
	"api_fragments":     {{func(r *analysis.Report) any { return apiOf(r).Fragments }, int64(1)}},
	"api_events":        {{func(r *analysis.Report) any { return apiOf(r).Events }, int64(2 + 2*1)}},
	// B's: W−1 = 1, c = W(W−1) = 2, times failed (1), root failed (1),
	// radius 2 and 4, misattributed m = 1 and eligible e = 2 as m², m·e
	// and e².
	"api_excess":       {{func(r *analysis.Report) any { return apiOf(r).Excess }, int64(1)}},
	"api_var":          {{func(r *analysis.Report) any { return apiOf(r).Var }, int64(2)}},
	"api_var_failed":   {{func(r *analysis.Report) any { return apiOf(r).VarFailed }, int64(2)}},
	"api_var_root":     {{func(r *analysis.Report) any { return apiOf(r).VarRoot }, int64(2)}},
	"api_var_radius":   {{func(r *analysis.Report) any { return apiOf(r).VarRadius }, int64(2 * 2)}},
	"api_var_radius2":  {{func(r *analysis.Report) any { return apiOf(r).VarRadius2 }, int64(2 * 4)}},
	"api_var_mis2":     {{func(r *analysis.Report) any { return apiOf(r).VarMis2 }, int64(2 * 1)}},
	"api_var_mis_elig": {{func(r *analysis.Report) any { return apiOf(r).VarMisElig }, int64(2 * 2)}},
	"api_var_elig2":    {{func(r *analysis.Report) any { return apiOf(r).VarElig2 }, int64(2 * 4)}},
	"radius":           {{func(r *analysis.Report) any { return apiOf(r).Radius }, map[int]int64{3: 1, 2: 2}}},
	// The traces standing for themselves: A (failed) and D (not, below
	// 1/16).
	"api_tail_clean_16": {{func(r *analysis.Report) any { return apiOf(r).TailClean16 }, int64(1)}},
	"api_tail_clean_2":  {{func(r *analysis.Report) any { return apiOf(r).TailClean2 }, int64(1)}},
	"api_tail_clean":    {{func(r *analysis.Report) any { return apiOf(r).TailClean }, int64(1)}},
	"api_tail_failed_2": {{func(r *analysis.Report) any { return apiOf(r).TailFailed2 }, below(tailHash(graph.TraceID{0xf1, 1}), 0.5)}},
	"api_tail_failed":   {{func(r *analysis.Report) any { return apiOf(r).TailFailed }, int64(1)}},
	// A's largest amplification is db's 4/2, B's db's 3/1.
	"amp": {{func(r *analysis.Report) any { return apiOf(r).Amplification }, map[float64]int64{2: 1, 3: 2}}},
	// db owns in A and B, cache in A.
	"owner_events": {
		{func(r *analysis.Report) any { return ownerOf(r, "db", "q").Events }, int64(4 + 2*3)},
		{func(r *analysis.Report) any { return ownerOf(r, "cache", "get").Events }, int64(1)},
	},
	"owner_spurious": {
		{func(r *analysis.Report) any { return ownerOf(r, "db", "q").Spurious }, int64(5 + 2*4)},
		{func(r *analysis.Report) any { return ownerOf(r, "cache", "get").Spurious }, int64(2)},
	},
	"owner_traces": {
		{func(r *analysis.Report) any { return ownerOf(r, "db", "q").Traces }, int64(1 + 2)},
		{func(r *analysis.Report) any { return ownerOf(r, "cache", "get").Traces }, int64(1)},
	},
	"owner_suppressed": {
		{func(r *analysis.Report) any { return ownerOf(r, "db", "q").Suppressed }, int64(6 + 2*2)},
		{func(r *analysis.Report) any { return ownerOf(r, "cache", "get").Suppressed }, int64(6)},
	},
	"owner_radius_sum": {
		{func(r *analysis.Report) any { return ownerOf(r, "db", "q").RadiusSum }, int64(3 + 2*2)},
		{func(r *analysis.Report) any { return ownerOf(r, "cache", "get").RadiusSum }, int64(2)},
	},
	"owner_radius": {
		{func(r *analysis.Report) any { return ownerOf(r, "db", "q").Radius }, map[int]int64{3: 1, 2: 2}},
		{func(r *analysis.Report) any { return ownerOf(r, "cache", "get").Radius }, map[int]int64{2: 1}},
	},
	"owner_amp": {
		{func(r *analysis.Report) any { return ownerOf(r, "db", "q").Amplification }, map[float64]int64{2: 1, 3: 2}},
		{func(r *analysis.Report) any { return ownerOf(r, "cache", "get").Amplification }, map[float64]int64{1: 1}},
	},
	// front is A's alone (distinct values), db A's and B's, lost C's.
	"svc_correct": {
		{func(r *analysis.Report) any { return svcOf(r, "front").Claims[attribution.AuditCorrect] }, int64(1)},
		{func(r *analysis.Report) any { return svcOf(r, "db").Claims[attribution.AuditCorrect] }, int64(2 * 1)},
	},
	"svc_false_claim":   {{func(r *analysis.Report) any { return svcOf(r, "front").Claims[attribution.AuditFalseClaim] }, int64(2)}},
	"svc_false_unclaim": {{func(r *analysis.Report) any { return svcOf(r, "front").Claims[attribution.AuditFalseUnclaim] }, int64(3)}},
	"svc_missing":       {{func(r *analysis.Report) any { return svcOf(r, "front").Claims[attribution.AuditMissing] }, int64(4)}},
	"svc_invalid":       {{func(r *analysis.Report) any { return svcOf(r, "front").Claims[attribution.AuditInvalid] }, int64(5)}},
	"svc_mismatches":    {{func(r *analysis.Report) any { return svcOf(r, "front").Mismatches }, int64(6)}},
	"svc_misattributed": {
		{func(r *analysis.Report) any { return svcOf(r, "front").Misattributed }, int64(7)},
		{func(r *analysis.Report) any { return svcOf(r, "db").Misattributed }, int64(2 * 1)},
	},
	"svc_naive": {
		{func(r *analysis.Report) any { return svcOf(r, "front").NaiveMisattributed }, int64(8)},
		{func(r *analysis.Report) any { return svcOf(r, "db").NaiveMisattributed }, int64(2 * 1)},
	},
	"svc_eligible": {
		{func(r *analysis.Report) any { return svcOf(r, "front").Eligible }, int64(9)},
		{func(r *analysis.Report) any { return svcOf(r, "db").Eligible }, int64(2 * 2)},
	},
	"svc_context_drops": {
		{func(r *analysis.Report) any { return svcOf(r, "front").ContextDrops }, int64(10)},
		{func(r *analysis.Report) any { return svcOf(r, "lost").ContextDrops }, int64(3 * 2)},
	},
	"svc_owned": {
		{func(r *analysis.Report) any { return svcOf(r, "front").OwnedFailures }, int64(11)},
		{func(r *analysis.Report) any { return svcOf(r, "db").OwnedFailures }, int64(1 + 2*1)},
	},
	"svc_requests": {
		{func(r *analysis.Report) any { return svcOf(r, "front").Requests }, int64(12)},
		{func(r *analysis.Report) any { return svcOf(r, "db").Requests }, int64(6 + 2*3)},
		{func(r *analysis.Report) any { return svcOf(r, "lost").Requests }, int64(3 * 2)},
	},
	"svc_virtual_requests": {
		{func(r *analysis.Report) any { return svcOf(r, "front").VirtualRequests }, int64(13)},
		{func(r *analysis.Report) any { return svcOf(r, "db").VirtualRequests }, int64(2)},
	},
	"svc_counterfactual": {
		{func(r *analysis.Report) any { return svcOf(r, "front").Counterfactual }, int64(14)},
		{func(r *analysis.Report) any { return svcOf(r, "db").Counterfactual }, int64(9 + 2*7)},
	},
	"svc_spurious": {
		{func(r *analysis.Report) any { return svcOf(r, "front").Spurious }, int64(15)},
		{func(r *analysis.Report) any { return svcOf(r, "db").Spurious }, int64(5 + 2*4)},
	},
	"node_requests": {
		{func(r *analysis.Report) any { return nodeOf(r, "db", "q").Requests }, int64(6 + 2*3)},
		{func(r *analysis.Report) any { return nodeOf(r, "front", "GET /a").Requests }, int64(5)},
		{func(r *analysis.Report) any { return nodeOf(r, "lost", "op").Requests }, int64(3 * 2)},
	},
	"node_owned": {{func(r *analysis.Report) any { return nodeOf(r, "db", "q").Owned }, int64(1 + 2*1)}},
	// db 1.2 ran in A and B, front 9 in B alone.
	"ver_traces": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").Traces }, int64(1 + 2)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").Traces }, int64(2)},
	},
	"ver_failed": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").Failed }, int64(1 + 2)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").Failed }, int64(2)},
	},
	"ver_root_errors": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").RootErrors }, int64(1 + 2)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").RootErrors }, int64(2)},
	},
	"ver_radius_sum": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").RadiusSum }, int64(3 + 2*2)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").RadiusSum }, int64(2 * 2)},
	},
	"ver_radius": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").Radius }, map[int]int64{3: 1, 2: 2}},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").Radius }, map[int]int64{2: 2}},
	},
	"ver_amp": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").Amplification }, map[float64]int64{2: 1, 3: 2}},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").Amplification }, map[float64]int64{3: 2}},
	},
	"ver_excess": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").Excess }, int64(1)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").Excess }, int64(1)},
	},
	"ver_var": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").Var }, int64(2)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").Var }, int64(2)},
	},
	// The claim counts: db 1.2's in A and B, front 9's in B alone.
	"ver_failed_hops": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").FailedHops }, int64(3 + 2*1)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").FailedHops }, int64(2 * 6)},
	},
	"ver_claimed_hops": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").ClaimedHops }, int64(2 + 2*1)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").ClaimedHops }, int64(0)},
	},
	"ver_unclaimed_answers": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").UnclaimedAnswers }, int64(5)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").UnclaimedAnswers }, int64(2 * 7)},
	},
	"ver_retried_unclaimed": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").RetriedUnclaimed }, int64(4)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").RetriedUnclaimed }, int64(2 * 8)},
	},
	"ver_suppressed": {
		{func(r *analysis.Report) any { return versionOf(r, "db", "1.2").Suppressed }, int64(1 + 2*2)},
		{func(r *analysis.Report) any { return versionOf(r, "front", "9").Suppressed }, int64(0)},
	},
}

// checkFigures checks every figure of analysis.Figures in rep against its
// case.
func checkFigures(t *testing.T, what string, rep *analysis.Report) {
	t.Helper()
	for _, f := range analysis.Figures {
		cases, ok := figureCases[f.Name]
		if !ok {
			t.Errorf("figure %s has no case in storetest's figureCases: add what it reads back as", f.Name)
			continue
		}
		for i, c := range cases {
			if got := c.got(rep); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s: figure %s (check %d): %v, want %v", what, f.Name, i, got, c.want)
			}
		}
	}
}

// testFigures writes figureTraces through the store as the pipeline
// does (records applied, a replacement and a deletion among them) and
// checks every figure read back through Report, from the day, hour and
// minute rollups, for all APIs and for api-a alone.
func testFigures(t *testing.T, open Opener) {
	s := open(t, true)
	defer s.Close()
	x := ctx(t)
	// The hand-worked values, in Go: the case table itself must hold.
	want := analysis.NewReport()
	for _, r := range figureTraces() {
		want.Add(r, 1)
	}
	checkFigures(t, "Report.Add", want)

	var asm graph.Assembler
	facts := asm.Assemble([]graph.Span{{TraceID: graph.TraceID{0xf1}, SpanID: graph.SpanID{1}, Kind: graph.KindServer,
		Service: "front", Operation: "GET /a"}}).AppendBinary(nil)
	record := func(r *analysis.TraceResult, seq uint64) *store.Record {
		r.Window = analysis.WindowOf(r.Start, s.Window())
		return &store.Record{TraceID: r.TraceID, Start: r.Start, Window: r.Window, API: r.API, Seq: seq, Result: r, Facts: facts}
	}
	traces := figureTraces()
	// A first stored as B's twin (other figures, which the replacement
	// takes away again), and a fourth trace, deleted again.
	early := *traces[1]
	early.TraceID, early.Start = traces[0].TraceID, traces[0].Start
	extra := *traces[0]
	extra.TraceID = graph.TraceID{0xf1, 4}
	batches := [][]store.Change{
		{{New: record(&early, 1)}, {New: record(traces[2], 1)}, {New: record(&extra, 1)}},
		{{Old: record(&early, 1), New: record(traces[0], 2)}, {New: record(traces[1], 2)}, {New: record(traces[3], 2)},
			{New: record(traces[4], 2)}},
		{{Old: record(&extra, 1)}},
	}
	for _, b := range batches {
		if err := s.Apply(x, store.Batch{Changes: b}); err != nil {
			t.Fatal(err)
		}
	}
	h := func(hh, mm int) int64 { return time.Date(2026, 3, 1, hh, mm, 0, 0, time.UTC).UnixNano() }
	for _, q := range []store.Query{
		{},                             // days
		{From: h(9, 0), To: h(11, 0)},  // hours
		{From: h(10, 0), To: h(10, 2)}, // minutes
		{API: "api-a"},                 // days, one API
		{From: h(9, 59), To: h(10, 3), API: "api-a"}, // minutes, one API
	} {
		rep, err := s.Report(x, q)
		if err != nil {
			t.Fatal(err)
		}
		checkFigures(t, fmt.Sprintf("query %+v", q), rep)
	}
}
