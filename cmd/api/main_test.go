package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/store"
)

// syncBuffer is a buffer the command's logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// api refuses to start over a store that is not there or not migrated,
// saying what to run, and creates nothing: it opens the store read-only.
func TestRefusesUnmigratedStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	var stderr syncBuffer
	if code := run(ctx, []string{"--store", "sqlite://" + dir, "--http", "127.0.0.1:0"}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "no stormradius data") {
		t.Fatalf("missing sqlite store: exit %d, %s", code, stderr.String())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("api created %s: %v", dir, err)
	}

	dsn := chtest.FreshDSN(t)
	stderr = syncBuffer{}
	if code := run(ctx, []string{"--store", dsn, "--http", "127.0.0.1:0"}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "store schema not migrated") || !strings.Contains(stderr.String(), "stormradius migrate") {
		t.Fatalf("fresh ClickHouse database: exit %d, %s", code, stderr.String())
	}
	// Nothing migrated behind the refusal.
	if _, err := storeurl.Open(ctx, storeurl.Options{URL: dsn, Existing: true}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the fresh database after api: %v, want no stormradius data", err)
	}
}

// Over a migrated store, api serves until its context ends.
func TestServesMigratedStore(t *testing.T) {
	dsn := chtest.FreshDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := storeurl.Open(ctx, storeurl.Options{URL: dsn}) // migrates, as cmd/ingest would
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--store", dsn, "--http", addr}, &stderr) }()
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case code := <-done:
			t.Fatalf("api exited %d before serving: %s", code, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after shutdown: %s", code, stderr.String())
	}
}

// api --help prints the flags and exits 0, as ingest --help does.
func TestHelpExitsZero(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out); code != 0 || !strings.Contains(out.String(), "-http-tls-cert") {
		t.Errorf("--help: exit %d\n%s", code, &out)
	}
}
