package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// partitionOffsets is one partition's log and the group's place in it.
type partitionOffsets struct {
	First, Last int64 // the log's start and end (the next offset written)
	Committed   int64 // the group's committed offset; -1 when it has none
}

// lag returns the records after the group's committed offset. A group that
// committed nothing (or whose offset fell out of retention) starts at the
// log's start, as a Receiver without StartAtLatest does.
func (p partitionOffsets) lag() int64 {
	from := max(p.Committed, p.First)
	return max(p.Last-from, 0)
}

// newClient returns a kafka-go client that talks to the brokers the way
// dialer does (TLS, SASL, client id).
func newClient(brokers []string, dialer *kafkago.Dialer) *kafkago.Client {
	c := &kafkago.Client{Addr: kafkago.TCP(brokers...), Timeout: 10 * time.Second}
	if dialer != nil {
		c.Transport = &kafkago.Transport{
			TLS:         dialer.TLS,
			SASL:        dialer.SASLMechanism,
			ClientID:    dialer.ClientID,
			DialTimeout: dialer.Timeout,
		}
	}
	return c
}

// closeClient drops the client's idle connections (a nil Transport is
// kafka-go's shared default, which is not ours to close).
func closeClient(c *kafkago.Client) {
	if t, ok := c.Transport.(*kafkago.Transport); ok {
		t.CloseIdleConnections()
	}
}

// groupOffsets returns, per partition of topic, the log's offsets and the
// group's committed offset. It asks the brokers, not a member: the answer is
// the group's, whichever members consume, and also while consumption is
// paused.
func groupOffsets(ctx context.Context, c *kafkago.Client, group, topic string) (map[int]partitionOffsets, error) {
	md, err := c.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("topic %s: metadata: %w", topic, err)
	}
	var ids []int
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("topic %s: metadata: %w", topic, t.Error)
		}
		for _, p := range t.Partitions {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("topic %s: no partitions", topic)
	}

	reqs := make([]kafkago.OffsetRequest, 0, 2*len(ids))
	for _, id := range ids {
		reqs = append(reqs, kafkago.FirstOffsetOf(id), kafkago.LastOffsetOf(id))
	}
	lo, err := c.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("topic %s: list offsets: %w", topic, err)
	}
	out := make(map[int]partitionOffsets, len(ids))
	for _, p := range lo.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("topic %s partition %d: list offsets: %w", topic, p.Partition, p.Error)
		}
		out[p.Partition] = partitionOffsets{First: p.FirstOffset, Last: p.LastOffset, Committed: -1}
	}

	of, err := c.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ids}})
	if err == nil {
		err = of.Error
	}
	if errors.Is(err, kafkago.GroupIdNotFound) {
		// A group that never committed (or expired) does not exist on
		// brokers that answer so (kfake, newer Kafka); older ones answer
		// -1 per partition. Either way: nothing committed.
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("group %s: offset fetch: %w", group, err)
	}
	for _, p := range of.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("group %s topic %s partition %d: offset fetch: %w", group, topic, p.Partition, p.Error)
		}
		po := out[p.Partition]
		po.Committed = p.CommittedOffset
		out[p.Partition] = po
	}
	return out, nil
}

// probe sets the lag gauge every LagInterval (unless the lag metric is
// disabled) and counts the reader's rebalances, until ctx ends. A failed lag
// probe is logged once per failure streak; the gauges keep their last
// values meanwhile.
func (r *Receiver) probe(ctx context.Context, rebalances func() int64) {
	interval := r.cfg.LagInterval
	withLag := interval > 0
	if !withLag {
		interval = DefaultLagInterval
	}
	var c *kafkago.Client
	if withLag {
		c = newClient(r.cfg.Brokers, r.cfg.Dialer)
		defer closeClient(c)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		// Stats returns counts since its last call: we are its only caller.
		if rebalances != nil {
			r.m.rebalances.Add(float64(rebalances()))
		}
		if withLag {
			failing = r.probeLag(ctx, c, interval, failing)
		}
		select {
		case <-ctx.Done():
			if rebalances != nil {
				r.m.rebalances.Add(float64(rebalances()))
			}
			return
		case <-t.C:
		}
	}
}

// probeLag measures the lag once and reports whether it failed.
func (r *Receiver) probeLag(ctx context.Context, c *kafkago.Client, timeout time.Duration, failing bool) bool {
	pctx, cancel := context.WithTimeout(ctx, max(timeout, 5*time.Second))
	offs, err := groupOffsets(pctx, c, r.cfg.GroupID, r.cfg.Topic)
	cancel()
	switch {
	case err != nil && ctx.Err() == nil:
		if !r.watch.clientError() && !failing {
			r.log.Warn("kafka: lag probe failed; the lag metric is stale until it succeeds", "err", err)
		}
		return true
	case err == nil:
		if failing {
			r.log.Info("kafka: lag probe works again")
		}
		for id, p := range offs {
			r.m.lag.WithLabelValues(strconv.Itoa(id)).Set(float64(p.lag()))
		}
		return false
	}
	return failing
}
