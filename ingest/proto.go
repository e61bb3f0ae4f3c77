package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/stormradius/stormradius/graph"
)

// MaxProtoDepth bounds the nesting of a protobuf request's attribute values
// (arrays and key-value lists inside arrays and lists): it is pdata's own
// recursion limit, counted as pdata counts it (a KeyValue, an AnyValue, an
// ArrayValue or a KeyValueList is one level each, from the attribute's
// KeyValue at level 0), so the wire decoder and pdata accept the same
// requests. A deeper request is rejected with an error wrapping ErrLimit.
const MaxProtoDepth = 100

// The protobuf wire types.
const (
	wtVarint     = 0
	wtI64        = 1
	wtLen        = 2
	wtStartGroup = 3
	wtEndGroup   = 4
	wtI32        = 5
)

var (
	errVarintOverflow = errors.New("varint longer than 10 bytes")
	errNegativeLength = errors.New("negative length")
	errEndGroup       = errors.New("end-group tag without a start-group tag")
	errTooDeep        = newKindError(ErrLimit, nil, fmt.Sprintf("attribute value nested deeper than %d levels", MaxProtoDepth))
)

// errEOF is a field that runs past the end of its message (or of the
// request): the error wraps io.ErrUnexpectedEOF, as pdata's does.
var errEOF = fmt.Errorf("field runs past the end of its message: %w", io.ErrUnexpectedEOF)

// wireError describes a malformed field: msg is the message and field
// names it ("span", "span_id").
func wireError(msg, field string, err error) error {
	return fmt.Errorf("%s.%s: %w", msg, field, err)
}

// wrongType is a known field with another wire type than its own.
func wrongType(msg, field string, wt uint8) error {
	return fmt.Errorf("%s.%s: wrong wire type %d", msg, field, wt)
}

// bytesView returns b as a string without copying: only for strings that
// are not kept (looked up, hashed, parsed, or copied by intern).
func bytesView(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// varint reads a base-128 varint at b[i:] and returns it and the index
// after it; the index is -1 when b ends inside it, -2 when it is longer
// than 10 bytes. A tenth byte's bits beyond 64 are dropped, as pdata does.
func varint(b []byte, i int) (uint64, int) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	return varintSlow(b, i)
}

//go:noinline
func varintSlow(b []byte, i int) (uint64, int) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if i >= len(b) {
			return 0, -1
		}
		c := b[i]
		i++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, i
		}
	}
	return 0, -2
}

// varintErr is the error for a varint index below 0.
func varintErr(i int) error {
	if i == -1 {
		return errEOF
	}
	return errVarintOverflow
}

// tag reads a field's tag at b[i:]: its number, its wire type and the index
// after it. The number is truncated to 32 bits and must then be positive,
// as pdata has it. Hot loops call tagFast, then tagSlow when it fails.
func tag(b []byte, i int) (int32, uint8, int, error) {
	if f, wt, j := tagFast(b, i); j >= 0 {
		return f, wt, j, nil
	}
	return tagSlow(b, i)
}

// tagFast reads a one-byte tag (fields 1 to 15) at b[i], i < len(b); the
// index it returns is -1 for any other tag.
func tagFast(b []byte, i int) (int32, uint8, int) {
	if c := b[i]; c < 0x80 && c >= 8 {
		return int32(c >> 3), c & 7, i + 1
	}
	return 0, 0, -1
}

func tagSlow(b []byte, i int) (int32, uint8, int, error) {
	t, j := varint(b, i)
	if j < 0 {
		return 0, 0, 0, varintErr(j)
	}
	f := int32(t >> 3)
	if f <= 0 {
		return 0, 0, 0, fmt.Errorf("illegal field number %d (tag %d)", f, t)
	}
	return f, uint8(t & 7), j, nil
}

// length reads a length-delimited field's length at b[i:] and returns where
// its content starts and ends. Hot loops call lenFast, then lengthSlow when
// it fails.
func length(b []byte, i int) (int, int, error) {
	if s, e := lenFast(b, i); e >= 0 {
		return s, e, nil
	}
	return lengthSlow(b, i)
}

// lenFast reads a one-byte length at b[i:]; the end it returns is -1 when
// the length is longer, or runs past the end of b.
func lenFast(b []byte, i int) (int, int) {
	if i < len(b) && b[i] < 0x80 {
		if e := i + 1 + int(b[i]); e <= len(b) {
			return i + 1, e
		}
	}
	return 0, -1
}

func lengthSlow(b []byte, i int) (int, int, error) {
	n, s := varint(b, i)
	if s < 0 {
		return 0, 0, varintErr(s)
	}
	l := int(n)
	if l < 0 {
		return 0, 0, errNegativeLength
	}
	e := s + l
	if e < 0 || e > len(b) {
		return 0, 0, errEOF
	}
	return s, e, nil
}

// fixed64 reads a little-endian 64-bit field at b[i:].
func fixed64(b []byte, i int) (uint64, int, error) {
	if i < 0 || len(b)-i < 8 {
		return 0, 0, errEOF
	}
	return binary.LittleEndian.Uint64(b[i:]), i + 8, nil
}

// skip skips the content of an unknown field of wire type wt at b[i:]. It
// is pdata's ConsumeUnknown, groups included, so that both reject the same
// input: a start-group's first field that is not itself a group or an end
// ends the skip.
func skip(b []byte, i int, wt uint8) (int, error) {
	depth := 0
	for i < len(b) {
		switch wt {
		case wtVarint:
			_, j := varint(b, i)
			if j < 0 {
				return 0, varintErr(j)
			}
			return j, nil
		case wtI64:
			if len(b)-i < 8 {
				return 0, errEOF
			}
			return i + 8, nil
		case wtLen:
			_, e, err := length(b, i)
			return e, err
		case wtStartGroup:
			depth++
		case wtEndGroup:
			if depth == 0 {
				return 0, errEndGroup
			}
			depth--
		case wtI32:
			if len(b)-i < 4 {
				return 0, errEOF
			}
			return i + 4, nil
		default:
			return 0, fmt.Errorf("illegal wire type %d", wt)
		}
		if depth == 0 {
			return i, nil
		}
		var err error
		if _, wt, i, err = tag(b, i); err != nil {
			return 0, err
		}
	}
	return 0, errEOF
}

// appendProto decodes b, a protobuf ExportTraceServiceRequest, in one pass
// and appends its spans to dst, as AppendTraces does with what pdata
// decodes. It reads only what docs/SPEC.md §2 needs, but checks the whole request
// as pdata does (every known field's wire type, lengths, id sizes, the
// nesting limit), so that it rejects what pdata rejects. On error dst is
// returned unchanged.
func (d *Decoder) appendProto(dst []graph.Span, b []byte) ([]graph.Span, error) {
	if d.strs == nil {
		d.init(DecoderConfig{})
	}
	orig := dst
	nrs := 0
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return orig, fmt.Errorf("export_trace_service_request: %w", err)
		}
		if f != 1 {
			if i, err = skip(b, j, wt); err != nil {
				return orig, fmt.Errorf("export_trace_service_request: field %d: %w", f, err)
			}
			continue
		}
		if wt != wtLen {
			return orig, wrongType("export_trace_service_request", "resource_spans", wt)
		}
		s, e, err := length(b, j)
		if err != nil {
			return orig, wireError("export_trace_service_request", "resource_spans", err)
		}
		if dst, err = d.resourceSpans(dst, b[s:e]); err != nil {
			return orig, fmt.Errorf("resource_spans[%d]: %w", nrs, err)
		}
		nrs++
		i = e
	}
	return dst, nil
}

// resourceSpans decodes one ResourceSpans. The resource may come after
// the spans, and be given in several pieces: a first pass reads it (and
// checks every field), a second decodes the spans. As pdata's
// ExportRequest (and every OTLP receiver) does, the deprecated
// instrumentation_library_spans (field 1000) stand for scope_spans when
// there is none.
func (d *Decoder) resourceSpans(dst []graph.Span, b []byte) ([]graph.Span, error) {
	var service, version string
	hasService, hasScope := false, false
	var count float64
	countSeen := false
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return dst, err
		}
		switch f {
		case 1, 2, 3, 1000:
			if wt != wtLen {
				return dst, wrongType("resource_spans", rsField(f), wt)
			}
			s, e, err := length(b, j)
			if err != nil {
				return dst, wireError("resource_spans", rsField(f), err)
			}
			switch f {
			case 1:
				if err := d.resourceNames(b[s:e], &service, &hasService, &version, &count, &countSeen); err != nil {
					return dst, fmt.Errorf("resource: %w", err)
				}
			case 2:
				hasScope = true
			}
			i = e
		default:
			if i, err = skip(b, j, wt); err != nil {
				return dst, fmt.Errorf("resource_spans: field %d: %w", f, err)
			}
		}
	}
	d.cut = false
	if hasService {
		service = d.intern(service)
	} else {
		service = UnknownService
	}
	version = d.intern(version)
	d.resCut = d.cut
	d.res = d.resSampling(service, count)

	var n [2]int // scope_spans, instrumentation_library_spans
	for i := 0; i < len(b); {
		f, wt, j, _ := tag(b, i) // checked by the first pass
		if f != 2 && f != 1000 {
			i, _ = skip(b, j, wt)
			continue
		}
		s, e, _ := length(b, j)
		var err error
		if f == 2 || !hasScope {
			dst, err = d.scopeSpans(dst, b[s:e], service, version)
		} else {
			// Deprecated spans beside scope_spans: ignored, but pdata
			// decodes them, and rejects the request if they are malformed.
			d.skipped, err = d.scopeSpans(d.skipped[:0], b[s:e], service, version)
			clear(d.skipped)
		}
		k := 0
		if f == 1000 {
			k = 1
		}
		if err != nil {
			return dst, fmt.Errorf("%s[%d]: %w", rsField(f), n[k], err)
		}
		n[k]++
		i = e
	}
	return dst, nil
}

func rsField(f int32) string {
	switch f {
	case 1:
		return "resource"
	case 2:
		return "scope_spans"
	case 3:
		return "schema_url"
	}
	return "instrumentation_library_spans"
}

// resourceNames reads a Resource's service.name (the last non-empty string),
// service.version (the last string) and adjusted-count attribute (the
// first, into count as resSampling.count; countSeen says whether one was
// seen), as Decoder.resource does; service and version are views of b.
func (d *Decoder) resourceNames(b []byte, service *string, hasService *bool, version *string, count *float64, countSeen *bool) error {
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return err
		}
		switch f {
		case 1:
			if wt != wtLen {
				return wrongType("resource", "attributes", wt)
			}
			s, e, err := length(b, j)
			if err != nil {
				return wireError("resource", "attributes", err)
			}
			key, val, nval, err := keyValue(b[s:e])
			if err != nil {
				return fmt.Errorf("attributes: %w", err)
			}
			var v attrVal
			k := bytesView(key)
			isCount := k == d.countKey && k != "" && !*countSeen
			switch {
			case k == "service.name", k == "service.version", isCount:
				err = values(&v, b[s:e], val, nval)
			default:
				err = values(nil, b[s:e], val, nval)
			}
			if err != nil {
				return fmt.Errorf("attribute %q: %w", key, err)
			}
			if isCount {
				resourceCount(count, countSeen, &v)
			}
			if v.typ == vStr {
				switch k {
				case "service.version":
					*version = v.str
				case "service.name":
					if v.str != "" {
						*service, *hasService = v.str, true
					}
				}
			}
			i = e
		case 2:
			if wt != wtVarint {
				return wrongType("resource", "dropped_attributes_count", wt)
			}
			_, k := varint(b, j)
			if k < 0 {
				return wireError("resource", "dropped_attributes_count", varintErr(k))
			}
			i = k
		case 3:
			if wt != wtLen {
				return wrongType("resource", "entity_refs", wt)
			}
			s, e, err := length(b, j)
			if err != nil {
				return wireError("resource", "entity_refs", err)
			}
			if err := entityRef(b[s:e]); err != nil {
				return fmt.Errorf("entity_refs: %w", err)
			}
			i = e
		default:
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("resource: field %d: %w", f, err)
			}
		}
	}
	return nil
}

// entityRef checks an EntityRef: four string fields.
func entityRef(b []byte) error {
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return err
		}
		if f < 1 || f > 4 {
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("entity_ref: field %d: %w", f, err)
			}
			continue
		}
		_, e, err := lenField(b, j, wt, "entity_ref", f)
		if err != nil {
			return err
		}
		i = e
	}
	return nil
}

// scopeSpans decodes one ScopeSpans, appending its spans to dst.
func (d *Decoder) scopeSpans(dst []graph.Span, b []byte, service, version string) ([]graph.Span, error) {
	n := 0
	var err error
	for i := 0; i < len(b); {
		f, wt, j := tagFast(b, i)
		if j < 0 {
			if f, wt, j, err = tagSlow(b, i); err != nil {
				return dst, err
			}
		}
		switch f {
		case 1, 2, 3:
			if wt != wtLen {
				return dst, wrongType("scope_spans", ssField(f), wt)
			}
			s, e := lenFast(b, j)
			if e < 0 {
				if s, e, err = lengthSlow(b, j); err != nil {
					return dst, wireError("scope_spans", ssField(f), err)
				}
			}
			switch f {
			case 1:
				if err := scope(b[s:e]); err != nil {
					return dst, fmt.Errorf("scope: %w", err)
				}
			case 2:
				dst = append(dst, graph.Span{})
				if err := d.protoSpan(&dst[len(dst)-1], b[s:e], service, version); err != nil {
					return dst, fmt.Errorf("spans[%d]: %w", n, err)
				}
				n++
			}
			i = e
		default:
			if i, err = skip(b, j, wt); err != nil {
				return dst, fmt.Errorf("scope_spans: field %d: %w", f, err)
			}
		}
	}
	return dst, nil
}

func ssField(f int32) string {
	switch f {
	case 1:
		return "scope"
	case 2:
		return "spans"
	}
	return "schema_url"
}

// scope checks an InstrumentationScope.
func scope(b []byte) error {
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return err
		}
		switch f {
		case 1, 2, 3:
			s, e, err := lenField(b, j, wt, "scope", f)
			if err != nil {
				return err
			}
			if f == 3 {
				if err := checkAttr(b[s:e]); err != nil {
					return fmt.Errorf("scope: attributes: %w", err)
				}
			}
			i = e
		case 4:
			if i, err = varintField(b, j, wt, "scope", "dropped_attributes_count"); err != nil {
				return err
			}
		default:
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("scope: field %d: %w", f, err)
			}
		}
	}
	return nil
}

// lenField reads the bounds of field f's length-delimited value at b[j:]
// in a message msg (errors name the field by number).
func lenField(b []byte, j int, wt uint8, msg string, f int32) (int, int, error) {
	if wt != wtLen {
		return 0, 0, fmt.Errorf("%s: field %d: wrong wire type %d", msg, f, wt)
	}
	s, e, err := length(b, j)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: field %d: %w", msg, f, err)
	}
	return s, e, nil
}

// varintField skips a known varint field's value at b[j:].
func varintField(b []byte, j int, wt uint8, msg, field string) (int, error) {
	if wt != wtVarint {
		return 0, wrongType(msg, field, wt)
	}
	_, k := varint(b, j)
	if k < 0 {
		return 0, wireError(msg, field, varintErr(k))
	}
	return k, nil
}

// protoSpan fills out (a zero Span) from the Span message b, as span does
// from a pdata span: a field given more than once counts as pdata has it
// (the last id, name, kind or time; attributes and status pieces merged).
func (d *Decoder) protoSpan(out *graph.Span, b []byte, service, version string) error {
	a := &d.attrs
	a.has = 0
	d.cut = d.resCut
	var (
		sf         spanFields
		kind       int32
		start, end uint64
	)
	var err error
	for i := 0; i < len(b); {
		f, wt, j := tagFast(b, i)
		if j < 0 {
			if f, wt, j, err = tagSlow(b, i); err != nil {
				return err
			}
		}
		switch f {
		case 9: // attributes, the most frequent field
			if wt != wtLen {
				return wrongType("span", "attributes", wt)
			}
			s, e := lenFast(b, j)
			if e < 0 {
				if s, e, err = lengthSlow(b, j); err != nil {
					return wireError("span", "attributes", err)
				}
			}
			if err := d.spanAttr(a, b[s:e]); err != nil {
				return err
			}
			i = e
		case 1, 2, 3, 4, 5, 11, 13, 15:
			if wt != wtLen {
				return wrongType("span", spanField(f), wt)
			}
			s, e := lenFast(b, j)
			if e < 0 {
				if s, e, err = lengthSlow(b, j); err != nil {
					return wireError("span", spanField(f), err)
				}
			}
			if err := sf.bytesField(out, f, b[s:e]); err != nil {
				return err
			}
			i = e
		case 6:
			if wt != wtVarint {
				return wrongType("span", "kind", wt)
			}
			k, n := varint(b, j)
			if n < 0 {
				return wireError("span", "kind", varintErr(n))
			}
			kind = int32(k)
			i = n
		case 7, 8:
			if wt != wtI64 {
				return wrongType("span", spanField(f), wt)
			}
			t, n, err := fixed64(b, j)
			if err != nil {
				return wireError("span", spanField(f), err)
			}
			if f == 7 {
				start = t
			} else {
				end = t
			}
			i = n
		case 10, 12, 14:
			if i, err = varintField(b, j, wt, "span", spanField(f)); err != nil {
				return err
			}
		case 16:
			if wt != wtI32 {
				return wrongType("span", "flags", wt)
			}
			if len(b)-j < 4 {
				return wireError("span", "flags", errEOF)
			}
			i = j + 4
		default:
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("span: field %d: %w", f, err)
			}
		}
	}
	out.Kind = kindOf(kind)
	out.Service = service
	out.Version = version
	out.Name = d.internBytes(sf.name)
	out.Start = unixNanos(start)
	out.End = unixNanos(end)
	d.derive(out, a, sf.statusError, bytesView(sf.traceState))
	d.res.finish(out)
	return nil
}

// spanFields are the span fields protoSpan keeps until the end of the
// message (a field given twice: the last, or the pieces merged).
type spanFields struct {
	name, traceState []byte
	statusError      bool
}

// bytesField reads length-delimited field f of a Span message, v: ids
// into out, the rest into sf.
func (sf *spanFields) bytesField(out *graph.Span, f int32, v []byte) error {
	var err error
	switch f {
	case 1:
		if len(v) != 16 && len(v) != 0 {
			return fmt.Errorf("span.trace_id: %d bytes, want 16 (or none)", len(v))
		}
		out.TraceID = graph.TraceID{}
		copy(out.TraceID[:], v)
	case 3:
		sf.traceState = v
	case 2:
		if len(v) != 8 && len(v) != 0 {
			return fmt.Errorf("span.span_id: %d bytes, want 8 (or none)", len(v))
		}
		out.SpanID = graph.SpanID{}
		copy(out.SpanID[:], v)
	case 4:
		if len(v) != 8 && len(v) != 0 {
			return fmt.Errorf("span.parent_span_id: %d bytes, want 8 (or none)", len(v))
		}
		out.ParentID = graph.SpanID{}
		copy(out.ParentID[:], v)
	case 5:
		sf.name = v
	case 11:
		if err := event(v); err != nil {
			return fmt.Errorf("events: %w", err)
		}
	case 13:
		if err := link(v); err != nil {
			return fmt.Errorf("links: %w", err)
		}
	case 15:
		if sf.statusError, err = status(v, sf.statusError); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	}
	return nil
}

func spanField(f int32) string {
	switch f {
	case 1:
		return "trace_id"
	case 2:
		return "span_id"
	case 3:
		return "trace_state"
	case 4:
		return "parent_span_id"
	case 5:
		return "name"
	case 7:
		return "start_time_unix_nano"
	case 8:
		return "end_time_unix_nano"
	case 10:
		return "dropped_attributes_count"
	case 11:
		return "events"
	case 12:
		return "dropped_events_count"
	case 13:
		return "links"
	case 14:
		return "dropped_links_count"
	}
	return "status"
}

// spanAttr reads one span attribute (a KeyValue) into a, if its key is one
// of the slots and the first of its slot; it checks it anyway.
func (d *Decoder) spanAttr(a *attrSet, kv []byte) error {
	key, val, ok := simpleKeyValue(kv)
	nval := 1
	var err error
	if !ok {
		if key, val, nval, err = keyValue(kv); err != nil {
			return fmt.Errorf("attributes: %w", err)
		}
	}
	if s, ok := d.slotOf(bytesView(key)); ok && a.has&(1<<s) == 0 {
		a.has |= 1 << s
		v := &a.v[s]
		if nval != 1 || !simpleValueInto(v, val) {
			*v = attrVal{}
			err = values(v, kv, val, nval)
		}
	} else if nval != 1 || !simpleValue(val) {
		err = values(nil, kv, val, nval)
	}
	if err != nil {
		return fmt.Errorf("attribute %q: %w", key, err)
	}
	return nil
}

// simpleKeyValue reads a KeyValue as SDKs and collectors write it: a key and
// one value, both with one-byte lengths, key first (protobuf's marshallers)
// or value first (pdata's, which writes fields last to first). For any other
// shape it returns false (then keyValue reads it).
func simpleKeyValue(kv []byte) (key, val []byte, ok bool) {
	if len(kv) < 4 || kv[1] >= 0x80 {
		return nil, nil, false
	}
	k := 2 + int(kv[1])
	if k+2 > len(kv) || kv[k+1] >= 0x80 || k+2+int(kv[k+1]) != len(kv) {
		return nil, nil, false
	}
	switch {
	case kv[0] == 0x0a && kv[k] == 0x12:
		return kv[2:k], kv[k+2:], true
	case kv[0] == 0x12 && kv[k] == 0x0a:
		return kv[k+2:], kv[2:k], true
	}
	return nil, nil, false
}

// simpleValueInto decodes the AnyValue b into v if simpleValue holds.
func simpleValueInto(v *attrVal, b []byte) bool {
	if len(b) < 2 {
		return false
	}
	switch b[0] {
	case 0x0a: // string_value
		if b[1] < 0x80 && int(b[1]) == len(b)-2 {
			*v = attrVal{typ: vStr, str: bytesView(b[2:])}
			return true
		}
	case 0x10: // bool_value
		if n, j := varint(b, 1); j == len(b) {
			*v = attrVal{typ: vBool}
			if n != 0 {
				v.num = 1
			}
			return true
		}
	case 0x18: // int_value
		if n, j := varint(b, 1); j == len(b) {
			*v = attrVal{typ: vInt, num: n}
			return true
		}
	}
	return false
}

// simpleValue reports whether the AnyValue b is valid for sure: a string
// with a one-byte length, a bool or an int of one varint.
func simpleValue(b []byte) bool {
	if len(b) < 2 {
		return false
	}
	switch b[0] {
	case 0x0a: // string_value
		return b[1] < 0x80 && int(b[1]) == len(b)-2
	case 0x10, 0x18: // bool_value, int_value
		_, j := varint(b, 1)
		return j == len(b)
	}
	return false
}

// keyValue reads a KeyValue (at depth 0: an attribute's) and returns its key
// (the last one given), its value's bytes when there is exactly one value
// field, and the number of value fields. It checks the fields but not the
// value's content.
func keyValue(b []byte) (key, val []byte, nval int, err error) {
	for i := 0; i < len(b); {
		f, wt, j := tagFast(b, i)
		if j < 0 {
			if f, wt, j, err = tagSlow(b, i); err != nil {
				return nil, nil, 0, err
			}
		}
		switch f {
		case 1, 2:
			if wt != wtLen {
				return nil, nil, 0, wrongType("key_value", kvField(f), wt)
			}
			s, e := lenFast(b, j)
			if e < 0 {
				if s, e, err = lengthSlow(b, j); err != nil {
					return nil, nil, 0, wireError("key_value", kvField(f), err)
				}
			}
			if f == 1 {
				key = b[s:e]
			} else {
				val = b[s:e]
				nval++
			}
			i = e
		case 3:
			if i, err = varintField(b, j, wt, "key_value", "key_strindex"); err != nil {
				return nil, nil, 0, err
			}
		default:
			if i, err = skip(b, j, wt); err != nil {
				return nil, nil, 0, fmt.Errorf("key_value: field %d: %w", f, err)
			}
		}
	}
	return key, val, nval, nil
}

func kvField(f int32) string {
	if f == 1 {
		return "key"
	}
	return "value"
}

// values decodes the value of the KeyValue kv, which keyValue found to have
// nval value fields, the only one being val, into v (nil: only check it).
// Several value fields merge, as pdata merges them into one AnyValue: the
// last value set wins.
func values(v *attrVal, kv, val []byte, nval int) error {
	switch nval {
	case 0:
		return nil
	case 1:
		return anyValue(v, val, 1)
	}
	for i := 0; i < len(kv); {
		f, wt, j, _ := tag(kv, i) // checked by keyValue
		if f != 2 {
			i, _ = skip(kv, j, wt)
			continue
		}
		s, e, _ := length(kv, j)
		if err := anyValue(v, kv[s:e], 1); err != nil {
			return err
		}
		i = e
	}
	return nil
}

// checkAttr checks an attribute that is not read (a scope's, an event's, a
// link's).
func checkAttr(kv []byte) error {
	_, val, nval, err := keyValue(kv)
	if err != nil {
		return err
	}
	return values(nil, kv, val, nval)
}

// anyValue decodes the AnyValue b, at nesting depth depth, into v; with v
// nil it only checks it. Each value field replaces the value, as in pdata.
func anyValue(v *attrVal, b []byte, depth int) error {
	if depth >= MaxProtoDepth {
		return errTooDeep
	}
	depth++
	var err error
	for i := 0; i < len(b); {
		f, wt, j := tagFast(b, i)
		if j < 0 {
			if f, wt, j, err = tagSlow(b, i); err != nil {
				return err
			}
		}
		switch f {
		case 1, 5, 6, 7:
			if wt != wtLen {
				return wrongType("any_value", avField(f), wt)
			}
			s, e := lenFast(b, j)
			if e < 0 {
				if s, e, err = lengthSlow(b, j); err != nil {
					return wireError("any_value", avField(f), err)
				}
			}
			switch f {
			case 1:
				if v != nil {
					*v = attrVal{typ: vStr, str: bytesView(b[s:e])}
				}
			case 5:
				if v != nil {
					*v = attrVal{typ: vSlice}
				}
				if err := arrayValue(v, b[s:e], depth); err != nil {
					return err
				}
			case 6:
				if v != nil {
					*v = attrVal{typ: vMap}
				}
				if err := kvList(b[s:e], depth); err != nil {
					return err
				}
			case 7:
				if v != nil {
					*v = attrVal{typ: vBytes}
				}
			}
			i = e
		case 2, 3, 8:
			if wt != wtVarint {
				return wrongType("any_value", avField(f), wt)
			}
			n, k := varint(b, j)
			if k < 0 {
				return wireError("any_value", avField(f), varintErr(k))
			}
			if v != nil {
				switch f {
				case 2:
					*v = attrVal{typ: vBool}
					if n != 0 {
						v.num = 1
					}
				case 3:
					*v = attrVal{typ: vInt, num: n}
				case 8:
					*v = attrVal{} // string_value_strindex: pdata's Empty
				}
			}
			i = k
		case 4:
			if wt != wtI64 {
				return wrongType("any_value", "double_value", wt)
			}
			n, k, err := fixed64(b, j)
			if err != nil {
				return wireError("any_value", "double_value", err)
			}
			if v != nil {
				*v = attrVal{typ: vDouble, num: n}
			}
			i = k
		default:
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("any_value: field %d: %w", f, err)
			}
		}
	}
	return nil
}

func avField(f int32) string {
	switch f {
	case 1:
		return "string_value"
	case 2:
		return "bool_value"
	case 3:
		return "int_value"
	case 5:
		return "array_value"
	case 6:
		return "kvlist_value"
	case 7:
		return "bytes_value"
	}
	return "string_value_strindex"
}

// arrayValue decodes the ArrayValue b into v (already a vSlice): whether it
// has elements, and its first element; with v nil it only checks it.
func arrayValue(v *attrVal, b []byte, depth int) error {
	if depth >= MaxProtoDepth {
		return errTooDeep
	}
	depth++
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return err
		}
		if f != 1 {
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("array_value: field %d: %w", f, err)
			}
			continue
		}
		if wt != wtLen {
			return wrongType("array_value", "values", wt)
		}
		s, e, err := length(b, j)
		if err != nil {
			return wireError("array_value", "values", err)
		}
		if v != nil && !v.elems {
			// The first element, decoded in v itself (a local would
			// escape: the decoding is recursive), then v made the
			// array again.
			*v = attrVal{}
			if err := anyValue(v, b[s:e], depth); err != nil {
				return err
			}
			first, str := v.typ, v.str
			*v = attrVal{typ: vSlice, elems: true, first: first}
			if first == vStr {
				v.str = str
			}
		} else if err := anyValue(nil, b[s:e], depth); err != nil {
			return err
		}
		i = e
	}
	return nil
}

// kvList checks a KeyValueList.
func kvList(b []byte, depth int) error {
	if depth >= MaxProtoDepth {
		return errTooDeep
	}
	depth++
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return err
		}
		if f != 1 {
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("kvlist_value: field %d: %w", f, err)
			}
			continue
		}
		if wt != wtLen {
			return wrongType("kvlist_value", "values", wt)
		}
		s, e, err := length(b, j)
		if err != nil {
			return wireError("kvlist_value", "values", err)
		}
		if err := nestedKeyValue(b[s:e], depth); err != nil {
			return err
		}
		i = e
	}
	return nil
}

// nestedKeyValue checks a KeyValue inside a KeyValueList.
func nestedKeyValue(b []byte, depth int) error {
	if depth >= MaxProtoDepth {
		return errTooDeep
	}
	depth++
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return err
		}
		switch f {
		case 1, 2:
			if wt != wtLen {
				return wrongType("key_value", kvField(f), wt)
			}
			s, e, err := length(b, j)
			if err != nil {
				return wireError("key_value", kvField(f), err)
			}
			if f == 2 {
				if err := anyValue(nil, b[s:e], depth); err != nil {
					return err
				}
			}
			i = e
		case 3:
			if i, err = varintField(b, j, wt, "key_value", "key_strindex"); err != nil {
				return err
			}
		default:
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("key_value: field %d: %w", f, err)
			}
		}
	}
	return nil
}

// event checks a Span.Event.
func event(b []byte) error {
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return err
		}
		switch f {
		case 1:
			if wt != wtI64 {
				return wrongType("event", "time_unix_nano", wt)
			}
			if _, i, err = fixed64(b, j); err != nil {
				return wireError("event", "time_unix_nano", err)
			}
		case 2, 3:
			s, e, err := lenField(b, j, wt, "event", f)
			if err != nil {
				return err
			}
			if f == 3 {
				if err := checkAttr(b[s:e]); err != nil {
					return fmt.Errorf("event: attributes: %w", err)
				}
			}
			i = e
		case 4:
			if i, err = varintField(b, j, wt, "event", "dropped_attributes_count"); err != nil {
				return err
			}
		default:
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("event: field %d: %w", f, err)
			}
		}
	}
	return nil
}

// link checks a Span.Link, ids included.
func link(b []byte) error {
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return err
		}
		switch f {
		case 1, 2, 3, 4:
			s, e, err := lenField(b, j, wt, "link", f)
			if err != nil {
				return err
			}
			switch n := e - s; {
			case f == 1 && n != 16 && n != 0:
				return fmt.Errorf("link.trace_id: %d bytes, want 16 (or none)", n)
			case f == 2 && n != 8 && n != 0:
				return fmt.Errorf("link.span_id: %d bytes, want 8 (or none)", n)
			case f == 4:
				if err := checkAttr(b[s:e]); err != nil {
					return fmt.Errorf("link: attributes: %w", err)
				}
			}
			i = e
		case 5:
			if i, err = varintField(b, j, wt, "link", "dropped_attributes_count"); err != nil {
				return err
			}
		case 6:
			if wt != wtI32 {
				return wrongType("link", "flags", wt)
			}
			if len(b)-j < 4 {
				return wireError("link", "flags", errEOF)
			}
			i = j + 4
		default:
			if i, err = skip(b, j, wt); err != nil {
				return fmt.Errorf("link: field %d: %w", f, err)
			}
		}
	}
	return nil
}

// status reads a Status piece: whether its code is ERROR (the last code
// given wins; isError is what earlier pieces said).
func status(b []byte, isError bool) (bool, error) {
	for i := 0; i < len(b); {
		f, wt, j, err := tag(b, i)
		if err != nil {
			return false, err
		}
		switch f {
		case 2:
			if wt != wtLen {
				return false, wrongType("status", "message", wt)
			}
			_, e, err := length(b, j)
			if err != nil {
				return false, wireError("status", "message", err)
			}
			i = e
		case 3:
			if wt != wtVarint {
				return false, wrongType("status", "code", wt)
			}
			c, k := varint(b, j)
			if k < 0 {
				return false, wireError("status", "code", varintErr(k))
			}
			isError = int32(c) == 2 // STATUS_CODE_ERROR, on pdata's int32
			i = k
		default:
			if i, err = skip(b, j, wt); err != nil {
				return false, fmt.Errorf("status: field %d: %w", f, err)
			}
		}
	}
	return isError, nil
}
