package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store/storetest"
	"github.com/stormradius/stormradius/web"
)

// TestLoad is the bounded load test of the read endpoints on the embedded
// store holding 7 days of rollups for 100 root APIs: concurrent clients
// on loopback for STORMRADIUS_LOAD (e.g. 30s), then p50/p99 per endpoint
// and the throughput (docs/PERFORMANCE.md records the figures). It only
// reports; the target (p99 < 50 ms) is read from its output, not asserted.
func TestLoad(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("STORMRADIUS_LOAD"))
	if err != nil || d <= 0 {
		t.Skip("set STORMRADIUS_LOAD=30s to run the load test of the read endpoints")
	}
	// STORMRADIUS_LOAD_DIR keeps the filled store for the next run.
	dir := os.Getenv("STORMRADIUS_LOAD_DIR")
	fill := true
	if dir == "" {
		dir = t.TempDir()
	} else if _, err := os.Stat(dir + "/results.db"); err == nil {
		fill = false
	}
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: dir, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	end := time.Date(2026, 3, 8, 12, 30, 0, 0, time.UTC)
	if fill {
		t0 := time.Now()
		storetest.FillWeek(t, st, 100, end)
		t.Logf("7 days × 100 APIs × 1 trace a minute stored in %v", time.Since(t0).Round(time.Millisecond))
	}
	clients := 8
	if n, err := strconv.Atoi(os.Getenv("STORMRADIUS_LOAD_CLIENTS")); err == nil && n > 0 {
		clients = n
	}
	srv := httptest.NewServer(web.Handler(query.New(st), web.Config{Now: func() time.Time { return end }}))
	defer srv.Close()

	api := "svc-042 GET /api"
	paths := []string{
		"/api/v1/apis",                // the last hour
		"/api/v1/apis?from=now-24h",   // a day
		"/api/v1/fleet?from=now-168h", // the week
		"/api/v1/services",
		"/api/v1/radius" + q("api", api, "from", "now-24h", "step", "1h"),
		"/api/v1/radius" + q("api", api),
		"/api/v1/incidents",
		"/api/v1/gate" + q("api", api, "max_radius", "3"),
		"/api/v1/graph" + q("api", api),
	}
	lat := make([][]time.Duration, len(paths))
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			mine := make([][]time.Duration, len(paths))
			for i := c; time.Now().Before(stop); i++ {
				k := i % len(paths)
				t1 := time.Now()
				resp, err := srv.Client().Get(srv.URL + paths[k])
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s: %d", paths[k], resp.StatusCode)
					return
				}
				mine[k] = append(mine[k], time.Since(t1))
			}
			mu.Lock()
			for k := range mine {
				lat[k] = append(lat[k], mine[k]...)
			}
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	var all []time.Duration
	out := fmt.Sprintf("%d clients for %v on loopback\n%-60s %8s %8s %8s %8s\n", clients, d, "endpoint", "requests", "p50", "p99", "max")
	for k, l := range lat {
		all = append(all, l...)
		out += loadRow(paths[k], l)
	}
	out += loadRow("all", all)
	out += fmt.Sprintf("throughput %.0f requests/s\n", float64(len(all))/d.Seconds())
	t.Log("\n" + out)
}

func loadRow(name string, l []time.Duration) string {
	if len(l) == 0 {
		return fmt.Sprintf("%-60s %8d\n", name, 0)
	}
	slices.Sort(l)
	p := func(f float64) time.Duration {
		return l[min(len(l)-1, int(f*float64(len(l))))].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("%-60s %8d %8v %8v %8v\n", name, len(l), p(0.5), p(0.99), l[len(l)-1].Round(10*time.Microsecond))
}
