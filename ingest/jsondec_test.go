package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/graph"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// diffJSON decodes b with the JSON decoder (AppendRequest) and with pdata's
// path (appendJSONPdata), and fails the test unless both reject it or both
// give the same spans. It returns the decoder's result.
func diffJSON(t testing.TB, cfg DecoderConfig, b []byte) ([]graph.Span, error) {
	t.Helper()
	ref, rerr := appendJSONPdata(NewDecoder(cfg), nil, b)
	kept := []graph.Span{{Name: "kept"}}
	got, err := NewDecoder(cfg).AppendRequest(kept, b, true)
	if errors.Is(err, errEmptyName) || errors.Is(err, errLongNumber) {
		// The two differences, on purpose: see jField and bigFloatOK.
		return nil, err
	}
	return diffDecoded(t, "decoder", b, kept, got, err, ref, rerr)
}

func TestJSONDiffCorpora(t *testing.T) {
	n := 0
	check := func(cfg DecoderConfig, b []byte) {
		t.Helper()
		spans, err := diffJSON(t, cfg, b)
		if err != nil {
			t.Fatalf("corpus request rejected: %v", err)
		}
		n += len(spans)
	}
	sims, hdrs := simRequests(t)
	for i, b := range sims {
		check(DecoderConfig{ClaimHeader: hdrs[i]}, jsonOfProto(t, b))
	}
	for _, b := range sampleRequests(t) {
		check(DecoderConfig{}, jsonOfProto(t, b))
	}
	check(DecoderConfig{}, jsonOf(t, benchTraces(333)))
	for _, td := range fuzzSeeds(t) {
		check(DecoderConfig{}, jsonOf(t, td))
		check(DecoderConfig{ClaimHeader: "x-uber-error-claim"}, jsonOf(t, td))
		check(samplingDiffConfig, jsonOf(t, td))
		check(samplingDiffConfig2, jsonOf(t, td))
	}
	if n < 10000 {
		t.Fatalf("only %d spans compared", n)
	}
}

// jsonOfProto is the protobuf request b as pdata marshals it in JSON.
func jsonOfProto(t testing.TB, b []byte) []byte {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		t.Fatal(err)
	}
	return jsonOf(t, td)
}

// jreq is a request with one resource (attributes res, JSON) and one span
// (members span, JSON, without braces).
func jreq(res, span string) []byte {
	return []byte(`{"resourceSpans":[{"resource":{"attributes":[` + res + `]},"scopeSpans":[{"spans":[{` + span + `}]}]}]}`)
}

// jspan is a request with one server span named "s" whose attributes are
// attrs (JSON), under a resource with service.name "svc".
func jspan(attrs string) []byte {
	return jreq(`{"key":"service.name","value":{"stringValue":"svc"}}`,
		`"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"1112131415161718","name":"s","kind":2,"attributes":[`+attrs+`]`)
}

// jattr is a request whose span has the attribute key with the value
// value (an AnyValue's JSON), after a GET method.
func jattr(key, value string) []byte {
	return jspan(`{"key":"http.request.method","value":{"stringValue":"GET"}},{"key":"` + key + `","value":` + value + `}`)
}

// jsonEdgeCases are requests that exercise each of pdata's JSON rules: all
// are compared with pdata's path by TestJSONEdgeCases.
func jsonEdgeCases() [][]byte {
	var cs [][]byte
	add := func(bs ...[]byte) { cs = append(cs, bs...) }
	s := func(ss ...string) {
		for _, x := range ss {
			cs = append(cs, []byte(x))
		}
	}
	// Field names: camelCase, snake_case, escaped, unknown.
	s(`{"resource_spans":[{"resource":{"attributes":[{"key":"service.name","value":{"string_value":"a"}}]},"scope_spans":[{"spans":[{"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"1112131415161718","parent_span_id":"2122232425262728","name":"n","kind":3,"start_time_unix_nano":"5","end_time_unix_nano":"7","status":{"code":2}}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"n\u0061me":"x","\u006bind":"SPAN_KIND_SERVER","attributes":[{"k\u0065y":"http.route","value":{"stringValue":"/a"}},{"key":"http.method","v\u0061lue":{"stringValue":"GET"}}]}]}]}]}`,
		`{"resourceSpans":[{"resourceX":1,"scopeSpans":[{"spansX":[1,2],"spans":[{"unknown":{"a":[1,{"b":null}],"c":"d"},"name":"x"}]}]}]}`,
		`{"foo":{"resourceSpans":[{"scopeSpans":[{"spans":[{}]}]}]},"resourceSpans":[{"scopeSpans":[{"spans":[{}]}]}]}`,
	)
	// Ids: hex cases, wrong lengths, invalid digits, null, numbers, base64.
	for _, id := range []string{`""`, `"0102030405060708090A0B0C0D0E0F10"`, `"0102"`, `"0102030405060708090a0b0c0d0e0f1"`, `"0102030405060708090a0b0c0d0e0f100"`,
		`"0102030405060708090a0b0c0d0e0fzz"`, `null`, `12`, `"AQIDBAUGBwgJCgsMDQ4PEA=="`, `"AQIDBAUGBwgJCgsMDQ4PEA"`, `"AQIDBAUGBwgJCgsMDQ4P"`,
		`"AQIDBAUGBwgJCgsMDQ4PEA\u003d="`, `"\u0030102030405060708090a0b0c0d0e0f10"`, `"0102030405060708\"090a0b0c0d0e0f"`, `"AQIDBAUG\nBwgJCgsMDQ4PEA=="`, `{}`} {
		s(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":`+id+`,"name":"a"}]}]}]}`,
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"trace\u0049d":`+id+`,"name":"a"}]}]}]}`,
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","links":[{"traceId":`+id+`}]}]}]}]}`)
	}
	for _, id := range []string{`"1112131415161718"`, `"ERITFBUWFxg="`, `"ERITFBUWFxg"`, `"ERITFBUWFx-="`, `"ERITFBUW"`, `"111213141516171"`} {
		s(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":`+id+`,"parentSpanId":`+id+`}]}]}]}`,
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"span_id":`+id+`,"links":[{"spanId":`+id+`}]}]}]}]}`)
	}
	// Ids given twice: the last counts; "" resets.
	s(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","traceId":""}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"1112131415161718","span_id":"2122232425262728"}]}]}]}`)
	// Integers: numbers, strings, signs, fractions, exponents, leading
	// zeros, overflow (jsoniter's, which lets some 20-digit values wrap).
	for _, n := range []string{`0`, `-0`, `5`, `"5"`, `"+5"`, `"-5"`, `-5`, `05`, `"05"`, `5.0`, `5.5`, `1e3`, `"1e3"`, `" 5"`, `""`, `null`, `true`, `{}`, `[]`,
		`18446744073709551615`, `18446744073709551616`, `21000000000000000000`, `99999999999999999999`, `184467440737095516150`, `"18446744073709551616"`,
		`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `-9223372036854775809`, `4294967295`, `4294967296`, `2147483648`, `-2147483648`, `-2147483649`,
		`42949672950`, `52949672950`, `"\u0035"`, `-`, `--1`, `-01`, `1-2`, `1.`, `-+1`} {
		s(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":`+n+`}]}]}]}`,
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":`+n+`}]}]}]}`,
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"flags":`+n+`,"droppedLinksCount":`+n+`}]}]}]}`,
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"status":{"code":`+n+`}}]}]}]}`)
		add(jattr("http.response.status_code", `{"intValue":`+n+`}`), jattr("http.response.status_code", `{"doubleValue":`+n+`}`),
			jattr("retry.attempt", `{"intValue":`+n+`,"doubleValue":`+n+`}`), jattr("k", `{"stringValueStrindex":`+n+`}`),
			jspan(`{"key":"k","keyStrindex":`+n+`}`))
	}
	// Doubles: jsoniter's syntax, strings strconv parses.
	for _, f := range []string{`499.99999999999999`, `500.0000000000001`, `1e2`, `1E+2`, `-1e-2`, `0.5`, `0e5`, `00.5`, `-.5`, `.5`, `-+.5`, `-+05`, `-e5`, `1.e5`, `1..2`,
		`1e400`, `-1e400`, `"1e400"`, `"NaN"`, `"Infinity"`, `"-Infinity"`, `"inf"`, `"0x1p-2"`, `"1_0"`, `"503"`, `503`, `"503.9"`, `0.1234567`, `123456789012345678901234567890`, `1.5e`, `1e5e5`} {
		add(jattr("http.response.status_code", `{"doubleValue":`+f+`}`), jattr("retry.attempt", `{"doubleValue":`+f+`}`))
		// Numbers in unknown fields, as jsoniter's Skip checks them.
		s(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"x":` + f + `,"y":[` + f + `],"name":"a"}]}]}]}`)
	}
	for _, f := range []string{`-05`, `-05e1`, `-.5e3`, `-0.5.5`, `0.5e-50`, `0e999`, `0.00000001`, `5`, `-5`, `-`, `-e`, `-1e`, `1e+`, `-1.5E-3`, `1-`, `-.e1`, `-0`, `-00`, `-.`, `-..1`} {
		s(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"x":` + f + `,"name":"a"}]}]}]}`)
	}
	// Enums: names, unknown names, numbers out of range, numeric strings.
	for _, k := range []string{`"SPAN_KIND_SERVER"`, `"SPAN_KIND_CONSUMER"`, `"span_kind_server"`, `"SERVER"`, `"2"`, `2`, `7`, `-1`, `2147483648`, `null`, `true`, `"SPAN_KIND_\u0053ERVER"`} {
		s(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":` + k + `,"attributes":[{"key":"http.method","value":{"stringValue":"GET"}},{"key":"http.route","value":{"stringValue":"/r"}}]}]}]}]}`)
	}
	for _, c := range []string{`"STATUS_CODE_ERROR"`, `"STATUS_CODE_OK"`, `"ERROR"`, `2`, `"2"`, `3`, `null`} {
		s(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"status":{"code":`+c+`,"message":"m"}}]}]}]}`,
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"status":{"code":2},"status":{"code":`+c+`}}]}]}]}`,
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"status":{"code":`+c+`},"status":{"message":"m"}}]}]}]}`)
	}
	// AnyValue variants, in slots of every kind, and merging.
	for _, v := range []string{`{"stringValue":"x"}`, `{"stringValue":null}`, `{"stringValue":5}`, `{"boolValue":true}`, `{"boolValue":"true"}`, `{"boolValue":null}`,
		`{"intValue":"7"}`, `{"doubleValue":7.9}`, `{"arrayValue":{"values":[{"stringValue":"claimed"}]}}`, `{"arrayValue":{"values":[]}}`,
		`{"arrayValue":null}`, `{"arrayValue":{}}`, `{"arrayValue":{"values":[null,{"stringValue":"a"}]}}`, `{"arrayValue":{"values":[{"intValue":1}],"values":[{"stringValue":"a"}]}}`,
		`{"arrayValue":{"values":[{"arrayValue":{"values":[{"stringValue":"claimed"}]}}]}}`, `{"arrayValue":{"values":[{"stringValue":"a"}]},"arrayValue":{"values":[]}}`,
		`{"kvlistValue":{"values":[{"key":"a","value":{"intValue":1}}]}}`, `{"kvlistValue":null}`, `{"kvlistValue":{"values":[null]}}`,
		`{"bytesValue":"aGk="}`, `{"bytesValue":"aGk"}`, `{"bytesValue":""}`, `{"bytesValue":null}`, `{"bytesValue":"aG\nk="}`, `{"bytesValue":"a\\Gk="}`, `{"bytesValue":"!!!!"}`,
		`{"stringValueStrindex":3}`, `{}`, `null`, `{"foo":1}`, `{"stringValue":"x","intValue":"5"}`, `{"intValue":"5","stringValue":"x"}`, `{"stringValue":"x","foo":[1]}`,
		`{"stringValue":"claimed"},"value":{}`, `{"stringValue":"claimed"},"value":{"boolValue":false}`, `{"stringValue":"claimed"},"value":null`, `"x"`, `[]`, `5`} {
		for _, k := range []string{"error.claim", "http.response.header.x-error-claim", "retry.suppressed", "http.response.status_code", "rpc.grpc.status_code", "server.address", "http.route"} {
			add(jattr(k, v))
		}
		add(jreq(`{"key":"service.name","value":`+v+`},{"key":"service.version","value":`+v+`}`, `"name":"a"`))
	}
	// Key-values: value before key, key given twice, null key, null pair,
	// first of a slot wins, duplicate attribute arrays.
	add(jspan(`{"value":{"stringValue":"/v"},"key":"http.route"}`),
		jspan(`{"key":"x","value":{"stringValue":"/v"},"key":"http.route"}`),
		jspan(`{"key":"http.route","value":{"stringValue":"/v"},"key":null}`),
		jspan(`null,{"key":"http.route","value":{"stringValue":"/1"}},{"key":"http.route","value":{"stringValue":"/2"}}`),
		jspan(`{"key":"http.route"},{"key":"http.route","value":{"stringValue":"/2"}}`),
		jreq(`{"key":"service.name","value":{"stringValue":"a"}},{"key":"service.name","value":{"stringValue":""}},{"key":"service.name","value":{"intValue":1}}`, `"name":"x"`),
		jreq(`{"key":"service.name","value":{"stringValue":"a"}},{"key":"service.name","value":{"stringValue":"b"}},{"key":"service.version","value":{"stringValue":"1"}},{"key":"service.version","value":{"stringValue":""}}`, `"name":"x"`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a"}]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"late"}}]}}]}`),
		[]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"a"}}]},"resource":{"attributes":[{"key":"service.version","value":{"stringValue":"v"}}]},"scopeSpans":[{"spans":[{"name":"a"}]}]}]}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","attributes":[{"key":"http.route","value":{"stringValue":"/a"}}],"kind":2,"attributes":[{"key":"http.method","value":{"stringValue":"GET"}},{"key":"http.route","value":{"stringValue":"/b"}}]}]}]}]}`),
	)
	// Strings: escapes, surrogates, control characters, invalid UTF-8.
	for _, str := range []string{`a\"b`, `a\\b`, `a\/b`, `\b\f\n\r\t`, `\u00e9`, `\u00E9`, `\ud83d\ude00`, `\ud83d`, `\ude00`, `\ud83dx`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`,
		`\ud83d\n`, `\ud83d\x`, `\ud83d\`, `\u12`, `\u12g4`, `\x`, `\'`, "a\tb", "a\x01b", "\\n\x01", "a\xffb", "\xe2\x9f\xa8svc", `\u27e8svc`, `\u0000`, "\x7f"} {
		add(jattr("server.address", `{"stringValue":"`+str+`"}`),
			jreq(`{"key":"service.name","value":{"stringValue":"`+str+`"}}`, `"name":"`+str+`"`),
			[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","x":"`+str+`","`+str+`":1}]}]}]}`))
	}
	// null where objects, arrays, strings are wanted.
	s(`{"resourceSpans":null}`, `{"resourceSpans":[null]}`, `{"resourceSpans":[{"resource":null,"scopeSpans":null}]}`,
		`{"resourceSpans":[{"scopeSpans":[null,{"spans":[null,{"name":null,"attributes":null,"status":null,"events":null,"links":null}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"scope":null,"spans":[{"events":[null],"links":[null]}]}]}]}`,
		`{"resourceSpans":[{"resource":{"attributes":[null],"entityRefs":[null,{"idKeys":null,"descriptionKeys":[null,"a"]}]},"scopeSpans":[{"spans":[{}]}]}]}`,
		`{"resourceSpans":"x"}`, `{"resourceSpans":{}}`, `{"resourceSpans":[1]}`, `{"resourceSpans":[[]]}`, `{"resourceSpans":[{"scopeSpans":[{"spans":["x"]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":5}]}]}]}`, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":{}}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":{}}]}]}]}`, `{"resourceSpans":[{"resource":[]}]}`,
		`{"resourceSpans":[{"resource":{"entityRefs":[{"idKeys":[1]}]}}]}`, `{"resourceSpans":[{"resource":{"droppedAttributesCount":-1}}]}`,
		`{"resourceSpans":[{"schemaUrl":null,"scopeSpans":[{"schemaUrl":1}]}]}`, `{"resourceSpans":[{"schemaUrl":5}]}`,
	)
	// Events, links and scopes: checked, not read.
	s(`{"resourceSpans":[{"scopeSpans":[{"scope":{"name":"n","version":"v","attributes":[{"key":"a","value":{"intValue":"x"}}]},"spans":[{}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"scope":{"droppedAttributesCount":"3"},"spans":[{}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"events":[{"timeUnixNano":"1","name":"e","attributes":[{"key":"a","value":{"boolValue":1}}]}]}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"events":[{"time_unix_nano":1.5}]}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"links":[{"traceState":"x","flags":1,"droppedAttributesCount":2,"attributes":[{"key":"a","value":{"stringValue":"b"}}]}]}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"links":[{"flags":-1}]}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"links":[{"parentSpanId":"zz"}]}]}]}]}`,
	)
	// Deprecated scope spans: stand in only when there are no scope spans.
	s(`{"resourceSpans":[{"deprecatedScopeSpans":[{"spans":[{"name":"old"}]}]}]}`,
		`{"resourceSpans":[{"deprecated_scope_spans":[{"spans":[{"name":"old"}]}],"scopeSpans":[{"spans":[{"name":"new"}]}]}]}`,
		`{"resourceSpans":[{"deprecatedScopeSpans":[{"spans":[{"name":"old"}]}],"scopeSpans":[]}]}`,
		`{"resourceSpans":[{"deprecatedScopeSpans":[{"spans":[{"name":"old"}]}],"scopeSpans":[null]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"new"}]}],"deprecatedScopeSpans":[{"spans":[{"kind":"bad"}]}]}]}`,
		`{"resourceSpans":[{"deprecatedScopeSpans":[{"spans":[{"name":"old"}]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"r"}}]}}]}`,
	)
	// Other kinds of JSON, empty requests, top-level shapes.
	s(`{}`, `{"resourceSpans":[]}`, `{"resourceLogs":[{}]}`, `{"resource_metrics":[]}`, `{"data":[]}`, `{"result":{"resourceSpans":[]}}`, `[]`, `[{"traceId":"a","id":"b"}]`,
		`"x"`, `5`, `null`, `true`, ` {"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"ws"}]}]}]} `, "\t\r\n{}\n")
	// Broken structure: what the scanner rejects, the decoder must too.
	s(`{"resourceSpans":[}`, `{"resourceSpans":[]]}`, `{"a":1]`, `{"resourceSpans":[{"scopeSpans":[{"spans":[{]}]}]}`, `{"resourceSpans":[{"scopeSpans":[{"spans":[}]}]}]}`,
		`{"resourceSpans":[]} x`, `{"resourceSpans":[]}{}`, `{"resourceSpans":[]},`, `{"a":nul}`, `{"a":tru}`, `{"a":fals}`, `{"a":nulll}`, `{"a":1,}`, `{"a":[1,]}`, `{"a":[,1]}`,
		`{"a" 1}`, `{"a"::1}`, `{"a":1 "b":2}`, `{1:2}`, `{"a":01x}`, `{"a":-}`, `{"a":1.2.3}`, `{"a":"x"y}`, `{"a":'x'}`, `{"resourceSpans":null`, `{"resourceSpans":[{"resource":nul}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":tru}]}]}]}`, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":{"boolValue":fals}}]}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":nul}]}]}]}`, `{"a":{"b":[}]}`, "{\"a\":\x01}", `{"a":"\"}`, ``, ` `, `{`, `}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":{"arrayValue":{"values":[1,]}}}]}]}]}]}`)
	for _, n := range []int{15, 16, 17} {
		// An attribute value's arrays: 64 levels in all, and one more.
		add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":` + strings.Repeat(`{"arrayValue":{"values":[`, n) + `{}` + strings.Repeat(`]}}`, n) + `}]}]}]}]}`))
		add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"x":` + strings.Repeat(`[{"a":`, 3*n) + `1` + strings.Repeat(`}]`, 3*n) + `}]}]}]}`))
	}
	// Long and reserved names.
	long := strings.Repeat("n", graph.MaxNameLen+10)
	add(jreq(`{"key":"service.name","value":{"stringValue":"`+long+`"}},{"key":"service.name","value":{"stringValue":"short"}}`, `"name":"a"`),
		jreq(`{"key":"service.version","value":{"stringValue":"`+long+`"}}`, `"name":"a"`),
		jreq(`{"key":"service.name","value":{"stringValue":"svc"}}`, `"name":"`+long+`"`),
		jattr("server.address", `{"stringValue":"`+long+`"}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a"}]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"`+long+`"}}]}},{"scopeSpans":[{"spans":[{"name":"b"}]}]}]}`),
	)
	return cs
}

func TestJSONEdgeCases(t *testing.T) {
	accepted := 0
	for _, b := range jsonEdgeCases() {
		for _, cfg := range []DecoderConfig{{}, {ClaimHeader: "X_Error_Claim"}, samplingDiffConfig, samplingDiffConfig2} {
			if _, err := diffJSON(t, cfg, b); err == nil {
				accepted++
			}
		}
	}
	t.Logf("%d edge cases, %d accepted", len(jsonEdgeCases()), accepted/2)
}

// TestJSONDiffDamaged compares the decoders on damaged requests: single-byte
// changes of small requests, most of which the scanner lets through when
// they fall inside strings and numbers.
func TestJSONDiffDamaged(t *testing.T) {
	var reqs [][]byte
	for _, td := range fuzzSeeds(t) {
		reqs = append(reqs, jsonOf(t, td))
	}
	for _, b := range jsonEdgeCases() {
		if len(b) < 4096 {
			reqs = append(reqs, b)
		}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	alphabet := []byte(`0123456789abcdefAF"\/{}[]:,.-+eEnutlx ` + "\t\n\x01\xff")
	for _, b := range reqs {
		for range min(len(b), 100) {
			m := bytes.Clone(b)
			i := rng.IntN(len(m))
			switch rng.IntN(5) {
			case 0:
				m[i] ^= 1 << rng.IntN(8)
			case 1:
				m[i] = alphabet[rng.IntN(len(alphabet))]
			case 2:
				m = slices.Insert(m, i, alphabet[rng.IntN(len(alphabet))])
			case 3:
				m = append(m[:i], m[i+1:]...)
			case 4:
				m = slices.Insert(m, i, '\\')
			}
			diffJSON(t, DecoderConfig{}, m)
		}
	}
}

// randomTraces builds traces of random shape, names and attribute values
// of every type, to be marshalled by pdata.
func randomTraces(rng *rand.Rand) ptrace.Traces {
	td := ptrace.NewTraces()
	words := []string{"", "a", "GET", "/r/{id}", "claimed", " Unclaimed ", "true", "FALSE", "503", "14", "UNAVAILABLE", "http://h:1/p", "x\"y", "é\u2028\x01", "⟨other⟩", "2.5", strings.Repeat("w", 300),
		"probabilistic", "const", "ratelimiting", "0.25", " 1e1 ", "0"}
	traceStates := []string{"", "ot=th:8", "ot=th:c;rv:abcdef01234567", "congo=x, ot=th:e666 ,rojo=y", "ot=th:", "ot=th:8;", "ot=rv:abcdef01234567", "ot=th:g", "ot=th:\\u0063"}
	keys := []string{"http.request.method", "http.method", "http.route", "rpc.service", "rpc.method", "http.response.status_code", "http.status_code",
		"rpc.grpc.status_code", "rpc.response.status_code", "error.claim", "http.response.header.x-error-claim", "rpc.response.metadata.x_error_claim",
		"http.request.resend_count", "retry.attempt", "retry.criteria_satisfied", "retry.suppressed", "dependency.fail_open", "service.peer.name",
		"peer.service", "server.address", "net.peer.name", "db.system.name", "db.system", "url.full", "http.url", "db.query.text", "db.statement",
		"upstream_cluster", "upstream_cluster.name", "other", "service.name",
		"sampling.adjusted_count", "sampler.type", "sampler.param", "m"}
	var value func(v pcommon.Value, depth int)
	value = func(v pcommon.Value, depth int) {
		switch rng.IntN(9) {
		case 0:
			v.SetStr(words[rng.IntN(len(words))])
		case 1:
			v.SetBool(rng.IntN(2) == 0)
		case 2:
			v.SetInt([]int64{0, 1, -1, 200, 503, 14, math.MaxInt64, math.MinInt64}[rng.IntN(8)])
		case 3:
			v.SetDouble([]float64{0, 503.7, -1, 1e300, math.Inf(1), math.NaN(), 499.99999999999994}[rng.IntN(7)])
		case 4:
			if depth < 3 {
				s := v.SetEmptySlice()
				for range rng.IntN(3) {
					value(s.AppendEmpty(), depth+1)
				}
			}
		case 5:
			if depth < 3 {
				m := v.SetEmptyMap()
				for range rng.IntN(3) {
					value(m.PutEmpty(keys[rng.IntN(len(keys))]), depth+1)
				}
			}
		case 6:
			v.SetEmptyBytes().FromRaw([]byte(words[rng.IntN(len(words))]))
		case 7:
			v.SetStr(strings.Repeat("⟨", rng.IntN(3)) + words[rng.IntN(len(words))])
		}
	}
	for range 1 + rng.IntN(3) {
		rs := td.ResourceSpans().AppendEmpty()
		for range rng.IntN(4) {
			value(rs.Resource().Attributes().PutEmpty([]string{"service.name", "service.version", "host.name", "sampling.adjusted_count", "m"}[rng.IntN(5)]), 0)
		}
		for range 1 + rng.IntN(2) {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(words[rng.IntN(len(words))])
			for range rng.IntN(6) {
				sp := ss.Spans().AppendEmpty()
				var tid pcommon.TraceID
				var sid, pid pcommon.SpanID
				for i := range tid {
					tid[i] = byte(rng.IntN(256))
				}
				for i := range sid {
					sid[i], pid[i] = byte(rng.IntN(256)), byte(rng.IntN(256))
				}
				sp.SetTraceID(tid)
				sp.SetSpanID(sid)
				if rng.IntN(2) == 0 {
					sp.SetParentSpanID(pid)
				}
				sp.SetName(words[rng.IntN(len(words))])
				sp.TraceState().FromRaw(traceStates[rng.IntN(len(traceStates))])
				sp.SetKind(ptrace.SpanKind(rng.IntN(7)))
				sp.SetStartTimestamp(pcommon.Timestamp(rng.Uint64()))
				sp.SetEndTimestamp(pcommon.Timestamp(rng.Uint64() >> rng.IntN(64)))
				sp.Status().SetCode(ptrace.StatusCode(rng.IntN(3)))
				for range rng.IntN(12) {
					value(sp.Attributes().PutEmpty(keys[rng.IntN(len(keys))]), 0)
				}
				if rng.IntN(4) == 0 {
					ev := sp.Events().AppendEmpty()
					ev.SetName("e")
					value(ev.Attributes().PutEmpty("k"), 0)
				}
				if rng.IntN(4) == 0 {
					l := sp.Links().AppendEmpty()
					l.SetTraceID(tid)
					l.SetSpanID(sid)
				}
			}
		}
	}
	return td
}

// TestJSONDiffRandomTraces compares the decoders on pdata-marshalled JSON of
// randomly built traces.
func TestJSONDiffRandomTraces(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	n := 0
	for range 400 {
		for _, cfg := range []DecoderConfig{{}, {ClaimHeader: "x-error-claim"}, samplingDiffConfig, samplingDiffConfig2} {
			spans, err := diffJSON(t, cfg, jsonOf(t, randomTraces(rng)))
			if err != nil {
				t.Fatal(err)
			}
			n += len(spans)
		}
	}
	if n < 1000 {
		t.Fatalf("only %d spans compared", n)
	}
}

// TestJSONDiffFuzzCorpora compares the decoders on every committed fuzz
// input that is a request, or a file of JSON lines.
func TestJSONDiffFuzzCorpora(t *testing.T) {
	var files []string
	for _, dir := range []string{"testdata/fuzz/FuzzDecodeJSONDiff", "testdata/fuzz/FuzzDecodeJSON", "testdata/fuzz/FuzzReadFile"} {
		m, _ := filepath.Glob(filepath.Join(dir, "*"))
		files = append(files, m...)
	}
	for _, name := range files {
		b, ok := readCorpusFile(name)
		if !ok {
			continue
		}
		diffJSON(t, DecoderConfig{}, b)
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			diffJSON(t, DecoderConfig{}, line)
		}
	}
}

// jsonDiffSeeds are the seeds of FuzzDecodeJSONDiff.
func jsonDiffSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, td := range fuzzSeeds(t) {
		seeds = append(seeds, jsonOf(t, td))
	}
	seeds = append(seeds, jsonSeeds()...)
	seeds = append(seeds, jsonEdgeCases()...)
	rng := rand.New(rand.NewPCG(5, 5))
	for range 20 {
		seeds = append(seeds, jsonOf(t, randomTraces(rng)))
	}
	// Not the simulated meshes' requests: the seeds are built again in
	// every fuzzing worker, and TestJSONDiffCorpora compares those.
	return seeds
}

// FuzzDecodeJSONDiff: the JSON decoder and pdata's path agree on any input
// (accept or reject, and span for span), and neither panics.
func FuzzDecodeJSONDiff(f *testing.F) {
	fuzzDiff(f, jsonDiffSeeds(f), diffJSON)
}

// TestJSONWarmDecoder: a decoder reused across requests (its intern table
// warm, its scratch dirty) gives what a fresh one gives.
func TestJSONWarmDecoder(t *testing.T) {
	reqs := jsonEdgeCases()
	sims, _ := simRequests(t)
	for _, b := range sims[:5] {
		reqs = append(reqs, jsonOfProto(t, b))
	}
	warmDecoder(t, reqs, func(d *Decoder, dst []graph.Span, b []byte) ([]graph.Span, error) {
		return d.AppendRequest(dst, b, true)
	})
}

func TestJSONNoAllocs(t *testing.T) {
	sims, _ := simRequests(t)
	escaped := bytes.ReplaceAll(jsonOf(t, benchTraces(20)), []byte(`"GET"`), []byte(`"G\u0045T"`))
	sampled := jsonOf(t, withTraceState(benchTraces(50), "congo=t61rcWkgMzE,ot=rv:abcdef01234567;th:e666"))
	escapedTS := bytes.ReplaceAll(sampled, []byte(`th:e666`), []byte(`th:\u0065666`))
	for _, req := range [][]byte{jsonOf(t, benchTraces(50)), jsonOfProto(t, sims[0]), jsonOfProto(t, sims[len(sims)-1]), escaped, sampled, escapedTS} {
		d := NewDecoder(DecoderConfig{})
		dst, err := d.decodeJSON(nil, req) // warm the intern table
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(20, func() {
			dst, _ = d.decodeJSON(dst[:0], req)
		})
		if allocs != 0 {
			t.Fatalf("%v allocations per request of %d spans, want 0", allocs, len(dst))
		}
	}
}

func TestJSONInterning(t *testing.T) {
	b := bytes.ReplaceAll(jsonOf(t, benchTraces(3)), []byte(`"GET"`), []byte(`"G\u0045T"`))
	d := NewDecoder(DecoderConfig{})
	a, err := d.AppendRequest(nil, b, true)
	if err != nil {
		t.Fatal(err)
	}
	// The request's bytes are reused: nothing decoded may point into them.
	for i := range b {
		b[i] = 0
	}
	c, err := d.AppendRequest(nil, jsonOf(t, benchTraces(3)), true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i] != c[i] {
			t.Fatalf("span %d changed with the request's bytes: %+v vs %+v", i, a[i], c[i])
		}
	}
}

// TestJSONEmptyFieldName: the one request shape where the decoder differs
// from pdata on purpose. pdata's decoders take a field named "" for the end
// of its object and read on out of step: here it makes an empty span of a
// span named "x", and ignores the rest of the request.
func TestJSONEmptyFieldName(t *testing.T) {
	b := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"":null,"name":"x"}]}]}]}`)
	ref, err := appendJSONPdata(NewDecoder(DecoderConfig{}), nil, b)
	if err != nil || len(ref) != 1 || ref[0].Name != "" {
		t.Fatalf("pdata: %v %+v (the test's premise changed)", err, ref)
	}
	_, err = NewDecoder(DecoderConfig{}).AppendRequest(nil, b, true)
	want := `resourceSpans[0].scopeSpans[0].spans[0]: a field named "" (pdata would read the rest of the request out of step) at offset 44`
	if err == nil || err.Error() != want || !errors.Is(err, errEmptyName) {
		t.Fatalf("got %v, want %s", err, want)
	}
	// Skipped objects may have such fields: pdata skips them whole.
	b = []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"x":{"":1},"name":"x"}]}]}]}`)
	if spans, err := diffJSON(t, DecoderConfig{}, b); err != nil || len(spans) != 1 || spans[0].Name != "x" {
		t.Fatalf("%v %+v", err, spans)
	}
}

// TestJSONErrors: errors say what was wrong and where (the field's path
// and the byte offset).
func TestJSONErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SERVER"}]}]}]}`, `resourceSpans[0].scopeSpans[0].spans[0].kind: unknown value "SERVER" at offset 51`},
		{`{"resourceSpans":[{},{"scopeSpans":[{"spans":[{},{"startTimeUnixNano":1.5}]}]}]}`, `resourceSpans[1].scopeSpans[0].spans[1].startTimeUnixNano: 1.5 is not a 64-bit unsigned integer at offset 70`},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":{"intValue":"x"}}]}]}]}]}`, `resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue: "x" is not a 64-bit integer at offset 89`},
		{`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"stringValue":"a\qb"}}]}}]}`, `resourceSpans[0].resource.attributes[0].value.stringValue: invalid escape 'q' in a string at offset 81`},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102"}]}]}]}`, `trace and span ids must be hex in OTLP/JSON (32 and 16 digits): resourceSpans[0].scopeSpans[0].spans[0].traceId: "0102" is not a 16-byte id at offset 54`},
		{`{"resourceSpans":{}}`, `resourceSpans: want an array, found an object at offset 17`},
	} {
		_, err := NewDecoder(DecoderConfig{}).AppendRequest(nil, []byte(tt.in), true)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s:\n got %v\nwant %s", tt.in, err, tt.want)
		}
	}
}

// TestBigFloatOK: bigFloatOK says what big.ParseFloat says of strings of
// number bytes, short ones exhaustively up to 4 bytes, random longer ones,
// and exponents at the edges of big.Float's range.
func TestBigFloatOK(t *testing.T) {
	check := func(s string) {
		t.Helper()
		_, _, err := big.ParseFloat(s, 10, uint(max(64, len(s))), big.ToZero)
		if got := bigFloatOK([]byte(s)); (got == nil) != (err == nil) {
			t.Fatalf("%q: bigFloatOK %v, big.ParseFloat %v", s, got, err)
		}
	}
	alphabet := "0123456789+-.eE"
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		check(prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			if c > '1' && c <= '9' {
				continue // digits 2-9 behave as 1
			}
			gen(prefix+string(c), n-1)
		}
	}
	gen("", 5)
	rng := rand.New(rand.NewPCG(3, 3))
	for range 20000 {
		b := make([]byte, 1+rng.IntN(30))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
	}
	for _, e := range []int64{math.MaxInt32, math.MaxInt32 - 1, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 + 1, math.MinInt32 - 1,
		math.MaxInt32 - 3, math.MaxInt32 - 64, math.MinInt32 + 64, math.MaxInt64, math.MinInt64, math.MaxInt64 / 2, math.MinInt64 / 2} {
		for _, m := range []string{"1", "9", ".5", "05", "0.000", "123456789012345678901234567890", "1." + strings.Repeat("0", 100), strings.Repeat("7", 300)} {
			for d := int64(-70); d <= 70; d += 7 {
				check(m + "e" + strconv.FormatInt(e+d, 10))
			}
			check(m + "e" + strconv.FormatInt(e, 10))
		}
	}
	if err := bigFloatOK([]byte(strings.Repeat("9", 5000) + "e2147471000")); err != errLongNumber {
		t.Fatalf("long number: %v", err)
	}
}

// TestJSONErrorsInFiles: in a file, a decoding error says where as the
// JSON lines reader's own errors do: the column, and the line when the
// request spans several.
func TestJSONErrorsInFiles(t *testing.T) {
	file := "{}\n" +
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"X"}]}]}]}` + "\n" +
		"{\n \"resourceSpans\": [{\"scopeSpans\":[{\"spans\":[\n   {\"kind\": \"X\"}]}]}]\n}\n"
	var bad []string
	_, err := NewDecoder(DecoderConfig{}).ReadFile(strings.NewReader(file), "f.json", nil, func(err error) { bad = append(bad, err.Error()) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`f.json:2: invalid OTLP JSON: resourceSpans[0].scopeSpans[0].spans[0].kind: unknown value "X" at column 52`,
		`f.json:3: invalid OTLP JSON: resourceSpans[0].scopeSpans[0].spans[0].kind: unknown value "X" on line 5, column 13`,
	}
	if !slices.Equal(bad, want) {
		t.Fatalf("got %q\nwant %q", bad, want)
	}
}

// TestJSONLinesDecodedDirectly: a JSON lines file read on one goroutine
// (whose whole lines are decoded without the scanner first, see
// decodeLine) gives the same spans, counts and errors as read by a pool of
// decoders (every line scanned first).
func TestJSONLinesDecodedDirectly(t *testing.T) {
	good := string(jsonOf(t, benchTraces(2)))
	st, spans, bad := compareJSONLinesReads(t, []byte(strings.Join(jsonLinesSeed(good), "\n")+"\n"))
	if st.BadRequests != 9 || len(spans) != 3*benchTraces(2).SpanCount()+1 {
		t.Fatalf("%+v, %d spans, errors %q", st, len(spans), bad)
	}
}

// jsonLinesSeed is a JSON lines file's lines: good requests (good), bad
// ones of every kind, blank lines, documents of several lines.
func jsonLinesSeed(good string) []string {
	return []string{
		good, "", "   ", "{}", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"X"}]}]}]}`,
		`{"resourceSpans":[]} junk`, `{"resourceSpans":[}`, `{"resourceLogs":[{}]}`, `[{"traceId":"a","id":"b"}]`,
		string(deepJSON(70)), "{\n  \"resourceSpans\": [\n    {\"scopeSpans\":[{\"spans\":[{\"name\":\"doc\"}]}]}\n  ]\n}", good,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a\qb"}]}]}]}`, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"":1}]}]}]}`,
		"{\n  \"resourceSpans\": [\n    {\"scopeSpans\":[{\"spans\":[{\"name\":\"doc\", \"kind\":\"Y\"}]}]}\n  ]\n}", good,
	}
}

// compareJSONLinesReads reads file on one goroutine (whole lines decoded
// directly, see decodeLine) and with a pool of two (every line scanned
// first), and fails unless both give the same spans, counts and errors.
func compareJSONLinesReads(t *testing.T, file []byte) (FileStats, []string, []string) {
	t.Helper()
	read := func(workers int) (FileStats, []string, []string, error) {
		d := NewDecoder(DecoderConfig{})
		d.Workers = workers
		var spans, bad []string
		st, err := d.ReadFile(bytes.NewReader(file), "f.jsonl", func(ss []graph.Span) error {
			for _, s := range ss {
				spans = append(spans, fmt.Sprintf("%+v", s))
			}
			return nil
		}, func(err error) { bad = append(bad, err.Error()) })
		slices.Sort(spans)
		slices.Sort(bad)
		return st, spans, bad, err
	}
	st1, spans1, bad1, err1 := read(1)
	st2, spans2, bad2, err2 := read(2)
	if st1 != st2 || !slices.Equal(spans1, spans2) || !slices.Equal(bad1, bad2) || fmt.Sprint(err1) != fmt.Sprint(err2) {
		t.Fatalf("one goroutine: %+v, %d spans, errors %q, %v\npool: %+v, %d spans, errors %q, %v", st1, len(spans1), bad1, err1, st2, len(spans2), bad2, err2)
	}
	return st1, spans1, bad1
}

// FuzzJSONLinesDirect: a JSON lines file reads the same on one goroutine
// (lines decoded directly) as with a pool (lines scanned first).
func FuzzJSONLinesDirect(f *testing.F) {
	good := string(jsonOf(f, benchTraces(1)))
	seed := jsonLinesSeed(good)
	f.Add([]byte(strings.Join(seed, "\n") + "\n"))
	for _, l := range seed {
		f.Add([]byte(l + "\n" + l))
	}
	for _, b := range jsonEdgeCases()[:200] {
		f.Add(append(append(b, '\n'), b...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		compareJSONLinesReads(t, b)
	})
}
