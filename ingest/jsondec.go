package ingest

import (
	"errors"
	"math"

	"github.com/stormradius/stormradius/graph"
)

// The OTLP/JSON decoder: one pass over a request, straight to graph.Span
// records. It checks the syntax as the jsonScanner does (brackets that
// match, literals spelt out, nothing after the request, at most
// MaxJSONDepth levels), so that what it accepts the scanner accepts. No
// pdata object, no map and no interface value is built: strings are views
// of the request (or, when they hold escapes, of a per-span arena) until
// what is kept of them is interned, as in the protobuf path.
//
// It accepts and rejects what pdata's JSONUnmarshaler (jsoniter underneath,
// in its ConfigFastest) followed by AppendTraces does, and gives the same
// spans; differential tests and FuzzDecodeJSONDiff hold it to that. pdata's
// rules, as its generated UnmarshalJSON methods and jsoniter apply them:
//
//   - Field names in camelCase or snake_case; unknown fields skipped, but
//     checked as jsoniter's Skip checks them (strings, numbers, nested keys).
//   - null is an empty object where an object is wanted (a null span is a
//     span), an empty array where an array is, "" where a string is; it is
//     an error where a number, a bool, an id or bytes are wanted.
//   - A field given twice: arrays append, objects merge, scalars and the
//     AnyValue's variant are the last one's.
//   - Strings: a control character is an error before the first backslash
//     and kept as it is after it; escapes as jsoniter decodes them (\uXXXX,
//     surrogate pairs, a lone surrogate as U+FFFD); invalid UTF-8 is kept.
//   - Ids: hex, read without unescaping (any backslash is an error); ""
//     is the zero id. As before this decoder, an id that is not hex but is
//     the id's size in base64 (protobuf's generic JSON mapping) is read as
//     such when its field name is written without escapes.
//   - Integers: a JSON integer (no fraction, exponent or leading zero), or
//     a string strconv parses; jsoniter's overflow check for numbers is
//     kept as it is (it misses some 20-digit values, which wrap).
//   - Doubles: jsoniter's number syntax (which lets "-+1" through), or a
//     string strconv.ParseFloat parses ("NaN", "Infinity").
//   - Enums (kind, status code): a number, or the exact name.
//   - bytesValue: standard base64, padded, as encoding/base64 decodes it.
//   - The deprecated deprecatedScopeSpans of a resource stand for its
//     scopeSpans when it has none (pdata's MigrateTraces).
//
// Two differences on purpose, on input no producer writes: a field named ""
// (see jField) and, in an unknown field, a malformed number too long to
// check cheaply (see bigFloatOK) are rejected.

// decodeJSON decodes one JSON request and appends its spans to dst. On
// error dst is returned unchanged.
//
// It checks the request's syntax as strictly as the scanner (checkJSON,
// jsonScanner) does, and its depth: a request it accepts, the scanner
// accepts. So it can run without the scanner in front (AppendRequest asks
// the scanner only what is wrong with a request it rejects), and the
// request's bytes are read once, not twice. What the scanner alone
// checks is the number of elements (MaxJSONElements): AppendRequest
// counts them first.
func (d *Decoder) decodeJSON(dst []graph.Span, b []byte) ([]graph.Span, error) {
	if d.strs == nil {
		d.init(DecoderConfig{})
	}
	d.depth, d.arrays = 0, 0
	i := jws(b, 0)
	if i < len(b) && b[i] == '[' {
		return dst, notRequestArray(b)
	}
	if i >= len(b) || b[i] != '{' {
		return dst, errors.New("not a JSON object: an OTLP/JSON request is an object with resourceSpans")
	}
	n := len(dst)
	out, i, err := d.jRequest(dst, b, i)
	if err != nil {
		return dst, err
	}
	if i = jws(b, i); i < len(b) {
		return dst, jErr(i, "unexpected %s after the end of the JSON request (one request per line)", quoteByte(b[i]))
	}
	if len(out) == n {
		if err := otherKind(b); err != nil {
			return dst, err
		}
	}
	return out, nil
}

// jRequest reads an ExportTraceServiceRequest (or TracesData) object.
func (d *Decoder) jRequest(dst []graph.Span, b []byte, i int) ([]graph.Span, int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return dst, i, err
		}
		switch string(key) {
		case "resourceSpans", "resource_spans":
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				if dst, i, err = d.jResourceSpans(dst, b, i); err != nil {
					return dst, i, inKey(inIndex(err, n), key)
				}
				i, m, err = d.jNext(b, i)
			}
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return dst, i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return dst, i, err
}

// jResourceSpans reads a ResourceSpans object. Its resource may come after
// its spans: the spans are decoded first, and given the resource's names
// when the object ends.
func (d *Decoder) jResourceSpans(dst []graph.Span, b []byte, i int) ([]graph.Span, int, error) {
	start := len(dst)
	service, version := UnknownService, ""
	resCut := false
	var count float64
	countSeen := false
	nScope := 0
	d.skipped = d.skipped[:0]
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return dst, i, err
		}
		switch string(key) {
		case "resource":
			i, err = d.jResource(b, i, &service, &version, &resCut, &count, &countSeen)
		case "scopeSpans", "scope_spans", "deprecatedScopeSpans", "deprecated_scope_spans":
			dep := key[0] == 'd'
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				if dep {
					d.skipped, i, err = d.jScopeSpans(d.skipped, b, i)
				} else {
					dst, i, err = d.jScopeSpans(dst, b, i)
					nScope++
				}
				if err != nil {
					err = inIndex(err, n)
					break
				}
				i, m, err = d.jNext(b, i)
			}
		case "schemaUrl", "schema_url":
			_, i, err = d.jStr(b, i, strCheck)
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return dst, i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	if err != nil {
		return dst, i, err
	}
	if nScope == 0 {
		// pdata's MigrateTraces: the deprecated spans stand in.
		dst = append(dst, d.skipped...)
	}
	clear(d.skipped)
	res := d.resSampling(service, count)
	for k := start; k < len(dst); k++ {
		s := &dst[k]
		s.Service, s.Version = service, version
		s.Truncated = s.Truncated || resCut
		res.finish(s)
	}
	return dst, i, nil
}

// jResource reads a Resource: its service.name (the last non-empty string
// value) and service.version (the last string value), interned as
// Decoder.resource interns them (every one, so that a cut name marks the
// spans even if a later one replaces it), and its adjusted-count attribute
// (the first, into count as resSampling.count; countSeen says whether one
// was seen).
func (d *Decoder) jResource(b []byte, i int, service, version *string, cut *bool, count *float64, countSeen *bool) (int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return i, err
		}
		switch string(key) {
		case "attributes":
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				var k []byte
				if k, i, err = d.jKeyValue(b, i, &d.jv); err != nil {
					err = inIndex(err, n)
					break
				}
				if !*countSeen && d.countKey != "" && string(k) == d.countKey {
					resourceCount(count, countSeen, &d.jv)
				}
				if d.jv.typ == vStr {
					switch string(k) {
					case "service.name":
						if d.jv.str != "" {
							d.cut = false
							*service = d.intern(d.jv.str)
							*cut = *cut || d.cut
						}
					case "service.version":
						d.cut = false
						*version = d.intern(d.jv.str)
						*cut = *cut || d.cut
					}
				}
				i, m, err = d.jNext(b, i)
			}
		case "droppedAttributesCount", "dropped_attributes_count":
			_, i, err = d.jUint(b, i, 32)
		case "entityRefs", "entity_refs":
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				if i, err = d.jEntityRef(b, i); err != nil {
					err = inIndex(err, n)
					break
				}
				i, m, err = d.jNext(b, i)
			}
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}

// jEntityRef checks an EntityRef.
func (d *Decoder) jEntityRef(b []byte, i int) (int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return i, err
		}
		switch string(key) {
		case "schemaUrl", "schema_url", "type":
			_, i, err = d.jStr(b, i, strCheck)
		case "idKeys", "id_keys", "descriptionKeys", "description_keys":
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				if _, i, err = d.jStr(b, i, strCheck); err != nil {
					err = inIndex(err, n)
					break
				}
				i, m, err = d.jNext(b, i)
			}
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}

// jScopeSpans reads a ScopeSpans object, appending its spans to dst.
func (d *Decoder) jScopeSpans(dst []graph.Span, b []byte, i int) ([]graph.Span, int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return dst, i, err
		}
		switch string(key) {
		case "spans":
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				dst = append(dst, graph.Span{})
				if i, err = d.jSpan(&dst[len(dst)-1], b, i); err != nil {
					err = inIndex(err, n)
					break
				}
				i, m, err = d.jNext(b, i)
			}
		case "scope":
			i, err = d.jScope(b, i)
		case "schemaUrl", "schema_url":
			_, i, err = d.jStr(b, i, strCheck)
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return dst, i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return dst, i, err
}

// jScope checks an InstrumentationScope.
func (d *Decoder) jScope(b []byte, i int) (int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return i, err
		}
		switch string(key) {
		case "name", "version":
			_, i, err = d.jStr(b, i, strCheck)
		case "attributes":
			i, err = d.jCheckAttrs(b, i)
		case "droppedAttributesCount", "dropped_attributes_count":
			_, i, err = d.jUint(b, i, 32)
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}

// jCheckAttrs checks an attributes array that is not read.
func (d *Decoder) jCheckAttrs(b []byte, i int) (int, error) {
	i, more, err := d.jOpen(b, i, '[')
	for n := 0; more && err == nil; n++ {
		if _, i, err = d.jKeyValue(b, i, nil); err != nil {
			return i, inIndex(err, n)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}

// jSpan reads a Span object into out (a zero Span) as span does from a
// pdata span, but for the resource's names and sampling (see
// jResourceSpans).
func (d *Decoder) jSpan(out *graph.Span, b []byte, i int) (int, error) {
	a := &d.attrs
	a.has = 0
	d.arena = d.arena[:0]
	var (
		name, traceState []byte
		kind             int32
		start, end       uint64
		statusError      bool
	)
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		var raw bool
		if key, raw, i, err = d.jField(b, i); err != nil {
			return i, err
		}
		switch string(key) {
		case "attributes":
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				var k []byte
				if k, i, err = d.jKeyValue(b, i, &d.jv); err != nil {
					err = inIndex(err, n)
					break
				}
				if s, ok := d.slotOf(bytesView(k)); ok && a.has&(1<<s) == 0 {
					a.has |= 1 << s
					a.v[s] = d.jv
				}
				i, m, err = d.jNext(b, i)
			}
		case "traceId", "trace_id":
			i, err = jID(out.TraceID[:], b, i, raw)
		case "spanId", "span_id":
			i, err = jID(out.SpanID[:], b, i, raw)
		case "parentSpanId", "parent_span_id":
			i, err = jID(out.ParentID[:], b, i, raw)
		case "name":
			name, i, err = d.jStr(b, i, strKeep)
		case "kind":
			kind, i, err = d.jEnum(b, i, spanKindNames)
		case "startTimeUnixNano", "start_time_unix_nano":
			start, i, err = d.jUint(b, i, 64)
		case "endTimeUnixNano", "end_time_unix_nano":
			end, i, err = d.jUint(b, i, 64)
		case "status":
			i, err = d.jStatus(b, i, &statusError)
		case "traceState", "trace_state":
			traceState, i, err = d.jStr(b, i, strKeep)
		case "flags", "droppedAttributesCount", "dropped_attributes_count", "droppedEventsCount",
			"dropped_events_count", "droppedLinksCount", "dropped_links_count":
			_, i, err = d.jUint(b, i, 32)
		case "events":
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				if i, err = d.jEvent(b, i); err != nil {
					err = inIndex(err, n)
					break
				}
				i, m, err = d.jNext(b, i)
			}
		case "links":
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				if i, err = d.jLink(b, i); err != nil {
					err = inIndex(err, n)
					break
				}
				i, m, err = d.jNext(b, i)
			}
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	if err != nil {
		return i, err
	}
	out.Kind = kindOf(kind)
	d.cut = false
	out.Name = d.internBytes(name)
	out.Start = unixNanos(start)
	out.End = unixNanos(end)
	// Its sampling is completed with its resource's (jResourceSpans).
	d.derive(out, a, statusError, bytesView(traceState))
	return i, nil
}

// jStatus reads a Status: whether its code is ERROR (a status given in
// several pieces merges: the last code given counts).
func (d *Decoder) jStatus(b []byte, i int, isError *bool) (int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return i, err
		}
		switch string(key) {
		case "code":
			var c int32
			c, i, err = d.jEnum(b, i, statusCodeNames)
			*isError = c == 2
		case "message":
			_, i, err = d.jStr(b, i, strCheck)
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}

// jEvent checks a span event.
func (d *Decoder) jEvent(b []byte, i int) (int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return i, err
		}
		switch string(key) {
		case "timeUnixNano", "time_unix_nano":
			_, i, err = d.jUint(b, i, 64)
		case "name":
			_, i, err = d.jStr(b, i, strCheck)
		case "attributes":
			i, err = d.jCheckAttrs(b, i)
		case "droppedAttributesCount", "dropped_attributes_count":
			_, i, err = d.jUint(b, i, 32)
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}

// jLink checks a span link, ids included.
func (d *Decoder) jLink(b []byte, i int) (int, error) {
	var id [16]byte
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		var raw bool
		if key, raw, i, err = d.jField(b, i); err != nil {
			return i, err
		}
		switch string(key) {
		case "traceId", "trace_id":
			i, err = jID(id[:16], b, i, raw)
		case "spanId", "span_id":
			i, err = jID(id[:8], b, i, raw)
		case "traceState", "trace_state":
			_, i, err = d.jStr(b, i, strCheck)
		case "attributes":
			i, err = d.jCheckAttrs(b, i)
		case "droppedAttributesCount", "dropped_attributes_count", "flags":
			_, i, err = d.jUint(b, i, 32)
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}

// jKeyValue reads a KeyValue object: its key (the last given; kept in the
// span's arena if it had escapes) and, when v is not nil, its value into v
// (reset first; a value given in several pieces merges, the last variant
// given wins). With v nil it only checks it.
func (d *Decoder) jKeyValue(b []byte, i int, v *attrVal) ([]byte, int, error) {
	if v != nil {
		*v = attrVal{}
	}
	var k []byte
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		switch {
		case qKey.at(b, i): // as every producer writes it
			key, i = b[i+1:i+4], jws(b, i+6)
		case qValue.at(b, i):
			key, i = b[i+1:i+6], jws(b, i+8)
		default:
			if key, _, i, err = d.jField(b, i); err != nil {
				return nil, i, err
			}
		}
		switch string(key) {
		case "key":
			mode := strCheck
			if v != nil {
				mode = strKeep
			}
			k, i, err = d.jStr(b, i, mode)
		case "value":
			i, err = d.jAnyValue(b, i, v)
		case "keyStrindex", "key_strindex":
			_, i, err = d.jInt(b, i, 32)
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return nil, i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return k, i, err
}

// jAnyValue reads an AnyValue object into v (nil: only check it): each
// variant given replaces the value, others leave it as it was.
func (d *Decoder) jAnyValue(b []byte, i int, v *attrVal) (int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		switch {
		case qStringValue.at(b, i):
			key, i = b[i+1:i+12], jws(b, i+14)
		case qIntValue.at(b, i):
			key, i = b[i+1:i+9], jws(b, i+11)
		default:
			if key, _, i, err = d.jField(b, i); err != nil {
				return i, err
			}
		}
		switch string(key) {
		case "stringValue", "string_value":
			if v == nil {
				_, i, err = d.jStr(b, i, strCheck)
				break
			}
			var s []byte
			if s, i, err = d.jStr(b, i, strKeep); err == nil {
				*v = attrVal{typ: vStr, str: bytesView(s)}
			}
		case "boolValue", "bool_value":
			var t bool
			if t, i, err = jBool(b, i); err == nil && v != nil {
				*v = attrVal{typ: vBool}
				if t {
					v.num = 1
				}
			}
		case "intValue", "int_value":
			var n int64
			if n, i, err = d.jInt(b, i, 64); err == nil && v != nil {
				*v = attrVal{typ: vInt, num: uint64(n)}
			}
		case "doubleValue", "double_value":
			var f float64
			if f, i, err = d.jFloat(b, i); err == nil && v != nil {
				*v = attrVal{typ: vDouble, num: math.Float64bits(f)}
			}
		case "arrayValue", "array_value":
			if v != nil {
				*v = attrVal{typ: vSlice}
			}
			i, err = d.jArrayValue(b, i, v)
		case "kvlistValue", "kvlist_value":
			if v != nil {
				*v = attrVal{typ: vMap}
			}
			i, err = d.jKvlist(b, i)
		case "bytesValue", "bytes_value":
			if i, err = d.jBytes(b, i); err == nil && v != nil {
				*v = attrVal{typ: vBytes}
			}
		case "stringValueStrindex", "string_value_strindex":
			if _, i, err = d.jInt(b, i, 32); err == nil && v != nil {
				*v = attrVal{} // pdata's Empty
			}
		default:
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}

// jArrayValue reads an ArrayValue object into v (already a vSlice; nil:
// only check it): whether it has elements, and its first element.
func (d *Decoder) jArrayValue(b []byte, i int, v *attrVal) (int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return i, err
		}
		if string(key) == "values" {
			var m bool
			i, m, err = d.jOpen(b, i, '[')
			for n := 0; m && err == nil; n++ {
				if v != nil && !v.elems {
					// The first element, decoded in v itself (a local
					// would escape: the decoding is recursive), then v
					// made the array again.
					*v = attrVal{}
					if i, err = d.jAnyValue(b, i, v); err == nil {
						first, str := v.typ, v.str
						*v = attrVal{typ: vSlice, elems: true, first: first}
						if first == vStr {
							v.str = str
						}
					}
				} else {
					i, err = d.jAnyValue(b, i, nil)
				}
				if err != nil {
					err = inIndex(err, n)
					break
				}
				i, m, err = d.jNext(b, i)
			}
		} else {
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}

// jKvlist checks a KeyValueList object.
func (d *Decoder) jKvlist(b []byte, i int) (int, error) {
	i, more, err := d.jOpen(b, i, '{')
	for more && err == nil {
		var key []byte
		if key, _, i, err = d.jField(b, i); err != nil {
			return i, err
		}
		if string(key) == "values" {
			i, err = d.jCheckAttrs(b, i)
		} else {
			i, err = d.jSkip(b, i)
		}
		if err != nil {
			return i, inKey(err, key)
		}
		i, more, err = d.jNext(b, i)
	}
	return i, err
}
