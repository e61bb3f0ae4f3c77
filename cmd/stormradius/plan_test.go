package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/analysis/plan"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/sim"
)

// planChain writes 20 traces of the chain A→B→C→D→E, one naive retry per
// hop and no claims, D down in every trace, as a file and into an
// embedded store.
func planChain(t *testing.T) (file, dir string) {
	t.Helper()
	res, err := sim.Run(sim.Scenario{Services: sim.Chain([]string{"A", "B", "C", "D", "E"}, sim.Policy{Retry: sim.RetryNaive, Retries: 1, ResendAttr: true}),
		Root: "A", Faults: []sim.Fault{{Service: "D", Rate: 1, Persistent: true}}, Traces: 20, Seed: 31, Start: fixture.Start})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := res.WriteJSONLines(&buf); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), "chain.jsonl")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: dir, Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	fixture.Load(t, st, fixture.Traces(res))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return file, dir
}

func planJSON(t *testing.T, args ...string) *plan.Plan {
	t.Helper()
	code, out, errOut := runCmd(t, append([]string{"plan", "--format", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("plan %v: exit %d: %s", args, code, errOut)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// The plan learned from traces: D is the only owner of failures (every
// one of its hops), so the plan weighs D failing alone. Without a budget
// that bites (B = 1) only a caller and callee together help: A+B (D: 8 →
// 4 requests per root request, radius 3 → 2), then C (2, radius 1). With
// B = 0.1 each service alone caps its own retries: A, B, C (8 → 4.4 →
// 2.2 → 1.1 = (1+B)·N). The store's plan of the same spans is the same.
func TestPlanCommand(t *testing.T) {
	file, dir := planChain(t)
	for _, tc := range []struct {
		budget string
		steps  []string
		load   []float64
		radius []int
	}{
		{"1", []string{"A+B", "C"}, []float64{8, 4, 2}, []int{3, 2, 1}},
		{"0.1", []string{"A", "B", "C"}, []float64{8, 4.4, 2.2, 1.1}, []int{3, 3, 2, 1}},
	} {
		p := planJSON(t, "--budget", tc.budget, file)
		if p.Weights != plan.WeightsObserved || len(p.APIs) != 1 || p.APIs[0].API != "A GET /A" {
			t.Fatalf("B=%s: weights %q, apis %+v", tc.budget, p.Weights, p.APIs)
		}
		var steps []string
		load, radius := []float64{p.APIs[0].Load}, []int{p.APIs[0].MaxRadius}
		for _, s := range p.Steps {
			steps = append(steps, strings.Join(s.Services, "+"))
			if len(s.APIs) != 1 {
				t.Fatalf("step %d changes %d APIs", s.Step, len(s.APIs))
			}
			load, radius = append(load, s.APIs[0].After.Load), append(radius, s.APIs[0].After.MaxRadius)
		}
		if !reflect.DeepEqual(steps, tc.steps) || !reflect.DeepEqual(load, tc.load) || !reflect.DeepEqual(radius, tc.radius) {
			t.Errorf("B=%s: steps %v loads %v radius %v, want %v %v %v", tc.budget, steps, load, radius, tc.steps, tc.load, tc.radius)
		}
		stored := planJSON(t, "--budget", tc.budget, "--data", dir)
		if !reflect.DeepEqual(stored, p) {
			a, _ := json.Marshal(p)
			b, _ := json.Marshal(stored)
			t.Errorf("B=%s: the stored plan differs from the offline one:\n%s\n%s", tc.budget, b, a)
		}
	}
	// The table says the same.
	code, out, errOut := runCmd(t, "plan", "--budget", "1", file)
	if code != 0 {
		t.Fatalf("table: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"adoption plan: 2 steps over 1 root APIs, 5 services", "step 1: adopt A + B (together: neither helps alone)",
		"why: A GET /A, while D GET /D fails: A stops retrying B GET /B: B answers unclaimed and A honours it (neither helps alone); D GET /D serves 8 → 4 requests per root request",
		"A GET /A  3 -> 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// --fail and --steps.
	if p := planJSON(t, "--budget", "1", "--fail", "C", "--steps", "1", file); len(p.Steps) != 1 || p.Weights != plan.WeightsFail || p.APIs[0].Load != 4 {
		t.Errorf("--fail C --steps 1: %+v", p)
	}
}

func TestPlanBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--budget", "2", "x.jsonl"}, "budget 2: want a fraction"},
		{[]string{"--steps", "-1", "x.jsonl"}, "steps -1"},
		{[]string{"--format", "xml", "x.jsonl"}, `unknown --format "xml"`},
		{[]string{"--data", "d", "x.jsonl"}, "not both"},
	} {
		code, _, errOut := runCmd(t, append([]string{"plan"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	file, _ := planChain(t)
	if code, _, errOut := runCmd(t, "plan", "--fail", "Z", file); code != 2 || !strings.Contains(errOut, `fail "Z" is not a service`) {
		t.Errorf("--fail Z: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "plan", "--api", "Z GET /", file); code != 1 || !strings.Contains(errOut, `no traces of root API "Z GET /"`) {
		t.Errorf("--api Z: exit %d %q", code, errOut)
	}
}
