package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stormradius/stormradius/radius"
)

// fleet returns a mesh of services services in ten layers and apis root
// APIs: each API's root is a service of the first layer; every node calls
// one to three services of the next layers (fail-open one call in ten,
// R = 0–2), up to maxNodes nodes. A few services already speak the
// protocol; every fourth API saw failures at a few of its nodes.
func fleet(seed uint64, services, apis, maxNodes int) *Mesh {
	rng := rand.New(rand.NewPCG(seed, 31))
	m := &Mesh{Speaks: make([]radius.Speaks, services)}
	for i := range services {
		m.Services = append(m.Services, fmt.Sprintf("svc-%04d", i))
		if rng.IntN(20) == 0 {
			m.Speaks[i] = radius.Speaks{Claims: true, Honours: true}
		}
	}
	layer := services / 10
	for a := range apis {
		root := a % layer
		mod := &radius.Model{}
		at := map[int]int{}
		add := func(s int) int {
			if v, ok := at[s]; ok {
				return v
			}
			at[s] = len(mod.Nodes)
			mod.Nodes = append(mod.Nodes, fmt.Sprintf("%s GET /%d", m.Services[s], s%7))
			mod.Service = append(mod.Service, s)
			return at[s]
		}
		add(root)
		queue := []int{root}
		for len(queue) > 0 && len(mod.Nodes) < maxNodes {
			s := queue[0]
			queue = queue[1:]
			l := s / layer
			if l >= 9 {
				continue
			}
			for range 1 + rng.IntN(3) {
				next := (l+1+rng.IntN(min(2, 9-l)))*layer + rng.IntN(layer)
				_, seen := at[next]
				to := add(next)
				mod.Edges = append(mod.Edges, radius.ModelEdge{From: at[s], To: to, Calls: float64(1 + rng.IntN(2)), Retries: float64(rng.IntN(3)), FailOpen: rng.IntN(10) == 0})
				if !seen {
					queue = append(queue, next)
				}
			}
		}
		api := API{Name: fmt.Sprintf("%s GET /api/%d", m.Services[root], a), Model: mod, Weight: float64(100 + rng.IntN(10000))}
		if a%4 == 0 {
			api.Failures = make([]float64, len(mod.Nodes))
			for range 3 {
				api.Failures[rng.IntN(len(mod.Nodes))] = rng.Float64() / 10
			}
		}
		m.APIs = append(m.APIs, api)
	}
	return m
}

// BenchmarkPlanFleet plans 1,000 services × 100 root APIs (up to 60
// nodes each), to the end: the target is under 1 s on one core.
func BenchmarkPlanFleet(b *testing.B) {
	m := fleet(1, 1000, 100, 60)
	nodes := 0
	for _, a := range m.APIs {
		nodes += len(a.Model.Nodes)
	}
	b.ReportAllocs()
	var steps int
	for b.Loop() {
		p, err := Make(m, Options{Budget: 0.1})
		if err != nil {
			b.Fatal(err)
		}
		steps = len(p.Steps)
	}
	b.ReportMetric(float64(steps), "steps")
	b.ReportMetric(float64(nodes), "nodes")
}

// BenchmarkPlanFleetLarge: the same fleet with APIs of up to 250 nodes.
func BenchmarkPlanFleetLarge(b *testing.B) {
	m := fleet(2, 1000, 100, 250)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Make(m, Options{Budget: 0.1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWhatIfSweep is the reference: one per-service what-if
// (radius.Model.Requests) for every API and every node of the fleet
// failing — what a planner without incremental evaluation would repeat
// for every candidate at every step.
func BenchmarkWhatIfSweep(b *testing.B) {
	m := fleet(1, 1000, 100, 60)
	adopted := make([]bool, len(m.Services))
	b.ReportAllocs()
	for b.Loop() {
		for _, a := range m.APIs {
			a.Model.Speaks = m.Speaks
			failing := make([]bool, len(a.Model.Nodes))
			for f := range failing {
				failing[f] = true
				if _, err := a.Model.Requests(radius.Scenario{Failing: failing, Budget: 0.1, Adopted: adopted}); err != nil {
					b.Fatal(err)
				}
				failing[f] = false
			}
		}
	}
}
