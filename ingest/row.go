package ingest

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/stormradius/stormradius/graph"
)

// Row is one span as a table keeps it when every attribute value is a
// string: the OpenTelemetry Collector's clickhouseexporter writes its
// otel_traces table so (pcommon.Value.AsString: an int as its decimal, a
// bool as true or false, an array or a map as JSON). A reader fills it from
// the table's columns and hands it to Decoder.AppendRow, which applies the
// span conventions of docs/SPEC.md §2 as for OTLP.
type Row struct {
	TraceID  graph.TraceID
	SpanID   graph.SpanID
	ParentID graph.SpanID
	Kind     graph.Kind
	// Name is the span's name; Service its resource's service.name (""
	// when it had none); TraceState its W3C tracestate.
	Name, Service, TraceState string
	// Start and End are unix nanoseconds.
	Start, End int64
	// StatusError: the span's status is ERROR.
	StatusError bool
	// AttrKeys and AttrValues are the span's attributes, ResKeys and
	// ResValues its resource's (the same length each): only those the
	// decoder reads need be there (RowAttributes).
	AttrKeys, AttrValues []string
	ResKeys, ResValues   []string
}

// RowAttributes says which attributes AppendRow reads, for a reader to
// fetch only those: span attributes named in Span, or whose name starts
// with one of SpanPrefixes (the captured claim header's, matched
// case-insensitively by AppendRow), and resource attributes named in
// Resource.
type RowAttributes struct {
	Span, SpanPrefixes, Resource []string
}

// RowAttributes returns the attributes d reads from a Row.
func (d *Decoder) RowAttributes() RowAttributes {
	d.ready()
	var out RowAttributes
	for _, e := range slotKeys {
		out.Span = append(out.Span, e.key)
	}
	if d.countDyn != "" {
		out.Span = append(out.Span, d.countDyn)
	}
	out.SpanPrefixes = []string{headerPrefix, metadataPrefix}
	out.Resource = []string{"service.version"}
	if d.countKey != "" {
		out.Resource = append(out.Resource, d.countKey)
	}
	slices.Sort(out.Span)
	out.Span = slices.Compact(out.Span)
	return out
}

func (d *Decoder) ready() {
	if d.strs == nil {
		d.init(DecoderConfig{})
	}
}

// AppendRow appends the graph.Span of r to dst: the span AppendTraces
// gives for the OTLP span the row was written from, but where the row
// cannot say what the span held — an attribute whose value was not a
// string reads as the string the exporter wrote (docs/SPEC.md §2; a
// captured header holding a JSON array of strings reads as that array,
// as the exporter writes one).
//
// AppendRow keeps none of r's strings past the call (what the span keeps
// is interned: copied the first time it is seen), so a reader may hand it
// views of its own buffers; once the names are interned, it allocates
// nothing (a captured header's array of more than one string, or one with
// escapes, is the exception: it is parsed as JSON).
func (d *Decoder) AppendRow(dst []graph.Span, r *Row) []graph.Span {
	d.ready()
	d.cut = false
	service, version, count := UnknownService, "", 0.0
	if r.Service != "" {
		service = d.intern(r.Service)
	}
	seen := false
	for i, k := range r.ResKeys {
		v := r.ResValues[i]
		if k == d.countKey && d.countKey != "" {
			av := attrVal{typ: vStr, str: v}
			resourceCount(&count, &seen, &av)
		}
		if k == "service.version" && version == "" {
			version = d.intern(v)
		}
	}
	d.resCut = d.cut
	d.res = d.resSampling(service, count)

	dst = append(dst, graph.Span{})
	out := &dst[len(dst)-1]
	out.TraceID, out.SpanID, out.ParentID = r.TraceID, r.SpanID, r.ParentID
	out.Kind = r.Kind
	out.Service, out.Version = service, version
	d.cut = d.resCut
	out.Name = d.intern(r.Name)
	out.Start, out.End = r.Start, r.End

	a := &d.attrs
	a.has = 0
	for i, k := range r.AttrKeys {
		if s, ok := d.slotOf(k); ok && a.has&(1<<s) == 0 {
			a.has |= 1 << s
			a.v[s] = rowVal(s, r.AttrValues[i])
		}
	}
	d.derive(out, a, r.StatusError, r.TraceState)
	d.res.finish(out)
	return dst
}

// rowVal is the value of slot s written as the string v: a captured
// header's or metadata's JSON array of strings is that array (its first
// element counts), anything else a string.
func rowVal(s slot, v string) attrVal {
	if (s == sClaimHeader || s == sClaimMeta) && strings.HasPrefix(v, "[") {
		if first, ok := oneString(v); ok {
			return attrVal{typ: vSlice, elems: true, first: vStr, str: first}
		}
		var arr []any
		if json.Unmarshal([]byte(v), &arr) == nil {
			out := attrVal{typ: vSlice, elems: len(arr) > 0}
			if len(arr) > 0 {
				if first, ok := arr[0].(string); ok {
					out.first, out.str = vStr, first
				} else {
					out.first = vMap // not a string: the claim is invalid
				}
			}
			return out
		}
	}
	return attrVal{typ: vStr, str: v}
}

// oneString returns s when the JSON v is an array of that one string
// written without escapes (as the exporter writes a captured header's
// single value: json.Marshal of []any{s}), without allocating; ok is
// false for anything else, which json.Unmarshal then reads.
func oneString(v string) (s string, ok bool) {
	if len(v) < 4 || v[:2] != `["` || v[len(v)-2:] != `"]` {
		return "", false
	}
	s = v[2 : len(v)-2]
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			return "", false
		}
	}
	return s, utf8.ValidString(s)
}

// KindOfName maps a span kind as tables write it — the exporter's
// "Server", "Client", "Producer", "Consumer", "Internal", or OTLP's
// "SPAN_KIND_SERVER"… — to a graph.Kind; anything else is unspecified.
func KindOfName(s string) graph.Kind {
	s = strings.TrimPrefix(s, "SPAN_KIND_")
	switch strings.ToLower(s) {
	case "internal":
		return graph.KindInternal
	case "server":
		return graph.KindServer
	case "client":
		return graph.KindClient
	case "producer":
		return graph.KindProducer
	case "consumer":
		return graph.KindConsumer
	}
	return graph.KindUnspecified
}

// StatusErrorOfName reports whether a status code as tables write it —
// the exporter's "Error", or OTLP's "STATUS_CODE_ERROR" — is ERROR.
func StatusErrorOfName(s string) bool {
	return strings.EqualFold(strings.TrimPrefix(s, "STATUS_CODE_"), "error")
}
