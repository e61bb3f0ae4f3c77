package app_test

import (
	"flag"
	"maps"
	"testing"

	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/internal/app"
)

// The sampling flags reach the OTLP and Kafka decoders, from the command
// line or STORMRADIUS_<FLAG>, the per-input probability overriding the
// default when given (0 included: none), for serve and cmd/ingest alike.
func TestSamplingFlag(t *testing.T) {
	parse := func(role app.Role, args ...string) (app.Config, error) {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		build := app.Flags(fs, role)
		if err := fs.Parse(append([]string{"--kafka-brokers", "k:9092"}, args...)); err != nil {
			t.Fatal(err)
		}
		if err := app.ApplyEnv(fs); err != nil {
			t.Fatal(err)
		}
		return build()
	}
	want := func(role app.Role, args []string, otlp, kafka ingest.SamplingConfig) {
		t.Helper()
		c, err := parse(role, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		same := func(a, b ingest.SamplingConfig) bool {
			return a.AdjustedCountKey == b.AdjustedCountKey && a.Probability == b.Probability && maps.Equal(a.ServiceProbability, b.ServiceProbability)
		}
		if !same(c.OTLP.Sampling, otlp) || !same(c.Kafka.Sampling, kafka) {
			t.Fatalf("%v: OTLP %+v, Kafka %+v; want %+v, %+v", args, c.OTLP.Sampling, c.Kafka.Sampling, otlp, kafka)
		}
	}
	def := ingest.SamplingConfig{AdjustedCountKey: "sampling.adjusted_count"}
	for _, role := range []app.Role{app.Serve, app.Ingest} {
		want(role, nil, def, def)
	}
	svc := map[string]float64{"frontend": 0.5, "redis": 1}
	both := ingest.SamplingConfig{AdjustedCountKey: "tempo.multiplier", Probability: 0.1, ServiceProbability: svc}
	want(app.Serve, []string{"--sampling-adjusted-count-attribute", "tempo.multiplier", "--sampling-probability", "0.1",
		"--sampling-service-probability", "frontend=0.5, redis=1"}, both, both)
	otlp := both
	otlp.Probability = 0.5
	kafka := both
	kafka.Probability = 0
	want(app.Ingest, []string{"--sampling-adjusted-count-attribute", "tempo.multiplier", "--sampling-probability", "0.1",
		"--sampling-service-probability", "frontend=0.5,redis=1", "--otlp-sampling-probability", "0.5", "--kafka-sampling-probability", "0"}, otlp, kafka)
	none := ingest.SamplingConfig{AdjustedCountKey: ingest.NoAdjustedCountKey}
	want(app.Serve, []string{"--sampling-adjusted-count-attribute", ""}, none, none)
	want(app.Serve, []string{"--sampling-adjusted-count-attribute", "none"}, none, none)

	t.Setenv("STORMRADIUS_SAMPLING_PROBABILITY", "0.25")
	t.Setenv("STORMRADIUS_KAFKA_SAMPLING_PROBABILITY", "1")
	t.Setenv("STORMRADIUS_SAMPLING_SERVICE_PROBABILITY", "frontend=0.5,redis=1")
	want(app.Serve, nil, ingest.SamplingConfig{AdjustedCountKey: "sampling.adjusted_count", Probability: 0.25, ServiceProbability: svc},
		ingest.SamplingConfig{AdjustedCountKey: "sampling.adjusted_count", Probability: 1, ServiceProbability: svc})
	want(app.Serve, []string{"--sampling-probability", "0.5", "--sampling-service-probability", ""},
		ingest.SamplingConfig{AdjustedCountKey: "sampling.adjusted_count", Probability: 0.5},
		ingest.SamplingConfig{AdjustedCountKey: "sampling.adjusted_count", Probability: 1})
	t.Setenv("STORMRADIUS_SAMPLING_ADJUSTED_COUNT_ATTRIBUTE", "")
	want(app.Serve, []string{"--kafka-sampling-probability", "0.5"},
		ingest.SamplingConfig{AdjustedCountKey: "none", Probability: 0.25, ServiceProbability: svc},
		ingest.SamplingConfig{AdjustedCountKey: "none", Probability: 0.5, ServiceProbability: svc})
}

func TestSamplingFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sampling-probability", "1.5"}, "--sampling-probability 1.5: want 0 < P ≤ 1 (0: none)"},
		{[]string{"--sampling-probability", "-0.1"}, "--sampling-probability -0.1: want 0 < P ≤ 1 (0: none)"},
		{[]string{"--sampling-probability", "NaN"}, "--sampling-probability NaN: want 0 < P ≤ 1 (0: none)"},
		{[]string{"--otlp-sampling-probability", "2"}, "--otlp-sampling-probability 2: want 0 < P ≤ 1 (0: none)"},
		{[]string{"--kafka-brokers", "k:9092", "--kafka-sampling-probability", "-1"}, "--kafka-sampling-probability -1: want 0 < P ≤ 1 (0: none)"},
		{[]string{"--sampling-service-probability", "frontend=0"}, `--sampling-service-probability: "frontend=0": 0: want 0 < p ≤ 1`},
		{[]string{"--sampling-service-probability", "frontend"}, `--sampling-service-probability: "frontend": want service=probability`},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		build := app.Flags(fs, app.Ingest)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if _, err := build(); err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
