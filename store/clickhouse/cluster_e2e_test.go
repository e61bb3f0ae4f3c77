package clickhouse_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// The service on a ClickHouse cluster and on one server, fed the same
// simulated incident over OTLP gRPC (stopped and restarted half way),
// stores the same report: the whole document, a time range and an API of
// it, and the incidents are equal, and equal to what `analyze` makes of
// the traces. The single server is one of the cluster's, in a database of
// its own.
func TestServiceOnCluster(t *testing.T) {
	cu, name := chtest.Cluster(t)
	t.Parallel() // with TestCluster
	clusterDSN := chtest.FreshClusterDatabase(t, cu)
	singleDSN := chtest.FreshDatabase(t, &url.URL{Scheme: "clickhouse", Host: cu.Host})

	start := time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC)
	res, err := sim.Run(storetest.Scenario(300, start, 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const window = 10 * time.Minute
	d, _ := storetest.Analyze(res, window)
	wantB, _ := json.Marshal(d)

	exports := res.Exports(11, 5, 0)
	half := len(exports) / 2
	for _, dsn := range []string{clusterDSN, singleDSN} {
		for _, part := range [][]ptrace.Traces{exports[:half], exports[half:]} { // a restart half way
			stop := startService(t, dsn, window, part)
			if err := stop(); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
		}
	}
	onCluster := reportWhenQuiet(t, clusterDSN, int64(res.Stats.Spans))
	onOne := reportWhenQuiet(t, singleDSN, int64(res.Stats.Spans))
	if onCluster != onOne {
		t.Fatalf("the cluster's report differs from one server's:\n cluster %s\n    one %s", onCluster, onOne)
	}
	if onCluster != string(wantB) {
		t.Fatalf("the stored report differs from analyze:\n got %s\nwant %s", onCluster, wantB)
	}

	// Parts of the document, and the incidents, read from both.
	ctx := context.Background()
	read := func(dsn string) string {
		t.Helper()
		st, err := storeurl.Open(ctx, storeurl.Options{URL: dsn, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		cfg := analysis.Config{Window: st.Window()}
		var out strings.Builder
		for _, q := range []store.Query{
			{From: start.Add(4 * time.Minute).UnixNano(), To: start.Add(13 * time.Minute).UnixNano()},
			{API: d.APIs[0].API},
		} {
			doc, err := query.Document(ctx, st, q, cfg)
			if err != nil {
				t.Fatal(err)
			}
			out.WriteString(storetest.DocJSON(t, doc) + "\n")
		}
		inc, err := query.DocumentIncidents(ctx, st.(query.Reader), store.Query{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(inc)
		out.Write(b)
		return out.String()
	}
	a, b := read(clusterDSN), read(singleDSN)
	if a != b {
		t.Fatalf("the cluster's reads differ from one server's:\n cluster %s\n    one %s", a, b)
	}
	if !strings.Contains(a, `"peak_owned_failure_rate"`) {
		t.Fatalf("no incident in the reads: the comparison proves little:\n%s", a)
	}
	t.Logf("cluster %s: %d spans, the same report as one server and analyze", name, res.Stats.Spans)
}
