package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/graph"
)

// prettyDoc is a whole-file OTLP/JSON document, pretty-printed as in
// opentelemetry-proto's examples: two resources, three spans (hex ids in
// upper case, timestamps as numbers and as strings, kind as a number and as
// a name, attributes of several types, one nested).
const prettyDoc = `{
  "resourceSpans": [
    {
      "resource": {
        "attributes": [
          { "key": "service.name", "value": { "stringValue": "checkout" } },
          { "key": "service.version", "value": { "stringValue": "2.1.0" } }
        ]
      },
      "scopeSpans": [
        {
          "scope": { "name": "manual", "version": "1.0.0" },
          "spans": [
            {
              "traceId": "5B8EFFF798038103D269B633813FC60C",
              "spanId": "EEE19B7EC3C1B174",
              "name": "POST /orders",
              "kind": 2,
              "startTimeUnixNano": 1544712660000000000,
              "endTimeUnixNano": "1544712661000000000",
              "attributes": [
                { "key": "http.request.method", "value": { "stringValue": "POST" } },
                { "key": "http.route", "value": { "stringValue": "/orders" } },
                { "key": "http.response.status_code", "value": { "intValue": "503" } },
                {
                  "key": "http.response.header.x-error-claim",
                  "value": {
                    "arrayValue": {
                      "values": [ { "stringValue": "claimed" } ]
                    }
                  }
                }
              ],
              "status": { "code": 2 }
            },
            {
              "traceId": "5B8EFFF798038103D269B633813FC60C",
              "spanId": "EEE19B7EC3C1B175",
              "parentSpanId": "EEE19B7EC3C1B174",
              "name": "GET",
              "kind": "SPAN_KIND_CLIENT",
              "attributes": [
                { "key": "url.full", "value": { "stringValue": "http://payments:8080/charge" } },
                { "key": "http.request.resend_count", "value": { "intValue": 1 } },
                { "key": "retry.criteria_satisfied", "value": { "boolValue": true } }
              ]
            }
          ]
        }
      ]
    },
    {
      "resource": {
        "attributes": [
          { "key": "service.name", "value": { "stringValue": "payments" } }
        ]
      },
      "scopeSpans": [
        {
          "spans": [
            {
              "traceId": "5B8EFFF798038103D269B633813FC60C",
              "spanId": "AAA19B7EC3C1B176",
              "parentSpanId": "EEE19B7EC3C1B175",
              "name": "POST /charge",
              "kind": 2,
              "attributes": [
                { "key": "http.response.status_code", "value": { "doubleValue": 200.0 } }
              ]
            }
          ]
        }
      ]
    }
  ]
}
`

// spansOf reads data with ReadFile and returns what it emitted, whole.
func spansOf(t *testing.T, name string, data []byte) ([]graph.Span, FileStats, []error, error) {
	t.Helper()
	var spans []graph.Span
	var bad []error
	st, err := NewDecoder(DecoderConfig{}).ReadFile(bytes.NewReader(data), name, func(s []graph.Span) error {
		spans = append(spans, s...)
		return nil
	}, func(err error) { bad = append(bad, err) })
	return spans, st, bad, err
}

func TestReadFilePrettyDocument(t *testing.T) {
	spans, st, bad, err := spansOf(t, "trace.json", []byte(prettyDoc))
	if err != nil || len(bad) != 0 {
		t.Fatal(err, bad)
	}
	if st.Requests != 1 || st.Spans != 3 || len(spans) != 3 {
		t.Fatalf("stats %+v", st)
	}
	// The spans as docs/SPEC.md §2 reads them, worked out from the document.
	s0, s1, s2 := spans[0], spans[1], spans[2]
	if s0.Service != "checkout" || s0.Version != "2.1.0" || s0.Operation != "POST /orders" || !s0.Failed || s0.StatusCode != 503 || s0.Claim != graph.ClaimClaimed ||
		s0.Start != 1544712660000000000 || s0.End != 1544712661000000000 || s0.SpanID != (graph.SpanID{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74}) {
		t.Errorf("span 0: %+v", s0)
	}
	if s1.Kind != graph.KindClient || s1.Peer != "payments" || !s1.HasResend || s1.Resend != 1 || !s1.CriteriaSatisfied || s1.ParentID != s0.SpanID {
		t.Errorf("span 1: %+v", s1)
	}
	if s2.Service != "payments" || s2.Operation != "POST /charge" || s2.Failed || s2.StatusCode != 200 || s2.TraceID != s0.TraceID {
		t.Errorf("span 2: %+v", s2)
	}
}

func TestReadFilePrettyDocumentsAndLines(t *testing.T) {
	// Two pretty documents one after the other (the second indented with
	// tabs, its closing brace in column 0), then JSON lines, then blank
	// lines: 3 + 3 + 1 + 2 spans.
	tabbed := strings.ReplaceAll(prettyDoc, "  ", "\t")
	line1 := string(jsonOf(t, request(t, "a", 1)))
	line2 := string(jsonOf(t, request(t, "b", 2)))
	data := prettyDoc + tabbed + line1 + "\n" + line2 + "\n\n  \n"
	_, st, bad, err := spansOf(t, "docs.json", []byte(data))
	if err != nil || len(bad) != 0 {
		t.Fatal(err, bad)
	}
	if st.Requests != 4 || st.Spans != 9 {
		t.Fatalf("stats %+v", st)
	}
	// Gzipped and with CRLF line ends, the same.
	_, st, bad, err = spansOf(t, "docs.json.gz", gz(t, []byte(strings.ReplaceAll(data, "\n", "\r\n"))))
	if err != nil || len(bad) != 0 || st.Requests != 4 || st.Spans != 9 {
		t.Fatal(err, bad, st)
	}
}

func TestReadFilePrettyDocumentErrors(t *testing.T) {
	lines := strings.Split(prettyDoc, "\n")
	// A document broken on its line 16 ("spanId": …) is reported once, at
	// the line it starts on, with where it broke; the next one is read.
	broken := append([]string{}, lines...)
	broken[15] = `              "spanId": EEE19B7EC3C1B174,`
	data := strings.Join(broken, "\n") + prettyDoc
	_, st, bad, err := spansOf(t, "docs.json", []byte(data))
	if err != nil || st.Requests != 1 || st.Spans != 3 || st.BadRequests != 1 || len(bad) != 1 {
		t.Fatal(err, st, bad)
	}
	if want := `docs.json:1: invalid OTLP JSON: unexpected 'E' on line 16, column 25`; bad[0].Error() != want {
		t.Errorf("bad: %v\nwant %s", bad[0], want)
	}
	// A document that stops after line 19, inside its first span (7
	// brackets open), before another starts: reported as incomplete at its
	// first line, the next one read.
	data = strings.Join(lines[:19], "\n") + "\n" + prettyDoc
	_, st, bad, err = spansOf(t, "docs.json", []byte(data))
	if err != nil || st.Requests != 1 || st.Spans != 3 || len(bad) != 1 {
		t.Fatal(err, st, bad)
	}
	if want := "docs.json:1: invalid OTLP JSON: the request ends with 7 brackets unclosed when line 20 starts a new one"; bad[0].Error() != want {
		t.Errorf("bad: %v\nwant %s", bad[0], want)
	}
	// A document cut at the end of a line (a file copied while being
	// written): truncated.
	_, st, bad, err = spansOf(t, "cut.json", []byte(strings.Join(lines[:30], "\n")+"\n"))
	want := "cut.json: file truncated in the JSON request that starts on line 1 (after 30 complete lines; the file may still be being written)"
	if err == nil || err.Error() != want || !errors.Is(err, ErrTruncated) || len(bad) != 0 || st.Requests != 0 {
		t.Fatal(err, bad, st)
	}
}

// deepLine is a reader of the input, built as it is read so that
// the test holds none of it: a good JSON line, a line whose attribute value
// nests arrayValue 3,000,000 levels deep (84 MB), another good line.
type deepLine struct {
	parts [][]byte
	reps  []int // how many times each part comes
	off   int   // bytes of parts[0] already read
}

func newDeepLine(good1, good2 []byte, levels int) *deepLine {
	return &deepLine{
		parts: [][]byte{
			append(good1, '\n'),
			[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":`),
			[]byte(`{"arrayValue":{"values":[`),
			[]byte(`{"stringValue":"x"}`),
			[]byte(`]}}`),
			[]byte("}]}]}]}]}\n"),
			append(good2, '\n'),
		},
		reps: []int{1, 1, levels, 1, levels, 1, 1},
	}
}

func (r *deepLine) Read(p []byte) (int, error) {
	n := 0
	for len(r.parts) > 0 && n < len(p) {
		m := copy(p[n:], r.parts[0][r.off:])
		n += m
		if r.off += m; r.off < len(r.parts[0]) {
			break // p is full
		}
		r.off = 0
		if r.reps[0]--; r.reps[0] == 0 {
			r.parts, r.reps = r.parts[1:], r.reps[1:]
		}
	}
	if n == 0 && len(r.parts) == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func TestReadFileDeepNesting(t *testing.T) {
	const levels = 3_000_000
	good1, good2 := jsonOf(t, request(t, "a", 2)), jsonOf(t, request(t, "b", 3))
	size := int64(len(good1)+1) + 77 + levels*(25+3) + 19 + 10 + int64(len(good2)+1)
	if size < 84_000_000 {
		t.Fatalf("test premise: %d bytes", size)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var bad []error
	var names []string
	st, err := NewDecoder(DecoderConfig{}).ReadFile(newDeepLine(good1, good2, levels), "deep.jsonl", func(s []graph.Span) error {
		for _, sp := range s {
			names = append(names, sp.Name)
		}
		return nil
	}, func(err error) { bad = append(bad, err) })
	runtime.ReadMemStats(&after)

	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes != size || st.Requests != 2 || st.Spans != 5 || st.BadRequests != 1 || strings.Join(names, ",") != "a-0,a-1,b-0,b-1,b-2" {
		t.Fatalf("stats %+v, spans %v", st, names)
	}
	// Line 2's 65th bracket: 77 bytes of prefix leave 9 open, each level
	// opens 3 in its 25 bytes (at 0, 14, 24): the second of level 18.
	want := "deep.jsonl:2: JSON nested deeper than 64 levels (at column 542): skipped"
	if len(bad) != 1 || bad[0].Error() != want || !errors.Is(bad[0], ErrLimit) {
		t.Fatalf("bad %v\nwant %s", bad, want)
	}
	// The rejected line is not kept: reading 84 MB allocates a few read
	// buffers and the good lines' decoding, nothing like the line's size.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Fatalf("reading allocated %d bytes", alloc)
	}
}

func TestReadFileJSONKinds(t *testing.T) {
	logs := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"hello"}}]}]}]}`
	metrics := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m"}]}]}]}`
	trace := string(jsonOf(t, request(t, "a", 2)))
	// A collector file exporter shared by the three pipelines.
	data := logs + "\n" + trace + "\n" + metrics + "\n{}\n" + `{"resourceSpans":[]}` + "\n"
	_, st, bad, err := spansOf(t, "all.jsonl", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := FileStats{Bytes: int64(len(data)), Requests: 3, BadRequests: 2, NotTraces: 2, Spans: 2}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if len(bad) != 2 || bad[0].Error() != "all.jsonl:1: OTLP logs, not traces" || bad[1].Error() != "all.jsonl:3: OTLP metrics, not traces" ||
		!errors.Is(bad[0], ErrNotTraces) || !errors.Is(bad[1], ErrNotTraces) {
		t.Fatalf("bad %v", bad)
	}

	// Jaeger's "Download JSON", pretty-printed, and Zipkin's, a top-level
	// array (also after leading blank lines).
	jaeger := "{\n  \"data\": [\n    {\n      \"traceID\": \"5b8efff798038103d269b633813fc60c\",\n      \"spans\": [],\n      \"processes\": {}\n    }\n  ]\n}\n"
	zipkin := "\n\n[\n  {\n    \"traceId\": \"5b8efff798038103\",\n    \"id\": \"eee19b7ec3c1b174\",\n    \"localEndpoint\": { \"serviceName\": \"frontend\" }\n  }\n]\n"
	for _, tt := range []struct{ name, data, want string }{
		{"jaeger.json", jaeger, "jaeger.json:1: Jaeger JSON is not supported: export OTLP (e.g. the collector's file exporter, or Jaeger's /api/v3 OTLP endpoint)"},
		{"jaeger2.json", "\n" + jaeger, "jaeger2.json:2: Jaeger JSON is not supported: export OTLP (e.g. the collector's file exporter, or Jaeger's /api/v3 OTLP endpoint)"},
		{"zipkin.json", zipkin, "zipkin.json:3: Zipkin JSON is not supported: export OTLP (e.g. the collector's file exporter)"},
	} {
		_, st, bad, err := spansOf(t, tt.name, []byte(tt.data))
		if err != nil || len(bad) != 1 || bad[0].Error() != tt.want || st.NotTraces != 1 || st.Requests != 0 {
			t.Errorf("%s: %v %v %+v", tt.name, err, bad, st)
		}
	}
}

func TestReadFileEmptyRequests(t *testing.T) {
	// Requests without spans are requests: the caller tells "no spans in
	// input" from "nothing could be read" by Requests.
	_, st, bad, err := spansOf(t, "empty.jsonl", []byte("{}\n{\"resourceSpans\":[]}\n"))
	if err != nil || len(bad) != 0 || st.Requests != 2 || st.Spans != 0 {
		t.Fatal(err, bad, st)
	}
}

func TestReadFileBadLinesDoNotSwallow(t *testing.T) {
	// Bad lines of many kinds, each followed by a good one: every good one
	// is read, every bad one reported once by its line number.
	good := string(jsonOf(t, request(t, "g", 1)))
	badLines := []string{
		`{"resourceSpans": [`,   // unbalanced
		`{"resourceSpans": "x"`, // unbalanced, and wrong
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"unterminated`, // in a string
		`{"a":1}}`,        // a bracket too many
		`{} {}`,           // two requests on one line
		`not json at all`, // garbage
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"xyz"}]}]}]}`, // pdata's error
	}
	var data []string
	for _, b := range badLines {
		data = append(data, b, good)
	}
	_, st, bad, err := spansOf(t, "mixed.jsonl", []byte(strings.Join(data, "\n")))
	if err != nil || st.Requests != len(badLines) || st.Spans != len(badLines) || len(bad) != len(badLines) {
		t.Fatalf("%v %+v %v", err, st, bad)
	}
	for i, e := range bad {
		if prefix := "mixed.jsonl:" + itoa(2*i+1) + ": "; !strings.HasPrefix(e.Error(), prefix) {
			t.Errorf("bad %d: %v, want prefix %q", i, e, prefix)
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// readLong reads data as a file with workers decoding goroutines (0: on
// the reading goroutine) and returns the span names, the stats, what was
// reported bad and the error.
func readLong(t *testing.T, data []byte, workers int) ([]string, FileStats, []string, error) {
	t.Helper()
	var names, bad []string
	d := NewDecoder(DecoderConfig{})
	d.Workers = workers
	st, err := d.ReadFile(bytes.NewReader(data), "long.jsonl", func(s []graph.Span) error {
		for _, sp := range s {
			names = append(names, sp.Name)
		}
		return nil
	}, func(err error) { bad = append(bad, err.Error()) })
	return names, st, bad, err
}

// TestReadFileLongLines: a line longer than the read buffer (a collector's
// batch) is decoded whole when requests are decoded on the reading
// goroutine, without the scanner; what is read and what is reported — of
// a good line, a bad one, a file cut inside one — is what the scanner's
// way (decoding goroutines) gives.
func TestReadFileLongLines(t *testing.T) {
	good1, good2 := jsonOf(t, request(t, "a", 2)), jsonOf(t, request(t, "b", 3))
	long := jsonOf(t, request(t, "l", 5000))
	if len(long) < 2*readBufSize || len(long) > longLineMax {
		t.Fatalf("test premise: a line of %d bytes", len(long))
	}
	file := func(mid []byte) []byte {
		return slices.Concat(good1, []byte("\n"), mid, []byte("\n"), good2, []byte("\n"))
	}
	names, st, bad, err := readLong(t, file(long), 0)
	if err != nil || len(bad) != 0 || len(names) != 5005 || st.Requests != 3 || st.Spans != 5005 || names[2] != "l-0" || names[5004] != "b-2" {
		t.Fatalf("%v %v: %d spans, stats %+v", err, bad, len(names), st)
	}
	names2, st2, _, _ := readLong(t, file(long), 3)
	slices.Sort(names2) // emitted in no particular order
	if sorted := slices.Sorted(slices.Values(names)); !slices.Equal(sorted, names2) || st != st2 {
		t.Fatalf("the scanner's way read %d spans, stats %+v; %+v", len(names2), st2, st)
	}

	// A byte broken past the first fragment: the same report, its column
	// counted from the line's start.
	broken := slices.Clone(long)
	p := bytes.Index(broken[300_000:], []byte(`"name":`)) + 300_000 + len(`"name"`)
	broken[p] = '#'
	names, st, bad, err = readLong(t, file(broken), 0)
	_, st2, bad2, err2 := readLong(t, file(broken), 3)
	if err != nil || err2 != nil || len(bad) != 1 || !slices.Equal(bad, bad2) || st != st2 || len(names) != 5 {
		t.Fatalf("%v %v: %q, %d spans; the scanner's way: %q", err, err2, bad, len(names), bad2)
	}
	if want := "long.jsonl:2: invalid OTLP JSON: "; !strings.HasPrefix(bad[0], want) || !strings.HasSuffix(bad[0], fmt.Sprintf(" at column %d", p+1)) {
		t.Fatalf("reported %q, want %s… at column %d", bad[0], want, p+1)
	}

	// The file cut inside the long line: what came before, and the same
	// error.
	cut := slices.Concat(good1, []byte("\n"), long[:len(long)/2])
	names, _, _, err = readLong(t, cut, 0)
	_, _, _, err2 = readLong(t, cut, 3)
	if err == nil || err2 == nil || err.Error() != err2.Error() || !errors.Is(err, ErrTruncated) || len(names) != 2 {
		t.Fatalf("cut: %v (%d spans); the scanner's way: %v", err, len(names), err2)
	}
}
