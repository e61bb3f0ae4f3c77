package ingest

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/graph"
)

// exporterRows writes td as the collector's clickhouseexporter writes
// otel_traces rows (every attribute value pcommon.Value.AsString, the kind
// and status code by name, the service from service.name), as Rows.
func exporterRows(td ptrace.Traces) []Row {
	var out []Row
	for _, rs := range td.ResourceSpans().All() {
		var resK, resV []string
		service := ""
		for k, v := range rs.Resource().Attributes().All() {
			resK, resV = append(resK, k), append(resV, v.AsString())
			if k == "service.name" {
				service = v.AsString()
			}
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				r := Row{TraceID: graph.TraceID(sp.TraceID()), SpanID: graph.SpanID(sp.SpanID()), ParentID: graph.SpanID(sp.ParentSpanID()),
					Kind: KindOfName(kindName(sp.Kind())), Name: sp.Name(), Service: service, TraceState: sp.TraceState().AsRaw(),
					Start: int64(sp.StartTimestamp()), End: int64(sp.EndTimestamp()),
					StatusError: StatusErrorOfName(statusName(sp.Status().Code())), ResKeys: resK, ResValues: resV}
				for k, v := range sp.Attributes().All() {
					r.AttrKeys, r.AttrValues = append(r.AttrKeys, k), append(r.AttrValues, v.AsString())
				}
				out = append(out, r)
			}
		}
	}
	return out
}

// kindName and statusName are the exporter's names (traceutil.SpanKindStr,
// traceutil.StatusCodeStr).
func kindName(k ptrace.SpanKind) string {
	return [...]string{"Unspecified", "Internal", "Server", "Client", "Producer", "Consumer"}[k]
}

func statusName(c ptrace.StatusCode) string { return [...]string{"Unset", "Ok", "Error"}[c] }

// A span read from a table row as the clickhouseexporter writes it is the
// span decoded from the OTLP it was written from — over the simulated
// meshes (HTTP and gRPC, claims in headers and metadata, retries,
// fail-open, suppressed retries, peers, targets) and the README's sample,
// with each scenario's claim header and a configured sampling source.
func TestRowIsOTLP(t *testing.T) {
	reqs, headers := simRequests(t)
	for _, r := range sampleRequests(t) {
		reqs, headers = append(reqs, r), append(headers, "")
	}
	n := 0
	for i, b := range reqs {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			t.Fatal(err)
		}
		td := req.Traces()
		cfg := DecoderConfig{ClaimHeader: headers[i], SamplingConfig: SamplingConfig{ServiceProbability: map[string]float64{"svc-1-0": 0.5}}}
		want := NewDecoder(cfg).AppendTraces(nil, td)
		d := NewDecoder(cfg)
		var got []graph.Span
		for _, r := range exporterRows(td) {
			got = d.AppendRow(got, &r)
		}
		if len(got) != len(want) {
			t.Fatalf("request %d: %d spans from rows, %d from OTLP", i, len(got), len(want))
		}
		for j := range want {
			if !reflect.DeepEqual(got[j], want[j]) {
				t.Fatalf("request %d span %d:\n rows %+v\n OTLP %+v", i, j, got[j], want[j])
			}
		}
		n += len(want)
	}
	if n < 1000 {
		t.Fatalf("only %d spans compared", n)
	}
}

// A captured claim header is a string array in OTLP, JSON in a row: read
// as the array either way; a value the exporter could not tell from a
// string reads as a string.
func TestRowHeaderArrays(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	for _, c := range []struct {
		v    pcommon.Value
		want graph.Claim
	}{
		{pcommon.NewValueStr("claimed"), graph.ClaimClaimed},
		{sliceOf("claimed", "x"), graph.ClaimClaimed},
		{sliceOf("unclaimed"), graph.ClaimUnclaimed},
		{sliceOf(), graph.ClaimMissing},
		{pcommon.NewValueInt(3), graph.ClaimInvalid},
	} {
		r := Row{Kind: graph.KindClient, Name: "GET", AttrKeys: []string{"http.response.header.X-Error-Claim"}, AttrValues: []string{c.v.AsString()}}
		if got := d.AppendRow(nil, &r)[0].Claim; got != c.want {
			t.Errorf("%s written %q: claim %v, want %v", c.v.Type(), c.v.AsString(), got, c.want)
		}
	}
}

func sliceOf(s ...string) pcommon.Value {
	v := pcommon.NewValueSlice()
	for _, e := range s {
		v.Slice().AppendEmpty().SetStr(e)
	}
	return v
}

// A captured header's value as the exporter writes it, read without
// json.Unmarshal when it is one plain string, reads as json.Unmarshal
// reads it, whatever it holds.
func TestRowOneString(t *testing.T) {
	for _, v := range []string{`["claimed"]`, `[""]`, `["a\"b"]`, `["a\\b"]`, `["x","y"]`, `[1]`, `[]`, `["\u00e9"]`, `["é"]`,
		"[\"a\x01\"]", "[\"\xff\"]", `["a"`, `["a"] `, `[ "a"]`, `["]`, `[""]]`, `["a","]`, `[null]`} {
		want := attrVal{typ: vStr, str: v}
		var arr []any
		if json.Unmarshal([]byte(v), &arr) == nil {
			want = attrVal{typ: vSlice, elems: len(arr) > 0}
			if len(arr) > 0 {
				if s, ok := arr[0].(string); ok {
					want.first, want.str = vStr, s
				} else {
					want.first = vMap
				}
			}
		}
		if got := rowVal(sClaimHeader, v); got != want {
			t.Errorf("%q: %+v, want %+v", v, got, want)
		}
	}
	// The usual one, read without allocating.
	d := NewDecoder(DecoderConfig{})
	r := Row{Kind: graph.KindClient, Name: "GET", AttrKeys: []string{"http.response.header.X-Error-Claim"}, AttrValues: []string{`["claimed"]`}}
	dst := d.AppendRow(nil, &r)
	if a := testing.AllocsPerRun(10, func() { dst = d.AppendRow(dst[:0], &r) }); a != 0 || dst[0].Claim != graph.ClaimClaimed {
		t.Errorf("%v allocations, claim %v", a, dst[0].Claim)
	}
}

// AppendRow keeps none of a row's strings: spans read from rows whose
// strings are views of one buffer are unchanged when the buffer is
// overwritten afterwards, and equal those read from rows of ordinary
// strings. With the names interned, it allocates nothing.
func TestRowKeepsNoStrings(t *testing.T) {
	reqs, headers := simRequests(t)
	n := 0
	for i, b := range reqs {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			t.Fatal(err)
		}
		rows := exporterRows(req.Traces())
		cfg := DecoderConfig{ClaimHeader: headers[i]}
		want := NewDecoder(cfg).AppendTraces(nil, req.Traces())
		var buf []byte
		views := make([]Row, len(rows))
		for j, r := range rows {
			views[j] = r
			v := &views[j]
			for _, s := range []*string{&v.Name, &v.Service, &v.TraceState} {
				buf = append(buf, *s...)
			}
			for _, ss := range [][]string{v.AttrKeys, v.AttrValues, v.ResKeys, v.ResValues} {
				for _, s := range ss {
					buf = append(buf, s...)
				}
			}
		}
		at := 0
		view := func(s *string) {
			*s = unsafe.String(unsafe.SliceData(buf[at:]), len(*s))
			at += len(*s)
		}
		for j := range views {
			v := &views[j]
			v.AttrKeys, v.AttrValues = slices.Clone(v.AttrKeys), slices.Clone(v.AttrValues)
			v.ResKeys, v.ResValues = slices.Clone(v.ResKeys), slices.Clone(v.ResValues)
			for _, s := range []*string{&v.Name, &v.Service, &v.TraceState} {
				view(s)
			}
			for _, ss := range [][]string{v.AttrKeys, v.AttrValues, v.ResKeys, v.ResValues} {
				for k := range ss {
					view(&ss[k])
				}
			}
		}
		d := NewDecoder(cfg)
		var got []graph.Span
		for j := range views {
			got = d.AppendRow(got, &views[j])
		}
		for j := range buf {
			buf[j] = '#'
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("request %d: the spans of rows of views changed with their buffer", i)
		}
		allocs := testing.AllocsPerRun(3, func() {
			got = got[:0]
			for j := range rows {
				got = d.AppendRow(got, &rows[j])
			}
		})
		if allocs != 0 {
			t.Errorf("request %d: %v allocations for %d rows read again", i, allocs, len(rows))
		}
		n += len(got)
	}
	if n < 1000 {
		t.Fatalf("only %d spans compared", n)
	}
}
