package chtest

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testSuite returns a suite like the package's single-server one, using
// fallback without its variable and asking ping whether a server answers.
func testSuite(fallback string, ping func(dsn string, timeout time.Duration) error) *suite {
	return &suite{what: "ClickHouse integration tests", env: Env, fallback: fallback, start: "start one", ping: ping}
}

// Without the variable the tests use the local server README names when
// it answers, and skip naming it otherwise.
func TestDefaultServer(t *testing.T) {
	found := testSuite(DefaultServer, ping).decide("")
	if found.err != nil {
		t.Fatalf("without %s: %v, want no error whether or not a server answers", Env, found.err)
	}
	if err := ping(DefaultServer, defaultTimeout); err != nil {
		if found.dsn != "" || !strings.Contains(found.skip, DefaultServer) {
			t.Fatalf("no server at %s (%v): got %+v, want a skip naming it", DefaultServer, err, found)
		}
		t.Skipf("the default server's side needs a ClickHouse server at %s: %v", DefaultServer, err)
	}
	if found.dsn != DefaultServer || found.skip != "" {
		t.Fatalf("a server answers at %s: got %+v, want it used", DefaultServer, found)
	}
}

// Without the variable and without a server, the skip says where no
// server answered and what the dial said.
func TestSkipNamesServerAndError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "clickhouse://" + l.Addr().String() + "/default"
	l.Close()
	found := testSuite(closed, ping).decide("")
	if found.dsn != "" || found.err != nil || found.off {
		t.Fatalf("nothing at %s: got %+v, want a skip", closed, found)
	}
	for _, want := range []string{closed, "connection refused", Env} {
		if !strings.Contains(found.skip, want) {
			t.Errorf("skip %q does not say %q", found.skip, want)
		}
	}
}

// Off skips without asking any server, and needs no note.
func TestOffSkips(t *testing.T) {
	found := testSuite(DefaultServer, func(dsn string, _ time.Duration) error {
		t.Fatalf("%s=%s asked %s", Env, Off, dsn)
		return nil
	}).decide(Off)
	if found.dsn != "" || found.err != nil || !found.off || !strings.Contains(found.skip, Env+"="+Off) {
		t.Fatalf("%s=%s: got %+v, want a quiet skip naming it", Env, Off, found)
	}
}

// A server the variable names is used when it answers; when it does not,
// or is no URL, the tests fail (a server asked for and down is an error),
// saying which and why.
func TestNamedServer(t *testing.T) {
	named := "clickhouse://ch.example:9000/default"
	up := testSuite(DefaultServer, func(string, time.Duration) error { return nil }).decide(named)
	if up.dsn != named || up.skip != "" || up.err != nil {
		t.Fatalf("%s answers: got %+v, want it used", named, up)
	}

	refused := errors.New("dial tcp 192.0.2.1:9000: connect: connection refused")
	var asked string
	down := testSuite(DefaultServer, func(dsn string, _ time.Duration) error { asked = dsn; return refused }).decide(named)
	if asked != named {
		t.Errorf("asked %q, want %s", asked, named)
	}
	if down.err == nil || down.dsn != "" || down.skip != "" || !errors.Is(down.err, refused) {
		t.Fatalf("%s down: got %+v, want a failure wrapping %v", named, down, refused)
	}
	for _, want := range []string{Env + "=" + named, Off} {
		if !strings.Contains(down.err.Error(), want) {
			t.Errorf("failure %q does not say %q", down.err, want)
		}
	}

	bad := testSuite(DefaultServer, func(string, time.Duration) error { return nil }).decide("clickhouse://[::1")
	if bad.err == nil || bad.dsn != "" || bad.skip != "" {
		t.Fatalf("not a URL: got %+v, want a failure", bad)
	}
}

// One go command run writes a suite's note once, whichever of its test
// binaries skip first.
func TestFirstInRun(t *testing.T) {
	dir := t.TempDir()
	if !firstInRun(dir, Env) {
		t.Fatal("first call: false, want true")
	}
	if firstInRun(dir, Env) {
		t.Fatal("second call: true, want false")
	}
	if !firstInRun(dir, ClusterEnv) {
		t.Fatal("another suite's first call: false, want true")
	}
	// A marker of a run that ended long ago goes.
	old := filepath.Join(dir, markerPrefix+"1-1-"+Env)
	if err := os.WriteFile(old, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-2 * markerAge)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	firstInRun(dir, Env)
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an old marker: %v, want it removed", err)
	}
}
