package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The container's probe against a real serve: ready while it runs, failing
// once it stopped.
func TestHealthcheckServe(t *testing.T) {
	p := serve(t, t.TempDir())
	for _, path := range []string{"/healthz", "/readyz"} {
		code, out, errs := runCmd(t, "healthcheck", "--url", p.httpURL+path)
		if code != exitOK {
			t.Errorf("healthcheck %s of a running serve: exit %d, %s", path, code, errs)
		}
		if want := p.httpURL + path + ": "; !strings.HasPrefix(out, want) {
			t.Errorf("healthcheck %s printed %q, want it to start with %q", path, out, want)
		}
	}
	p.term(t)
	code, _, errs := runCmd(t, "healthcheck", "--url", p.httpURL+"/healthz")
	if code != exitFail || !strings.Contains(errs, "connection refused") {
		t.Errorf("healthcheck of a stopped serve: exit %d, %q; want 1 and connection refused", code, errs)
	}
}

func TestHealthcheckAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("ready\n"))
		case "/starting":
			// As /readyz answers while a service starts or stops.
			http.Error(w, "starting or stopping", http.StatusServiceUnavailable)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/big":
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(strings.Repeat("x", 100_000)))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		name    string
		args    []string
		code    int
		inErr   string
		maxTime time.Duration
	}{
		{"2xx", []string{"--url", srv.URL + "/ok"}, exitOK, "", 0},
		{"503", []string{"--url", srv.URL + "/starting"}, exitFail, "503 Service Unavailable starting or stopping", 0},
		// A redirect is not followed: the probe is of this address.
		{"redirect", []string{"--url", srv.URL + "/moved"}, exitFail, "302 Found", 0},
		{"timeout", []string{"--url", srv.URL + "/slow", "--timeout", "200ms"}, exitFail, "context deadline exceeded", 3 * time.Second},
		{"not http", []string{"--url", "ftp://127.0.0.1/x"}, exitUsage, "want http(s)://host:port/path", 0},
		{"no host", []string{"--url", "http:///healthz"}, exitUsage, "want http(s)://host:port/path", 0},
		{"bad timeout", []string{"--url", srv.URL + "/ok", "--timeout", "0s"}, exitUsage, "--timeout 0s must be positive", 0},
		{"argument", []string{srv.URL + "/ok"}, exitUsage, "unexpected argument", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			code, _, errs := runCmd(t, append([]string{"healthcheck"}, c.args...)...)
			if code != c.code || !strings.Contains(errs, c.inErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, c.code, c.inErr)
			}
			if took := time.Since(start); c.maxTime > 0 && took > c.maxTime {
				t.Errorf("took %v, want at most %v", took, c.maxTime)
			}
		})
	}
	// The reason of a refusal is shown cut short, not the whole body.
	_, _, errs := runCmd(t, "healthcheck", "--url", srv.URL+"/big")
	if n := strings.Count(errs, "x"); n != 512 {
		t.Errorf("a 100,000-byte answer printed %d bytes of it, want 512", n)
	}
}
