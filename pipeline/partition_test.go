package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/pipeline"
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
