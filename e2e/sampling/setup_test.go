// Package sampling is stormradius' end-to-end suite for sampled fleets
// (issue 27): it runs real OpenTelemetry Collectors with the sampling
// configs shipped in deploy/collector — tail-sampling.yaml on the
// collector at the v0.161 line (e2e/loadbalancing/otelcol: tail_sampling,
// transform), probabilistic-sampling.yaml on e2e/collector's (v0.165.0:
// probabilistic_sampler) — on generated traces with and without errors,
// into an OTLP sink in the test, and checks what they kept and what they
// recorded about it: which traces, whole, with which adjusted count or
// tracestate. README.md says how to run it.
package sampling

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stormradius/stormradius/e2e/e2ekit"
)

// defaultParallel is how many subtests run at once unless -parallel says
// otherwise: each runs one collector and mostly waits (decision_wait).
const defaultParallel = 4

func TestMain(m *testing.M) {
	e2ekit.DefaultParallel(defaultParallel)
	os.Exit(m.Run())
}

// The suite's shared state, built once by setup.
var suite struct {
	setup e2ekit.Once

	configs string // deploy/collector
	otelcol string // e2e/collector's collector (v0.165.0), cached
	lbcol   string // e2e/loadbalancing's collector (v0.161 line), cached
}

// setup builds both collectors, once (or takes them from the cache the
// other suites share: the same keys); a test whose setup failed fails
// with the reason.
func setup(t *testing.T) {
	t.Helper()
	suite.setup.Do(t, build)
}

func build() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	e2e := filepath.Dir(wd)
	suite.configs = filepath.Join(e2e, "..", "deploy", "collector")
	// One after the other: each cold build takes the machine's cores.
	if suite.lbcol, err = e2ekit.LBCollectorBuild(e2e).Build(); err != nil {
		return err
	}
	if suite.otelcol, err = e2ekit.CollectorBuild(e2e).Build(); err != nil {
		return err
	}
	for _, f := range []string{"tail-sampling.yaml", "probabilistic-sampling.yaml"} {
		if _, err := os.Stat(filepath.Join(suite.configs, f)); err != nil {
			return fmt.Errorf("the shipped config: %v", err)
		}
	}
	return nil
}
