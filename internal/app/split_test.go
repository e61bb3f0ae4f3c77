package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
)

// Two `ingest --partition` instances over one ClickHouse database, behind
// a collector that does not route by trace id: trace 1's root span
// reaches shard-0, its child shard-1; trace 2 reaches shard-0 whole. Each
// instance finds trace 1 in the other's spans: it is counted in
// stormradius_traces_split_total, logged with the fix, shown in /readyz
// (a warning: the service stays ready) and left out of the report, which
// counts it in split_traces alone; trace 2 is reported as it is.
func TestSplitTraceAcrossInstances(t *testing.T) {
	dsn := chtest.FreshDSN(t)
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	span := func(ss ptrace.SpanSlice, trace, id, parent byte, kind ptrace.SpanKind, name string) {
		s := ss.AppendEmpty()
		s.SetTraceID(pcommon.TraceID{15: trace, 0: 0xab})
		s.SetSpanID(pcommon.SpanID{7: id})
		if parent != 0 {
			s.SetParentSpanID(pcommon.SpanID{7: parent})
		}
		s.SetKind(kind)
		s.SetName(name)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(id) * time.Millisecond)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
	}
	export := func(service string, add func(ptrace.SpanSlice)) ptrace.Traces {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		add(rs.ScopeSpans().AppendEmpty().Spans())
		return td
	}
	toShard0 := []ptrace.Traces{
		export("front", func(ss ptrace.SpanSlice) {
			span(ss, 1, 1, 0, ptrace.SpanKindServer, "GET /a")
			span(ss, 1, 2, 1, ptrace.SpanKindClient, "GET /db")
			span(ss, 2, 1, 0, ptrace.SpanKindServer, "GET /a")
			span(ss, 2, 2, 1, ptrace.SpanKindClient, "GET /db")
		}),
		export("db", func(ss ptrace.SpanSlice) { span(ss, 2, 3, 2, ptrace.SpanKindServer, "GET /db") }),
	}
	toShard1 := []ptrace.Traces{export("db", func(ss ptrace.SpanSlice) { span(ss, 1, 3, 2, ptrace.SpanKindServer, "GET /db") })}

	var logs [2]syncBuffer
	svcs := make([]*service, 2)
	for k := range 2 {
		svcs[k] = runService(t, app.Config{
			Store:     storeurl.Options{URL: dsn, Window: 10 * time.Minute},
			Partition: []string{"shard-0", "shard-1"}[k],
			Pipeline:  pipeline.Config{TraceIdle: 300 * time.Millisecond, Retention: -1, SummaryInterval: 20 * time.Millisecond},
			OTLP:      otlp.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"},
			HTTPAddr:  "127.0.0.1:0",
			Logger:    slog.New(slog.NewTextHandler(&logs[k], nil)),
		})
		defer svcs[k].stop()
	}
	for k, tds := range [][]ptrace.Traces{toShard0, toShard1} {
		for _, td := range tds {
			b, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
			if err := post("http://"+svcs[k].addrs.OTLPHTTP.String()+otlp.TracesPath, "application/x-protobuf", "", b); err != nil {
				t.Fatal(err)
			}
		}
	}

	get := func(k int, path string) (int, string) {
		resp, err := http.Get("http://" + svcs[k].addrs.HTTP.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ctx := context.Background()
	var doc *analysis.Document
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := storeurl.Open(ctx, storeurl.Options{URL: dsn, Existing: true, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		doc, err = query.Document(ctx, st, store.Query{}, analysis.Config{Window: st.Window()})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if doc.SplitTraces == 1 && doc.Traces == 1 || time.Now().After(deadline) {
			break
		}
	}
	if doc.SplitTraces != 1 || doc.Traces != 1 || doc.Spans != 3 || len(doc.APIs) != 1 || doc.APIs[0].Traces != 1 {
		t.Fatalf("report: split_traces %d, traces %d, spans %d, apis %+v; want trace 1 split, trace 2's 3 spans alone",
			doc.SplitTraces, doc.Traces, doc.Spans, doc.APIs)
	}
	// Each instance that found trace 1 in the other's spans (one at
	// least: the one that analysed it last) counts it, logs it and warns.
	const id = "ab000000000000000000000000000001"
	// The store holds the split record before an instance has counted it
	// and set its warning: read both instances again until each says the
	// same on /metrics and /readyz (both, or neither) and one at least
	// counted it, for a few seconds at most.
	type view struct {
		metrics, ready string
		code           int
	}
	var views [2]view
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		agree, some := true, false
		for k := range views {
			v := &views[k]
			_, v.metrics = get(k, "/metrics")
			v.code, v.ready = get(k, "/readyz")
			counted := strings.Contains(v.metrics, "\nstormradius_traces_split_total 1\n")
			agree = agree && counted == strings.Contains(v.ready, "warning: routing:")
			some = some || counted
		}
		if agree && some || time.Now().After(deadline) {
			break
		}
	}
	found := 0
	for k, other := range []string{"shard-1", "shard-0"} {
		metrics, ready, code := views[k].metrics, views[k].ready, views[k].code
		if !strings.Contains(metrics, "\nstormradius_traces_split_total 1\n") {
			if !strings.Contains(metrics, "\nstormradius_traces_split_total 0\n") || code != 200 || ready != "ready\n" {
				t.Errorf("instance %d: /readyz %d %q, /metrics:\n%s", k, code, ready, grep(metrics, "split"))
			}
			continue
		}
		found++
		if code != 200 || !strings.Contains(ready, "ready\nwarning: routing: 1 trace(s) split across partitions") ||
			!strings.Contains(ready, "partition_traces_by_id: true") {
			t.Errorf("instance %d /readyz: %d %q", k, code, ready)
		}
		if l := logs[k].String(); !strings.Contains(l, "trace split across partitions") || !strings.Contains(l, "trace_id="+id) ||
			!strings.Contains(l, "other_partition="+other) {
			t.Errorf("instance %d logged no split trace:\n%s", k, l)
		}
	}
	if found == 0 {
		t.Error("no instance counted the split trace")
	}
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
