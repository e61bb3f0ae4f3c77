package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// cmd/api's service: the REST API, UI and /metrics over a store others
// write — here the rollout, loaded into the embedded store and, with a
// server, ClickHouse — behind a token, health open, shut down on cancel.
func TestRunAPI(t *testing.T) {
	traces, err := fixture.Rollout("")
	if err != nil {
		t.Fatal(err)
	}
	want := fixture.MustAnalyze(t, traces, store.Query{})
	for _, c := range []struct {
		name string
		opts func(t *testing.T) storeurl.Options
	}{
		{"sqlite", func(t *testing.T) storeurl.Options {
			return storeurl.Options{Data: t.TempDir(), Window: fixture.Window}
		}},
		{"clickhouse", func(t *testing.T) storeurl.Options {
			return storeurl.Options{URL: chtest.FreshDSN(t), Window: fixture.Window}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts(t)
			st, err := storeurl.Open(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			fixture.Load(t, st, traces)
			st.Close()

			ctx, cancel := context.WithCancel(context.Background())
			addr := make(chan net.Addr, 1)
			done := make(chan error, 1)
			go func() { // read-only: RunAPI opens it so
				done <- app.RunAPI(ctx, app.APIConfig{Store: opts, HTTPAddr: "127.0.0.1:0",
					Web: web.Config{Tokens: []string{"tok"}, Now: func() time.Time { return fixture.End }}, Ready: func(a net.Addr) { addr <- a }})
			}()
			var base string
			select {
			case a := <-addr:
				base = "http://" + a.String()
			case err := <-done:
				t.Fatalf("api did not start: %v", err)
			}
			get := func(path, token string) (int, string) {
				req, _ := http.NewRequest("GET", base+path, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if code, _ := get("/api/v1/fleet", ""); code != 401 {
				t.Errorf("fleet without a token: %d", code)
			}
			code, body := get("/api/v1/fleet", "tok")
			var fleet struct{ Traces int64 }
			if json.Unmarshal([]byte(body), &fleet); code != 200 || fleet.Traces != want.Traces {
				t.Errorf("fleet: %d %s; want %d traces", code, body, want.Traces)
			}
			for path, wantBody := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": "stormradius_rollups_up 1", "/": "<!doctype html>"} {
				if code, body := get(path, ""); code != 200 || !strings.Contains(strings.ToLower(body), strings.ToLower(wantBody)) {
					t.Errorf("%s: %d %.200s", path, code, body)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
}

// cmd/api's service opens the store read-only: a store that is not there
// or not migrated is refused before serving, and nothing is created or
// migrated (TestRunAPI serves a migrated one).
func TestRunAPIReadOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		opts func(t *testing.T) storeurl.Options
		want error
	}{
		{"sqlite", func(t *testing.T) storeurl.Options {
			return storeurl.Options{Data: filepath.Join(t.TempDir(), "data")}
		}, store.ErrNotFound},
		{"clickhouse", func(t *testing.T) storeurl.Options { return storeurl.Options{URL: chtest.FreshDSN(t)} }, store.ErrNotMigrated},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := app.RunAPI(ctx, app.APIConfig{Store: opts, HTTPAddr: "127.0.0.1:0",
				Ready: func(net.Addr) { t.Error("served a store that is not there"); cancel() }})
			if !errors.Is(err, c.want) {
				t.Fatalf("fresh store: %v, want %v", err, c.want)
			}
			opts.Existing = true
			if _, err := storeurl.Open(ctx, opts); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("after RunAPI: %v, want no stormradius data", err)
			}
		})
	}
}
