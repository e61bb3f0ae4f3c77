package app

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/stormradius/stormradius/ingest"
)

// SamplingFlags registers, on fs, the flags that say where each span's
// sampling probability is read from, or what it is assumed to be
// (docs/SPEC.md §2, "sampling") — serve, cmd/ingest, analyze and whatif
// take the same: --sampling-adjusted-count-attribute,
// --sampling-probability and --sampling-service-probability. The
// function returned, after parsing, gives the ingest.SamplingConfig they
// describe, or an error naming the flag that is wrong.
func SamplingFlags(fs *flag.FlagSet) func() (ingest.SamplingConfig, error) {
	key := fs.String("sampling-adjusted-count-attribute", ingest.DefaultAdjustedCountKey,
		`span attribute (else resource attribute) holding how many spans a sampled span stands for, 1/p, as Tempo's span_multiplier_key ("" or "none": none)`)
	p := fs.Float64("sampling-probability", 0,
		"probability every span that records none (no adjusted count, no tracestate ot=th, no Jaeger sampler tags) was sampled with, 0 < P ≤ 1: it counts 1/P times (0: unknown, counts once)")
	svc := fs.String("sampling-service-probability", "",
		`probability per service, before --sampling-probability: "svc=P,svc2=P"`)
	return func() (ingest.SamplingConfig, error) {
		c := ingest.SamplingConfig{AdjustedCountKey: strings.TrimSpace(*key), Probability: *p}
		if c.AdjustedCountKey == "" {
			c.AdjustedCountKey = ingest.NoAdjustedCountKey
		}
		if err := checkProbabilityFlag("sampling-probability", *p); err != nil {
			return c, err
		}
		m, err := ingest.ParseServiceProbabilities(*svc)
		if err != nil {
			return c, fmt.Errorf("--sampling-service-probability: %w", err)
		}
		if len(m) > 0 {
			c.ServiceProbability = m
		}
		return c, nil
	}
}

// checkProbabilityFlag checks the probability p given to flag name: 0 (none)
// or 0 < p ≤ 1.
func checkProbabilityFlag(name string, p float64) error {
	if p == 0 {
		return nil
	}
	if err := (ingest.SamplingConfig{Probability: p}).Validate(); err != nil {
		return fmt.Errorf("--%s %v: want 0 < P ≤ 1 (0: none)", name, p)
	}
	return nil
}

// inputSamplingFlags registers SamplingFlags and, per input of serve and
// cmd/ingest, --otlp-sampling-probability and
// --kafka-sampling-probability, which override --sampling-probability
// for their input when given. The function returned gives each input's
// ingest.SamplingConfig, or the errors naming the flags that are wrong.
func inputSamplingFlags(fs *flag.FlagSet) func() (otlp, kafka, base ingest.SamplingConfig, err error) {
	sampling := SamplingFlags(fs)
	otlpP := fs.Float64("otlp-sampling-probability", 0, "--sampling-probability for the spans received over OTLP, when given (0: none)")
	kafkaP := fs.Float64("kafka-sampling-probability", 0, "--sampling-probability for the spans read from Kafka, when given (0: none)")
	return func() (ingest.SamplingConfig, ingest.SamplingConfig, ingest.SamplingConfig, error) {
		c, err := sampling()
		otlp, oerr := inputSampling(fs, c, "otlp-sampling-probability", *otlpP)
		kafka, kerr := inputSampling(fs, c, "kafka-sampling-probability", *kafkaP)
		return otlp, kafka, c, errors.Join(err, oerr, kerr)
	}
}

// inputSampling is c for one input whose own probability flag name (value
// p) overrides c.Probability when it was given.
func inputSampling(fs *flag.FlagSet, c ingest.SamplingConfig, name string, p float64) (ingest.SamplingConfig, error) {
	if !Given(fs, name) {
		return c, nil
	}
	if err := checkProbabilityFlag(name, p); err != nil {
		return c, err
	}
	c.Probability = p
	return c, nil
}
