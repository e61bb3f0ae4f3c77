package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stormradius/stormradius/internal/app"
)

// runHealthcheck asks a running service's /healthz or /readyz and exits 0
// when it answers 2xx, 1 when it answers otherwise or not at all, 2 on a
// bad command line. It is the container image's probe: the image has no
// shell or curl (Dockerfile, deploy/compose).
func runHealthcheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("healthcheck", stderr)
	target := fs.String("url", "http://127.0.0.1:8080/healthz", "health or readiness endpoint to ask (serve's and cmd/api's --http default; cmd/ingest's is its own --http)")
	timeout := fs.Duration("timeout", 3*time.Second, "longest the answer may take")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stormradius healthcheck [--url http://127.0.0.1:8080/healthz] [--timeout 3s]")
		fmt.Fprintln(stderr, "\nExit 0 when the URL answers 2xx, 1 otherwise: a container's health check.")
		fs.PrintDefaults()
	}
	if rest, err := parseArgs(fs, args); err != nil {
		return exitUsage
	} else if len(rest) > 0 {
		fmt.Fprintf(stderr, "stormradius healthcheck: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius healthcheck: %v\n", err)
		return exitUsage
	}
	u, err := url.Parse(*target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "stormradius healthcheck: --url %q: want http(s)://host:port/path\n", *target)
		return exitUsage
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "stormradius healthcheck: --timeout %v must be positive\n", *timeout)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "stormradius healthcheck: %v\n", err)
		return exitUsage
	}
	// The service probed is this container's own: no proxy from the
	// environment, no redirect to somewhere else.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "stormradius healthcheck: %v\n", err)
		return exitFail
	}
	defer resp.Body.Close()
	// A few hundred bytes say why ("starting or stopping"); the rest is
	// not read.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "stormradius healthcheck: %s: %s %s\n", u.Redacted(), resp.Status, msg)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: %s\n", u.Redacted(), msg)
	return exitOK
}
