// Package sampling is stormradius' end-to-end suite for sampled fleets
// (issue 27): it runs real OpenTelemetry Collectors with the sampling
// configs shipped in deploy/collector — tail-sampling.yaml on the
// collector at the v0.161 line (e2e/loadbalancing/otelcol: tail_sampling,
// transform), probabilistic-sampling.yaml on e2e/collector's (v0.165.0:
// probabilistic_sampler) — on generated traces with and without errors,
// into an OTLP sink in the test, and checks what they kept and what they
// recorded about it: which traces, whole, with which adjusted count or
// tracestate. Then it puts a real `stormradius serve` behind them and
// checks its estimates against `stormradius analyze` of the unsampled
// traffic, within the standard errors the samplers' probabilities give,
// and its figures against `stormradius analyze` of the kept traffic,
// exactly. README.md says how to run it.
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
	code := m.Run()
	if suite.tmp != "" {
		os.RemoveAll(suite.tmp)
	}
	os.Exit(code)
}

// The suite's shared state, built once by setup.
var suite struct {
	setup e2ekit.Once

	tmp         string // removed by TestMain
	configs     string // deploy/collector
	otelcol     string // e2e/collector's collector (v0.165.0), cached
	lbcol       string // e2e/loadbalancing's collector (v0.161 line), cached
	stormradius string // cmd/stormradius, built for this run
}

// setup builds both collectors, once (or takes them from the cache the
// other suites share: the same keys), and stormradius beside them; a
// test whose setup failed fails with the reason.
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
	repo := filepath.Dir(e2e)
	suite.configs = filepath.Join(repo, "deploy", "collector")
	if suite.tmp, err = os.MkdirTemp("", "stormradius-e2e-sampling-"); err != nil {
		return err
	}
	// stormradius builds while the collectors do (or come from the
	// cache); the collectors one after the other: each cold build takes
	// the machine's cores.
	collectors := func() error {
		var err error
		if suite.lbcol, err = e2ekit.LBCollectorBuild(e2e).Build(); err != nil {
			return err
		}
		suite.otelcol, err = e2ekit.CollectorBuild(e2e).Build()
		return err
	}
	bin := filepath.Join(suite.tmp, "bin")
	if err := e2ekit.BuildCommands(repo, bin, collectors, "stormradius"); err != nil {
		return err
	}
	suite.stormradius = filepath.Join(bin, "stormradius")
	for _, f := range []string{"tail-sampling.yaml", "probabilistic-sampling.yaml"} {
		if _, err := os.Stat(filepath.Join(suite.configs, f)); err != nil {
			return fmt.Errorf("the shipped config: %v", err)
		}
	}
	return nil
}
