// Package hotrod is stormradius' end-to-end test with Jaeger's HotROD
// demo (github.com/jaegertracing/jaeger/examples/hotrod v1.76.0, a tool
// of this module): it builds HotROD and stormradius, runs HotROD's `all`
// exporting to `stormradius serve`, drives HotROD's frontend with
// concurrent dispatches and checks what stormradius reports against what
// HotROD answered and logged. README.md says what it checks and how to
// run it.
package hotrod

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stormradius/stormradius/e2e/e2ekit"
)

// hotrodPkg is HotROD's main package, the tool this module requires.
const hotrodPkg = "github.com/jaegertracing/jaeger/examples/hotrod"

// logLines is how many of a process's last lines a failed test logs.
const logLines = 40

func TestMain(m *testing.M) {
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
	repo        string // the stormradius module's root
	stormradius string // the stormradius binary
	hotrod      string // HotROD's binary (cached)
}

// setup builds both programs, once; a test whose setup failed fails with
// the reason.
func setup(t *testing.T) {
	t.Helper()
	suite.setup.Do(t, build)
}

func build() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	suite.repo = filepath.Clean(filepath.Join(wd, "..", ".."))
	if suite.tmp, err = os.MkdirTemp("", "stormradius-e2e-hotrod-"); err != nil {
		return err
	}
	// Both build at once.
	suite.stormradius = filepath.Join(suite.tmp, "stormradius")
	return e2ekit.BuildCommands(suite.repo, suite.tmp, func() error { return buildHotROD(wd) }, "stormradius")
}

// buildHotROD builds HotROD into the cache shared with the other suites
// (hotrod-KEY), keyed by this module's go.mod and go.sum (which pin HotROD
// and its dependencies), or takes it from there: the cold build takes
// about a minute on two cores.
func buildHotROD(moduleDir string) error {
	var err error
	suite.hotrod, err = e2ekit.CachedBuild{
		What: "HotROD", Prefix: "hotrod-", File: "hotrod", Dir: moduleDir, Pkg: hotrodPkg,
		Inputs: []string{filepath.Join(moduleDir, "go.mod"), filepath.Join(moduleDir, "go.sum")},
		Cold:   "about a minute",
	}.Build()
	return err
}
