package analysis_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
	"github.com/stormradius/stormradius/sim"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"frontend GET /dispatch": "frontend GET /dispatch",
		"日本語 サービス":               "日本語 サービス",
		"\x1b[31mred":            `"\x1b[31mred"`,
		"a\x00b":                 `"a\x00b"`,
		"tab\there":              `"tab\there"`,
		"\xff":                   `"\xff"`,
		"evil\u202egnp.exe":      `"evil\u202egnp.exe"`,
		"line\nbreak":            `"line\nbreak"`,
		"":                       "",
	} {
		if got := analysis.Printable(in); got != want {
			t.Errorf("Printable(%q) = %s, want %s", in, got, want)
		}
	}
}

// Names from traces cannot act on the terminal or break the table, and a
// virtual service that owns failures is listed, marked virtual.
func TestTableHostileNamesAndVirtualOwners(t *testing.T) {
	b := New(1)
	api := b.Root("\x1b[2Jevil\xff", "GET /\x00x", 0, 20*ms, Failed)
	b.Span(api, graph.KindClient, "\x1b[2Jevil\xff", "GET", 1*ms, 2*ms, Peer("redis"), Failed)
	doc, _ := analysis.InMemory(graph.Lists{b.Spans}, analysis.Config{}, 1)
	var out bytes.Buffer
	if err := doc.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, bad := range []string{"\x1b", "\x00", "\xff"} {
		if strings.Contains(s, bad) {
			t.Errorf("table contains %q:\n%s", bad, s)
		}
	}
	if !strings.Contains(s, `"\x1b[2Jevil\xff GET /\x00x"`) {
		t.Errorf("API name not quoted:\n%s", s)
	}
	// redis owns the only failure event: it must be in the services table.
	var redis string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "redis (virtual)") {
			redis = line
		}
	}
	if f := strings.Fields(redis); len(f) < 2 || f[len(f)-2] != "1" {
		t.Errorf("virtual owner row %q, want it listed with 1 owned failure:\n%s", redis, s)
	}
	for _, want := range []string{"ROOT ERRORS", "W/ FAILURE"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// The fleet's mean radius, a mean of the APIs' max radius, is printed
// under a name of its own, apart from the APIs' MEAN R/TRACE column, a
// mean over traces. X → Y → Z and W → Z retry naively once and Z always
// fails: every trace of X GET /X has radius 2 (Y retries Z, X retries Y),
// every one of W GET /W radius 1 (W retries Z). The APIs' means are 2 and
// 1, their max radius 2 and 1, and the mean of those 1.5, which is no
// API's.
func TestTableFleetMeanOfMaxRadiusApart(t *testing.T) {
	naive := sim.Policy{Retry: sim.RetryNaive, Retries: 1, ResendAttr: true}
	_, doc := run(t, sim.Scenario{
		Services: []sim.Service{
			{Name: "X", Operation: "GET /X", Policy: naive, Calls: []sim.Edge{{To: "Y"}}},
			{Name: "Y", Operation: "GET /Y", Policy: naive, Calls: []sim.Edge{{To: "Z"}}},
			{Name: "W", Operation: "GET /W", Policy: naive, Calls: []sim.Edge{{To: "Z"}}},
			{Name: "Z", Operation: "GET /Z", Policy: naive},
		},
		Root: "X", Roots: []string{"W"}, Traces: 20, Seed: 3,
		Faults: []sim.Fault{{Service: "Z", Rate: 1, Persistent: true}},
	})
	if x, w := api(t, doc, "X GET /X"), api(t, doc, "W GET /W"); x.MaxRadius != 2 || x.MeanRadius != 2 || w.MaxRadius != 1 || w.MeanRadius != 1 {
		t.Fatalf("X: max %d mean %v, W: max %d mean %v; want 2, 2, 1, 1", x.MaxRadius, x.MeanRadius, w.MaxRadius, w.MeanRadius)
	}
	if doc.Fleet.MaxRadius != 2 || doc.Fleet.MeanMaxRadius != 1.5 || doc.Fleet.MeanRadius != 1.5 {
		t.Errorf("fleet %+v: want max radius 2, mean max radius 1.5 (mean radius the same)", doc.Fleet)
	}
	var out bytes.Buffer
	if err := doc.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[1], "fleet: max radius 2, mean of the APIs' max radius 1.50;") {
		t.Errorf("fleet line %q", lines[1])
	}
	// The API table: MEAN R/TRACE right-aligned over 2.00 and 1.00.
	head := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "API ") })
	if head < 0 || head+2 >= len(lines) {
		t.Fatalf("no API table:\n%s", out.String())
	}
	col := strings.Index(lines[head], " MEAN R/TRACE ")
	if col < 0 || strings.Contains(lines[head], " MEAN R ") {
		t.Fatalf("API header %q: want MEAN R/TRACE, no bare MEAN R", lines[head])
	}
	end := col + len(" MEAN R/TRACE")
	want := map[string]string{"W GET /W": "1.00", "X GET /X": "2.00"}
	for _, l := range lines[head+1 : head+3] {
		name := strings.Fields(l)[0] + " " + strings.Fields(l)[1] + " " + strings.Fields(l)[2]
		m, ok := want[name]
		if !ok || len(l) < end || l[end-len(m):end] != m || l[end-len(m)-1] != ' ' {
			t.Errorf("row %q: want %s ending at column %d, under MEAN R/TRACE", l, m, end)
		}
		delete(want, name)
	}
	if len(want) != 0 {
		t.Errorf("rows missing: %v\n%s", want, out.String())
	}
	if !strings.Contains(out.String(), "MAX R, MEAN R/TRACE: the largest and the mean radius over those traces.") {
		t.Errorf("no legend for MEAN R/TRACE:\n%s", out.String())
	}
}
