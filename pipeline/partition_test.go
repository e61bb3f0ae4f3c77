package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// Partitions (docs/ARCHITECTURE.md, "Scaling out"): three analysers, each
// of the traces of one partition, over one store — fed at the same time,
// chunk by chunk, with late spans, and partition 1 handed over half-way to
// a new analyser (its pending traces left in the store) — store the report
// one analyser of all the traces stores: analyze's. Each evaluates its
// traces against its part of each window plus the other partitions'
// parts, and evaluates its records again when those change; without that
// (PeerRefresh 0), edges learned from the other partitions' traces are
// missed and the report differs.
func TestPartitionsEqualOneAnalyser(t *testing.T) {
	bothStores(t, func(t *testing.T, open func() store.Store) {
		c := storetest.NewCorpus(t, 450, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 3*time.Second) // 3 windows
		c2 := cfg()
		c2.PeerRefresh = 20 * time.Millisecond
		want := reference(t, c, c2.Analysis)
		st := open()
		defer st.Close()
		ps, ok := st.(store.Partitioned)
		if !ok {
			t.Fatalf("%T is not partitioned", st)
		}
		const n = 3
		names := [n]string{store.KafkaPartition("otlp_spans", 0), store.KafkaPartition("otlp_spans", 1), "shard-2"}
		view := func(k int) store.PartitionStore {
			v, err := ps.Partition(names[k])
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		// A partition's traces: by trace id, as the kafka exporter's
		// partitioner does it (any function of the id will do).
		parts := [n]*storetest.Corpus{}
		for k := range parts {
			parts[k] = &storetest.Corpus{}
		}
		for _, sp := range c.Spans {
			k := int(sp[0].TraceID[15]) % n
			parts[k].Spans = append(parts[k].Spans, sp)
		}
		var mu sync.Mutex
		pipes := [n]*pipeline.Pipeline{}
		stops := [n]func(){}
		views := [n]store.PartitionStore{}
		for k := range n {
			views[k] = view(k)
			pipes[k], stops[k] = start(t, views[k], c2)
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		var lates [n][][]graph.Span
		for k := range n {
			wg.Go(func() {
				pc := parts[k]
				chunks := 0
				for lo := 0; lo < len(pc.Spans); lo += 15 {
					chunk := &storetest.Corpus{Spans: pc.Spans[lo:min(lo+15, len(pc.Spans))]}
					b, l := shuffled(chunk, uint64(lo*n+k))
					mu.Lock()
					p := pipes[k]
					mu.Unlock()
					feed(t, p, b)
					lates[k] = append(lates[k], l...)
					if err := p.Flush(ctx); err != nil {
						t.Error(err)
					}
					if chunks++; k == 1 && chunks == 4 {
						// A rebalance: the partition's analyser stops and
						// leaves its pending traces (the last chunk's
						// late spans are fed first) to its next owner.
						feed(t, p, lates[k])
						lates[k] = nil
						p.HandOver()
						stops[k]()
						if err := views[k].Close(); err != nil {
							t.Error(err)
						}
						v := view(k)
						np, stop := start(t, v, c2)
						mu.Lock()
						pipes[k], stops[k], views[k] = np, stop, v
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		for k := range n {
			feed(t, pipes[k], lates[k]) // spans of traces already analysed
		}
		// Quiet: every partition flushed twice in turn (the first round
		// stores every state; the second evaluates against them all).
		for range 2 {
			for k := range n {
				if err := pipes[k].Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkReport(t, st, c, c2.Analysis, want, "report of three partitions")
		for k := range n {
			stops[k]()
			if err := views[k].Close(); err != nil {
				t.Error(err)
			}
		}
	})
}

// Split traces (issue 29 item 8): a collector that does not route by
// trace id sends one trace's spans to two partitions. Each partition's
// analyser finds the trace in the other's spans (store.Routing) and sets
// it aside: once quiet, the store's report is analyze's of the traces that
// were not split, with split_traces counting the others, whichever
// partition saw its part first. Traces i%10 == 2 reach both partitions
// before either analyses them; traces i%10 == 7 reach partition 1 only
// after partition 0 analysed its part as a whole trace (partition 1 then
// takes that record and its window counts back).
func TestSplitTraces(t *testing.T) {
	bothStores(t, func(t *testing.T, open func() store.Store) {
		c := storetest.NewCorpus(t, 300, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 4*time.Second) // 2 windows
		c2 := cfg()
		c2.PeerRefresh = 20 * time.Millisecond
		c2.TraceIdle, c2.MaxTraceAge = time.Hour, time.Hour // analysed when flushed alone
		var (
			feeds     [2][]graph.Span // before anything is analysed
			late      []graph.Span    // partition 1's part of the late-split traces
			whole     storetest.Corpus
			wantSplit = map[graph.TraceID]bool{}
		)
		for i, sp := range c.Spans {
			if (i%10 == 2 || i%10 == 7) && len(sp) > 1 {
				wantSplit[sp[0].TraceID] = true
				h := len(sp) / 2
				feeds[0] = append(feeds[0], sp[:h]...)
				if i%10 == 2 {
					feeds[1] = append(feeds[1], sp[h:]...)
				} else {
					late = append(late, sp[h:]...)
				}
				continue
			}
			whole.Spans = append(whole.Spans, sp)
			k := int(sp[0].TraceID[15]) % 2
			feeds[k] = append(feeds[k], sp...)
		}
		if len(wantSplit) < 40 || len(late) == 0 {
			t.Fatalf("%d split traces", len(wantSplit))
		}
		want := whole.Document(c2.Analysis)
		want.SplitTraces = int64(len(wantSplit))
		wantJSON := storetest.DocJSON(t, want)

		st := open()
		defer st.Close()
		var mu sync.Mutex
		seen := [2]map[graph.TraceID]string{{}, {}}
		names := [2]string{store.KafkaPartition("otlp_spans", 0), store.KafkaPartition("otlp_spans", 1)}
		pipes := [2]*pipeline.Pipeline{}
		for k := range 2 {
			v, err := st.(store.Partitioned).Partition(names[k])
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			pc := c2
			pc.OnSplit = func(id graph.TraceID, other string) {
				mu.Lock()
				seen[k][id] = other
				mu.Unlock()
			}
			var stop func()
			pipes[k], stop = start(t, v, pc)
			defer stop()
		}
		ctx := context.Background()
		for k := range 2 {
			if err := pipes[k].Consume(ctx, feeds[k]); err != nil {
				t.Fatal(err)
			}
		}
		flush := func(k int) {
			t.Helper()
			if err := pipes[k].Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		flush(0)
		flush(1)
		if err := pipes[1].Consume(ctx, late); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			flush(0)
			flush(1)
		}
		got, err := query.Document(ctx, st, store.Query{}, c2.Analysis)
		if err != nil {
			t.Fatal(err)
		}
		if g := storetest.DocJSON(t, got); g != wantJSON {
			t.Fatalf("report differs from analyze of the traces not split:\n got %s\nwant %s", g, wantJSON)
		}
		checkRecords(t, st, &whole, c2.Analysis)

		// Who counted what: partition 0 found the early-split traces
		// (partition 1's part stored before it analysed), partition 1
		// every split trace; each names the other.
		for id := range wantSplit {
			if seen[1][id] != names[0] {
				t.Errorf("trace %s: partition 1 reported it split with %q", id, seen[1][id])
			}
		}
		for i, sp := range c.Spans {
			id := sp[0].TraceID
			if other, ok := seen[0][id]; ok != (i%10 == 2 && wantSplit[id]) || (ok && other != names[1]) {
				t.Errorf("trace %d (%s): partition 0 reported split %v with %q", i, id, ok, other)
			}
		}
		if len(seen[1]) != len(wantSplit) {
			t.Errorf("partition 1 reported %d split traces, want %d", len(seen[1]), len(wantSplit))
		}
	})
}
