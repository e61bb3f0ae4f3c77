package plan

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/radius"
)

// chainAPI returns the chain names[0] → … with R = r on every edge, one
// service per node, services indexed in the mesh by svc.
func chainAPI(name string, names []string, r float64, svc map[string]int) API {
	m := radius.ChainModel(names)
	m.Service = make([]int, len(names))
	for i, n := range names {
		m.Service[i] = svc[n]
		if i > 0 {
			m.Edges[i-1].Retries = r
		}
	}
	return API{Name: name, Model: m, Weight: 1}
}

func services(names ...string) ([]string, map[string]int) {
	slices.Sort(names)
	idx := map[string]int{}
	for i, n := range names {
		idx[n] = i
	}
	return names, idx
}

func mustMake(t *testing.T, m *Mesh, o Options) *Plan {
	t.Helper()
	p, err := Make(m, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stepsOf returns each step's services, "+"-joined, and the load and max
// radius of API api after it (the first entry: before any step).
func stepsOf(p *Plan, api string) (steps []string, load []float64, maxRadius []int) {
	var cur Figures
	for _, a := range p.APIs {
		if a.API == api {
			cur = a.Figures
		}
	}
	load, maxRadius = []float64{cur.Load}, []int{cur.MaxRadius}
	for _, s := range p.Steps {
		steps = append(steps, strings.Join(s.Services, "+"))
		for _, c := range s.APIs {
			if c.API == api {
				cur = c.After
			}
		}
		load, maxRadius = append(load, cur.Load), append(maxRadius, cur.MaxRadius)
	}
	return steps, load, maxRadius
}

func check[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// The seed's chain A→…→G, one retry per hop, D failing. With B = 0.1 a
// service adopting ownership alone already caps its own retries: the
// cost (load at D + spurious requests, per root request) is 8 + 32 = 40
// before any step; adopting A gives 1, 1.1, 2.2, 4.4×4 (cost 4.4 + 14.9
// = 19.3), more than B (20.2), C (22) or any pair per service (A+B:
// 7.1, a gain of 32.9 for two). Then B (A→B stops: 1, 1, 1.1, 2.2×4),
// then C (1, 1, 1, 1.1×4): the ownership table, (1+B)·N at D. D alone
// changes nothing (the edge into D retries whatever D does).
func TestSeedChainWithBudget(t *testing.T) {
	names := []string{"A", "B", "C", "D", "E", "F", "G"}
	svc, idx := services(slices.Clone(names)...)
	m := &Mesh{Services: svc, APIs: []API{chainAPI("A GET /", names, 1, idx)}}
	p := mustMake(t, m, Options{Budget: 0.1, Fail: []string{"D"}})
	steps, load, rad := stepsOf(p, "A GET /")
	check(t, "steps", steps, []string{"A", "B", "C"})
	check(t, "load at D", load, []float64{8, 4.4, 2.2, 1.1})
	check(t, "max radius", rad, []int{3, 3, 2, 1})
	check(t, "cost", p.Cost, 40.0)
	var costs []float64
	for _, s := range p.Steps {
		costs = append(costs, s.Cost)
	}
	check(t, "costs", costs, []float64{19.3, 7.1, 1.5})
	check(t, "weights", p.Weights, WeightsFail)
	if p.Steps[0].Together {
		t.Errorf("step 1 says together")
	}
	if w := p.Steps[0].Why; w != "A GET /, while D fails: A retries B within the budget (2 → 1.1 attempts per call); D serves 8 → 4.4 requests per root request" {
		t.Errorf("why: %s", w)
	}
}

// R^d·N without a budget that bites (B = 1): no service helps alone; the
// first step is a pair, caller and callee together (A+B: A→B stops, D 8 →
// 4; B+C ties on load but adds more spurious requests), then C alone (B
// now honours claims): D serves 2 = (1+R)·N, the ownership table with B =
// 1.
func TestChainOnlyPairsHelp(t *testing.T) {
	names := []string{"A", "B", "C", "D", "E", "F", "G"}
	svc, idx := services(slices.Clone(names)...)
	m := &Mesh{Services: svc, APIs: []API{chainAPI("A GET /", names, 1, idx)}}
	p := mustMake(t, m, Options{Budget: 1, Fail: []string{"D"}})
	steps, load, rad := stepsOf(p, "A GET /")
	check(t, "steps", steps, []string{"A+B", "C"})
	check(t, "load at D", load, []float64{8, 4, 2})
	check(t, "max radius", rad, []int{3, 2, 1})
	if !p.Steps[0].Together || p.Steps[1].Together {
		t.Errorf("together = %v, %v; want true, false", p.Steps[0].Together, p.Steps[1].Together)
	}
	if w := p.Steps[0].Why; w != "A GET /, while D fails: A stops retrying B: B answers unclaimed and A honours it (neither helps alone); D serves 8 → 4 requests per root request" {
		t.Errorf("why: %s", w)
	}
	// The storm path of step 1: A → B → C → D, before and after.
	path := p.Steps[0].Path
	if path == nil {
		t.Fatal("no storm path")
	}
	check(t, "path before", path.Before, []PathHop{{"A", 1, false, 0}, {"B", 2, true, 2}, {"C", 4, true, 2}, {"D", 8, true, 2}})
	check(t, "path after", path.After, []PathHop{{"A", 1, false, 0}, {"B", 1, false, 1}, {"C", 2, true, 2}, {"D", 4, true, 2}})
}

// Fan-out: r calls x1, x2 and x3 (x3 fail-open: r answers without it,
// but still retries it), each calls d, which fails; R = 1, B = 1. Each
// r→xi doubles xi and d's share: d serves 3 × 2 × 2 = 12. A pair r+xi
// stops one: 10; ties go by name (r+x1); then x2 and x3 alone (r now
// honours): 8, 6.
func TestFanOut(t *testing.T) {
	svc, idx := services("r", "x1", "x2", "x3", "d")
	m := &radius.Model{Nodes: []string{"r GET /", "x1", "x2", "x3", "d"}, Service: []int{idx["r"], idx["x1"], idx["x2"], idx["x3"], idx["d"]}, Edges: []radius.ModelEdge{
		{From: 0, To: 1, Retries: 1}, {From: 0, To: 2, Retries: 1}, {From: 0, To: 3, Retries: 1, FailOpen: true},
		{From: 1, To: 4, Retries: 1}, {From: 2, To: 4, Retries: 1}, {From: 3, To: 4, Retries: 1},
	}}
	p := mustMake(t, &Mesh{Services: svc, APIs: []API{{Name: "r GET /", Model: m, Weight: 5}}}, Options{Budget: 1, Fail: []string{"d"}})
	steps, load, rad := stepsOf(p, "r GET /")
	check(t, "steps", steps, []string{"r+x1", "x2", "x3"})
	check(t, "load at d", load, []float64{12, 10, 8, 6})
	check(t, "max radius", rad, []int{2, 2, 2, 1})
	// Cost: weight 5 × (load + spurious requests): the requests are 1 + 3
	// × 2 + 12 = 19 against 1 + 3 + 3 = 7 without retries: 5 × (12 + 12).
	check(t, "cost", p.Cost, 120.0)
}

// A service that already claims and honours (C) makes its caller a single
// step: A→B→C→D failing at D, B = 1: B→C stops when B adopts (D 8 → 4),
// then A (B now claims): 2. C is never a step, and is listed as speaking.
func TestAlreadyClaims(t *testing.T) {
	names := []string{"A", "B", "C", "D"}
	svc, idx := services(slices.Clone(names)...)
	m := &Mesh{Services: svc, Speaks: make([]radius.Speaks, 4), APIs: []API{chainAPI("A GET /", names, 1, idx)}}
	m.Speaks[idx["C"]] = radius.Speaks{Claims: true, Honours: true}
	p := mustMake(t, m, Options{Budget: 1, Fail: []string{"D"}})
	steps, load, _ := stepsOf(p, "A GET /")
	check(t, "steps", steps, []string{"B", "A"})
	check(t, "load at D", load, []float64{8, 4, 2})
	check(t, "speaking", p.Speaking, []string{"C"})
}

// One service without the middleware breaks an otherwise owned chain:
// A→B→C→D→E failing at E, every service speaking but C (B = 0.1): E
// serves 1.1 × 2 × 1.1 = 2.42. A second API, P→Q→R failing at R, where
// nobody speaks yet, weighs half as much. C comes first: it stops C's
// retries of D and B's of C (E: 1.1; cost 2 × (2.42 + 2.72) → 2 × 1.2, a
// gain of 7.88, against P's 4.5 on the other API).
func TestLegacyFirst(t *testing.T) {
	svc, idx := services("A", "B", "C", "D", "E", "P", "Q", "R")
	m := &Mesh{Services: svc, Speaks: make([]radius.Speaks, len(svc)), APIs: []API{
		chainAPI("A GET /", []string{"A", "B", "C", "D", "E"}, 1, idx),
		chainAPI("P GET /", []string{"P", "Q", "R"}, 1, idx),
	}}
	m.APIs[0].Weight = 2
	for _, s := range []string{"A", "B", "D", "E"} {
		m.Speaks[idx[s]] = radius.Speaks{Claims: true, Honours: true}
	}
	p := mustMake(t, m, Options{Budget: 0.1, Fail: []string{"E", "R"}})
	steps, load, rad := stepsOf(p, "A GET /")
	if len(steps) == 0 || steps[0] != "C" {
		t.Fatalf("steps %v: want C first", steps)
	}
	check(t, "load at E", load[:2], []float64{2.42, 1.1})
	check(t, "max radius", rad[:2], []int{3, 1})
	check(t, "step 1 gain", p.Steps[0].Gain, 7.88)
}

// Observed failure rates weigh: Z fails (rate 0.5) on X→Y→Z and nothing
// was seen failing on P→Q→R, whose nodes then fail at X→Y→Z's mean node
// rate, 0.5/3. B = 1: X+Y stops X's retries of Y while Z fails (cost 0.5 ×
// (4 + 4) → 0.5 × (2 + 1): 1.25 per service); P+Q stops P's of Q while R
// fails (0.5/3 × (8 − 3): 0.42 per service).
func TestObservedFirst(t *testing.T) {
	svc, idx := services("P", "Q", "R", "X", "Y", "Z")
	m := &Mesh{Services: svc, APIs: []API{
		chainAPI("P GET /", []string{"P", "Q", "R"}, 1, idx),
		chainAPI("X GET /", []string{"X", "Y", "Z"}, 1, idx),
	}}
	m.APIs[1].Failures = []float64{0, 0, 0.5}
	p := mustMake(t, m, Options{Budget: 1})
	check(t, "weights", p.Weights, WeightsObserved)
	var steps []string
	for _, s := range p.Steps {
		steps = append(steps, strings.Join(s.Services, "+"))
	}
	check(t, "steps", steps, []string{"X+Y", "P+Q"})
	// The X API's figures are Z's alone; the P API's weigh every node
	// equally: P (1), Q (2, radius 1), R (4, radius 2).
	for _, a := range p.APIs {
		switch a.API {
		case "X GET /":
			check(t, "X figures", a.Figures, Figures{MaxRadius: 2, MeanRadius: 2, Load: 4, Spurious: 4})
		case "P GET /":
			check(t, "P figures", a.Figures, Figures{MaxRadius: 2, MeanRadius: 1, Load: radius.Round9(7.0 / 3), Spurious: 2})
		}
	}
}

// The plan's figures after every step equal the per-service what-if
// model (radius.Model.Requests) with the steps so far adopted, on random
// meshes: the incremental evaluation is exact.
func TestStepsMatchWhatIf(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	for trial := range 60 {
		m := randomMesh(rng, 8+rng.IntN(8), 1+rng.IntN(3))
		a := &m.APIs[0]
		f := a.Model.Nodes[1+rng.IntN(len(a.Model.Nodes)-1)]
		b := float64(rng.IntN(11)) / 10
		p, err := Make(m, Options{Budget: b, Fail: []string{f}})
		if err != nil {
			t.Fatal(err)
		}
		fi := slices.Index(a.Model.Nodes, f)
		a.Model.Speaks = m.Speaks
		adopted := make([]bool, len(m.Services))
		for i, s := range m.Speaks {
			adopted[i] = s.Owned()
		}
		cur := p.APIs
		for k := 0; k <= len(p.Steps); k++ {
			if k > 0 {
				for _, s := range p.Steps[k-1].Services {
					adopted[slices.Index(m.Services, s)] = true
				}
			}
			failing := make([]bool, len(a.Model.Nodes))
			failing[fi] = true
			req, err := a.Model.Requests(radius.Scenario{Failing: failing, Budget: b, Adopted: adopted})
			if err != nil {
				t.Fatal(err)
			}
			load := loadAfter(p, a.Name, k)
			if load < 0 {
				continue // f not reached: no scenario
			}
			if !near(load, req[fi]) && abs(load-req[fi]) > 1e-9 {
				t.Fatalf("trial %d, %s failing, B=%v, after %d steps %v: load %v, what-if %v", trial, f, b, k, p.Steps[:k], load, req[fi])
			}
		}
		_ = cur
	}
}

func abs(x float64) float64 { return max(x, -x) }

// loadAfter returns api's load after k steps, -1 when the plan has no
// figures for it.
func loadAfter(p *Plan, api string, k int) float64 {
	load := -1.0
	for _, a := range p.APIs {
		if a.API == api {
			load = a.Load
		}
	}
	for _, s := range p.Steps[:k] {
		for _, c := range s.APIs {
			if c.API == api {
				load = c.After.Load
			}
		}
	}
	return load
}

// randomMesh returns apis random DAG-ish APIs (cycles included) over n
// services, some already speaking, with R 0–2, calls 1–2 and fail-open
// edges.
func randomMesh(rng *rand.Rand, n, apis int) *Mesh {
	m := &Mesh{Speaks: make([]radius.Speaks, n)}
	for i := range n {
		m.Services = append(m.Services, fmt.Sprintf("s%02d", i))
		if rng.IntN(6) == 0 {
			m.Speaks[i] = radius.Speaks{Claims: rng.IntN(3) > 0, Honours: rng.IntN(3) > 0}
		}
	}
	for a := range apis {
		k := 3 + rng.IntN(n-2)
		perm := rng.Perm(n)[:k]
		mod := &radius.Model{}
		for _, s := range perm {
			mod.Nodes = append(mod.Nodes, m.Services[s]+" op")
			mod.Service = append(mod.Service, s)
		}
		for v := 1; v < k; v++ {
			mod.Edges = append(mod.Edges, radius.ModelEdge{From: rng.IntN(v), To: v, Retries: float64(rng.IntN(3)), Calls: float64(1 + rng.IntN(2))})
		}
		for range rng.IntN(k) {
			mod.Edges = append(mod.Edges, radius.ModelEdge{From: rng.IntN(k), To: rng.IntN(k), Retries: float64(rng.IntN(3)), FailOpen: rng.IntN(4) == 0})
		}
		m.APIs = append(m.APIs, API{Name: fmt.Sprintf("api%d", a), Model: mod, Weight: float64(1 + rng.IntN(100))})
	}
	return m
}

// Deterministic: the same mesh, APIs in another order, gives the same
// plan.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	m := randomMesh(rng, 30, 6)
	p1 := mustMake(t, m, Options{Budget: 0.1})
	slices.Reverse(m.APIs)
	p2 := mustMake(t, m, Options{Budget: 0.1})
	slices.SortFunc(p2.APIs, func(x, y APIFigures) int { return strings.Compare(x.API, y.API) })
	slices.SortFunc(p1.APIs, func(x, y APIFigures) int { return strings.Compare(x.API, y.API) })
	j1, _ := json.Marshal(p1)
	j2, _ := json.Marshal(p2)
	if string(j1) != string(j2) {
		t.Errorf("plans differ with the APIs reversed:\n%s\n%s", j1, j2)
	}
	if len(p1.Steps) == 0 {
		t.Error("no steps")
	}
}

func TestErrors(t *testing.T) {
	svc, idx := services("A", "B")
	good := func() *Mesh {
		return &Mesh{Services: svc, APIs: []API{chainAPI("A GET /", []string{"A", "B"}, 1, idx)}}
	}
	for _, tc := range []struct {
		m    *Mesh
		o    Options
		want string
	}{
		{good(), Options{Budget: 2}, "plan: retry budget B = 2: want a fraction between 0 and 1"},
		{good(), Options{Steps: -1}, "plan: steps -1: want 0 (all) or more"},
		{good(), Options{Fail: []string{"Z"}}, `plan: fail "Z" is not a service or node of the plan's APIs`},
		{&Mesh{Services: svc, Speaks: make([]radius.Speaks, 1)}, Options{}, "plan: 1 service behaviours for 2 services"},
		{func() *Mesh { m := good(); m.APIs[0].Model.Edges[0].Retries = -1; return m }(), Options{}, "plan: API \"A GET /\": edge A → B: retries -1: want a finite number ≥ 0"},
		{func() *Mesh { m := good(); m.APIs[0].Failures = []float64{1}; return m }(), Options{}, "plan: API \"A GET /\": 1 failure rates for 2 nodes"},
		{func() *Mesh { m := good(); m.APIs[0].Model.Service = []int{0, 5}; return m }(), Options{}, "plan: API \"A GET /\": node \"B\": service 5 out of range"},
	} {
		_, err := Make(tc.m, tc.o)
		if err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// An uninstrumented callee (a database) cannot adopt: on A→B→C with C
// virtual (B = 1, every node failing in turn: none was seen), B's retries
// of C stay whatever happens (the edge into the failing node), and A+B,
// stopping A's retries of B while C fails, is the only step.
func TestVirtualNeverAdopts(t *testing.T) {
	svc, idx := services("A", "B", "C")
	m := &Mesh{Services: svc, Virtual: []bool{false, false, true}, APIs: []API{chainAPI("A GET /", []string{"A", "B", "C"}, 1, idx)}}
	p := mustMake(t, m, Options{Budget: 1})
	steps, load, _ := stepsOf(p, "A GET /")
	check(t, "steps", steps, []string{"A+B"})
	// Loads while A, B, C fail: 1, 2, 4 before; 1, 2 (A→B is the edge
	// into B), 2 after.
	check(t, "load", load, []float64{radius.Round9(7.0 / 3), radius.Round9(5.0 / 3)})
}
