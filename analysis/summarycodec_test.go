package analysis_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
)

// realSummaries returns the summaries of the mixed corpus in one-minute
// windows (retries, failures of every claim, fail-open declarations,
// virtual nodes) and a window of the week fixture's 100-API graphs.
func realSummaries(t testing.TB) []*analysis.WindowSummary {
	t.Helper()
	cfg := analysis.Config{Window: time.Minute}
	_, ws := analysis.InMemory(graph.Lists(corpus(t, 300)), cfg, 1)
	sums := ws.Summaries(cfg)
	if len(sums) < 3 {
		t.Fatalf("%d windows", len(sums))
	}
	return append(sums, weekState(100).Summary(493000, analysis.Config{Window: time.Hour}))
}

// weekState is the state behind every window of storetest.FillWeek: each
// of apis root APIs calls its database, retried once.
func weekState(apis int) *analysis.State {
	var asm graph.Assembler
	st := analysis.NewState()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	for a := 0; a < apis; a++ {
		svc := fmt.Sprintf("svc-%03d", a)
		id := graph.TraceID{2, byte(a)}
		spans := []graph.Span{
			{TraceID: id, SpanID: graph.SpanID{1}, Kind: graph.KindServer, Service: svc, Operation: "GET /api", Start: t0, End: t0 + 9e6, Failed: true},
			{TraceID: id, SpanID: graph.SpanID{2}, ParentID: graph.SpanID{1}, Kind: graph.KindClient, Service: svc, Name: "query", Start: t0 + 1e6, End: t0 + 3e6, Failed: true},
			{TraceID: id, SpanID: graph.SpanID{3}, ParentID: graph.SpanID{2}, Kind: graph.KindServer, Service: "db-" + svc, Operation: "query", Start: t0 + 1e6, End: t0 + 3e6, Failed: true},
			{TraceID: id, SpanID: graph.SpanID{4}, ParentID: graph.SpanID{1}, Kind: graph.KindClient, Service: svc, Name: "query", Start: t0 + 4e6, End: t0 + 6e6, Failed: true, HasResend: true, Resend: 1},
			{TraceID: id, SpanID: graph.SpanID{5}, ParentID: graph.SpanID{4}, Kind: graph.KindServer, Service: "db-" + svc, Operation: "query", Start: t0 + 4e6, End: t0 + 6e6, Failed: true},
		}
		st.Add(asm.Assemble(spans), 1)
	}
	return st
}

// fill sets every int64 of *p (arrays included), found by reflection so
// that a count added to the graph types later is covered too, to distinct
// values from *next on, alternating signs and reaching the extremes.
func fill(p any, next *int64) {
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				walk(v.Field(i))
			}
		case reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Int64, reflect.Int:
			*next++
			x := *next
			switch x % 7 {
			case 0:
				x = -x
			case 3:
				x <<= 40
			}
			if *next == 5 {
				x = math.MaxInt64
			} else if *next == 9 {
				x = math.MinInt64
			}
			v.SetInt(x)
		default:
			panic("fill: unexpected field kind " + v.Kind().String())
		}
	}
	walk(reflect.ValueOf(p).Elem())
}

// fullSummary has every count of every record nonzero, empty names and
// repeated ones.
func fullSummary() *analysis.WindowSummary {
	var n int64
	es := func() *graph.EdgeStats { e := &graph.EdgeStats{}; fill(e, &n); return e }
	ns := func() *graph.NodeStats { s := &graph.NodeStats{}; fill(s, &n); return s }
	a, b, c := graph.Node{Service: "a", Operation: "GET /x"}, graph.Node{Service: "b", Operation: ""}, graph.Node{Service: "", Operation: "c"}
	w := &analysis.WindowSummary{Window: -42,
		Edges: map[graph.Edge]*graph.EdgeStats{{Caller: "a", Callee: b}: es(), {Caller: "", Callee: c}: es(), {Caller: "b", Callee: a}: {}},
		APIs:  map[string]analysis.APIPotential{"a GET /x": {With: 3, Without: 7}, "": {With: -1, Without: math.MaxInt32}, "z": {}},
	}
	var p analysis.APIPotential
	fill(&p, &n)
	w.APIs["filled"] = p
	g := graph.NewAPIGraph("a GET /x")
	fill(&g.Traces, &n)
	g.Nodes[a], g.Nodes[b], g.Nodes[c] = ns(), ns(), &graph.NodeStats{}
	g.Edges[graph.Pair{From: a, To: b}], g.Edges[graph.Pair{From: b, To: c}], g.Edges[graph.Pair{From: c, To: c}] = es(), es(), &graph.EdgeStats{}
	w.Graphs = map[string]*graph.APIGraph{"a GET /x": g, "empty": graph.NewAPIGraph("empty")}
	return w
}

// checkRoundTrip encodes w and checks that it decodes to w, that the
// encoding is deterministic and that the decoded summary encodes to the
// same bytes.
func checkRoundTrip(t *testing.T, w *analysis.WindowSummary) []byte {
	t.Helper()
	b := w.AppendBinary(nil)
	got, err := analysis.DecodeSummary(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("window %d does not round-trip:\n got %+v\nwant %+v", w.Window, got, w)
	}
	for i := 0; i < 3; i++ {
		if again := w.AppendBinary([]byte("prefix")); !bytes.Equal(again[6:], b) || string(again[:6]) != "prefix" {
			t.Fatalf("window %d: encoding %d differs", w.Window, i)
		}
	}
	if again := got.AppendBinary(nil); !bytes.Equal(again, b) {
		t.Fatalf("window %d: decoded summary encodes to other bytes", w.Window)
	}
	return b
}

func TestSummaryCodecRoundTrip(t *testing.T) {
	sums := realSummaries(t)
	for _, w := range sums {
		checkRoundTrip(t, w)
	}
	week := sums[len(sums)-1]
	bin := week.AppendBinary(nil)
	j, _ := json.Marshal(week)
	t.Logf("100-API window: %d bytes binary, %d JSON", len(bin), len(j))
	if len(bin)*5 > len(j) {
		t.Errorf("binary %d bytes, JSON %d: not compact", len(bin), len(j))
	}
	checkRoundTrip(t, fullSummary())
	checkRoundTrip(t, &analysis.WindowSummary{Edges: map[graph.Edge]*graph.EdgeStats{}, APIs: map[string]analysis.APIPotential{}, Graphs: map[string]*graph.APIGraph{}})
	// Nil maps decode as empty ones.
	got, err := analysis.DecodeSummary((&analysis.WindowSummary{Window: 3}).AppendBinary(nil))
	if err != nil || got.Window != 3 || got.Edges == nil || got.APIs == nil || got.Graphs == nil {
		t.Fatalf("empty summary: %+v %v", got, err)
	}
	// MarshalBinary / UnmarshalBinary.
	mb, _ := week.MarshalBinary()
	var back analysis.WindowSummary
	if err := back.UnmarshalBinary(mb); err != nil || !reflect.DeepEqual(&back, week) {
		t.Fatalf("UnmarshalBinary: %v", err)
	}
}

// Summaries that differ in any count encode differently.
func TestSummaryCodecDistinguishes(t *testing.T) {
	w := fullSummary()
	base := w.AppendBinary(nil)
	seen := map[string]bool{string(base): true}
	g := w.Graphs["a GET /x"]
	for p, st := range g.Edges {
		for i := range st.ByAttempts {
			st.ByAttempts[i]++
			b := w.AppendBinary(nil)
			if seen[string(b)] {
				t.Fatalf("edge %v bucket %d: same bytes", p, i)
			}
			seen[string(b)] = true
			st.ByAttempts[i]--
		}
	}
	if !bytes.Equal(w.AppendBinary(nil), base) {
		t.Fatal("restored summary encodes differently")
	}
}

// The binary form of a hand-built summary, pinned: a change of layout
// needs a new version byte.
func TestSummaryBinaryPinned(t *testing.T) {
	db, front := graph.Node{Service: "db", Operation: "query"}, graph.Node{Service: "front", Operation: "GET /"}
	st := func() *graph.EdgeStats {
		return &graph.EdgeStats{Calls: 4, Attempts: 6, Retried: 2, Failed: 1, FailedBy: [4]int64{0, 1, 0, 0}, CallerFailed: 1,
			DeclaredClose: 4, ByAttempts: [graph.MaxAttemptBuckets]int64{2, 2}}
	}
	g := graph.NewAPIGraph("front GET /")
	g.Traces = 4
	g.Nodes[db] = &graph.NodeStats{Hops: 6, Failed: 2, FailedBy: [4]int64{0, 2, 0, 0}}
	g.Nodes[front] = &graph.NodeStats{Hops: 4, Failed: 1, FailedBy: [4]int64{0, 0, 1, 0}}
	g.Edges[graph.Pair{From: front, To: db}] = st()
	want := &analysis.WindowSummary{Window: 7, Edges: map[graph.Edge]*graph.EdgeStats{{Caller: "front", Callee: db}: st()},
		APIs: map[string]analysis.APIPotential{"front GET /": {With: 2, Without: 3}}, Graphs: map[string]*graph.APIGraph{"front GET /": g}}
	checkRoundTrip(t, want)
	const pinned = "f7010e050502050b0566726f6e746462717565727966726f6e7420474554202f474554202f02010200040202010000bf49080c040404020202080103040601" +
		"030802000b0c04040113080202010100bf49080c04040402020208"
	if got := hex.EncodeToString(want.AppendBinary(nil)); got != pinned {
		t.Errorf("binary form changed:\n%s\nwant\n%s", got, pinned)
	}
}

func TestDecodeSummaryCorrupt(t *testing.T) {
	good := fullSummary().AppendBinary(nil)
	small := (&analysis.WindowSummary{Window: 1, APIs: map[string]analysis.APIPotential{"a": {With: 1, Without: 2}}}).AppendBinary(nil)
	uv := func(b []byte, x uint64) []byte { return binary.AppendUvarint(b, x) }
	// hdr is a binary summary's start: magic, version, window 0.
	hdr := []byte{0xF7, 1, 0}
	fullJSON, err := json.Marshal(fullSummary())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		in         []byte
	}{
		{"empty", "not the binary form", nil},
		{"white space", "not the binary form", []byte(" \n ")},
		{"text", "not the binary form", []byte("hello")},
		// A summary's JSON (MarshalJSON) is not a stored form.
		{"JSON", "not the binary form", fullJSON},
		{"JSON after white space", "not the binary form", append([]byte(" \n"), fullJSON...)},
		{"JSON array", "not the binary form", []byte(`[1,2]`)},
		{"magic alone", "not the binary form", []byte{0xF7}},
		{"unknown version", "version 2, want 1", []byte{0xF7, 2, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"no window", ": window", []byte{0xF7, 1}},
		{"trailing byte", "1 trailing bytes", append(append([]byte(nil), good...), 0)},
		{"string count too large", "strings too large", uv(append([]byte(nil), hdr...), 1<<40)},
		{"string count beyond input", "strings too large", append(uv(append([]byte(nil), hdr...), 5), 1, 1)},
		{"string length beyond input", "string length", append(uv(append([]byte(nil), hdr...), 1), 200, 1, 'a')},
		{"huge string length", "string length", append(uv(uv(uv(append([]byte(nil), hdr...), 2), math.MaxUint64-1), 3), 'a', 'b', 'c')},
		{"node name out of range", "node operation out of range", []byte{0xF7, 1, 0, 1, 1, 'a', 1, 0, 1}},
		{"edge stats declared beyond input", "edge stats too large", append([]byte{0xF7, 1, 0, 0, 0}, uv(nil, 1000)...)},
		{"more edges than declared stats", "more edge stats than declared", []byte{0xF7, 1, 0, 1, 1, 'a', 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}},
		{"fewer edges than declared stats", "fewer stats than declared", []byte{0xF7, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}},
		{"edge caller out of range", "edge caller out of range", []byte{0xF7, 1, 0, 1, 1, 'a', 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0}},
		{"edge stats mask too large", "edge stats mask", append([]byte{0xF7, 1, 0, 1, 1, 'a', 1, 0, 0, 1, 0, 1, 0, 0}, uv(nil, 1<<50)...)},
		{"edge count missing", "edge count", []byte{0xF7, 1, 0, 1, 1, 'a', 1, 0, 0, 1, 0, 1, 0, 0, 0x03}},
		{"duplicate edge", "duplicate edge", []byte{0xF7, 1, 0, 1, 1, 'a', 1, 0, 0, 2, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"duplicate api", "duplicate api", []byte{0xF7, 1, 0, 1, 1, 'a', 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}},
		{"graph count beyond input", "graphs too large", []byte{0xF7, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0}},
		{"node stats mask too large", "node stats mask", []byte{0xF7, 1, 0, 1, 1, 'a', 1, 0, 0, 0, 1, 0, 0, 1, 0, 2, 1, 0, 0x40, 0, 0, 0, 0}},
		{"graph node out of range", "graph node out of range", []byte{0xF7, 1, 0, 1, 1, 'a', 1, 0, 0, 0, 1, 0, 0, 1, 0, 2, 1, 1, 0, 0}},
		{"small trailing", "3 trailing bytes", append(append([]byte(nil), small...), 1, 2, 3)},
		{"good with JSON brace", "not the binary form", append([]byte{'{'}, good[1:]...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := analysis.DecodeSummary(c.in)
			if err == nil || w != nil {
				t.Fatalf("decoded %+v", w)
			}
			if !errors.Is(err, analysis.ErrCorruptSummary) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want one wrapping ErrCorruptSummary that says %q", err, c.want)
			}
		})
	}
	// Every truncation and every single-bit flip of a real encoding: an
	// error or a summary that encodes again (no panic).
	for _, b := range [][]byte{good, small, realSummaries(t)[0].AppendBinary(nil)} {
		for n := 0; n < len(b); n++ {
			if _, err := analysis.DecodeSummary(b[:n]); !errors.Is(err, analysis.ErrCorruptSummary) {
				t.Fatalf("truncated at %d of %d: %v", n, len(b), err)
			}
		}
		for i := range b {
			for bit := 0; bit < 8; bit++ {
				c := append([]byte(nil), b...)
				c[i] ^= 1 << bit
				if w, err := analysis.DecodeSummary(c); err == nil {
					w.AppendBinary(nil)
					analysis.MergeSummaries([]*analysis.WindowSummary{w})
				}
			}
		}
	}
}

func FuzzDecodeSummary(f *testing.F) {
	sums := realSummaries(f)
	for _, w := range sums[:3] {
		f.Add(w.AppendBinary(nil))
	}
	f.Add(weekState(3).Summary(9, analysis.Config{}).AppendBinary(nil))
	f.Add(fullSummary().AppendBinary(nil))
	j, _ := json.Marshal(fullSummary())
	f.Add(j)
	f.Add((&analysis.WindowSummary{}).AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := analysis.DecodeSummary(b)
		if err != nil {
			if w != nil || !errors.Is(err, analysis.ErrCorruptSummary) {
				t.Fatalf("error %v with %v", err, w)
			}
			return
		}
		// What decodes encodes, and decodes again to the same summary.
		enc := w.AppendBinary(nil)
		back, err := analysis.DecodeSummary(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, w) {
			t.Fatalf("decoded summary does not round-trip")
		}
		if again := back.AppendBinary(nil); !bytes.Equal(again, enc) {
			t.Fatal("encoding not deterministic")
		}
		analysis.MergeSummaries([]*analysis.WindowSummary{w, back})
	})
}

// BenchmarkDecodeSummaryWeek decodes a week of hourly summaries (169
// windows) of the 100-API fixture behind the stores' BenchmarkReportWeek:
// in the binary form stores keep, and, for comparison, their JSON with
// json.Unmarshal (what summaries were stored as before the binary form).
func BenchmarkDecodeSummaryWeek(b *testing.B) {
	st := weekState(100)
	var js, bin [][]byte
	var jsSize, binSize int
	for w := int64(0); w < 169; w++ {
		s := st.Summary(493000+w, analysis.Config{Window: time.Hour})
		j, err := json.Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		js, bin = append(js, j), append(bin, s.AppendBinary(nil))
		jsSize += len(j)
		binSize += len(bin[len(bin)-1])
	}
	run := func(name string, in [][]byte, size int, dec func([]byte) error) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, x := range in {
					if err := dec(x); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(size), "bytes/week")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/week")
		})
	}
	run("json.Unmarshal", js, jsSize, func(x []byte) error { var w analysis.WindowSummary; return json.Unmarshal(x, &w) })
	run("DecodeSummary-binary", bin, binSize, func(x []byte) error { _, err := analysis.DecodeSummary(x); return err })
	b.Run("AppendBinary", func(b *testing.B) {
		sums := make([]*analysis.WindowSummary, 0, 169)
		for w := int64(0); w < 169; w++ {
			sums = append(sums, st.Summary(493000+w, analysis.Config{Window: time.Hour}))
		}
		var buf []byte
		for b.Loop() {
			for _, s := range sums {
				buf = s.AppendBinary(buf[:0])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/week")
	})
}
