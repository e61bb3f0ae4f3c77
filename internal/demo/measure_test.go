package demo

import (
	"context"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
)

// TestMeasureAdoption runs the mesh with vault failing every request and
// some services adopted, and checks the load on vault, the max radius and
// the suppressed retries the store reports on the deep API against values
// derived by hand.
//
// Derivation. The deep API's path is frontend → checkout → orders →
// payments → fraud → risk → ledger → accounts → vault: 8 edges, R = 1
// retry per call, no budget. Every request fails at vault, so every call
// on the path fails. An adopted service that propagates a failure answers
// unclaimed (its call below either retried, or was not retried because
// it was told unclaimed: either way the retry criteria is met); a service
// not adopted sends no claim. A caller retries unless it is adopted
// (honours claims) and the callee answered unclaimed; vault originates
// the error, so the edge into it always retries. Edge u→v thus retries
// unless u and v are both adopted and v ≠ vault, and:
//   - vault serves Π over the path's edges of 2 for a retrying edge;
//   - a trace's radius (SPEC §4.5) is the highest retrying edge's level,
//     level i being the edge into the i-th service above vault (accounts→
//     vault is 1, frontend→checkout is 8);
//   - the calls on an edge are as many as the hops of its caller: Π of 2
//     over the retrying edges above it; an edge that does not retry
//     suppresses one retry per call (its suppressed_calls);
//   - suppressed_retries (SPEC §4.6) counts the failed calls whose last
//     response was unclaimed on a retry-enabled edge: every call into an
//     adopted service on the path but vault, honoured or not (a naive
//     caller that retried an unclaimed answer counts too).
//
// none: 8 retrying edges → 256, radius 8, nothing unclaimed, 0 and 0.
// all: only accounts→vault retries → 2, radius 1; edges 1..7 (frontend→
// checkout … ledger→accounts) carry one call each, all suppressed: 7 and 7.
// {accounts, ledger}: ledger→accounts (level 7) does not retry → 128;
// frontend→checkout (level 8) does → radius 8; ledger has 2^6 = 64 hops
// per request, each suppressing its call to accounts: 64 suppressed
// calls; risk's 2^5 = 32 calls to ledger are answered unclaimed too, but
// retried: suppressed_retries 64 + 32 = 96.
// {accounts, ledger, risk}: risk→ledger and ledger→accounts do not retry
// → 64, radius 8; risk's 2^5 = 32 calls to ledger and ledger's 32 calls
// to accounts are suppressed: 64; fraud's 2^4 = 16 calls to risk are
// answered unclaimed but retried: suppressed_retries 16 + 32 + 32 = 80.
// {checkout, frontend}: frontend→checkout (level 8) does not retry →
// 128; checkout→orders (level 7) does → radius 7; 1 and 1.
// Every service on the path but vault: as all (vault, not adopted, sends
// no claim; accounts retries a missing claim as a claimed one): 2, 1, 7, 7.
//
// The counts are exact: the failure is deterministic (no random errors:
// background error rates are off), Measure waits for every root request
// and every span, and each root request is one trace.
func TestMeasureAdoption(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the mesh six times")
	}
	const n = 8
	cases := []struct {
		name       string
		adopted    []string
		shallow    int
		load       float64
		radius     int
		unclaimed  int64 // suppressed_retries per root request
		suppressed int64 // suppressed calls per root request
		policy     string
	}{
		{name: "none", shallow: 2, load: 256, radius: 8, unclaimed: 0, suppressed: 0, policy: "naive"},
		{name: "all", adopted: AdoptableServices(), load: 2, radius: 1, unclaimed: 7, suppressed: 7, policy: "ownership"},
		{name: "accounts+ledger", adopted: []string{"accounts", "ledger"}, load: 128, radius: 8, unclaimed: 96, suppressed: 64, policy: "mixed"},
		{name: "accounts+ledger+risk", adopted: []string{"accounts", "ledger", "risk"}, load: 64, radius: 8, unclaimed: 80, suppressed: 64, policy: "mixed"},
		{name: "checkout+frontend", adopted: []string{"checkout", "frontend"}, load: 128, radius: 7, unclaimed: 1, suppressed: 1, policy: "mixed"},
		{name: "path-but-vault", adopted: []string{"frontend", "checkout", "orders", "payments", "fraud", "risk", "ledger", "accounts"},
			load: 2, radius: 1, unclaimed: 7, suppressed: 7, policy: "mixed"},
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var versions map[string][]string
			begin := time.Now()
			m, err := Measure(ctx, MeasureConfig{Adopted: c.adopted, Requests: n, ShallowRequests: c.shallow,
				Data: t.TempDir(), Logger: quiet,
				Inspect: func(ctx context.Context, svc *query.Service, q store.Query) (err error) {
					versions, err = spanVersions(ctx, svc)
					return err
				}})
			if err != nil {
				t.Fatal(err)
			}
			a := api(t, m.Report, DeepAPI)
			t.Logf("%v: %d traces, vault load %.3f per request, max radius %d, suppressed_retries %d, %d hops",
				time.Since(begin).Round(time.Millisecond), a.Traces, m.Load[DeepAPI], m.MaxRadius[DeepAPI], a.SuppressedRetries, a.Requests)
			if m.Policy.Name != c.policy {
				t.Errorf("policy %q, want %q", m.Policy.Name, c.policy)
			}
			if m.Sent[DeepAPI] != n || m.Failed[DeepAPI] != n || a.Traces != n {
				t.Errorf("deep API: %d sent, %d failed, %d traces; want %d of each", m.Sent[DeepAPI], m.Failed[DeepAPI], a.Traces, n)
			}
			if math.Abs(m.Load[DeepAPI]-c.load) > 1e-9 {
				t.Errorf("vault served %v requests per root request, want %v", m.Load[DeepAPI], c.load)
			}
			if m.MaxRadius[DeepAPI] != c.radius || a.MaxRadius != c.radius {
				t.Errorf("max radius %d, want %d", m.MaxRadius[DeepAPI], c.radius)
			}
			if a.SuppressedRetries != c.unclaimed*n {
				t.Errorf("suppressed_retries %d, want %d", a.SuppressedRetries, c.unclaimed*n)
			}
			var suppressed int64
			for _, e := range m.Report.Edges {
				suppressed += e.SuppressedCalls
			}
			if suppressed != c.suppressed*n {
				t.Errorf("%d suppressed calls, want %d", suppressed, c.suppressed*n)
			}
			if m.State == nil || m.State.APIs[DeepAPI] == nil {
				t.Error("the merged state has no call graph of the deep API")
			}
			if c.shallow > 0 {
				s := api(t, m.Report, ShallowAPI)
				_, reaches := m.Load[ShallowAPI]
				if s.Traces != int64(c.shallow) || m.Failed[ShallowAPI] != 0 || reaches || s.FailedTraces != 0 {
					t.Errorf("shallow API: %d traces, %d failed requests, %d failed traces, load on vault %v; want %d, 0, 0, none",
						s.Traces, m.Failed[ShallowAPI], s.FailedTraces, reaches, c.shallow)
				}
			}
			checkVersions(t, m.Policy, c.adopted, versions)
		})
	}
}

// checkVersions checks that every service reported one service.version:
// its mode's under a mixed policy, the policy's under a uniform one.
func checkVersions(t *testing.T, p Policy, adopted []string, versions map[string][]string) {
	t.Helper()
	for svc, vs := range versions {
		want := p.Version
		if p.Name == "mixed" {
			want = Naive.Version
			if slices.Contains(adopted, svc) {
				want = Ownership.Version
			}
		}
		if len(vs) != 1 || vs[0] != want {
			t.Errorf("%s reported service.version %s, want %s", svc, strings.Join(vs, ", "), want)
		}
	}
	if len(versions) == 0 {
		t.Error("no spans read back")
	}
}

// spanVersions reads every stored span: the versions each service reported.
func spanVersions(ctx context.Context, svc *query.Service) (map[string][]string, error) {
	out := map[string][]string{}
	err := svc.Store.SpansAfter(ctx, 0, func(_ uint64, spans []graph.Span) error {
		for _, s := range spans {
			if !slices.Contains(out[s.Service], s.Version) {
				out[s.Service] = append(out[s.Service], s.Version)
			}
		}
		return nil
	})
	return out, err
}

func TestAdoptionPolicy(t *testing.T) {
	if p, err := AdoptionPolicy(nil); err != nil || p.Name != Naive.Name || p.Ownership {
		t.Errorf("none adopted: %+v, %v; want the naive policy", p, err)
	}
	if p, err := AdoptionPolicy(AdoptableServices()); err != nil || p.Name != Ownership.Name || !p.Ownership {
		t.Errorf("all adopted: %+v, %v; want the ownership policy", p, err)
	}
	p, err := AdoptionPolicy([]string{"ledger", "accounts", "ledger"})
	if err != nil || p.Name != "mixed" || p.Ownership || !slices.Equal(p.Adopted, []string{"accounts", "ledger"}) {
		t.Errorf("accounts, ledger: %+v, %v; want mixed, [accounts ledger]", p, err)
	}
	for _, bad := range []string{"reviews", "nosuch", ""} {
		if _, err := AdoptionPolicy([]string{bad}); err == nil {
			t.Errorf("AdoptionPolicy(%q) took it", bad)
		}
	}
	// 16 services, one legacy.
	if got := AdoptableServices(); len(got) != 15 || slices.Contains(got, "reviews") {
		t.Errorf("AdoptableServices() = %v, want the 15 services but reviews", got)
	}
	// Versions: uniform policies as before, mixed ones by mode.
	mixed := Policy{Name: "mixed", Adopted: []string{"ledger"}}
	for _, c := range []struct {
		p    Policy
		s    service
		want string
	}{
		{Naive, service{name: "ledger"}, Naive.Version},
		{Ownership, service{name: "reviews", legacy: true}, Ownership.Version},
		{mixed, service{name: "ledger"}, Ownership.Version},
		{mixed, service{name: "accounts"}, Naive.Version},
		{mixed, service{name: "reviews", legacy: true}, Naive.Version},
	} {
		if got := c.p.versionOf(c.s); got != c.want {
			t.Errorf("%s under %s: version %q, want %q", c.s.name, c.p.Name, got, c.want)
		}
	}
}
