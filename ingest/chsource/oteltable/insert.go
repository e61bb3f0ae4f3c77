package oteltable

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column/orderedmap"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Columns of the exporter's INSERT (v0.165.1 internal/sqltemplates/
// traces_insert.sql and traces_json_insert.sql; v0.7x
// insertTracesSQLTemplate), in order.
var (
	columnsV0165 = []string{"Timestamp", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName",
		"SpanKind", "ServiceName", "ResourceAttributes", "ScopeName", "ScopeVersion", "SpanAttributes",
		"Duration", "StatusCode", "StatusMessage", "Events.Timestamp", "Events.Name", "Events.Attributes",
		"Links.TraceId", "Links.SpanId", "Links.TraceState", "Links.Attributes"}
	// The JSON exporter appends the keys columns when the table has them
	// (detectSchemaFeatures), as the DDL here does.
	columnsV0165JSON = append(slices.Clone(columnsV0165), "ResourceAttributesKeys", "SpanAttributesKeys")
	columnsV07x      = slices.DeleteFunc(slices.Clone(columnsV0165), func(c string) bool {
		return c == "ScopeName" || c == "ScopeVersion"
	})
)

// Columns returns the columns the shape's exporter names in its INSERT, in
// the order of the values Row returns.
func Columns(shape Shape) ([]string, error) {
	switch shape {
	case V0165:
		return columnsV0165, nil
	case V0165JSON:
		return columnsV0165JSON, nil
	case V07x:
		return columnsV07x, nil
	}
	return nil, fmt.Errorf("oteltable: unknown shape %q (known: %v)", shape, Shapes)
}

// Insert writes every span of td into table in database db as one batch,
// converted as the shape's exporter converts it (Row), through
// PrepareBatch as the exporter does.
func Insert(ctx context.Context, conn driver.Conn, db, table string, shape Shape, td ptrace.Traces) error {
	if err := checkNames(db, table); err != nil {
		return err
	}
	cols, err := Columns(shape)
	if err != nil {
		return err
	}
	batch, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %q.%q (%s)", db, table, strings.Join(cols, ", ")))
	if err != nil {
		return fmt.Errorf("oteltable: prepare insert into %s.%s: %w", db, table, err)
	}
	defer batch.Close()
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		for j := range rs.ScopeSpans().Len() {
			ss := rs.ScopeSpans().At(j)
			for k := range ss.Spans().Len() {
				row, err := Row(shape, rs.Resource(), ss.Scope(), ss.Spans().At(k))
				if err != nil {
					return err
				}
				if err := batch.Append(row...); err != nil {
					return fmt.Errorf("oteltable: append a row to %s.%s: %w", db, table, err)
				}
			}
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("oteltable: insert into %s.%s: %w", db, table, err)
	}
	return nil
}

// Row returns the values the shape's exporter appends for span, in the
// order of Columns.
func Row(shape Shape, res pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span) ([]any, error) {
	switch shape {
	case V0165:
		return rowV0165(res, scope, span), nil
	case V0165JSON:
		return rowV0165JSON(res, scope, span)
	case V07x:
		return rowV07x(res, scope, span), nil
	}
	return nil, fmt.Errorf("oteltable: unknown shape %q (known: %v)", shape, Shapes)
}

// rowV0165 is tracesExporter.pushTraceData of v0.165.1 (exporter_traces.go).
func rowV0165(res pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span) []any {
	st := span.Status()
	evTimes, evNames, evAttrs := eventColumns(span.Events(), attributesToMap)
	lTraces, lSpans, lStates, lAttrs := linkColumns(span.Links(), attributesToMap)
	return []any{
		span.StartTimestamp().AsTime(),
		traceIDHex(span.TraceID()),
		spanIDHex(span.SpanID()),
		spanIDHex(span.ParentSpanID()),
		span.TraceState().AsRaw(),
		span.Name(),
		span.Kind().String(),
		serviceName(res.Attributes()),
		attributesToMap(res.Attributes()),
		scope.Name(),
		scope.Version(),
		attributesToMap(span.Attributes()),
		span.EndTimestamp() - span.StartTimestamp(), // pcommon.Timestamp: wraps when end < start
		st.Code().String(),
		st.Message(),
		evTimes, evNames, evAttrs,
		lTraces, lSpans, lStates, lAttrs,
	}
}

// rowV0165JSON is tracesJSONExporter.pushTraceData of v0.165.1
// (exporter_traces_json.go), with the keys columns.
func rowV0165JSON(res pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span) ([]any, error) {
	resAttr, err := json.Marshal(res.Attributes().AsRaw())
	if err != nil {
		return nil, fmt.Errorf("oteltable: resource attributes: %w", err)
	}
	spanAttr, err := json.Marshal(span.Attributes().AsRaw())
	if err != nil {
		return nil, fmt.Errorf("oteltable: span attributes: %w", err)
	}
	var jsonErr error
	asJSON := func(m pcommon.Map) string {
		b, err := json.Marshal(m.AsRaw())
		if err != nil && jsonErr == nil {
			jsonErr = fmt.Errorf("oteltable: event or link attributes: %w", err)
		}
		return string(b)
	}
	evTimes, evNames, evAttrs := eventColumns(span.Events(), asJSON)
	lTraces, lSpans, lStates, lAttrs := linkColumns(span.Links(), asJSON)
	if jsonErr != nil {
		return nil, jsonErr
	}
	st := span.Status()
	return []any{
		span.StartTimestamp().AsTime(),
		span.TraceID().String(),
		span.SpanID().String(),
		span.ParentSpanID().String(),
		span.TraceState().AsRaw(),
		span.Name(),
		span.Kind().String(),
		serviceName(res.Attributes()),
		resAttr,
		scope.Name(),
		scope.Version(),
		spanAttr,
		span.EndTimestamp() - span.StartTimestamp(),
		st.Code().String(),
		st.Message(),
		evTimes, evNames, evAttrs,
		lTraces, lSpans, lStates, lAttrs,
		flattenedKeys(res.Attributes()),
		flattenedKeys(span.Attributes()),
	}, nil
}

// rowV07x is the v0.7x tracesExporter.pushTraceData (before contrib PR
// #21919): the scope goes into SpanAttributes, kinds and codes are the
// proto's names, Duration is a signed time.Duration in nanoseconds.
func rowV07x(res pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span) []any {
	var service string
	if v, ok := res.Attributes().Get("service.name"); ok {
		service = v.Str() // "" unless a string
	}
	spanAttr := plainMap(span.Attributes())
	if scope.Name() != "" {
		spanAttr["otel.scope.name"] = scope.Name()
	}
	if scope.Version() != "" {
		spanAttr["otel.scope.version"] = scope.Version()
	}
	st := span.Status()
	evTimes, evNames, evAttrs := eventColumns(span.Events(), plainMap)
	lTraces, lSpans, lStates, lAttrs := linkColumns(span.Links(), plainMap)
	return []any{
		span.StartTimestamp().AsTime(),
		traceIDHex(span.TraceID()),
		spanIDHex(span.SpanID()),
		spanIDHex(span.ParentSpanID()),
		span.TraceState().AsRaw(),
		span.Name(),
		spanKindProto(span.Kind()),
		service,
		plainMap(res.Attributes()),
		spanAttr,
		span.EndTimestamp().AsTime().Sub(span.StartTimestamp().AsTime()).Nanoseconds(),
		statusCodeProto(st.Code()),
		st.Message(),
		evTimes, evNames, evAttrs,
		lTraces, lSpans, lStates, lAttrs,
	}
}

// eventColumns returns the Events.* arrays: nil for a span without events,
// as the exporter's convertEvents.
func eventColumns[A any](events ptrace.SpanEventSlice, attrs func(pcommon.Map) A) ([]time.Time, []string, []A) {
	if events.Len() == 0 {
		return nil, nil, nil
	}
	times, names, as := make([]time.Time, 0, events.Len()), make([]string, 0, events.Len()), make([]A, 0, events.Len())
	for i := range events.Len() {
		e := events.At(i)
		times = append(times, e.Timestamp().AsTime())
		names = append(names, e.Name())
		as = append(as, attrs(e.Attributes()))
	}
	return times, names, as
}

// linkColumns returns the Links.* arrays: nil for a span without links.
// (The json exporter writes the ids with TraceID().String(), which is the
// same hex, "" for a zero id.)
func linkColumns[A any](links ptrace.SpanLinkSlice, attrs func(pcommon.Map) A) (traces, spans, states []string, as []A) {
	if links.Len() == 0 {
		return nil, nil, nil, nil
	}
	for i := range links.Len() {
		l := links.At(i)
		traces = append(traces, traceIDHex(l.TraceID()))
		spans = append(spans, spanIDHex(l.SpanID()))
		states = append(states, l.TraceState().AsRaw())
		as = append(as, attrs(l.Attributes()))
	}
	return traces, spans, states, as
}

// serviceName is internal.GetServiceName: service.name through AsString, or "".
func serviceName(attrs pcommon.Map) string {
	if v, ok := attrs.Get("service.name"); ok {
		return v.AsString()
	}
	return ""
}

// attributesToMap is internal.AttributesToMap: the attributes in their
// order, each value through AsString.
func attributesToMap(attrs pcommon.Map) column.IterableOrderedMap {
	return orderedmap.CollectN(func(yield func(string, string) bool) {
		attrs.Range(func(k string, v pcommon.Value) bool { return yield(k, v.AsString()) })
	}, attrs.Len())
}

// plainMap is v0.7x's attributesToMap: a Go map, values through AsString.
func plainMap(attrs pcommon.Map) map[string]string {
	m := make(map[string]string, attrs.Len())
	attrs.Range(func(k string, v pcommon.Value) bool {
		m[k] = v.AsString()
		return true
	})
	return m
}

// flattenedKeys is internal.UniqueFlattenedAttributes: the keys, those of
// nested maps joined to their parents' with ".", unique and sorted; nil
// for no attributes.
func flattenedKeys(attrs pcommon.Map) []string {
	if attrs.Len() == 0 {
		return nil
	}
	var keys []string
	var walk func(prefix string, m pcommon.Map)
	walk = func(prefix string, m pcommon.Map) {
		m.Range(func(k string, v pcommon.Value) bool {
			if prefix != "" {
				k = prefix + "." + k
			}
			if v.Type() == pcommon.ValueTypeMap {
				walk(k, v.Map())
			} else {
				keys = append(keys, k)
			}
			return true
		})
	}
	walk("", attrs)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// traceIDHex is traceutil.TraceIDToHexOrEmptyString.
func traceIDHex(id pcommon.TraceID) string {
	if id.IsEmpty() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// spanIDHex is traceutil.SpanIDToHexOrEmptyString.
func spanIDHex(id pcommon.SpanID) string {
	if id.IsEmpty() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// spanKindProto is traceutil.SpanKindStr.
func spanKindProto(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindUnspecified:
		return "SPAN_KIND_UNSPECIFIED"
	case ptrace.SpanKindInternal:
		return "SPAN_KIND_INTERNAL"
	case ptrace.SpanKindServer:
		return "SPAN_KIND_SERVER"
	case ptrace.SpanKindClient:
		return "SPAN_KIND_CLIENT"
	case ptrace.SpanKindProducer:
		return "SPAN_KIND_PRODUCER"
	case ptrace.SpanKindConsumer:
		return "SPAN_KIND_CONSUMER"
	}
	return ""
}

// statusCodeProto is traceutil.StatusCodeStr.
func statusCodeProto(c ptrace.StatusCode) string {
	switch c {
	case ptrace.StatusCodeUnset:
		return "STATUS_CODE_UNSET"
	case ptrace.StatusCodeOk:
		return "STATUS_CODE_OK"
	case ptrace.StatusCodeError:
		return "STATUS_CODE_ERROR"
	}
	return ""
}
