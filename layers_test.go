package stormradius

import (
	"bufio"
	"bytes"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// layers places every package of the module: a package may import only
// packages of lower layers (docs/ARCHITECTURE.md, "Packages"). A new
// package must be placed here, where the data path puts it.
var layers = map[string]int{
	// Leaves: import nothing of ours.
	"graph/wire":               0, // the varint reader of the stored encodings
	"query/timerange":          0, // the time arguments users give
	"bearer":                   0, // bearer tokens for every server
	"schema":                   0, // migrations, embedded
	"gate":                     0, // the rollout decision, pure
	"ownership":                0, // the claim-protocol middleware, standalone
	"sim":                      0, // the trace simulator
	"internal/chtest":          0, // ClickHouse test databases
	"internal/secret":          0, // credentials kept out of messages
	"internal/certs":           0, // TLS certificates that rotate, mutual TLS
	"internal/health":          0, // /readyz: ready, and what is wrong with what
	"internal/chdsn":           1, // ClickHouse DSNs: TLS and password parameters
	"internal/certs/certstest": 1, // test CAs
	"deploy":                   0, // checks of the deployable artefacts against the binaries

	// The model and the analyses (pure: no I/O).
	"graph":                     1,
	"graph/graphtest":           2,
	"attribution":               2,
	"radius":                    2,
	"ingest":                    2, // OTLP decoding into graph.Span
	"analysis":                  3,
	"analysis/plan":             4, // the adoption planner, pure
	"store":                     4, // the storage contract
	"pipeline":                  5, // the stream
	"offline":                   5, // the file engine
	"store/internal/*":          5,
	"store/sqlite":              6,
	"store/clickhouse":          6,
	"store/storetest":           6,
	"ingest/otlp":               6, // receivers hand spans to the stream
	"ingest/kafka":              6,
	"ingest/chsource":           6, // the clickhouseexporter's table as a source
	"ingest/chsource/oteltable": 0, // the exporter's table as a test fixture
	"query":                     7, // the read side
	"internal/storeurl":         7,
	"internal/fixture":          7,
	"internal/corpus":           3, // the benchmark corpora (simulated meshes of every shape)
	"web":                       8,

	// Wiring.
	"internal/app":  9,
	"internal/demo": 10,
	"cmd/*":         11,
}

const module = "github.com/stormradius/stormradius"

// layerOf returns the layer of a package path relative to the module.
func layerOf(rel string) (int, bool) {
	if l, ok := layers[rel]; ok {
		return l, true
	}
	for pat, l := range layers {
		if dir, ok := strings.CutSuffix(pat, "/*"); ok && strings.HasPrefix(rel, dir+"/") {
			return l, true
		}
	}
	return 0, false
}

// TestLayers reads the module's import graph with `go list -deps` and
// checks that every import of ours runs down the layers.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var bad []string
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		pkg, imports, _ := strings.Cut(sc.Text(), "|")
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if !ok {
			continue // the root (this map) and other modules
		}
		seen++
		l, ok := layerOf(rel)
		if !ok {
			bad = append(bad, rel+": not placed in a layer (layers_test.go)")
			continue
		}
		for _, imp := range strings.Fields(imports) {
			irel, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			il, ok := layerOf(irel)
			if ok && il >= l {
				bad = append(bad, rel+" (layer "+strconv.Itoa(l)+") imports "+irel+" (layer "+strconv.Itoa(il)+")")
			}
		}
	}
	if seen < 30 {
		t.Fatalf("go list gave %d packages of the module: not the module's import graph", seen)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}
