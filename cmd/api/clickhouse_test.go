package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/analysis/plan"
	"github.com/stormradius/stormradius/internal/certs/certstest"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

var (
	ingestOnce sync.Once
	ingestPath string
	ingestErr  error
)

// ingestBinary builds cmd/ingest once per test run: the production
// writer, as a process of its own with its own exit status.
func ingestBinary(t *testing.T) string {
	t.Helper()
	ingestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stormradius-ingest")
		if err != nil {
			ingestErr = err
			return
		}
		ingestPath = filepath.Join(dir, "ingest")
		if out, err := exec.Command("go", "build", "-o", ingestPath, "../ingest").CombinedOutput(); err != nil {
			ingestErr = fmt.Errorf("go build ../ingest: %v\n%s", err, out)
		}
	})
	if ingestErr != nil {
		t.Fatal(ingestErr)
	}
	return ingestPath
}

// ingestCmd is cmd/ingest with args, its environment without a ClickHouse
// password but password, when set.
func ingestCmd(t *testing.T, password string, args ...string) (*exec.Cmd, *syncBuffer) {
	cmd := exec.Command(ingestBinary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, storeurl.PasswordEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if password != "" {
		cmd.Env = append(cmd.Env, storeurl.PasswordEnv+"="+password)
	}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd, &out
}

// waitReady polls base/readyz until it answers 200, failing t if done
// says the process ended first.
func waitReady(t *testing.T, base string, done <-chan struct{}, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-done:
			t.Fatalf("%s ended before it was ready:\n%s", base, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never ready:\n%s", base, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Production's ClickHouse (issue 29), on 18.16: the TLS port (client
// certificates verified, a test CA), a user with a password for cmd/ingest
// (from password_file) and a readonly user for cmd/api (from
// STORMRADIUS_CLICKHOUSE_PASSWORD). Simulated traffic sent to ingest over
// OTLP is stored and analysed as analyze does it; api as the readonly user
// serves every route of its OpenAPI document and every file and page of
// the UI with 200 and the figures analyze gives.
func TestProductionClickHouse(t *testing.T) {
	srv := chtest.TLS(t)
	writer, writerPass := chtest.User(t, chtest.WriterEnv)
	reader, readerPass := chtest.User(t, chtest.ReaderEnv)
	db := chtest.DatabaseOf(chtest.FreshDSN(t))
	passFile := filepath.Join(t.TempDir(), "writer-password")
	if err := os.WriteFile(passFile, []byte(writerPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const window = 10 * time.Minute
	res, err := sim.Run(storetest.Scenario(300, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	exports := res.Exports(5, 4, 20)
	want, windows := storetest.AnalyzeBatches(exports, window)
	wantPlan, err := query.Plan(query.PlanRequest{}, windows.Merged(), want, analysis.Config{Window: window})
	if err != nil {
		t.Fatal(err)
	}

	// cmd/ingest over TLS as the writer.
	otlpAddr, httpAddr := freeAddr(t), freeAddr(t)
	ing, ingLog := ingestCmd(t, "", "--store", srv.DSN(db, writer, "password_file", passFile), "--window", window.String(),
		"--otlp-grpc", "off", "--otlp-http", otlpAddr, "--http", httpAddr, "--trace-idle", "100ms", "--max-trace-age", "3s",
		"--retention", "0", "--log-level", "warn")
	if err := ing.Start(); err != nil {
		t.Fatal(err)
	}
	ingDone := make(chan struct{})
	go func() { ing.Wait(); close(ingDone) }()
	defer func() {
		ing.Process.Signal(syscall.SIGTERM)
		<-ingDone
		if code := ing.ProcessState.ExitCode(); code != 0 {
			t.Errorf("ingest: exit %d\n%s", code, ingLog)
		}
	}()
	waitReady(t, "http://"+httpAddr, ingDone, ingLog)
	for i, td := range exports {
		b, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		resp, err := http.Post("http://"+otlpAddr+"/v1/traces", "application/x-protobuf", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("export %d: %d\n%s", i, resp.StatusCode, ingLog)
		}
	}

	// The report, read over TLS as the readonly user, is analyze's.
	t.Setenv(storeurl.PasswordEnv, readerPass)
	readerDSN := srv.DSN(db, reader)
	wantJSON, _ := json.Marshal(want)
	if got := settledReport(t, readerDSN, want.Spans); got != string(wantJSON) {
		t.Fatalf("the stored report differs from analyze:\n got %s\nwant %s", got, wantJSON)
	}

	// cmd/api over TLS as the readonly user.
	apiAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var apiLog syncBuffer
	apiDone := make(chan struct{})
	code := -1
	go func() {
		defer close(apiDone)
		code = run(ctx, []string{"--store", readerDSN, "--http", apiAddr, "--log-level", "warn"}, &apiLog)
	}()
	defer func() {
		cancel()
		<-apiDone
		if code != 0 {
			t.Errorf("api: exit %d\n%s", code, &apiLog)
		}
	}()
	base := "http://" + apiAddr
	waitReady(t, base, apiDone, &apiLog)
	checkAPI(t, base, want, wantPlan, res)
	checkUI(t, base)
}

// settledReport reads the stored report over dsn until it covers want
// spans and has not changed for two seconds.
func settledReport(t *testing.T, dsn string, want int64) string {
	t.Helper()
	ctx := context.Background()
	var last string
	same := 0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		st, err := storeurl.Open(ctx, storeurl.Options{URL: dsn, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		d, err := query.Document(ctx, st, store.Query{}, analysis.Config{Window: st.Window()})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(d)
		if d.Spans == want && string(b) == last {
			if same++; same == 8 {
				return last
			}
		} else {
			same = 0
		}
		last = string(b)
	}
	t.Fatalf("the stored report never settled on %d spans; last:\n%s", want, last)
	return ""
}

// rangeQ is the simulated traffic's time range.
const rangeQ = "from=2026-03-01T09:00:00Z&to=2026-03-01T11:00:00Z"

// checkAPI requests every route of the API's OpenAPI document, with the
// simulated traffic's range, and checks each answers 200 with what analyze
// says (want), or for the routes analyze has no figure of, the traffic's
// own: the trace's spans, the root API's name.
func checkAPI(t *testing.T, base string, want *analysis.Document, wantPlan *plan.Plan, res *sim.Result) {
	t.Helper()
	var doc struct{ Paths map[string]map[string]any }
	if err := json.Unmarshal(fetch(t, "GET", base+"/api/v1/openapi.json", ""), &doc); err != nil {
		t.Fatal(err)
	}
	if len(want.APIs) == 0 {
		t.Fatal("analyze found no root API")
	}
	api := want.APIs[0].API
	var trace struct {
		id    string
		spans int
	}
	for _, tr := range res.TraceData() {
		for _, rs := range tr.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					id := sp.TraceID()
					trace.id = hex.EncodeToString(id[:])
					trace.spans++
				}
			}
		}
		break
	}
	fromWant := func(fields ...string) string {
		m := map[string]any{}
		b, _ := json.Marshal(want)
		json.Unmarshal(b, &m)
		out := map[string]any{}
		for _, f := range fields {
			out[f] = m[f]
		}
		return canon(out)
	}
	apiQ := "api=" + url.QueryEscape(api) + "&" + rangeQ
	var incidents struct{ Incidents []struct{ ID string } }
	json.Unmarshal(fetch(t, "GET", base+"/api/v1/incidents?"+rangeQ, ""), &incidents)
	if len(incidents.Incidents) == 0 {
		t.Fatal("/api/v1/incidents: none in the simulated incident")
	}
	visited := map[string]bool{}
	for _, c := range []struct {
		method, path, query, body string
		check                     func(b []byte) string // "" when right
	}{
		{"GET", "/apis", rangeQ, "", func(b []byte) string { return same(b, fromWant("apis"), "apis") }},
		{"GET", "/fleet", rangeQ, "", func(b []byte) string {
			return same(b, fromWant("fleet", "spans", "traces", "fragments", "sampling"), "fleet", "spans", "traces", "fragments", "sampling")
		}},
		{"GET", "/services", rangeQ, "", func(b []byte) string { return same(b, fromWant("services", "edges"), "services", "edges") }},
		{"GET", "/radius", apiQ, "", func(b []byte) string {
			var sr struct {
				Points []struct {
					Traces       int64 `json:"traces"`
					FailedTraces int64 `json:"failed_traces"`
					MaxRadius    int   `json:"max_radius"`
				}
			}
			json.Unmarshal(b, &sr)
			var traces, failed int64
			maxRadius := 0
			for _, p := range sr.Points {
				traces, failed, maxRadius = traces+p.Traces, failed+p.FailedTraces, max(maxRadius, p.MaxRadius)
			}
			if w := want.APIs[0]; traces != w.Traces || failed != w.FailedTraces || maxRadius != w.MaxRadius {
				return fmt.Sprintf("%d traces, %d failed, max radius %d over the points; want %d, %d, %d",
					traces, failed, maxRadius, w.Traces, w.FailedTraces, w.MaxRadius)
			}
			return ""
		}},
		{"GET", "/graph", apiQ, "", func(b []byte) string { return has(b, `"api":`+quote(api)) }},
		{"GET", "/incidents", rangeQ, "", func(b []byte) string { return has(b, `"id":`+quote(incidents.Incidents[0].ID)) }},
		{"GET", "/incidents/{id}", "", "", func(b []byte) string { return has(b, `"id":`+quote(incidents.Incidents[0].ID)) }},
		{"GET", "/traces/{traceID}", "", "", func(b []byte) string {
			var tr struct {
				TraceID string `json:"trace_id"`
				Spans   int    `json:"spans"`
			}
			json.Unmarshal(b, &tr)
			if tr.TraceID != trace.id || tr.Spans != trace.spans {
				return fmt.Sprintf("trace %s with %d spans, want %s with %d", tr.TraceID, tr.Spans, trace.id, trace.spans)
			}
			return ""
		}},
		// One retry at each hop of a chain whose end fails: every hop
		// sends twice what it is sent.
		{"POST", "/whatif", rangeQ, `{"chain": ["a", "b", "c"], "fail": ["c"]}`,
			func(b []byte) string { return has(b, `"requests":{"a":1,"b":2,"c":4}`) }},
		// The adoption plan of the stored traces is the plan of the same
		// spans analysed in memory.
		{"GET", "/plan", rangeQ, "", func(b []byte) string {
			w, _ := json.Marshal(wantPlan)
			if canon(json.RawMessage(b)) != canon(json.RawMessage(w)) {
				return fmt.Sprintf("plan differs from the in-memory one:\n got %s\nwant %s", b, w)
			}
			return ""
		}},
		{"GET", "/gate", apiQ + "&max_radius=1000&always_200=true", "", func(b []byte) string { return has(b, `"decision"`) }},
		{"POST", "/gate", rangeQ + "&always_200=true", `{"metadata": {"api": ` + quote(api) + `, "max_radius": "1000"}}`,
			func(b []byte) string { return has(b, `"decision"`) }},
		{"GET", "/openapi.json", "", "", func(b []byte) string { return has(b, `"openapi"`) }},
	} {
		visited[c.method+" /api/v1"+c.path] = true
		p := strings.NewReplacer("{id}", incidents.Incidents[0].ID, "{traceID}", trace.id).Replace(c.path)
		u := base + "/api/v1" + p
		if c.query != "" {
			u += "?" + c.query
		}
		if msg := c.check(fetch(t, c.method, u, c.body)); msg != "" {
			t.Errorf("%s %s: %s", c.method, u, msg)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if strings.HasPrefix(path, "/api/v1") && !visited[strings.ToUpper(method)+" "+path] {
				t.Errorf("%s %s: in the OpenAPI document, not checked here", strings.ToUpper(method), path)
			}
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		fetch(t, "GET", base+p, "")
	}
}

// checkUI requests every file of the UI (web/ui), each as it is, and
// each of the UI's pages by its path (the index, which routes it).
func checkUI(t *testing.T, base string) {
	t.Helper()
	root := filepath.Join("..", "..", "web", "ui")
	index, err := os.ReadFile(filepath.Join(root, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, rel)
		if got := fetch(t, "GET", base+"/"+filepath.ToSlash(rel), ""); !bytes.Equal(got, b) {
			t.Errorf("GET /%s: not the file", rel)
		}
		return nil
	})
	if err != nil || !slices.Contains(files, filepath.Join("js", "app.js")) {
		t.Fatalf("web/ui: %v, %v", files, err)
	}
	// The pages web/ui/js/app.js routes.
	for _, p := range []string{"/", "/api?api=x", "/incidents", "/incidents/x", "/traces/0123", "/services", "/whatif"} {
		if got := fetch(t, "GET", base+p, ""); !bytes.Equal(got, index) {
			t.Errorf("GET %s: not the UI's index.html", p)
		}
	}
}

// fetch requests u and returns the body of its 200 answer, failing t on
// any other.
func fetch(t *testing.T, method, u, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("%s %s: %d %s", method, u, resp.StatusCode, b)
	}
	return b
}

// same compares the fields of a JSON answer with want (canon of them).
func same(b []byte, want string, fields ...string) string {
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return err.Error()
	}
	out := map[string]any{}
	for _, f := range fields {
		out[f] = m[f]
	}
	if got := canon(out); got != want {
		return "got " + got + "\nwant " + want
	}
	return ""
}

func canon(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func has(b []byte, s string) string {
	if !bytes.Contains(b, []byte(s)) {
		return fmt.Sprintf("no %s in %.300s", s, b)
	}
	return ""
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Every way of getting production's ClickHouse settings wrong (issue 29
// item 6) stops api (in process) and ingest (a process) at start, exit
// status 1, with one line naming the server's host:port and what to set,
// and no password.
func TestClickHouseRefusals(t *testing.T) {
	srv := chtest.TLS(t)
	writer, writerPass := chtest.User(t, chtest.WriterEnv)
	db := chtest.DatabaseOf(chtest.FreshDSN(t))
	// A migrated store, so that api's refusals are the connection's.
	t.Setenv(storeurl.PasswordEnv, writerPass)
	st, err := storeurl.Open(context.Background(), storeurl.Options{URL: srv.DSN(db, writer)})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	const wrong = "Wr0ng-Planted"
	other := certstest.NewCA(t)
	plain := (&url.URL{Scheme: "clickhouse", Host: srv.Host, Path: "/" + db, User: url.User(writer)}).String()
	for _, c := range []struct {
		name, dsn, password, want string
	}{
		{"wrong password", srv.DSN(db, writer), wrong, "clickhouse: " + srv.Host + ": the server refused user " + writer +
			" (code 193 WRONG_PASSWORD: Wrong password for user " + writer + "): check the user in the DSN (clickhouse://USER@host:port/db) " +
			"and the password (from " + storeurl.PasswordEnv + ")"},
		{"unknown CA", srv.DSN(db, writer, "tls_ca", other.File), writerPass, "clickhouse: " + srv.Host +
			": TLS: the server's certificate (issued by \"CN=stormradius test CA\") is not signed by the CA of tls_ca=" + other.File},
		{"expired client certificate", srv.DSN(db, writer, "tls_cert", srv.ExpiredCert, "tls_key", srv.ExpiredKey), writerPass,
			"clickhouse: " + srv.Host + ": TLS: our client certificate tls_cert=" + srv.ExpiredCert + " expired at "},
		{"TLS to the plaintext port", strings.Replace(srv.DSN(db, writer), srv.Host, srv.Plain, 1), writerPass, "clickhouse: " + srv.Plain +
			": the server is not speaking TLS on this port: drop secure=true and the tls_* parameters, or use the TLS port (9440)"},
		{"plaintext to the TLS port", plain, writerPass, "clickhouse: " + srv.Host + ": the server expects TLS on this port: add secure=true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(storeurl.PasswordEnv, c.password)
			var out syncBuffer
			code := run(context.Background(), []string{"--store", c.dsn, "--http", "127.0.0.1:0"}, &out)
			checkRefusal(t, "api", code, out.String(), c.want, c.password)
			ing, log := ingestCmd(t, c.password, "--store", c.dsn, "--otlp-grpc", "127.0.0.1:0", "--otlp-http", "off", "--http", "off")
			ing.Run()
			checkRefusal(t, "ingest", ing.ProcessState.ExitCode(), log.String(), c.want, c.password)
		})
	}
}

// checkRefusal checks a command exited 1 with one line: "cmd: " and the
// message want starts.
func checkRefusal(t *testing.T, cmd string, code int, out, want, password string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], cmd+": "+want) {
		t.Errorf("%s: exit %d, %d lines:\n%s\nwant exit 1 and one line starting %q", cmd, code, len(lines), out, cmd+": "+want)
	}
	if strings.Contains(out, password) {
		t.Errorf("%s: the output holds the password:\n%s", cmd, out)
	}
}
