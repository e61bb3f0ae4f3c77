package e2ekit

import (
	"path/filepath"
	"sort"
)

// The suites' two collectors, each defined once here because more than
// one suite runs it (e2e/sampling runs both): a suite that built one
// with other inputs would compute another key, and each build would sweep
// the other's binary as stale. e2e is the directory of the suites (the
// repository's e2e/).

// CollectorBuild is e2e/collector's collector: the package otelcol/ of
// that module (core and contrib v0.165.0), keyed by the module's go.mod,
// go.sum and the program's sources, cached as otelcol-KEY.
func CollectorBuild(e2e string) CachedBuild {
	mod := filepath.Join(e2e, "collector")
	return CachedBuild{
		What: "the collector", Prefix: "otelcol-", File: "otelcol", Dir: mod, Pkg: "./otelcol",
		Inputs: append([]string{filepath.Join(mod, "go.mod"), filepath.Join(mod, "go.sum")}, sources(filepath.Join(mod, "otelcol"))...),
		Cold:   "minutes",
	}
}

// LBCollectorBuild is e2e/loadbalancing's collector: the module
// loadbalancing/otelcol/ (the whole collector at the v0.161 line, with
// contrib's load_balancing exporter and the tail_sampling and transform
// processors), keyed by its go.mod, go.sum and sources, cached as
// lbcol-KEY.
func LBCollectorBuild(e2e string) CachedBuild {
	dir := filepath.Join(e2e, "loadbalancing", "otelcol")
	return CachedBuild{
		What: "the collector (v0.161 line)", Prefix: "lbcol-", File: "otelcol", Dir: dir, Pkg: ".",
		Inputs: append([]string{filepath.Join(dir, "go.mod"), filepath.Join(dir, "go.sum")}, sources(dir)...),
		Cold:   "minutes",
	}
}

// sources are the Go files of dir, sorted.
func sources(dir string) []string {
	srcs, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	sort.Strings(srcs)
	return srcs
}
