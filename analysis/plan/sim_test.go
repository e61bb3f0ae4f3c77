package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/sim"
)

// simMesh runs the mesh gw → api → orders → pay → ledger, with api also
// calling search (fail-open) → index, ledger down in every request; every
// service retries once, naively, unless adopted: then it runs the
// ownership middleware (claims honestly, retries claimed or missing
// errors only, no budget).
func simMesh(t *testing.T, adopted []string) (*analysis.Document, *analysis.Windows, sim.Stats) {
	t.Helper()
	naive := sim.Policy{Retry: sim.RetryNaive, Retries: 1, ResendAttr: true}
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}
	svcs := []sim.Service{
		{Name: "gw", Calls: []sim.Edge{{To: "api"}}},
		{Name: "api", Calls: []sim.Edge{{To: "orders"}, {To: "search", FailOpen: true}}},
		{Name: "orders", Calls: []sim.Edge{{To: "pay"}}},
		{Name: "pay", Calls: []sim.Edge{{To: "ledger"}}},
		{Name: "ledger"},
		{Name: "search", Calls: []sim.Edge{{To: "index"}}},
		{Name: "index"},
	}
	for i := range svcs {
		svcs[i].Version = "1"
		svcs[i].Policy = naive
		if slices.Contains(adopted, svcs[i].Name) {
			svcs[i].Policy = own
		}
	}
	res, err := sim.Run(sim.Scenario{Services: svcs, Root: "gw", Traces: 40, Seed: 5,
		Faults: []sim.Fault{{Service: "ledger", Rate: 1, Persistent: true}}})
	if err != nil {
		t.Fatal(err)
	}
	doc, windows := analysis.InMemory(graph.Lists(fixture.Traces(res)), analysis.Config{}, 1)
	return doc, windows, res.Stats
}

// The plan's predictions against the simulator, which runs the real
// retry and claim logic: planned from the naive mesh's traces, every
// prefix of the plan, adopted in the simulated mesh, gives the load on
// the failing ledger and the max radius the plan predicted for it —
// exactly. By hand: four retrying levels above ledger (16 requests per
// root request, radius 4); gw+api together first (the highest cut saves
// the most spurious requests: 8, radius 3), then orders (4, 2), then pay
// (2, 1).
func TestPlanPredictsSimulator(t *testing.T) {
	doc, windows, _ := simMesh(t, nil)
	owners := map[string][]analysis.OwnerDoc{}
	for _, a := range doc.APIs {
		owners[a.API] = a.Owners
	}
	m, err := FromState(windows.Merged(), owners, nil, analysis.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Make(m, Options{Budget: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Weights != WeightsObserved {
		t.Errorf("weights %q, want observed (ledger's failures)", p.Weights)
	}
	steps, load, rad := stepsOf(p, "gw GET /gw")
	check(t, "steps", steps, []string{"api+gw", "orders", "pay"})
	check(t, "predicted load at ledger", load, []float64{16, 8, 4, 2})
	check(t, "predicted max radius", rad, []int{4, 3, 2, 1})
	var adopted []string
	for k := 0; k <= len(p.Steps); k++ {
		if k > 0 {
			adopted = append(adopted, p.Steps[k-1].Services...)
		}
		d, _, st := simMesh(t, adopted)
		got := float64(st.Nodes["ledger"].Requests) / float64(st.Requests)
		if got != load[k] || d.APIs[0].MaxRadius != rad[k] {
			t.Errorf("%d steps (%s adopted): ledger serves %v per root request, max radius %d; the plan said %v, %d",
				k, strings.Join(adopted, ","), got, d.APIs[0].MaxRadius, load[k], rad[k])
		}
	}
}
