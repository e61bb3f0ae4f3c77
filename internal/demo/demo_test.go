package demo

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
)

// TestDemo runs a short demo and checks what the mesh's shape and the two
// retry policies predict, from the figures the store reports.
//
// Derivation (the deep API, frontend GET /checkout: frontend → checkout →
// orders → payments → fraud → risk → ledger → accounts → vault, one retry
// per call at every hop):
//   - naive: a request for an account on vault's broken shard fails at
//     vault every time, so every call on the chain fails and is retried:
//     the event's levels 1..8 are all retried, radius 8, and vault serves
//     2^8 = 256 requests for it. Other requests reach vault once (a
//     transient failure twice), so the load per request is about
//     share·256 + (1-share)·1.05.
//   - ownership: vault claims its error; accounts retries it (level 1) and,
//     the retry having failed too, answers unclaimed; ledger and every
//     caller above see an unclaimed error and do not retry (7 suppressed
//     retries per such request). Radius 1, vault serves 2 requests for it.
//     Transient failures are retried by accounts alone: radius 1.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := Config{Data: t.TempDir(), Duration: 6 * time.Second, ErrorRate: 0.1, Rate: 8, HTTPAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err := Run(ctx, cfg, func(ctx context.Context, r *Result) error {
		before, after := api(t, r.Before.Report, DeepAPI), api(t, r.After.Report, DeepAPI)
		t.Logf("before: %d traces, max radius %d, mean %.2f, vault load %.2f, suppressed %d; after: %d traces, max radius %d, mean %.2f, vault load %.2f, suppressed %d",
			before.Traces, before.MaxRadius, before.MeanRadius, r.Before.Load[DeepAPI], before.SuppressedRetries,
			after.Traces, after.MaxRadius, after.MeanRadius, r.After.Load[DeepAPI], after.SuppressedRetries)
		if before.MaxRadius != 8 {
			t.Errorf("naive max radius %d, want 8 (every level of the chain retried)", before.MaxRadius)
		}
		if after.MaxRadius != 1 {
			t.Errorf("ownership max radius %d, want 1 (only accounts retries vault)", after.MaxRadius)
		}
		if before.SuppressedRetries != 0 {
			t.Errorf("naive phase suppressed %d retries, want 0", before.SuppressedRetries)
		}
		// 7 suppressed per broken-shard request: at least one such request.
		if after.SuppressedRetries < 7 {
			t.Errorf("ownership phase suppressed %d retries, want ≥ 7", after.SuppressedRetries)
		}
		if after.SpuriousRequestsPrevented <= 0 {
			t.Errorf("ownership phase prevented %d spurious requests, want > 0", after.SpuriousRequestsPrevented)
		}
		// Expected loads: 0.1·256 + 0.9·1.05 ≈ 26.5 before, 0.1·2 + 0.9·1.05
		// ≈ 1.15 after; the shard's share of a short run varies, so ask
		// for a fivefold drop and sane bounds.
		lb, la := r.Before.Load[DeepAPI], r.After.Load[DeepAPI]
		if lb < 5*la || la < 1 || la > 2 {
			t.Errorf("vault requests per request: %.2f before, %.2f after; want a drop of 5x or more to 1–2", lb, la)
		}
		if !r.Gate.Pass {
			t.Errorf("gate with the ownership version as candidate failed: %v", r.Gate.Reasons)
		}
		if r.GateBack.Pass {
			t.Error("gate with the naive version as candidate passed")
		}
		// The same gate over REST, as a rollout would ask it.
		for _, c := range []struct {
			base, cand string
			want       int
		}{{Naive.Version, Ownership.Version, http.StatusOK}, {Ownership.Version, Naive.Version, http.StatusPreconditionFailed}} {
			v := url.Values{"api": {DeepAPI}, "service": {RootService}, "baseline": {c.base}, "candidate": {c.cand},
				"max_radius": {"3"}, "max_radius_increase": {"0"},
				"from": {strconv.FormatInt(r.Before.From.Unix(), 10)}, "to": {strconv.FormatInt(r.After.To.Unix(), 10)}}
			resp, err := http.Get(r.UI + "api/v1/gate?" + v.Encode())
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				Pass bool `json:"pass"`
			}
			json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if resp.StatusCode != c.want || d.Pass != (c.want == http.StatusOK) {
				t.Errorf("GET /api/v1/gate candidate %s vs %s: %d pass=%v, want %d", c.cand, c.base, resp.StatusCode, d.Pass, c.want)
			}
		}
		// The context drop: notifications calls email without its context.
		for _, p := range []Phase{r.Before, r.After} {
			drops := int64(0)
			for _, s := range p.Report.Services {
				if s.Service == "notifications" {
					drops = s.ContextDrops
				}
			}
			if drops == 0 {
				t.Errorf("%s phase: no context drop charged to notifications", p.Policy.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func api(t *testing.T, d *analysis.Document, name string) analysis.APIDoc {
	t.Helper()
	for _, a := range d.APIs {
		if a.API == name {
			return a
		}
	}
	t.Fatalf("no root API %q in %d APIs", name, len(d.APIs))
	return analysis.APIDoc{}
}
