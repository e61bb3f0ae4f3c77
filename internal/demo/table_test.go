package demo

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/gate"
)

func sampleResult() *Result {
	three, zero := 3, 0
	th := gate.Thresholds{MaxRadius: &three, MaxRadiusIncrease: &zero}
	doc := func(maxR int, mean float64, suppressed int64) *analysis.Document {
		return &analysis.Document{APIs: []analysis.APIDoc{
			{API: ShallowAPI, Traces: 10},
			{API: DeepAPI, Traces: 1200, RootErrors: 300, MaxRadius: maxR, MeanRadius: mean, MaxAmplification: float64(int(1) << maxR),
				SuppressedRetries: suppressed},
		}}
	}
	return &Result{
		Before:   Phase{Policy: Naive, Report: doc(8, 7.5, 0), Load: map[string]float64{DeepAPI: 50}},
		After:    Phase{Policy: Ownership, Report: doc(1, 1, 2100), Load: map[string]float64{DeepAPI: 1.25}},
		Gate:     &gate.Decision{Decision: gate.Pass, Pass: true, API: DeepAPI, Thresholds: th, Candidate: gate.Figures{Label: "frontend " + Ownership.Version}},
		GateBack: &gate.Decision{Decision: gate.Fail, Pass: false, Reasons: []string{"max radius 8 exceeds 3"}, API: DeepAPI, Thresholds: th},
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sampleResult(), 0.3); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	find := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return l
			}
		}
		t.Fatalf("no line %q in\n%s", prefix, out)
		return ""
	}
	// The deep API comes first, though the documents list it second.
	if strings.Index(out, DeepAPI) > strings.Index(out, ShallowAPI) {
		t.Errorf("the deep API is not first:\n%s", out)
	}
	for prefix, want := range map[string][]string{
		"max radius":                 {"8", "1"},
		"max amplification":          {"256", "2"},
		"suppressed retries":         {"0", "2,100"},
		"vault requests per request": {"50.00", "1.25"},
	} {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(find(prefix)), prefix))
		if len(f) < 2 || f[0] != want[0] || f[1] != want[1] {
			t.Errorf("%s: %q, want %v", prefix, f, want)
		}
	}
	// Numbers right-aligned: every figure row ends at the same column.
	end := len(find("max radius"))
	for _, p := range []string{"traces", "mean radius", "suppressed retries"} {
		if n := len(find(p)); n != end {
			t.Errorf("row %q is %d wide, max radius %d", p, n, end)
		}
	}
	for _, s := range []string{"50.00 → 1.25 (-98%)", "Gate (", ": PASS", ": FAIL — max radius 8 exceeds 3"} {
		if !strings.Contains(out, s) {
			t.Errorf("no %q in\n%s", s, out)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleResult()); err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"before", "after"} {
		var d struct {
			APIs []map[string]any `json:"apis"`
		}
		if err := json.Unmarshal(got[side], &d); err != nil || len(d.APIs) != 2 {
			t.Fatalf("%s: %v, %d APIs", side, err, len(d.APIs))
		}
		for _, k := range []string{"api", "max_radius", "mean_radius", "suppressed_retries", "spurious_requests_prevented", "potential_radius"} {
			if _, ok := d.APIs[1][k]; !ok {
				t.Errorf("%s: API row without %q", side, k)
			}
		}
	}
}
