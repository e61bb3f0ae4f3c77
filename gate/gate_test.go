package gate

import (
	"errors"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestDecide(t *testing.T) {
	cand := Figures{Label: "v2", Traces: 100, MaxRadius: 3, MaxAmplification: 4}
	base := &Figures{Label: "v1", Traces: 100, MaxRadius: 1, MaxAmplification: 2}
	for _, tc := range []struct {
		name   string
		base   *Figures
		th     Thresholds
		pass   bool
		reason string
	}{
		{"absolute radius ok", nil, Thresholds{MaxRadius: ptr(3)}, true, ""},
		{"absolute radius exceeded", nil, Thresholds{MaxRadius: ptr(2)}, false, "max radius 3 exceeds 2"},
		{"increase of 2 allowed", base, Thresholds{MaxRadiusIncrease: ptr(2)}, true, ""},
		{"increase of 2 not allowed", base, Thresholds{MaxRadiusIncrease: ptr(1)}, false, "is 2 above v1's 1 (allowed: 1)"},
		{"amplification", nil, Thresholds{MaxAmplification: ptr(3.5)}, false, "max amplification 4 exceeds 3.5"},
		{"too few candidate traces", nil, Thresholds{MaxRadius: ptr(9), MinTraces: 101}, false, "100 traces of api, fewer than the 101"},
		{"too few baseline traces", &Figures{Label: "v1", Traces: 3}, Thresholds{MaxRadiusIncrease: ptr(5)}, false, "v1 has 3 traces"},
		{"default min traces", nil, Thresholds{MaxRadius: ptr(9)}, true, ""},
	} {
		d := Decide("api", cand, tc.base, tc.th)
		if d.Pass != tc.pass {
			t.Errorf("%s: pass %v, want %v (%v)", tc.name, d.Pass, tc.pass, d.Reasons)
		}
		if tc.reason != "" && !strings.Contains(strings.Join(d.Reasons, "; "), tc.reason) {
			t.Errorf("%s: reasons %v lack %q", tc.name, d.Reasons, tc.reason)
		}
		if d.Thresholds.MinTraces == 0 {
			t.Errorf("%s: the decision does not say the min traces it used", tc.name)
		}
	}
	// Nine traces under the default of ten: never a pass.
	if d := Decide("api", Figures{Label: "c", Traces: 9}, nil, Thresholds{MaxRadius: ptr(100)}); d.Pass {
		t.Error("9 traces passed with the default minimum of 10")
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		th   Thresholds
		base bool
		ok   bool
	}{
		{Thresholds{}, false, false},
		{Thresholds{MaxRadius: ptr(1)}, false, true},
		{Thresholds{MaxRadiusIncrease: ptr(1)}, false, false},
		{Thresholds{MaxRadiusIncrease: ptr(1)}, true, true},
		{Thresholds{MaxRadius: ptr(-1)}, false, false},
		{Thresholds{MaxAmplification: ptr(0.5)}, false, false},
		{Thresholds{MaxRadius: ptr(1), MinTraces: -1}, false, false},
	} {
		err := tc.th.Check(tc.base)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadThresholds)) {
			t.Errorf("%+v baseline %v: %v", tc.th, tc.base, err)
		}
	}
}
