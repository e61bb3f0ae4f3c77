package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestCheckJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		in   string
		want string // "" for valid
	}{
		{`{}`, ""},
		{` {"resourceSpans" : [ ] } ` + "\r\n", ""},
		{`{"a":[1,-2.5e+3,true,false,null,"x",{},[]]}`, ""},
		{`{"a":"brackets [[[[ and {{{ in a string"}`, ""},
		{`{"a":"escaped \" quote [[[ still a string"}`, ""},
		{`{"a":"a backslash at the end \\"}`, ""},
		{`{"a":"\\\"[ is an escaped backslash then an escaped quote"}`, ""},
		{`[{"traceId":"x"}]`, ""},
		{`"a string"`, ""},
		{deep(64), ""},
		{deep(65), "JSON nested deeper than 64 levels at offset 64"},
		{`{"a" 1}`, `invalid JSON: unexpected '1' at offset 5`},
		{`{"resourceSpans": [ this is not json`, `invalid JSON: unexpected 't' at offset 20`},
		{`{"a":tru}`, `invalid JSON: unexpected 't' at offset 5`},
		{`{"a":nul`, `invalid JSON: the request ends with 1 bracket unclosed`},
		{`nul`, `invalid JSON: the request ends inside a value`},
		{`{"a":1,}`, `invalid JSON: unexpected '}' at offset 7`},
		{`{,"a":1}`, `invalid JSON: unexpected ',' at offset 1`},
		{`{"a":,"values":1}`, `invalid JSON: unexpected ',' at offset 5`},
		{`[,1]`, `invalid JSON: unexpected ',' at offset 1`},
		{`{"a":[}`, `invalid JSON: unexpected '}' at offset 6`},
		{`{"a":{]}`, `invalid JSON: unexpected ']' at offset 6`},
		{`{"a":1]`, `invalid JSON: unexpected ']' at offset 6`},
		{`{"a":arrayValue}`, `invalid JSON: unexpected 'a' at offset 5`},
		{`{arrayValue:1}`, `invalid JSON: unexpected 'a' at offset 1`},
		{`{1:2}`, `invalid JSON: unexpected '1' at offset 1`},
		{`{"a"::1}`, `invalid JSON: unexpected ':' at offset 5`},
		{`{}{}`, `invalid JSON: unexpected '{' after the end of the JSON request (one request per line) at offset 2`},
		{`{} x`, `invalid JSON: unexpected 'x' after the end of the JSON request (one request per line) at offset 3`},
		{"{\x00}", `invalid JSON: unexpected byte 0x00 at offset 1`},
		{`]`, `invalid JSON: unexpected ']' at offset 0`},
		{``, `invalid JSON: the request is empty`},
		{`   `, `invalid JSON: the request is empty`},
		{`{"a":"unterminated`, `invalid JSON: the request ends inside a string`},
		{`{"a":"ends in an escape\`, `invalid JSON: the request ends inside a string`},
		{`{"a":[{"b":1}`, `invalid JSON: the request ends with 2 brackets unclosed`},
		{`{"a":1`, `invalid JSON: the request ends with 1 bracket unclosed`},
		{`12`, `invalid JSON: the request ends inside a value`},
	}
	for _, tt := range tests {
		err := checkJSON([]byte(tt.in))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("checkJSON(%.40q): %q, want %q", tt.in, got, tt.want)
		}
		if tt.want != "" && errors.Is(err, ErrLimit) != strings.HasPrefix(tt.want, "JSON nested") {
			t.Errorf("checkJSON(%.40q): ErrLimit is %v", tt.in, errors.Is(err, ErrLimit))
		}
	}
}

// TestJSONScannerChunks checks that the scanner, resumable, says the same
// whatever the input's cutting into chunks: every cut of every input into
// two, and into single bytes.
func TestJSONScannerChunks(t *testing.T) {
	inputs := []string{
		`{"a":[1,-2.5e+3,true,false,null,"x\"y\\",{},[]],"b":{"c":"\u00e9"}}`,
		`{"a":"\\\"[[["}`, `{"a":tru}`, `{"a":1,}`, `{}{}`, `[[[[`, `{"k":"v"} `,
		strings.Repeat("[", 66), `{"a":"x\`, `{"a":12`, `{"a":fals`,
	}
	result := func(chunks ...[]byte) string {
		var s jsonScanner
		for _, c := range chunks {
			s.scan(c)
		}
		if s.failed() {
			return fmt.Sprintf("fault %d at %d: %v", s.fault, s.faultAt, s.problem())
		}
		return fmt.Sprintf("done=%v depth=%d state=%d tok=%d", s.done(), s.depth, s.state, s.tok)
	}
	for _, in := range inputs {
		b := []byte(in)
		want := result(b)
		for cut := 0; cut <= len(b); cut++ {
			if got := result(b[:cut], b[cut:]); got != want {
				t.Errorf("%q cut at %d: %s, want %s", in, cut, got, want)
			}
		}
		var bytewise [][]byte
		for i := range b {
			bytewise = append(bytewise, b[i:i+1])
		}
		if got := result(bytewise...); got != want {
			t.Errorf("%q byte by byte: %s, want %s", in, got, want)
		}
	}
}

func TestQuoteOrBackslash(t *testing.T) {
	for _, tt := range []struct {
		s    string
		from int
		want int
	}{
		{`abcdefghij"`, 0, 10},
		{`abcdefgh\ij"`, 0, 8},
		{`"`, 0, 0},
		{`abc`, 0, -1},
		{`0123456789abcdef0123456"`, 3, 23},
		{"\x00\x21\x23\x5b\x5d\x7f\x80\xa2\xdc\"", 0, 9}, // neighbours of '"' (0x22) and '\\' (0x5c)
		{"\xff\xff\xff\xff\xff\xff\xff\xff\\", 0, 8},
	} {
		if got := quoteOrBackslash([]byte(tt.s), tt.from); got != tt.want {
			t.Errorf("quoteOrBackslash(%q, %d) = %d, want %d", tt.s, tt.from, got, tt.want)
		}
	}
}

// otlpEventAttr is a request whose one span has one event whose one
// attribute's value is v (JSON).
func otlpEventAttr(v string) []byte {
	return []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"events":[{"attributes":[{"key":"k","value":` + v + `}]}]}]}]}]}`)
}

func TestJSONDepthAdmitsRealOTLP(t *testing.T) {
	// An event attribute's value object is at depth 12 ({ [ { [ { [ { [ { [
	// { {), and each kvlist level adds 4 (kvlistValue { values [ { value {):
	// 13 levels reach 12 + 4×13 = 64, the limit; 14 reach 68.
	kvlist := func(levels int) string {
		v := `{"stringValue":"leaf"}`
		for range levels {
			v = `{"kvlistValue":{"values":[{"key":"k","value":` + v + `}]}}`
		}
		return v
	}
	d := NewDecoder(DecoderConfig{})
	if _, err := d.AppendRequest(nil, otlpEventAttr(kvlist(13)), true); err != nil {
		t.Fatalf("13 kvlist levels in an event attribute: %v", err)
	}
	_, err := d.AppendRequest(nil, otlpEventAttr(kvlist(14)), true)
	if !errors.Is(err, ErrLimit) || !strings.HasPrefix(err.Error(), "JSON nested deeper than 64 levels") {
		t.Fatalf("14 kvlist levels: %v", err)
	}

	// What pdata itself writes for a span with a 5-level nested attribute
	// decodes, with the value intact.
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("nested")
	v := sp.Events().AppendEmpty().Attributes().PutEmptyMap("m")
	for range 4 {
		v = v.PutEmptyMap("m")
	}
	v.PutEmptySlice("s").AppendEmpty().SetStr("leaf")
	got, err := d.AppendRequest(nil, jsonOf(t, td), true)
	if err != nil || len(got) != 1 || got[0].Name != "nested" {
		t.Fatalf("%v %+v", err, got)
	}
}

func TestJSONDeepNestingNoCrash(t *testing.T) {
	// The shape of the issue, 200,000 levels deep (5 MB): pdata would
	// recurse 600,000 times; it is rejected before pdata sees it.
	const levels = 200_000
	var b bytes.Buffer
	b.WriteString(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":`)
	for range levels {
		b.WriteString(`{"arrayValue":{"values":[`)
	}
	b.WriteString(`{"stringValue":"x"}`)
	for range levels {
		b.WriteString(`]}}`)
	}
	b.WriteString(`}]}]}]}]}`)
	_, err := NewDecoder(DecoderConfig{}).AppendRequest(nil, b.Bytes(), true)
	// The prefix is 77 bytes and leaves 9 brackets open; each level is 25
	// bytes and opens 3 (at 0, 14 and 24: the value's {, arrayValue's {,
	// values' [), so level L (from 0) reaches depths 10+3L, 11+3L, 12+3L.
	// The 65th is the second of level 18.
	want := fmt.Sprintf("JSON nested deeper than 64 levels at offset %d", 77+18*25+14)
	if err == nil || err.Error() != want || !errors.Is(err, ErrLimit) {
		t.Fatalf("err %v, want %s", err, want)
	}
}

func TestJSONElementsLimit(t *testing.T) {
	// Commas inside strings count too (see MaxJSONElements): the request's
	// own '[' and ',' and a string of commas make exactly the limit, then
	// one more.
	at := []byte(`{"resourceSpans":[],"note":"` + strings.Repeat(",", MaxJSONElements-2) + `"}`)
	d := NewDecoder(DecoderConfig{})
	if spans, err := d.AppendRequest(nil, at, true); err != nil || len(spans) != 0 {
		t.Fatalf("at the limit: %v", err)
	}
	over := []byte(`{"resourceSpans":[],"note":"` + strings.Repeat(",", MaxJSONElements-1) + `"}`)
	_, err := d.AppendRequest(nil, over, true)
	want := "JSON request has more than 2097152 elements (commas and '['): split it into smaller requests"
	if err == nil || err.Error() != want || !errors.Is(err, ErrLimit) {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestJSONEmptyRequests(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	for _, in := range []string{`{}`, `{"resourceSpans":[]}`, `{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}`, ` {} `} {
		spans, err := d.AppendRequest(nil, []byte(in), true)
		if err != nil || len(spans) != 0 {
			t.Errorf("%s: %v %v", in, spans, err)
		}
	}
}

func TestJSONNotTraces(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"hello"}}]}]}]}`, "OTLP logs, not traces"},
		{`{"resource_logs":[]}`, "OTLP logs, not traces"},
		{`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","gauge":{"dataPoints":[{"asInt":"1"}]}}]}]}]}`, "OTLP metrics, not traces"},
		{`{"resourceProfiles":[]}`, "OTLP profiles, not traces"},
		{`{"data":[{"traceID":"5b8efff798038103d269b633813fc60c","spans":[{"traceID":"5b8efff798038103d269b633813fc60c","spanID":"eee19b7ec3c1b174","operationName":"GET","references":[],"startTime":1544712660000000,"duration":1000,"processID":"p1"}],"processes":{"p1":{"serviceName":"frontend"}}}],"total":0,"limit":0,"offset":0,"errors":null}`,
			"Jaeger JSON is not supported: export OTLP (e.g. the collector's file exporter, or Jaeger's /api/v3 OTLP endpoint)"},
		{`{"result":{"resourceSpans":[]}}`, `a Jaeger API v3 response: its "result" field holds the OTLP request (extract it, e.g. jq -c .result)`},
		{`[{"traceId":"5b8efff798038103","id":"eee19b7ec3c1b174","name":"get","kind":"SERVER","localEndpoint":{"serviceName":"frontend"}}]`,
			"Zipkin JSON is not supported: export OTLP (e.g. the collector's file exporter)"},
		{`[[{"traceId":"5b8efff798038103","id":"eee19b7ec3c1b174","name":"get"}]]`,
			"Zipkin JSON is not supported: export OTLP (e.g. the collector's file exporter)"},
		{`[1,2,3]`, "a JSON array, not an OTLP/JSON request (an object with resourceSpans)"},
	}
	d := NewDecoder(DecoderConfig{})
	for _, tt := range tests {
		_, err := d.AppendRequest(nil, []byte(tt.in), true)
		if err == nil || err.Error() != tt.want || !errors.Is(err, ErrNotTraces) {
			t.Errorf("%.30s: %v, want %s", tt.in, err, tt.want)
		}
	}
	// A trace request with spans is traces, whatever else it holds.
	in := `{"resourceLogs":[],"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"s"}]}]}]}`
	if spans, err := d.AppendRequest(nil, []byte(in), true); err != nil || len(spans) != 1 {
		t.Fatalf("%v %v", spans, err)
	}
	// A JSON scalar is not a request.
	if _, err := d.AppendRequest(nil, []byte(`"x"`), true); err == nil || errors.Is(err, ErrNotTraces) {
		t.Fatalf("scalar: %v", err)
	}
}

func TestJSONBase64IDs(t *testing.T) {
	// Trace id 01 02 … 10, span id 11 12 … 18, parent 21 22 … 28, written as
	// protobuf's JSON mapping writes bytes: standard base64, padded. Their
	// encodings, worked out by hand from the 6-bit groups:
	// 010203 → AQID, 040506 → BAUG, 070809 → BwgJ, 0a0b0c → CgsM,
	// 0d0e0f → DQ4P, 10 → EA==; 111213 → ERIT, 141516 → FBUW, 1718 → Fxg=;
	// 212223 → ISIj, 242526 → JCUm, 2728 → Jyg=.
	const (
		traceB64  = "AQIDBAUGBwgJCgsMDQ4PEA=="
		spanB64   = "ERITFBUWFxg="
		parentB64 = "ISIjJCUmJyg="
	)
	want := struct {
		trace        pcommon.TraceID
		span, parent pcommon.SpanID
	}{
		trace:  pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		span:   pcommon.SpanID{0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18},
		parent: pcommon.SpanID{0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28},
	}
	d := NewDecoder(DecoderConfig{})
	for name, req := range map[string]string{
		"padded":   `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"` + traceB64 + `","spanId":"` + spanB64 + `","parentSpanId":"` + parentB64 + `","name":"s","kind":"SPAN_KIND_SERVER"}]}]}]}`,
		"unpadded": `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"AQIDBAUGBwgJCgsMDQ4PEA","spanId":"ERITFBUWFxg","parentSpanId":"ISIjJCUmJyg","name":"s","kind":2}]}]}]}`,
		"snake":    `{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"` + traceB64 + `","span_id":"` + spanB64 + `","parent_span_id":"` + parentB64 + `","name":"s","kind":2,"links":[{"traceId":"` + traceB64 + `","spanId":"` + spanB64 + `"}]}]}]}]}`,
		"mixed":    `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"` + spanB64 + `","parentSpanId":"2122232425262728","name":"s","kind":2}]}]}]}`,
	} {
		spans, err := d.AppendRequest(nil, []byte(req), true)
		if err != nil || len(spans) != 1 {
			t.Fatalf("%s: %v %v", name, spans, err)
		}
		s := spans[0]
		if [16]byte(s.TraceID) != [16]byte(want.trace) || [8]byte(s.SpanID) != [8]byte(want.span) || [8]byte(s.ParentID) != [8]byte(want.parent) || s.Name != "s" {
			t.Errorf("%s: %x %x %x", name, s.TraceID, s.SpanID, s.ParentID)
		}
	}
	// Base64 ids fixed, but another field wrong: that field's error.
	req := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"` + traceB64 + `","kind":"NOT_A_KIND"}]}]}]}`
	if _, err := d.AppendRequest(nil, []byte(req), true); err == nil || strings.Contains(err.Error(), "must be hex") {
		t.Errorf("base64 id and a bad kind: %v", err)
	}
	// Neither hex nor base64 of the right size.
	for _, bad := range []string{`"0102"`, `"AQIDBAUGBwgJCgsMDQ4P"`, `"!!!!!!!!!!!!!!!!!!!!!!!="`} {
		req := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":` + bad + `,"name":"s"}]}]}]}`
		_, err := d.AppendRequest(nil, []byte(req), true)
		if err == nil || !strings.HasPrefix(err.Error(), "trace and span ids must be hex in OTLP/JSON (32 and 16 digits): ") {
			t.Errorf("traceId %s: %v", bad, err)
		}
	}
}
