package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/query"
)

// TestPlanPredictsMesh checks the adoption planner against the real mesh
// (issue 31): planned from the traces of the naive mesh under vault's
// failure, the plan's first k steps (k = 0, 1, 2 and all) adopted in the
// running mesh — the ownership middleware switched on service by service
// — give, under the same fault, the load on vault and the max radius the
// plan predicted for that step, within 10 % (here: exactly).
//
// By hand: the deep API's path has eight retrying levels above vault (R =
// 1, no budget: B = 1), so vault serves 2^8 = 256 per root request, radius
// 8. Only a caller and callee together stop a level; the highest cut saves
// the most spurious requests (everything below it halves): checkout +
// frontend first (128, radius 7), then orders (64, 6), then payments,
// fraud, risk, ledger and accounts, one level each (2, radius 1: the edge
// into vault always retries).
func TestPlanPredictsMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the mesh four times")
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m0, err := Measure(ctx, MeasureConfig{Requests: 8, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	b := 1.0
	p, err := query.Plan(query.PlanRequest{Budget: &b}, m0.State, m0.Report, m0.Config)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range p.Steps {
		steps = append(steps, strings.Join(s.Services, "+"))
	}
	want := []string{"checkout+frontend", "orders", "payments", "fraud", "risk", "ledger", "accounts"}
	if strings.Join(steps, " ") != strings.Join(want, " ") {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	// The plan's predictions after k steps, from its figures.
	predicted := func(k int) (load float64, radius int) {
		for _, a := range p.APIs {
			if a.API == DeepAPI {
				load, radius = a.Load, a.MaxRadius
			}
		}
		for _, s := range p.Steps[:k] {
			for _, c := range s.APIs {
				if c.API == DeepAPI {
					load, radius = c.After.Load, c.After.MaxRadius
				}
			}
		}
		return load, radius
	}
	var rows []string
	for _, k := range []int{0, 1, 2, len(p.Steps)} {
		var adopted []string
		for _, s := range p.Steps[:k] {
			adopted = append(adopted, s.Services...)
		}
		m := m0
		if k > 0 {
			if m, err = Measure(ctx, MeasureConfig{Requests: 8, Adopted: adopted, Logger: log}); err != nil {
				t.Fatal(err)
			}
		}
		load, radius := predicted(k)
		wantLoad, wantRadius := math.Pow(2, float64(8-k)), 8-k
		if k == len(p.Steps) {
			wantLoad, wantRadius = 2, 1
		}
		if load != wantLoad || radius != wantRadius {
			t.Errorf("k=%d: the plan predicts %v and radius %d; by hand %v and %d", k, load, radius, wantLoad, wantRadius)
		}
		got, gotRadius := m.Load[DeepAPI], m.MaxRadius[DeepAPI]
		if math.Abs(got-load) > 0.1*load || math.Abs(float64(gotRadius-radius)) > 0.1*float64(radius) {
			t.Errorf("k=%d (%s adopted): the mesh's vault served %v per root request, max radius %d; the plan predicted %v and %d",
				k, strings.Join(adopted, ","), got, gotRadius, load, radius)
		}
		rows = append(rows, fmt.Sprintf("| %d | %s | %g | %g | %d | %d |", k, strings.Join(adopted, ", "), load, got, radius, gotRadius))
	}
	t.Logf("\n| k | adopted | predicted load | measured | predicted radius | measured |\n%s", strings.Join(rows, "\n"))
}
