package app

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/health"
)

// splitFix is what to change when traces are split across partitions.
const splitFix = "the collector must send every span of a trace to one partition: " +
	"kafka exporter `partition_traces_by_id: true`, loadbalancing exporter `routing_key: traceID`"

// splitLogFirst traces split are logged one by one; after them, a line at
// most every splitLogEvery says how many more.
const (
	splitLogFirst = 5
	splitLogEvery = time.Minute
)

// splitWatch is what a process says of the traces its partitions' analysers
// set aside because another partition wrote spans of them too (issue:
// a collector that does not route by trace id): the first few logged with
// the fix, then a count now and then, and a /readyz warning that stays.
// The pipelines count them in stormradius_traces_split_total.
type splitWatch struct {
	log    *slog.Logger
	health *health.Status

	mu     sync.Mutex
	n      int64
	logged int64     // traces counted in the log lines so far
	last   time.Time // the last count line
}

// observer returns the pipeline.Config.OnSplit of partition part.
func (w *splitWatch) observer(part string) func(graph.TraceID, string) {
	return func(id graph.TraceID, other string) { w.split(part, id, other) }
}

func (w *splitWatch) split(part string, id graph.TraceID, other string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	w.health.Warn("routing", fmt.Sprintf("%d trace(s) split across partitions since start, left out of every figure (last: %s, in %q and %q); %s",
		w.n, id, part, other, splitFix))
	now := time.Now()
	switch {
	case w.n <= splitLogFirst:
		w.log.Warn("trace split across partitions: left out of every figure; "+splitFix,
			"trace_id", id.String(), "partition", part, "other_partition", other)
		w.logged, w.last = w.n, now
	case now.Sub(w.last) >= splitLogEvery:
		w.log.Warn("more traces split across partitions, left out of every figure; "+splitFix,
			"traces_split", w.n, "since_last_line", w.n-w.logged)
		w.logged, w.last = w.n, now
	}
}
