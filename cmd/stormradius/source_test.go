package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/ingest/chsource/oteltable"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/sim"
)

// analyze --source: the simulated incident (a naive mesh with a
// persistent fault, and claims) written into the exporter's otel_traces
// table (v0.165.1) reads back, over --from/--to, as the report analyze
// gives of the same spans written as OTLP JSON lines; the range selects
// traces as analyze's does; the usage errors and an empty range say so.
func TestAnalyzeSource(t *testing.T) {
	u := chtest.Current(t)
	dsn := chtest.FreshDatabase(t, u)
	fresh, _ := url.Parse(dsn)
	db := strings.TrimPrefix(fresh.Path, "/")
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
	defer conn.Close()
	ctx := context.Background()
	if err := oteltable.Create(ctx, conn, db, "otel_traces", oteltable.V0165); err != nil {
		t.Fatal(err)
	}
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}
	sc := sim.Mesh(sim.MeshConfig{Seed: 8, APIs: 2, Depth: 5, Fanout: 2, GRPC: 0.5, FailOpen: 0.3, ErrorRate: 0.02, Policy: own})
	sc.Faults = []sim.Fault{{Service: "svc-2-0", Rate: 0.5, Persistent: true}}
	start := time.Date(2026, 3, 1, 9, 40, 0, 0, time.UTC)
	sc.Traces, sc.Start, sc.Spacing = 300, start, 4*time.Second // 9:40 to 10:00
	res, err := sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	var lines bytes.Buffer
	for _, td := range res.Exports(1, 16, 8) {
		if err := oteltable.Insert(ctx, conn, db, "otel_traces", oteltable.V0165, td); err != nil {
			t.Fatal(err)
		}
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		lines.Write(append(b, '\n'))
	}
	file := filepath.Join(t.TempDir(), "traces.jsonl")
	if err := os.WriteFile(file, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, rng := range [][]string{
		{"--from", "2026-03-01T09:00:00Z", "--to", "2026-03-01T11:00:00Z"}, // every trace
		{"--from", "2026-03-01T09:45:00Z", "--to", "2026-03-01T09:52:00Z"}, // the traces that start in it, whole
	} {
		code, want, stderr := runCmd(t, append([]string{"analyze", file}, rng...)...)
		if code != 0 {
			t.Fatalf("analyze %v: %d %s", rng, code, stderr)
		}
		code, got, stderr := runCmd(t, append([]string{"analyze", "--source", dsn + "?table=otel_traces"}, rng...)...)
		if code != 0 {
			t.Fatalf("analyze --source %v: %d %s", rng, code, stderr)
		}
		if got != want {
			t.Fatalf("analyze --source %v differs from analyze of the file:\n got %s\nwant %s", rng, got, want)
		}
		if !strings.Contains(want, `"failed_traces":`) {
			t.Fatalf("nothing analysed: %.200s", want)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"analyze", "--source", dsn}, exitUsage, "--source needs --from"},
		{[]string{"analyze", "--source", dsn, "--from", "2026-03-01T09:00:00Z", file}, exitUsage, "give no files with it"},
		{[]string{"analyze", "--source", dsn, "--from", "2026-03-02T09:00:00Z", "--to", "2026-03-02T10:00:00Z"}, exitFail,
			"no spans in " + db + ".otel_traces with a Timestamp from 2026-03-02T08:59:00Z to 2026-03-02T10:01:00Z"},
		{[]string{"analyze", "--source", dsn + "?table=nothing_here", "--from", "2026-03-01T09:00:00Z"}, exitFail, "no table " + db + ".nothing_here"},
	} {
		code, _, stderr := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, %q; want %d with %q", c.args, code, stderr, c.code, c.msg)
		}
	}
}
