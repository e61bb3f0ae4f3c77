package query

import (
	"errors"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/radius"
)

func f(x float64) *float64 { return &x }

// The seed's chain A→…→G, D failing, R = 1, B = 0.1 (docs/SPEC.md §4.7 table).
func TestWhatIfChain(t *testing.T) {
	chain := []string{"A", "B", "C", "D", "E", "F", "G"}
	for pol, want := range map[string][]float64{
		"naive":     {1, 2, 4, 8, 8, 8, 8},
		"budget":    {1, 1.1, 1.21, 1.331, 1.331, 1.331, 1.331},
		"ownership": {1, 1, 1, 1.1, 1.1, 1.1, 1.1},
	} {
		a, err := WhatIf(WhatIfRequest{Chain: chain, Fail: []string{"D"}, Retries: f(1), Budget: f(0.1), Policy: pol}, nil, analysis.Config{})
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range chain {
			if a.Requests[n] != want[i] || a.Order[i] != n {
				t.Errorf("%s: %s = %v, want %v (order %v)", pol, n, a.Requests[n], want[i], a.Order)
			}
		}
	}
}

func TestWhatIfErrors(t *testing.T) {
	for _, tc := range []struct {
		req  WhatIfRequest
		want error
	}{
		{WhatIfRequest{Fail: []string{"A"}}, ErrBadRequest},
		{WhatIfRequest{Chain: []string{"A"}}, ErrBadRequest},
		{WhatIfRequest{Chain: []string{"A", "B", "A"}, Fail: []string{"B"}}, ErrBadRequest},
		{WhatIfRequest{Chain: []string{"A"}, Fail: []string{"Z"}}, ErrBadRequest},
		{WhatIfRequest{Chain: []string{"A"}, Fail: []string{"A"}, Budget: f(5)}, ErrBadRequest},
		{WhatIfRequest{Chain: []string{"A"}, Fail: []string{"A"}, Policy: "yolo"}, ErrBadRequest},
		{WhatIfRequest{API: "nope", Fail: []string{"A"}}, ErrNotFound},
		{WhatIfRequest{API: "nope", Fail: []string{"A"}}, ErrNotFound},
	} {
		if _, err := WhatIf(tc.req, analysis.NewState(), analysis.Config{}); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.req, err, tc.want)
		}
	}
	chain := make([]string, 201)
	for i := range chain {
		chain[i] = string(rune('a'+i%26)) + string(rune('0'+i/26))
	}
	if _, err := WhatIf(WhatIfRequest{Chain: chain, Fail: []string{chain[200]}, Retries: f(1000)}, nil, analysis.Config{}); !errors.Is(err, radius.ErrOverflow) {
		t.Errorf("1001^200: %v, want ErrOverflow", err)
	}
}
