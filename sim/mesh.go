package sim

import (
	"math/rand/v2"
	"strconv"
)

// MeshConfig configures Mesh.
type MeshConfig struct {
	Seed uint64
	// APIs is the number of root services, one user-facing API each (≥ 1).
	APIs int
	// Depth is the number of hops on every API's longest call path (≥ 1).
	Depth int
	// Fanout is the number of outbound calls of every non-leaf service
	// (≥ 1): one fail-close call to the next layer, the others to virtual
	// stores or to leaf services.
	Fanout int
	// Policy is given to every service.
	Policy Policy
	// ErrorRate is every service's internal error rate.
	ErrorRate float64
	// FailOpen is the probability that an extra (non-path) call is
	// fail-open; half of those are declared (dependency.fail_open).
	FailOpen float64
	// GRPC is the fraction of non-root services served over gRPC.
	GRPC float64
}

// Mesh returns a deterministic random layered mesh (a DAG) for benchmarks
// and demos: APIs root services "api-<i>" (HTTP "GET /api/<i>") on layer 0,
// layers 1..Depth-1 of max(2, APIs) services "svc-<layer>-<i>" each. Every
// non-leaf service makes one fail-close call to a random service of the next
// layer (so every API has a path of Depth hops), then Fanout-1 extra calls,
// each to a virtual store (a cache "cache-<layer>-<k>", GET, or a database
// "db-<layer>-<k>", SELECT) or to a leaf service (last layer), fail-open with
// probability FailOpen. Leaf services call one virtual database
// "db-leaf-<i>" (fail-close). Without retries a trace has about
// 2·Depth·Fanout spans.
//
// The returned scenario has Services, Root, Roots and Seed set; set Traces,
// Faults, Start and Spacing before running it.
func Mesh(c MeshConfig) Scenario {
	apis, depth, fanout := max(1, c.APIs), max(1, c.Depth), max(1, c.Fanout)
	width := max(2, apis)
	rng := rand.New(rand.NewPCG(c.Seed, 0x6d657368))
	layers := make([][]string, depth)
	for l := range layers {
		n := width
		if l == 0 {
			n = apis
		}
		for i := 0; i < n; i++ {
			if l == 0 {
				layers[l] = append(layers[l], "api-"+strconv.Itoa(i))
			} else {
				layers[l] = append(layers[l], "svc-"+strconv.Itoa(l)+"-"+strconv.Itoa(i))
			}
		}
	}
	var services []Service
	for l, names := range layers {
		for i, name := range names {
			s := Service{Name: name, Version: "1.0." + strconv.Itoa(i%3), Policy: c.Policy, ErrorRate: c.ErrorRate}
			if l == 0 {
				s.Operation = "GET /api/" + strconv.Itoa(i)
			} else if rng.Float64() < c.GRPC {
				s.Protocol = GRPC
				s.Operation = "mesh.Layer" + strconv.Itoa(l) + ".S" + strconv.Itoa(i) + "/Handle"
			} else {
				s.Operation = "POST /v1/" + name
			}
			if l == depth-1 {
				s.Calls = []Edge{{To: "db-leaf-" + strconv.Itoa(i), Virtual: true}}
				services = append(services, s)
				continue
			}
			next := layers[l+1]
			spine := next[rng.IntN(len(next))]
			s.Calls = []Edge{{To: spine}}
			used := map[string]bool{spine: true}
			leaves := layers[depth-1]
			for k := 1; k < fanout; k++ {
				e := Edge{}
				if rng.Float64() < c.FailOpen {
					e.FailOpen = true
					e.DeclareFailOpen = rng.IntN(2) == 0
				}
				leaf := leaves[rng.IntN(len(leaves))]
				switch {
				case rng.IntN(2) == 0 && !used[leaf]:
					e.To = leaf
					used[leaf] = true
				case rng.IntN(2) == 0:
					e.To, e.Virtual, e.Op = "cache-"+strconv.Itoa(l)+"-"+strconv.Itoa(k), true, "GET"
				default:
					e.To, e.Virtual = "db-"+strconv.Itoa(l)+"-"+strconv.Itoa(k), true
				}
				s.Calls = append(s.Calls, e)
			}
			services = append(services, s)
		}
	}
	sc := Scenario{Services: services, Root: layers[0][0], Roots: layers[0][1:], Seed: c.Seed}
	return sc
}
