package main

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
)

// analyze and whatif take the sampling flags: a bad value is a usage
// error (exit 2) that names the flag, nothing on stdout; good ones are
// taken.
func TestSamplingFlagsUsage(t *testing.T) {
	p, _ := naiveChainFile(t, 1)
	whatif := []string{"whatif", "--traces", p, "--api", "A GET /A", "--fail", "D"}
	for _, cmd := range [][]string{{"analyze", p}, whatif} {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--sampling-probability", "1.5"}, "--sampling-probability 1.5: want 0 < P ≤ 1 (0: none)"},
			{[]string{"--sampling-probability", "NaN"}, "--sampling-probability NaN: want 0 < P ≤ 1 (0: none)"},
			{[]string{"--sampling-service-probability", "A=2"}, `--sampling-service-probability: "A=2": 2: want 0 < p ≤ 1`},
			{[]string{"--sampling-service-probability", "A"}, `--sampling-service-probability: "A": want service=probability`},
		} {
			code, out, stderr := runCmd(t, append(slices.Clone(cmd), c.args...)...)
			if code != exitUsage || out != "" || stderr != "stormradius "+cmd[0]+": "+c.want+"\n" {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", cmd[0], c.args, code, out, stderr, c.want)
			}
		}
		args := append(slices.Clone(cmd), "--sampling-probability", "0.5", "--sampling-service-probability", "A=0.25,B=1", "--sampling-adjusted-count-attribute", "")
		if code, _, stderr := runCmd(t, args...); code != 0 {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
	q, ok := parseWhatIf([]string{"--traces", p, "--api", "A GET /A", "--fail", "D", "--claim-header", "x-c",
		"--sampling-probability", "0.5", "--sampling-service-probability", "A=0.25", "--sampling-adjusted-count-attribute", "mult"}, io.Discard)
	if !ok || q.decoder.ClaimHeader != "x-c" || q.decoder.AdjustedCountKey != "mult" || q.decoder.Probability != 0.5 ||
		!maps.Equal(q.decoder.ServiceProbability, map[string]float64{"A": 0.25}) {
		t.Fatalf("whatif's decoder: %+v", q.decoder)
	}
}

// readInputs decodes with the configuration it is given.
func TestReadInputsSampling(t *testing.T) {
	p, _ := naiveChainFile(t, 1)
	var spans []graph.Span
	in := readInputs(context.Background(), []string{p},
		ingest.DecoderConfig{SamplingConfig: ingest.SamplingConfig{Probability: 0.5, ServiceProbability: map[string]float64{"A": 0.25}}},
		strings.NewReader(""), io.Discard, func(s []graph.Span) error {
			spans = append(spans, s...)
			return nil
		})
	if in.spans != 29 || len(spans) != 29 {
		t.Fatalf("%d spans read, %d emitted", in.spans, len(spans))
	}
	for _, s := range spans {
		want := 2.0
		if s.Service == "A" {
			want = 4
		}
		if s.Sampling != graph.SamplingConfigured || s.AdjustedCount != want {
			t.Fatalf("%s %s: %v %v, want configured %v", s.Service, s.Name, s.Sampling, s.AdjustedCount, want)
		}
	}
}
