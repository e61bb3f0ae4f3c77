package demo

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func loadRate(v *atomic.Uint64) float64     { return math.Float64frombits(v.Load()) }
func storeRate(v *atomic.Uint64, r float64) { v.Store(math.Float64bits(r)) }

// account is the n-th request's account: a stride through all of them, so
// that any run of requests holds the broken shard's share of accounts
// within one or two (a short demo still sees it).
func account(n int64) int { return int(n*389) % Accounts }

// target is one root API the load generator calls.
type target struct {
	api, url string
	share    float64 // of the requests
}

// loadStats counts what the load generator saw.
type loadStats struct {
	sent, failed, skipped atomic.Int64
}

// generate sends rate requests a second, spread over the targets by share,
// until ctx ends or until; at most maxInflight at once (a request that
// would exceed it is skipped and counted: an open-loop generator that
// never queues). It returns once every request it sent has finished.
func generate(ctx context.Context, until time.Time, rate float64, targets []target, maxInflight int, st *loadStats) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: maxInflight}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	sem := make(chan struct{}, maxInflight)
	var wg sync.WaitGroup
	defer wg.Wait()
	interval := time.Duration(float64(time.Second) / rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	stop := time.NewTimer(time.Until(until))
	defer stop.Stop()
	credit := make([]float64, len(targets))
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop.C:
			return
		case <-tick.C:
		}
		// Pick the target furthest behind its share (deterministic
		// interleaving: 3:1 shares give 3 of one, then 1 of the other).
		best := 0
		for i, t := range targets {
			credit[i] += t.share
			if credit[i] > credit[best] {
				best = i
			}
		}
		credit[best]--
		select {
		case sem <- struct{}{}:
		default:
			st.skipped.Add(1)
			continue
		}
		wg.Add(1)
		n := st.sent.Add(1)
		go func(t target) {
			defer func() { <-sem; wg.Done() }()
			u := t.url + "?account=" + strconv.Itoa(account(n))
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				st.failed.Add(1)
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				st.failed.Add(1)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				st.failed.Add(1)
			}
		}(targets[best])
	}
}
