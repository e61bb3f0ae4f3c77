package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// testPartitions checks store.Partitioned (docs/ARCHITECTURE.md,
// "Scaling out"): two partitions and the default one share a store; each
// keeps its span log, checkpoint, records (for WindowRecords), window
// states and lease apart, reads the others' states as peers, and the
// store's reports are the sum of every partition's records.
func testPartitions(t *testing.T, open Opener) {
	c := NewCorpus(t, 60, time.Date(2026, 3, 1, 10, 20, 0, 0, time.UTC), 30*time.Second) // one hourly window
	idx := c.Windows.Indexes()
	if len(idx) != 1 {
		t.Fatalf("corpus has %d windows", len(idx))
	}
	w := idx[0]
	s := open(t, true)
	x := ctx(t)

	for _, bad := range []string{"a b", "é", string(make([]byte, store.MaxPartitionName+1))} {
		if _, err := s.(store.Partitioned).Partition(bad); !errors.Is(err, store.ErrBadPartition) {
			t.Fatalf("Partition(%q): %v, want ErrBadPartition", bad, err)
		}
	}
	// Traces i%3 == 1 are p1's, i%3 == 2 p2's, i%3 == 0 the default's.
	views := partitionViews(t, s.(store.Partitioned))
	def, p1, p2 := views[0], views[1], views[2]
	owner := func(i int) int { return i % 3 }
	parts, seqs := writePartitions(t, views, c, w, owner)
	checkSpanLogs(t, views, c, owner, seqs)
	checkPartitionStates(t, views, parts, w, owner, c)

	// A trace re-opened by another partition becomes that partition's:
	// trace 1 (p1's) is replaced through p2, and p2's state takes it over.
	old := c.Record(1, seqs[1][1])
	if err := p2.Apply(x, store.Batch{Changes: []store.Change{{Old: old, New: c.Record(1, seqs[2][1])}}}); err != nil {
		t.Fatal(err)
	}
	moved := func(i int) int {
		if i == 1 {
			return 2
		}
		return owner(i)
	}
	parts[1].Add(c.Traces[1], -1)
	parts[2].Add(c.Traces[1], 1)
	if err := p1.Apply(x, store.Batch{States: map[int64]*analysis.State{w: parts[1]}}); err != nil {
		t.Fatal(err)
	}
	if err := p2.Apply(x, store.Batch{States: map[int64]*analysis.State{w: parts[2]}}); err != nil {
		t.Fatal(err)
	}
	checkPartitionStates(t, views, parts, w, moved, c)

	checkPartitionedReport(t, s, c)
	checkSharedTraces(t, views, c, owner)
	checkSourcePositions(t, views)

	// PeerWindows: p1 and the default stored window w now; p2 sees it,
	// looking back a minute, and not from a minute ahead.
	now := time.Now()
	if ws, err := p2.PeerWindows(x, now.Add(-time.Minute).UnixNano()); err != nil || !slices.Contains(ws, w) {
		t.Errorf("p2 PeerWindows(a minute ago) = %v %v, want %d in it", ws, err, w)
	}
	if ws, err := p2.PeerWindows(x, now.Add(time.Minute).UnixNano()); err != nil || len(ws) != 0 {
		t.Errorf("p2 PeerWindows(a minute ahead) = %v %v, want none", ws, err)
	}

	checkPartitionLeases(t, open, p1, p2)
	for _, v := range []store.Store{p2, def, s} {
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Durable: opened again, each partition has its checkpoint and state.
	s3 := open(t, false)
	defer s3.Close()
	again := partitionViews(t, s3.(store.Partitioned))
	for k, v := range again {
		defer v.Close()
		if wm, err := v.Watermark(x); err != nil || wm != seqs[k][1] {
			t.Errorf("partition %d after reopening: watermark %d %v, want %d", k, wm, err, seqs[k][1])
		}
	}
	checkPartitionStates(t, again, parts, w, moved, c)
}

// checkSharedTraces checks store.Routing: each view is asked of the
// traces it wrote spans of (owner). None is shared while each partition
// wrote its own traces' spans; once p2 writes half of trace 4's spans
// (p1's: a collector not routing by trace id), p1 and p2 each find it
// written by the other, and nothing else is shared.
func checkSharedTraces(t *testing.T, views []store.PartitionStore, c *Corpus, owner func(int) int) {
	t.Helper()
	x := ctx(t)
	shared := func(k int, extra ...int) map[graph.TraceID]string {
		t.Helper()
		r, ok := views[k].(store.Routing)
		if !ok {
			t.Fatalf("partition %q: no store.Routing", partitionNames[k])
		}
		ids := []graph.TraceID{}
		for i, tr := range c.Traces {
			if owner(i) == k || slices.Contains(extra, i) {
				ids = append(ids, tr.ID)
			}
		}
		m, err := r.SharedTraces(x, ids)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for k := range views {
		if m := shared(k); len(m) != 0 {
			t.Errorf("partition %q: shared traces %v before any is split", partitionNames[k], m)
		}
	}
	half := c.Spans[4][:len(c.Spans[4])/2]
	if len(half) == 0 || owner(4) != 1 {
		t.Fatal("trace 4 is not p1's, or has one span")
	}
	if _, err := views[2].WriteSpans(x, half); err != nil {
		t.Fatal(err)
	}
	id := c.Traces[4].ID
	if m := shared(1); len(m) != 1 || m[id] != partitionNames[2] {
		t.Errorf("p1: shared traces %v, want trace 4 (%s) written by %q", m, id, partitionNames[2])
	}
	if m := shared(2, 4); len(m) != 1 || m[id] != partitionNames[1] {
		t.Errorf("p2: shared traces %v, want trace 4 (%s) written by %q", m, id, partitionNames[1])
	}
	if m := shared(0); len(m) != 0 {
		t.Errorf("default partition: shared traces %v, want none", m)
	}
}

// checkSourcePositions checks store.SourcePositions: none at first; each
// partition's its own; the last set is what is read; negative and zero
// positions are positions.
func checkSourcePositions(t *testing.T, views []store.PartitionStore) {
	t.Helper()
	x := ctx(t)
	pos := func(k int) store.SourcePositions {
		p, ok := views[k].(store.SourcePositions)
		if !ok {
			t.Fatalf("partition %q: no store.SourcePositions", partitionNames[k])
		}
		return p
	}
	for k := range views {
		if v, ok, err := pos(k).SourcePosition(x); err != nil || ok {
			t.Fatalf("partition %q: position %d %v %v before any was set", partitionNames[k], v, ok, err)
		}
	}
	set := [][]int64{{5, 0}, {-7}, {1_700_000_000_123_456_789, 1_700_000_000_223_456_789}}
	for k, vs := range set {
		for _, v := range vs {
			if err := pos(k).SetSourcePosition(x, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, vs := range set {
		if v, ok, err := pos(k).SourcePosition(x); err != nil || !ok || v != vs[len(vs)-1] {
			t.Errorf("partition %q: position %d %v %v, want %d", partitionNames[k], v, ok, err, vs[len(vs)-1])
		}
	}
}

// partitionNames are the partitions of testPartitions: the default one,
// a Kafka partition's and one named by hand.
var partitionNames = []string{"", store.KafkaPartition("otlp_spans", 1), "shard-2"}

// partitionViews returns ps's views of partitionNames, in that order.
func partitionViews(t *testing.T, ps store.Partitioned) []store.PartitionStore {
	t.Helper()
	views := make([]store.PartitionStore, len(partitionNames))
	for k, name := range partitionNames {
		v, err := ps.Partition(name)
		if err != nil {
			t.Fatal(err)
		}
		views[k] = v
	}
	return views
}

// writePartitions writes, through each view k, the spans of the traces
// owner gives it (in two writes), their records and its state of window
// w; it returns each partition's state and the sequences of its writes.
func writePartitions(t *testing.T, views []store.PartitionStore, c *Corpus, w int64, owner func(int) int) ([]*analysis.State, [3][]uint64) {
	t.Helper()
	x := ctx(t)
	parts := make([]*analysis.State, 3)
	var seqs [3][]uint64
	for k, v := range views {
		parts[k] = analysis.NewState()
		var spans []graph.Span
		var changes []store.Change
		for i := range c.Traces {
			if owner(i) != k {
				continue
			}
			spans = append(spans, c.Spans[i]...)
			parts[k].Add(c.Traces[i], 1)
		}
		// Two writes per partition: the sequences increase within it.
		for h := range 2 {
			seq, err := v.WriteSpans(x, spans[h*len(spans)/2:(h+1)*len(spans)/2])
			if err != nil {
				t.Fatal(err)
			}
			seqs[k] = append(seqs[k], seq)
		}
		if seqs[k][0] >= seqs[k][1] {
			t.Fatalf("partition %d: sequences %v do not increase", k, seqs[k])
		}
		for i := range c.Traces {
			if owner(i) == k {
				changes = append(changes, store.Change{New: c.Record(i, seqs[k][1])})
			}
		}
		if err := v.Apply(x, store.Batch{Changes: changes, States: map[int64]*analysis.State{w: parts[k]},
			Watermark: seqs[k][1]}); err != nil {
			t.Fatal(err)
		}
	}
	return parts, seqs
}

// checkSpanLogs checks that each view reads its own span log (the writes
// seqs[k], and from the first on the second) but every partition's trace
// spans, and that its watermark is its own.
func checkSpanLogs(t *testing.T, views []store.PartitionStore, c *Corpus, owner func(int) int, seqs [3][]uint64) {
	t.Helper()
	x := ctx(t)
	for k, v := range views {
		var got []uint64
		n := 0
		if err := v.SpansAfter(x, 0, func(seq uint64, spans []graph.Span) error {
			got = append(got, seq)
			for _, sp := range spans {
				if owner(traceIndex(c, sp.TraceID)) != k {
					t.Errorf("partition %d read a span of trace %s, another partition's", k, sp.TraceID)
				}
			}
			n += len(spans)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, seqs[k]) {
			t.Errorf("partition %d: SpansAfter(0) read writes %v, want %v", k, got, seqs[k])
		}
		got = got[:0]
		if err := v.SpansAfter(x, seqs[k][0], func(seq uint64, _ []graph.Span) error { got = append(got, seq); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, seqs[k][1:]) {
			t.Errorf("partition %d: SpansAfter(first) read writes %v, want %v", k, got, seqs[k][1:])
		}
		for i := k; i < len(c.Traces); i += 7 { // any partition's trace, from any view
			sp, err := v.TraceSpans(x, c.Traces[i].ID, nil)
			if err != nil || len(sp) != len(c.Spans[i]) {
				t.Fatalf("partition %d: TraceSpans of trace %d: %d spans, %v; want %d", k, i, len(sp), err, len(c.Spans[i]))
			}
		}
		if wm, err := v.Watermark(x); err != nil || wm != seqs[k][1] {
			t.Errorf("partition %d: watermark %d %v, want %d", k, wm, err, seqs[k][1])
		}
	}
}

// checkPartitionedReport checks that s's report is every partition's
// records, each trace once: the same as a store that got them all
// unpartitioned.
func checkPartitionedReport(t *testing.T, s store.Store, c *Corpus) {
	t.Helper()
	got, err := s.Report(ctx(t), store.Query{})
	if err != nil {
		t.Fatal(err)
	}
	want := analysis.NewReport()
	for _, r := range c.Results {
		want.Add(r, 1)
	}
	if a, b := DocJSON(t, got.Document(nil, analysis.Config{})), DocJSON(t, want.Document(nil, analysis.Config{})); a != b {
		t.Fatalf("report of the partitioned store differs from the sum of its traces:\n%s\nwant\n%s", a, b)
	}
}

// checkPartitionLeases checks that leases are per partition: p1 and p2
// each take theirs; a second claimant of p1 (another process: another
// store over the same data) is refused; closing a view releases its lease
// and leaves the store open. It closes p1.
func checkPartitionLeases(t *testing.T, open Opener, p1, p2 store.PartitionStore) {
	t.Helper()
	x := ctx(t)
	h1, h2, h3 := store.NewLeaseHolder(), store.NewLeaseHolder(), store.NewLeaseHolder()
	if _, err := p1.AcquireLease(x, h1, time.Minute); err != nil {
		t.Fatalf("p1 lease: %v", err)
	}
	if _, err := p2.AcquireLease(x, h2, time.Minute); err != nil {
		t.Fatalf("p2 lease next to p1's: %v", err)
	}
	s2 := open(t, false)
	other, err := s2.(store.Partitioned).Partition(store.KafkaPartition("otlp_spans", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.AcquireLease(x, h3, time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("a second claimant of p1's lease: %v, want ErrLeaseHeld", err)
	}
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.AcquireLease(x, h3, time.Minute); err != nil {
		t.Fatalf("p1's lease after its view closed: %v", err)
	}
	if _, err := p2.Watermark(x); err != nil {
		t.Fatalf("p2 after p1's view closed: %v", err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkPartitionStates checks, for every view k, its state of window w
// (parts[k]), its peers' sum (the other parts), and that WindowRecords
// reads exactly its traces (those owner maps to k).
func checkPartitionStates(t *testing.T, views []store.PartitionStore, parts []*analysis.State, w int64, owner func(int) int, c *Corpus) {
	t.Helper()
	x := ctx(t)
	for k, v := range views {
		st, exact, err := v.State(x, w)
		if err != nil || !exact {
			t.Fatalf("partition %d: state: exact %v, %v", k, exact, err)
		}
		if a, b := stateJSON(st), stateJSON(parts[k]); a != b {
			t.Errorf("partition %d: its state differs from the sum of its traces", k)
		}
		peers := analysis.NewState()
		for o, p := range parts {
			if o != k {
				peers.Merge(p, 1)
			}
		}
		got, err := v.PeerState(x, w)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := stateJSON(got), stateJSON(peers); a != b {
			t.Errorf("partition %d: PeerState differs from the other partitions' states:\n%s\nwant\n%s", k, a, b)
		}
		if got, err := v.PeerState(x, w+3); err != nil {
			t.Errorf("partition %d: PeerState of a window nobody stored: %v", k, err)
		} else if got.Traces != 0 {
			t.Errorf("partition %d: PeerState of a window nobody stored: %d traces", k, got.Traces)
		}
		ids := map[graph.TraceID]bool{}
		if err := v.WindowRecords(x, w, nil, func(r *store.Record) error { ids[r.TraceID] = true; return nil }); err != nil {
			t.Fatal(err)
		}
		want := map[graph.TraceID]bool{}
		for i, tr := range c.Traces {
			if owner(i) == k {
				want[tr.ID] = true
			}
		}
		if !maps.Equal(ids, want) {
			t.Errorf("partition %d: WindowRecords read %d records, want its %d", k, len(ids), len(want))
		}
		// Records reads any partition's.
		all := make([]graph.TraceID, len(c.Traces))
		for i, tr := range c.Traces {
			all[i] = tr.ID
		}
		recs, err := v.Records(x, all)
		if err != nil || len(recs) != len(all) {
			t.Errorf("partition %d: Records of every trace: %d, %v; want %d", k, len(recs), err, len(all))
		}
	}
}

func stateJSON(s *analysis.State) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func traceIndex(c *Corpus, id graph.TraceID) int {
	for i, tr := range c.Traces {
		if bytes.Equal(tr.ID[:], id[:]) {
			return i
		}
	}
	return -1
}
