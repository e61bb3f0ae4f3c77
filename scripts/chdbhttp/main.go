// Command chdbhttp serves chdb, a current ClickHouse engine embedded as a
// library, over ClickHouse's HTTP interface, as much of it as
// clickhouse-go's HTTP protocol uses (server.go): the ClickHouse store's
// tests run on it (store/clickhouse, STORMRADIUS_TEST_CLICKHOUSE_CURRENT;
// scripts/chdb-serve.sh builds, starts and stops it).
//
//	chdbhttp -lib /tmp/chdb/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so [-addr 127.0.0.1:0] [-data DIR]
//
// It prints the URL it serves on its first line of output
// (http://127.0.0.1:PORT/), and serves until SIGINT or SIGTERM; its data
// lives in DIR (a temporary directory, removed at exit, by default).
//
// libchdb.so comes from npm (chdb's @chdb/lib-linux-x64-gnu package, which
// scripts/chdb-check.sh installs); it is loaded at run time without cgo
// (github.com/ebitengine/purego). This is a module of its own so that the
// repository's module does not depend on it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chdbhttp:", err)
		os.Exit(1)
	}
}

func run() error {
	lib := flag.String("lib", "", "libchdb.so (npm's @chdb/lib-linux-x64-gnu)")
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	data := flag.String("data", "", "data directory (a temporary one, removed at exit, when empty)")
	verbose := flag.Bool("v", false, "log every query")
	flag.Parse()
	if *lib == "" {
		return errors.New("-lib is required: the path of libchdb.so")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	dir := *data
	if dir == "" {
		d, err := os.MkdirTemp("", "chdbhttp-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	tmp := filepath.Join(dir, "inserts")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	e, err := openEngine(*lib, dir)
	if err != nil {
		return err
	}
	defer e.close()
	e.mu.Lock()
	v, _, err := e.query([]byte("SELECT version()"), "TabSeparatedRaw")
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("version: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	version := strings.TrimSpace(string(v))
	srv := &http.Server{
		Handler:           &server{e: e, log: log, version: version, maxBody: 1 << 30, tmp: tmp},
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Printf("http://%s/\n", ln.Addr())
	log.Info("serving chdb", "version", version, "addr", ln.Addr().String(), "data", dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}
