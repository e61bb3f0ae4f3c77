package clickhouse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// checkStore records what the pipeline asks of the store and checks, after
// every batch, that each window state it stores is the sum of the window's
// records: the log a failing outage test prints.
type checkStore struct {
	store.Store
	mu      sync.Mutex
	log     []string
	lastErr error
}

func (c *checkStore) Apply(ctx context.Context, b store.Batch) error {
	err := c.Store.Apply(ctx, b)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := 0
	for _, ch := range b.Changes {
		if ch.Old != nil {
			old++
		}
	}
	line := fmt.Sprintf("apply changes=%d old=%d states=%d err=%v", len(b.Changes), old, len(b.States), err)
	if err == nil {
		for w, st := range b.States {
			sum := analysis.NewState()
			c.Store.WindowRecords(ctx, w, nil, func(r *store.Record) error {
				tr, _ := graph.DecodeTrace(r.Facts)
				sum.Add(tr, 1)
				return nil
			})
			a, _ := json.Marshal(sum)
			bb, _ := json.Marshal(st)
			if string(a) != string(bb) {
				line += fmt.Sprintf(" MISMATCH window %d (records %d traces, state %d)", w, sum.Traces, st.Traces)
			}
		}
	}
	c.log = append(c.log, line)
	return err
}

func (c *checkStore) State(ctx context.Context, w int64) (*analysis.State, bool, error) {
	st, exact, err := c.Store.State(ctx, w)
	c.mu.Lock()
	n := int64(-1)
	if st != nil {
		n = st.Traces
	}
	c.log = append(c.log, fmt.Sprintf("state %d exact=%v traces=%d err=%v", w, exact, n, err))
	c.mu.Unlock()
	return st, exact, err
}
