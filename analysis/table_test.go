package analysis_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
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
