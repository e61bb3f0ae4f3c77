package chsource_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/ingest/chsource/oteltable"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/sim"
)

// server connects to the current engine (chtest.Current) and returns a
// fresh database (dropped when the test ends) and its DSN.
func server(t *testing.T) (driver.Conn, string, string) {
	t.Helper()
	u := chtest.Current(t)
	dsn := chtest.FreshDatabase(t, u)
	fresh, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	d := *u
	d.Path = "/default"
	o, err := ch.ParseDSN(d.String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, strings.TrimPrefix(fresh.Path, "/"), dsn
}

// exports simulates an incident (HTTP and gRPC, claims, retries, a
// persistent fault, fail-open) as an SDK mesh exports it.
func exports(t *testing.T) []ptrace.Traces {
	t.Helper()
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}
	sc := sim.Mesh(sim.MeshConfig{Seed: 5, APIs: 3, Depth: 6, Fanout: 2, GRPC: 0.3, FailOpen: 0.3, ErrorRate: 0.01, Policy: own})
	sc.Faults = []sim.Fault{{Service: "svc-3-0", Rate: 0.3, Persistent: true}}
	sc.Traces, sc.Start, sc.Spacing = 400, time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC), 1500*time.Millisecond
	res, err := sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	return res.Exports(3, 16, 8)
}

// analyzed is the document offline.Analyze makes of what read emits.
func analyzed(t *testing.T, read func(emit func([]graph.Span) error) error) string {
	t.Helper()
	doc, _, _, err := offline.Analyze(context.Background(), read, offline.Config{Analysis: analysis.Config{Window: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The acceptance of the source: the simulated incident written into the
// exporter's table — v0.165.1's shape and an older one (Int64 Duration,
// no scope columns), rows as each exporter writes them — read back by the
// source gives the report analyze gives of the same spans as OTLP, field
// by field; the exporter's json: true table is refused by name.
func TestSourceEqualsOTLP(t *testing.T) {
	tds := exports(t)
	want := analyzed(t, func(emit func([]graph.Span) error) error {
		dec := ingest.NewDecoder(ingest.DecoderConfig{})
		for _, td := range tds {
			if err := emit(dec.AppendTraces(nil, td)); err != nil {
				return err
			}
		}
		return nil
	})
	if !strings.Contains(want, `"failed_traces":`) || strings.Contains(want, `"traces":0,`) {
		t.Fatalf("the reference analysed nothing: %.300s", want)
	}
	ctx := context.Background()
	for _, shape := range oteltable.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			conn, db, dsn := server(t)
			if err := oteltable.Create(ctx, conn, db, "otel_traces", shape); err != nil {
				t.Fatal(err)
			}
			for _, td := range tds {
				if err := oteltable.Insert(ctx, conn, db, "otel_traces", shape, td); err != nil {
					t.Fatal(err)
				}
			}
			src, err := chsource.Open(ctx, dsn, "", nil)
			if shape == oteltable.V0165JSON {
				if !errors.Is(err, chsource.ErrTable) || !strings.Contains(err.Error(), "json: true") {
					t.Fatalf("the json table: %v, want it refused by name", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var st chsource.Stats
			got := analyzed(t, func(emit func([]graph.Span) error) error {
				st, err = src.Read(ctx, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC),
					ingest.NewDecoder(ingest.DecoderConfig{}), emit)
				return err
			})
			if got != want {
				t.Fatalf("the source's report differs from analyze of the OTLP:\n got %s\nwant %s", got, want)
			}
			spans := 0
			for _, td := range tds {
				spans += td.SpanCount()
			}
			if st.Rows != int64(spans) || st.Spans != int64(spans) || st.Bad != 0 {
				t.Errorf("read %+v, want %d rows and spans", st, spans)
			}
		})
	}
}

// Tables the source cannot read are refused at Open with one error that
// names what is wrong; a range without spans reads nothing.
func TestBadTables(t *testing.T) {
	conn, db, dsn := server(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db); err != nil {
		t.Fatal(err)
	}
	spanCols := "Timestamp DateTime64(9), TraceId String, SpanId String, ParentSpanId String, SpanName LowCardinality(String), " +
		"SpanKind LowCardinality(String), ServiceName LowCardinality(String), Duration UInt64, StatusCode LowCardinality(String)"
	for _, c := range []struct{ table, cols, want string }{
		{"absent", "", "no table " + db + ".absent"},
		{"otel_logs", "Timestamp DateTime64(9), TraceId String, SpanId String, Body String, ServiceName String",
			"has no column ParentSpanId, SpanName, SpanKind, Duration, StatusCode (the clickhouseexporter's traces table has them all): it looks like the exporter's logs table"},
		{"no_kind", strings.Replace(spanCols, "SpanKind LowCardinality(String), ", "", 1), "has no column SpanKind"},
		{"string_duration", strings.Replace(spanCols, "Duration UInt64", "Duration String", 1), "Duration is String, want UInt64 or Int64"},
		{"second_timestamps", strings.Replace(spanCols, "Timestamp DateTime64(9)", "Timestamp DateTime", 1), "Timestamp is DateTime, want DateTime64"},
		{"array_attributes", spanCols + ", SpanAttributes Array(String)", "SpanAttributes is Array(String), want Map(String, String)"},
		{"numbers", "n UInt64", "is not a table of spans: it has none of the exporter's span columns"},
	} {
		if c.cols != "" {
			if err := conn.Exec(ctx, "CREATE TABLE "+db+"."+c.table+" ("+c.cols+") ENGINE = MergeTree ORDER BY tuple()"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := chsource.Open(ctx, dsn+"?table="+c.table, "", nil)
		if !errors.Is(err, chsource.ErrTable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant ErrTable with %q", c.table, err, c.want)
		}
	}
	if _, err := chsource.Open(ctx, dsn+"?table=bad-name", "", nil); err == nil || !strings.Contains(err.Error(), "letters, digits and underscores") {
		t.Errorf("a bad table name: %v", err)
	}

	// An empty range reads nothing, and says so through Stats.
	if err := oteltable.Create(ctx, conn, db, "otel_traces", oteltable.V0165); err != nil {
		t.Fatal(err)
	}
	src, err := chsource.Open(ctx, dsn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	st, err := src.Read(ctx, time.Unix(0, 0), time.Now(), ingest.NewDecoder(ingest.DecoderConfig{}), func([]graph.Span) error {
		t.Error("emitted spans of an empty table")
		return nil
	})
	if err != nil || st != (chsource.Stats{}) {
		t.Errorf("an empty table: %+v %v", st, err)
	}
}
