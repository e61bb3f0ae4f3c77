package collector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/e2e/e2ekit"
)

// currentEnv names a current ClickHouse engine served over ClickHouse's
// HTTP interface (scripts/chdb-serve.sh start prints it), as in the main
// module's tests (internal/chtest.CurrentEnv).
const currentEnv = "STORMRADIUS_TEST_CLICKHOUSE_CURRENT"

// tableWait bounds the wait for the exporter to have written every span.
const tableWait = 2 * time.Minute

// The collector's clickhouse exporter (contrib v0.165.1), with
// deploy/collector/clickhouse.yaml as shipped (its defaults: lz4, async
// inserts, both checked on the wire), writes the sample into a current
// ClickHouse engine over the HTTP interface, in a database it creates
// with its own DDL; the table then holds every span of the sample
// (counted from the OTLP data), the companion otel_traces_trace_id_ts
// every trace id, and `stormradius analyze --source` of the table equals
// `stormradius analyze` of the sample file over the same range, field by
// field (that range covering every span of the sample).
func TestClickHouseExporter(t *testing.T) {
	t.Parallel()
	server := os.Getenv(currentEnv)
	if server == "" {
		t.Skip("set " + currentEnv + "=http://127.0.0.1:PORT/ to run the clickhouse exporter against a current ClickHouse engine " +
			"(scripts/chdb-serve.sh start serves chdb and prints it)")
	}
	setup(t)
	srv, err := url.Parse(server)
	if err != nil || srv.Scheme != "http" || srv.Host == "" {
		t.Fatalf("%s=%s: want http://host:port/ (ClickHouse's HTTP interface)", currentEnv, server)
	}
	conn := openCurrent(t, srv)
	db := freshCurrentDatabase(t, conn)
	from, to := sampleRange(t)

	var wire inserts
	tap := startTap(t, srv.Host, false, wire.inspect)
	col := startCollector(t, "clickhouse", []string{
		"CLICKHOUSE_ENDPOINT=http://" + tap.addr,
		"CLICKHOUSE_DATABASE=" + db,
	})
	col.send(t)
	waitForRows(t, conn, col, fmt.Sprintf("SELECT count() FROM %q.otel_traces", db), uint64(suite.spans))
	wire.check(t)
	tap.check(t, "none") // lz4 is ClickHouse's block compression, not HTTP's
	var traceIDs uint64
	if err := conn.QueryRow(context.Background(), fmt.Sprintf("SELECT uniqExact(TraceId) FROM %q.otel_traces_trace_id_ts", db)).Scan(&traceIDs); err != nil {
		t.Fatal(err)
	}
	if traceIDs != uint64(suite.traces) {
		t.Errorf("otel_traces_trace_id_ts (the exporter's materialized view) holds %d trace ids, the sample %d", traceIDs, suite.traces)
	}

	rng := []string{"--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339)}
	want, err := e2ekit.Run(suite.stormradius, append([]string{"analyze", "--format", "json", suite.sample}, rng...)...)
	if err != nil {
		t.Fatal(err)
	}
	if n := spansOf(want); n != suite.spans {
		t.Fatalf("analyze of the sample over %v counts %d spans, the sample has %d: the range misses some", rng, n, suite.spans)
	}
	source := (&url.URL{Scheme: "http", Host: srv.Host, Path: "/" + db, RawQuery: "table=otel_traces"}).String()
	got, err := e2ekit.Run(suite.stormradius, append([]string{"analyze", "--format", "json", "--source", source}, rng...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e2ekit.SameDoc(got, want); err != nil {
		t.Errorf("analyze --source %s differs from analyze of the sample in %v", source, err)
	}
}

// inserts reads the exporter's inserts on the wire (wiretap): each must
// be sent as the shipped config says, its data in lz4 blocks (ClickHouse's
// block compression: the block's method byte, 0x82, after its 16-byte
// checksum) and async_insert on, so that a setting the exporter did not
// apply cannot pass as tested.
type inserts struct {
	mu  sync.Mutex
	n   int
	bad []string
}

// inspect reads one request to the server.
func (w *inserts) inspect(req *http.Request) {
	q := req.URL.Query()
	if !strings.HasPrefix(strings.TrimSpace(q.Get("query")), "INSERT") {
		return
	}
	head := make([]byte, 17)
	_, err := io.ReadFull(req.Body, head)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	for _, p := range [][2]string{{"compress", "1"}, {"decompress", "1"}, {"network_compression_method", "LZ4"}, {"async_insert", "1"}} {
		if v := q.Get(p[0]); v != p[1] {
			w.bad = append(w.bad, fmt.Sprintf("insert %d: %s=%q, want %s", w.n, p[0], v, p[1]))
		}
	}
	if err != nil || head[16] != 0x82 {
		w.bad = append(w.bad, fmt.Sprintf("insert %d: body starts %x (%v), want an lz4 block", w.n, head, err))
	}
}

// check asserts that the exporter sent inserts, each as inspect wants.
func (w *inserts) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		t.Error("no INSERT went through the wiretap")
	}
	for _, b := range w.bad {
		t.Error(b)
	}
	t.Logf("%d inserts, lz4-compressed, async_insert=1", w.n)
}

// openCurrent opens a clickhouse-go connection to the current engine's
// HTTP interface, closed when the test ends.
func openCurrent(t *testing.T, srv *url.URL) driver.Conn {
	t.Helper()
	conn, err := ch.Open(&ch.Options{Protocol: ch.HTTP, Addr: []string{srv.Host}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("%s: %v", currentEnv, err)
	}
	return conn
}

// freshCurrentDatabase returns the name of a database that does not exist
// yet (the exporter creates it), dropped when the test ends: after the
// collector stops, since the cleanup is registered before it starts.
func freshCurrentDatabase(t *testing.T, conn driver.Conn) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "stormradius_e2e_otel_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return name
}

// sampleRange returns the whole minutes that hold the start of every span
// of the sample, read from its OTLP requests: from the first one's
// minute to the minute after the last one's.
func sampleRange(t *testing.T) (from, to time.Time) {
	t.Helper()
	var lo, hi time.Time
	for i, body := range suite.requests {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		rss := req.Traces().ResourceSpans()
		for j := range rss.Len() {
			sss := rss.At(j).ScopeSpans()
			for k := range sss.Len() {
				spans := sss.At(k).Spans()
				for l := range spans.Len() {
					s := spans.At(l).StartTimestamp().AsTime()
					if lo.IsZero() || s.Before(lo) {
						lo = s
					}
					if s.After(hi) {
						hi = s
					}
				}
			}
		}
	}
	if lo.IsZero() {
		t.Fatal("the sample has no spans")
	}
	return lo.UTC().Truncate(time.Minute), hi.UTC().Truncate(time.Minute).Add(time.Minute)
}

// waitForRows waits until query (a count) answers want, failing the test
// when the collector dropped data or exited, when the count passes want,
// or when it is not reached within tableWait.
func waitForRows(t *testing.T, conn driver.Conn, col *collector, query string, want uint64) {
	t.Helper()
	start := time.Now()
	var n uint64
	var err error
	for {
		for _, d := range e2ekit.Dropped {
			if line := col.Find(d); line != "" {
				t.Fatalf("%s dropped the sample's data: %s", col.Name, e2ekit.ExportError(line))
			}
		}
		select {
		case <-col.Exited():
			t.Fatalf("%s exited early: %v", col.Name, col.Err())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = conn.QueryRow(ctx, query).Scan(&n)
		cancel()
		switch {
		case err == nil && n == want:
			t.Logf("%d rows after %v", n, time.Since(start).Round(time.Millisecond))
			return
		case err == nil && n > want:
			t.Fatalf("%s: %d, more than the %d sent", query, n, want)
		case time.Since(start) > tableWait:
			retrying := col.Find("Will retry")
			t.Fatalf("%s: %d (err %v) after %v, want %d; the collector's first retry: %s",
				query, n, err, tableWait, want, strings.TrimSpace(e2ekit.ExportError(retrying)))
		}
		time.Sleep(300 * time.Millisecond)
	}
}
