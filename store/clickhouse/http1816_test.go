package clickhouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// HTTPEnv names the HTTP interface of STORMRADIUS_CLICKHOUSE's server
// (http://127.0.0.1:8123/): TestOverHTTP runs the store over it.
const HTTPEnv = "STORMRADIUS_TEST_CLICKHOUSE_HTTP"

// TestOverHTTP runs the conformance suites over clickhouse-go's HTTP
// protocol on the test server, ClickHouse 18.16, through http1816: the
// store's HTTP path on the engine it is known to be right on.
func TestOverHTTP(t *testing.T) {
	server(t) // the databases' server; skips without one
	raw := os.Getenv(HTTPEnv)
	if raw == "" {
		t.Skip("set " + HTTPEnv + "=http://127.0.0.1:8123/ (the test server's HTTP interface) to run the store over HTTP on it")
	}
	target, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", HTTPEnv, err)
	}
	u, seen := http1816(t, target)
	onServer(t, u)
	t.Run("Conformance", TestConformance)
	t.Run("LeaseConformance", TestLeaseConformance)
	// The HTTP path was taken: inserts, and queries with external tables.
	if seen.inserts.Load() == 0 || seen.external.Load() == 0 {
		t.Errorf("%d inserts, %d queries with external tables over HTTP", seen.inserts.Load(), seen.external.Load())
	}
	t.Logf("over HTTP: %d requests, %d inserts, %d with external tables", seen.requests.Load(), seen.inserts.Load(), seen.external.Load())
}

// http1816 serves ClickHouse 18.16's HTTP interface at target as
// clickhouse-go's HTTP protocol expects a server's, and returns its URL:
// a proxy that patches what 18.16 predates, nothing else.
//
//   - clickhouse-go sends client_protocol_version, a setting 18.16 does
//     not know (Code: 115, Unknown setting): dropped.
//   - Its first query, its "hello" (SELECT displayName(), version(),
//     revision(), timezone()), calls two functions 18.16 does not have,
//     and is read in the Native format of the client's revision, which
//     18.16 does not write over HTTP: answered here (from version() and
//     timezone()), with revision 0, the Native 18.16 writes.
//   - It sends a query with external tables in a multipart form field,
//     where 18.16 does not look (it reads only the URL's query): moved to
//     the URL.
//   - 18.16 words errors "Code: N, e.displayText() = DB::Exception: ...,
//     e.what() = ...", without X-ClickHouse-Exception-Code, and
//     clickhouse-go parses "Code: N. DB::Exception: ...": reworded, the
//     header added.
//
// clickhouse-go's DESCRIBE TABLE before an insert (18.16 answers five
// columns, it reads seven) is not patched: the store gives its inserts'
// column types (http.go), and is to fail here if it stopped doing so.
func http1816(t *testing.T, target *url.URL) (*url.URL, *seen1816) {
	t.Helper()
	p := &proxy1816{target: target}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/")
	return u, &p.seen
}

type proxy1816 struct {
	target *url.URL
	seen   seen1816
}

// seen1816 counts what the proxy forwarded.
type seen1816 struct{ requests, inserts, external atomic.Int64 }

const helloQuery = "SELECT displayName(), version(), revision(), timezone()"

var error1816 = regexp.MustCompile(`(?s)^Code: (\d+), e\.displayText\(\) = ([A-Za-z:]+): (.*?)(?:, e\.what\(\) = [A-Za-z:]+)?\s*$`)

func (p *proxy1816) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.URL.Query()
	rev, _ := strconv.ParseUint(q.Get("client_protocol_version"), 10, 64)
	q.Del("client_protocol_version")
	ctype := r.Header.Get("Content-Type")
	p.seen.requests.Add(1)
	if strings.HasPrefix(q.Get("query"), "INSERT") {
		p.seen.inserts.Add(1)
	}
	if mt, mp, _ := mime.ParseMediaType(ctype); mt == "multipart/form-data" {
		p.seen.external.Add(1)
		if body, ctype, err = queryToURL(body, mp["boundary"], q); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else if strings.TrimSpace(q.Get("query")+string(body)) == helloQuery {
		out, status, err := p.hello(rev)
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.Write(out)
		return
	}
	u := *p.target
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" {
		req.Header.Set("Content-Encoding", ce)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if res.StatusCode != http.StatusOK {
		if m := error1816.FindSubmatch(out); m != nil {
			w.Header().Set("X-ClickHouse-Exception-Code", string(m[1]))
			out = fmt.Appendf(nil, "Code: %s. %s: %s\n", m[1], m[2], m[3])
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(res.StatusCode)
	w.Write(out)
}

// queryToURL moves the query field of a multipart body to the URL's
// parameters q, and returns the body without it and its Content-Type.
func queryToURL(body []byte, boundary string, q url.Values) ([]byte, string, error) {
	var out bytes.Buffer
	mw := multipart.NewWriter(&out)
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", err
		}
		data, err := io.ReadAll(part)
		if err != nil {
			return nil, "", err
		}
		if part.FormName() == "query" && part.FileName() == "" {
			q.Set("query", string(data))
			continue
		}
		pw, err := mw.CreatePart(textproto.MIMEHeader(part.Header))
		if err != nil {
			return nil, "", err
		}
		pw.Write(data)
	}
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	return out.Bytes(), mw.FormDataContentType(), nil
}

// hello answers clickhouse-go's first query in Native at revision rev:
// the server's version and time zone, revision 0.
func (p *proxy1816) hello(rev uint64) ([]byte, int, error) {
	u := *p.target
	u.RawQuery = url.Values{"query": {"SELECT version(), timezone() FORMAT TabSeparated"}}.Encode()
	res, err := http.Get(u.String())
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return nil, http.StatusBadGateway, fmt.Errorf("hello: %s %q %v", res.Status, out, err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\t")
	if len(f) != 2 {
		return nil, http.StatusBadGateway, fmt.Errorf("hello: %q", out)
	}
	var b []byte
	str := func(v string) { b = append(binary.AppendUvarint(b, uint64(len(v))), v...) }
	if rev > 0 {
		b = append(b, 1, 0, 2, 0xff, 0xff, 0xff, 0xff, 0) // block info
	}
	b = append(b, 4, 1) // columns, rows
	for _, c := range []struct{ name, typ, v string }{
		{"displayName()", "String", "ClickHouse"}, {"version()", "String", f[0]}, {"revision()", "UInt32", ""}, {"timezone()", "String", f[1]},
	} {
		str(c.name)
		str(c.typ)
		if rev >= 54454 { // DBMS_MIN_REVISION_WITH_CUSTOM_SERIALIZATION: no custom serialization
			b = append(b, 0)
		}
		if c.typ == "UInt32" {
			b = binary.LittleEndian.AppendUint32(b, 0)
		} else {
			str(c.v)
		}
	}
	return b, http.StatusOK, nil
}

// Over HTTP straight to 18.16, the store refuses to open, saying why and
// what to use instead.
func TestHTTPNeedsCurrentServer(t *testing.T) {
	raw := os.Getenv(HTTPEnv)
	if raw == "" {
		t.Skip("set " + HTTPEnv + "=http://127.0.0.1:8123/ (the test server's HTTP interface) to run the store over HTTP on it")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", HTTPEnv, err)
	}
	u.Path = "/stormradius_never_created"
	_, err = Open(context.Background(), Options{DSN: u.String(), Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "22.11 or later") || !strings.Contains(err.Error(), "clickhouse://host:9000/stormradius_never_created") {
		t.Fatalf("open over HTTP on 18.16: %v, want a refusal naming 22.11 and the native protocol", err)
	}
}
