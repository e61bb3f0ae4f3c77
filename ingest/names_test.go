package ingest

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// cutName is what the documented rule makes of a name longer than 256
// bytes, computed here from the rule's words, not from graph.CapName: the
// longest prefix of at most 256−3−8 = 245 bytes that ends before the
// start of a character, "…", and the FNV-1a 32-bit hash of the whole name
// in 8 lowercase hexadecimal digits.
func cutName(s string) string {
	n := 245
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…" + hash8(s)
}

// hash8 is the FNV-1a 32-bit hash of s in 8 hexadecimal digits.
func hash8(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// longNamesTraces is one request whose every name is long: service and
// version (a resource), a SERVER span named by method and route, a CLIENT
// span calling an uninstrumented peer, and a second resource whose names
// are short but begin with the reserved names' rune.
func longNamesTraces(service, version, route, peer, name string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	rs.Resource().Attributes().PutStr("service.version", version)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	srv := spans.AppendEmpty()
	srv.SetTraceID([16]byte{1})
	srv.SetSpanID([8]byte{1})
	srv.SetKind(ptrace.SpanKindServer)
	srv.SetName(name)
	srv.Attributes().PutStr("http.request.method", "GET")
	srv.Attributes().PutStr("http.route", route)
	cl := spans.AppendEmpty()
	cl.SetTraceID([16]byte{1})
	cl.SetSpanID([8]byte{2})
	cl.SetParentSpanID([8]byte{1})
	cl.SetKind(ptrace.SpanKindClient)
	cl.SetName("SELECT")
	cl.Attributes().PutStr("peer.service", peer)

	rs2 := td.ResourceSpans().AppendEmpty()
	rs2.Resource().Attributes().PutStr("service.name", graph.OtherService)
	sp := rs2.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID([16]byte{2})
	sp.SetSpanID([8]byte{3})
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetName(graph.OtherOperation)
	return td
}

// decodeEveryWay decodes td through every path a request takes: the
// protobuf wire decoder, pdata's protobuf unmarshal then AppendTraces,
// OTLP/JSON (AppendRequest), and files (JSON lines and length-prefixed
// protobuf, through ReadFile and its JSON scanner), each with a fresh
// decoder and again with a warm one. It fails unless all give the same
// spans, and returns them.
func decodeEveryWay(t *testing.T, td ptrace.Traces) []graph.Span {
	t.Helper()
	pbBytes, jsonBytes := protoOf(t, td), jsonOf(t, td)
	framed := frame(pbBytes)
	readFile := func(data []byte, name string) []graph.Span {
		var out []graph.Span
		if _, err := NewDecoder(DecoderConfig{}).ReadFile(bytes.NewReader(data), name, func(s []graph.Span) error {
			out = append(out, s...)
			return nil
		}, func(err error) { t.Errorf("%s: %v", name, err) }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out
	}
	warm := NewDecoder(DecoderConfig{})
	paths := []struct {
		name   string
		decode func() ([]graph.Span, error)
	}{
		{"proto", func() ([]graph.Span, error) { return NewDecoder(DecoderConfig{}).AppendRequest(nil, pbBytes, false) }},
		{"pdata", func() ([]graph.Span, error) { return appendRequestPdata(NewDecoder(DecoderConfig{}), nil, pbBytes) }},
		{"json", func() ([]graph.Span, error) { return NewDecoder(DecoderConfig{}).AppendRequest(nil, jsonBytes, true) }},
		{"json lines file", func() ([]graph.Span, error) { return readFile(append(jsonBytes, '\n'), "x.jsonl"), nil }},
		{"proto file", func() ([]graph.Span, error) { return readFile(framed, "x.pb"), nil }},
		{"warm proto", func() ([]graph.Span, error) { return warm.AppendRequest(nil, pbBytes, false) }},
		{"warm proto again", func() ([]graph.Span, error) { return warm.AppendRequest(nil, pbBytes, false) }},
		{"warm json", func() ([]graph.Span, error) { return warm.AppendRequest(nil, jsonBytes, true) }},
	}
	var want []graph.Span
	for i, p := range paths {
		got, err := p.decode()
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if i == 0 {
			want = got
			continue
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d spans, proto %d", p.name, len(got), len(want))
		}
		for k := range got {
			if got[k] != want[k] {
				t.Fatalf("%s: span %d differs:\n%+v\nproto:\n%+v", p.name, k, got[k], want[k])
			}
		}
	}
	return want
}

// Every name a span brings is cut to 256 bytes on a character boundary,
// marked and hashed, identically in every decoding path; a name that
// begins with the reserved rune loses it; short names are untouched.
func TestNamesCapped(t *testing.T) {
	service := strings.Repeat("s", 10<<10)        // 10 KiB, ASCII: cut to exactly 256 bytes
	version := strings.Repeat("é", 300)           // 2-byte characters: byte 245 is inside one
	route := "/" + strings.Repeat("€", 200)       // "GET " + route: 3-byte characters
	peer := strings.Repeat("p", graph.MaxNameLen) // exactly the limit: kept
	name := strings.Repeat("n", graph.MaxNameLen+1)
	spans := decodeEveryWay(t, longNamesTraces(service, version, route, peer, name))
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	srv, cl, other := spans[0], spans[1], spans[2]
	for _, c := range []struct {
		what, got, want string
		size            int
	}{
		{"service", srv.Service, cutName(service), 256},
		{"client span's service", cl.Service, cutName(service), 256},
		{"version", srv.Version, cutName(version), 255}, // 122 "é" (244 bytes), then 11
		// "GET /" is 5 bytes, then 3-byte characters: 245−5 = 240 = 80·3,
		// the cut falls on a boundary.
		{"operation", srv.Operation, "GET /" + strings.Repeat("€", 80) + "…" + hash8("GET "+route), 256},
		{"span name", srv.Name, cutName(name), 256},
		{"peer", cl.Peer, peer, 256},
		{"reserved service", other.Service, "<" + strings.TrimPrefix(graph.OtherService, "⟨"), len(graph.OtherService) - 2},
		{"reserved operation", other.Operation, "<" + strings.TrimPrefix(graph.OtherOperation, "⟨"), len(graph.OtherOperation) - 2},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
		if !utf8.ValidString(c.got) {
			t.Errorf("%s: not valid UTF-8: %q", c.what, c.got)
		}
		if len(c.got) != c.size {
			t.Errorf("%s: %d bytes, want %d", c.what, len(c.got), c.size)
		}
	}
	if !srv.Truncated || !cl.Truncated {
		t.Errorf("spans with cut names not marked: %v %v", srv.Truncated, cl.Truncated)
	}
	if other.Truncated {
		t.Error("a span whose names were only unreserved is marked truncated")
	}
	// Two names that differ only past the cut stay two names.
	a := decodeEveryWay(t, longNamesTraces(service+"a", "v", "/r", "p", "n"))
	b := decodeEveryWay(t, longNamesTraces(service+"b", "v", "/r", "p", "n"))
	if a[0].Service == b[0].Service || a[0].Service[:245] != b[0].Service[:245] {
		t.Errorf("names differing past the cut: %q and %q", a[0].Service, b[0].Service)
	}
	// Short names: nothing changes, nothing is marked.
	short := decodeEveryWay(t, longNamesTraces("frontend", "1.2.3", "/dispatch", "redis", "HTTP GET"))
	if s := short[0]; s.Service != "frontend" || s.Version != "1.2.3" || s.Operation != "GET /dispatch" ||
		s.Name != "HTTP GET" || short[1].Peer != "redis" || s.Truncated || short[1].Truncated {
		t.Errorf("short names changed: %+v %+v", short[0], short[1])
	}
}

// The rule itself, on edge cases: the limit and one past it, invalid
// UTF-8 (the cut backs off at most three bytes), and a reserved name that
// is also long.
func TestCapName(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
	}{
		{strings.Repeat("x", 256), strings.Repeat("x", 256)},
		{strings.Repeat("x", 257), cutName(strings.Repeat("x", 257))},
		// Continuation bytes only (not UTF-8): back off three, no more.
		{strings.Repeat("\xa9", 300), strings.Repeat("\xa9", 242) + "…" + hash8(strings.Repeat("\xa9", 300))},
		{"⟨" + strings.Repeat("y", 300), cutName("<" + strings.Repeat("y", 300))},
		{"⟨x", "<x"},
		{"x⟨", "x⟨"},
	} {
		if !graph.NeedsCap(c.in) && c.in != c.want {
			t.Errorf("NeedsCap(%q) = false", c.in)
		}
		got, _ := graph.CapName(nil, c.in)
		if string(got) != c.want {
			t.Errorf("CapName(%.20q…) = %q, want %q", c.in, got, c.want)
		}
		if len(got) > graph.MaxNameLen {
			t.Errorf("CapName(%.20q…): %d bytes", c.in, len(got))
		}
	}
}
