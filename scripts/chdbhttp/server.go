package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"compress/zlib"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/compress"
)

// server answers ClickHouse's HTTP interface
// (https://clickhouse.com/docs/interfaces/http) from the engine, as much
// of it as clickhouse-go's HTTP protocol uses:
//
//   - the query in the URL parameter query, the POST body, or both (the
//     parameter, a newline, then the body: an INSERT's data);
//   - the URL parameters database and default_format, and every other
//     parameter as a setting of that query alone (a GET's readonly=2
//     unless it says otherwise);
//   - external tables, sent as multipart/form-data (a file part per
//     table, its structure or types and format in the URL parameters
//     NAME_structure, NAME_types, NAME_format, the query in the URL or
//     a form field);
//   - request bodies compressed with gzip or deflate (Content-Encoding);
//   - ClickHouse's own block compression (its native protocol's, checksum
//     and all): of the request body with decompress=1 (any method a
//     server reads: LZ4, LZ4HC, ZSTD, none) and of the response with
//     compress=1 (network_compression_method: LZ4, the default, LZ4HC,
//     ZSTD or NONE), as clickhouse-go sends and reads every query and
//     insert with its lz4 and zstd compressions (the collector's
//     clickhouse exporter's default is lz4);
//   - errors as ClickHouse words them (Code: N. DB::Exception: ...), with
//     their code in X-ClickHouse-Exception-Code and the HTTP status
//     ClickHouse gives it;
//   - GET /ping.
//
// It refuses, by name, what it does not do: sessions (session_id), query
// parameters (param_NAME), other Content-Encodings. Responses are never
// HTTP-compressed (ClickHouse's enable_http_compression=0, its default). A
// query's answer is streamed as the engine produces it (chdb's streaming
// API), as a server streams it: memory is bounded by a piece of the
// answer, and the client reads a piece while the engine makes the next;
// an error after the first piece follows what was sent, in ClickHouse's
// framing. Other statements (chdb streams SELECTs alone), inserts, the
// hello and answers in ClickHouse's block compression (compress=1) are
// answered whole, with X-ClickHouse-Summary.
//
// Some things differ from a server, because chdb is an engine embedded in
// this process rather than a server with clients:
//
//   - Native output is that of protocol revision 0 (no block info, no
//     serialization flags), which ClickHouse writes for a client that
//     sends no client_protocol_version: chdb has no client to take one
//     from. clickhouse-go reads every result at the revision the server
//     gave in its HTTP "hello" (SELECT displayName(), version(),
//     revision(), timezone()), the hello itself at its own revision; so
//     this server answers the hello itself (hello), encoded at the
//     client's client_protocol_version, and gives revision 0.
//   - Settings, the current database and external tables are per query on
//     a server; here they are applied to the engine's one session before
//     the query (USE, CREATE TEMPORARY TABLE, SET) and undone after it
//     (DROP TEMPORARY TABLE, SET ... = DEFAULT), one query at a time.
//   - An INSERT's data reaches the engine in a file (insert).
//   - The engine runs several statements given at once, which a server
//     refuses over HTTP.
type server struct {
	e       *engine
	log     *slog.Logger
	version string
	// maxBody bounds a request body.
	maxBody int64
	// tmp is where inserts' data is written for the engine to read.
	tmp string
}

// helloQuery is what clickhouse-go's HTTP protocol asks first, on every
// new connection (conn_http.go, queryHello); helloAnswer is what this
// server runs for it in another format than Native (see server).
const (
	helloQuery  = "SELECT displayName(), version(), revision(), timezone()"
	helloAnswer = "SELECT displayName(), version(), toUInt32(0), timezone()"
)

// hello answers helloQuery in Native at revision rev: one row of the
// engine's display name, version and time zone, and revision 0.
func (s *server) hello(rev uint64) ([]byte, error) {
	out, _, err := s.e.query([]byte("SELECT displayName(), version(), timezone()"), "TabSeparatedRaw")
	if err != nil {
		return nil, err
	}
	f := strings.Split(strings.TrimSuffix(string(out), "\n"), "\t")
	if len(f) != 3 {
		return nil, fmt.Errorf("hello: %q", out)
	}
	var b []byte
	str := func(v string) { b = append(binary.AppendUvarint(b, uint64(len(v))), v...) }
	if rev > 0 {
		// Block info: field 1, is_overflows false; field 2, bucket_num -1; end.
		b = append(b, 1, 0, 2, 0xff, 0xff, 0xff, 0xff, 0)
	}
	b = binary.AppendUvarint(b, 4) // columns
	b = binary.AppendUvarint(b, 1) // rows
	col := func(name, typ string, data func()) {
		str(name)
		str(typ)
		if rev >= minRevisionWithCustomSerialization {
			b = append(b, 0) // no custom serialization
		}
		data()
	}
	col("displayName()", "String", func() { str(f[0]) })
	col("version()", "String", func() { str(f[1]) })
	col("revision()", "UInt32", func() { b = binary.LittleEndian.AppendUint32(b, 0) })
	col("timezone()", "String", func() { str(f[2]) })
	return b, nil
}

// minRevisionWithCustomSerialization is the protocol revision from which a
// Native block gives each column's serialization
// (DBMS_MIN_REVISION_WITH_CUSTOM_SERIALIZATION).
const minRevisionWithCustomSerialization = 54454

// reserved are the URL parameters of ClickHouse's HTTP interface that are
// not settings.
var reserved = map[string]bool{
	"query": true, "database": true, "default_format": true, "user": true, "password": true, "quota_key": true,
	"query_id": true, "stacktrace": true, "role": true, "client_protocol_version": true, "buffer_size": true,
	"wait_end_of_query": true, "compress": true, "decompress": true, "session_id": true, "session_timeout": true,
	"session_check": true, "close_session": true,
}

// name is what the server accepts as a setting's, database's or external
// table's name.
var name = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// codeRe finds an error's code in the engine's message.
var codeRe = regexp.MustCompile(`^Code: (\d+)\.`)

// chError is an error answered as ClickHouse answers it.
type chError struct {
	code int
	msg  string
}

func (e *chError) Error() string { return e.msg }

// newError returns an error of code (its ClickHouse name: codeName) in
// ClickHouse's words.
func newError(code int, codeName, format string, args ...any) *chError {
	return &chError{code, fmt.Sprintf("Code: %d. DB::Exception: %s. (%s)", code, fmt.Sprintf(format, args...), codeName)}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.URL.Path == "/ping" {
		io.WriteString(w, "Ok.\n")
		return
	}
	if r.URL.Path != "/" {
		s.fail(w, newError(48, "NOT_IMPLEMENTED", "There is no handler %s", r.URL.Path))
		return
	}
	req, err := s.parse(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	if req.isHello || req.data != nil || req.compress || !streamable.Match(req.query) {
		s.whole(w, req, start)
	} else {
		s.streamed(w, req, start)
	}
}

// streamable matches the queries chdb streams: SELECTs (its streaming API
// refuses other statements).
var streamable = regexp.MustCompile(`(?i)^\s*(SELECT|WITH)\s`)

// whole answers req with its whole answer (inserts, the hello): its
// figures in X-ClickHouse-Summary.
func (s *server) whole(w http.ResponseWriter, req *request, start time.Time) {
	out, st, err := s.run(req)
	if err != nil {
		s.log.Debug("query failed", "query", truncate(req.query), "err", err)
		s.fail(w, err)
		return
	}
	if req.compress {
		if out, err = compressBlocks(out, req.method); err != nil {
			s.fail(w, err)
			return
		}
	}
	s.log.Debug("query", "query", truncate(req.query), "settings", req.settings, "compress", req.compress,
		"bytes", len(out), "elapsed", time.Since(start))
	h := s.headers(w, req)
	h.Set("X-ClickHouse-Summary", fmt.Sprintf(`{"read_rows":"%d","read_bytes":"%d","written_rows":"%d","written_bytes":"%d",`+
		`"total_rows_to_read":"%d","result_rows":"%d","result_bytes":"%d","elapsed_ns":"%d"}`,
		st.readRows, st.readBytes, st.writtenRows, st.writtenBytes, st.readRows, st.resultRows, len(out), time.Since(start).Nanoseconds()))
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.Write(out)
}

// streamed answers req as the engine produces the answer, as a server
// does: an error before the first piece is answered as an error; after
// it, the status is sent already, and the error's text follows what was
// sent, framed as ClickHouse 25.8 frames it ("__exception__", CRLF, the
// text), which clickhouse-go recognises.
func (s *server) streamed(w http.ResponseWriter, req *request, start time.Time) {
	sent := int64(-1)
	err := s.stream(req, func(b []byte) error {
		if sent < 0 {
			s.headers(w, req)
			w.WriteHeader(http.StatusOK)
			sent = 0
		}
		n, err := w.Write(b)
		sent += int64(n)
		return err
	})
	switch {
	case err != nil && sent < 0:
		s.log.Debug("query failed", "query", truncate(req.query), "err", err)
		s.fail(w, err)
		return
	case err != nil:
		s.log.Debug("query failed while answering", "query", truncate(req.query), "bytes", sent, "err", err)
		io.WriteString(w, "__exception__\r\n"+s.message(err)+"\r\n")
		return
	case sent < 0:
		s.headers(w, req)
		w.WriteHeader(http.StatusOK)
		sent = 0
	}
	s.log.Debug("query", "query", truncate(req.query), "bytes", sent, "elapsed", time.Since(start))
}

// headers sets the headers of a successful answer to req.
func (s *server) headers(w http.ResponseWriter, req *request) http.Header {
	h := w.Header()
	h.Set("X-ClickHouse-Query-Id", req.queryID)
	h.Set("X-ClickHouse-Format", req.format)
	h.Set("X-ClickHouse-Server-Display-Name", "chdbhttp")
	h.Set("Content-Type", contentType(req.format))
	return h
}

// request is what a request asks the engine.
type request struct {
	query    []byte
	database string
	format   string
	queryID  string
	// data is an INSERT's data, when apart from its statement (query).
	data     []byte
	settings [][2]string // name, value; by name, readonly last
	external []external
	// isHello: the query is clickhouse-go's hello, answered at revision
	// hello.
	isHello bool
	hello   uint64
	// compress: the response in compressed blocks of method (compress=1).
	compress bool
	method   compress.Method
}

// external is an external table: its name, structure (columns and types)
// and data in its format.
type external struct {
	name, structure, format string
	data                    []byte
}

// parse reads what r asks.
func (s *server) parse(r *http.Request) (*request, error) {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		return nil, newError(48, "NOT_IMPLEMENTED", "HTTP method %s is not supported", r.Method)
	}
	params := r.URL.Query()
	if v := params.Get("session_id"); v != "" {
		return nil, newError(48, "NOT_IMPLEMENTED", "chdbhttp does not support session_id=%s", v)
	}
	req := &request{database: params.Get("database"), format: params.Get("default_format"), queryID: params.Get("query_id")}
	var decompress bool
	var err error
	if req.compress, err = boolParam(params, "compress"); err != nil {
		return nil, err
	}
	if decompress, err = boolParam(params, "decompress"); err != nil {
		return nil, err
	}
	if req.compress {
		if req.method, err = compressionMethod(params.Get("network_compression_method")); err != nil {
			return nil, err
		}
	}
	body, err := s.body(r, decompress)
	if err != nil {
		return nil, err
	}
	if req.database == "" {
		req.database = "default"
	}
	if r.Method == http.MethodGet && !params.Has("readonly") {
		params.Set("readonly", "2") // as a server makes a GET
	}
	if req.format == "" {
		req.format = "TabSeparated"
	}
	if req.queryID == "" {
		var b [16]byte
		rand.Read(b[:])
		req.queryID = hex.EncodeToString(b[:])
	}
	query := params.Get("query")
	if mt, mp, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		fields, err := s.externalTables(body, mp["boundary"], params, req)
		if err != nil {
			return nil, err
		}
		if q, ok := fields["query"]; ok {
			query = q
		}
		body = nil
	}
	switch {
	case query != "" && len(body) > 0 && insertFormat.MatchString(query):
		req.query, req.data = []byte(query), body
	case query != "" && len(body) > 0:
		req.query = append(append([]byte(query), '\n'), body...)
	case query != "":
		req.query = []byte(query)
	default:
		req.query = body
	}
	if strings.TrimSpace(string(req.query)) == helloQuery {
		if req.format != "Native" {
			req.query = []byte(helloAnswer)
		} else if req.hello, err = strconv.ParseUint(cmp.Or(params.Get("client_protocol_version"), "0"), 10, 64); err != nil {
			return nil, newError(36, "BAD_ARGUMENTS", "client_protocol_version=%q", params.Get("client_protocol_version"))
		} else {
			req.isHello = true
		}
	}
	ext := map[string]bool{}
	for _, x := range req.external {
		ext[x.name+"_structure"], ext[x.name+"_types"], ext[x.name+"_format"] = true, true, true
	}
	for k, vs := range params {
		if reserved[k] || ext[k] {
			continue
		}
		if strings.HasPrefix(k, "param_") {
			return nil, newError(48, "NOT_IMPLEMENTED", "chdbhttp does not support query parameters (%s)", k)
		}
		if !name.MatchString(k) {
			return nil, newError(115, "UNKNOWN_SETTING", "Unknown setting '%s'", k)
		}
		req.settings = append(req.settings, [2]string{k, vs[len(vs)-1]})
	}
	// readonly last: it may forbid setting the others.
	slices.SortFunc(req.settings, func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(boolInt(a[0] == "readonly"), boolInt(b[0] == "readonly")), strings.Compare(a[0], b[0]))
	})
	if !name.MatchString(req.database) {
		return nil, newError(81, "UNKNOWN_DATABASE", "Database %s does not exist", req.database)
	}
	return req, nil
}

// body reads r's body, decompressed: its Content-Encoding undone, then,
// with native, ClickHouse's block compression.
func (s *server) body(r *http.Request, native bool) ([]byte, error) {
	rd := io.Reader(http.MaxBytesReader(nil, r.Body, s.maxBody))
	var err error
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		rd, err = gzip.NewReader(rd)
	case "deflate":
		rd, err = zlib.NewReader(rd)
	default:
		return nil, newError(48, "NOT_IMPLEMENTED", "chdbhttp does not support Content-Encoding %s", enc)
	}
	if err != nil {
		return nil, newError(271, "CANNOT_DECOMPRESS", "%v", err)
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, newError(33, "CANNOT_READ_ALL_DATA", "reading the request body: %v", err)
	}
	if native {
		return decompressBlocks(b, s.maxBody)
	}
	return b, nil
}

// externalTables reads the multipart body: its file parts as external
// tables of req (their structure and format from params), and returns its
// other fields.
func (s *server) externalTables(body []byte, boundary string, params url.Values, req *request) (map[string]string, error) {
	fields := map[string]string{}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return fields, nil
		}
		if err != nil {
			return nil, newError(27, "CANNOT_PARSE_INPUT_ASSERTION_FAILED", "multipart body: %v", err)
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, newError(33, "CANNOT_READ_ALL_DATA", "multipart body: %v", err)
		}
		if p.FileName() == "" && p.FormName() != "" && !params.Has(p.FormName()+"_structure") && !params.Has(p.FormName()+"_types") {
			fields[p.FormName()] = string(data)
			continue
		}
		x := external{name: p.FormName(), format: params.Get(p.FormName() + "_format"), data: data}
		if !name.MatchString(x.name) {
			return nil, newError(36, "BAD_ARGUMENTS", "external table name %q", x.name)
		}
		if x.format == "" {
			x.format = "TabSeparated"
		}
		if st := params.Get(x.name + "_structure"); st != "" {
			x.structure = st
		} else if ts := params.Get(x.name + "_types"); ts != "" {
			var cols []string
			for i, t := range strings.Split(ts, ",") {
				cols = append(cols, fmt.Sprintf("_%d %s", i+1, t))
			}
			x.structure = strings.Join(cols, ", ")
		} else {
			return nil, newError(36, "BAD_ARGUMENTS", "Neither structure nor types have not been provided for external table %s. "+
				"Use fields %s_structure or %s_types to do so", x.name, x.name, x.name)
		}
		if !name.MatchString(x.format) {
			return nil, newError(73, "UNKNOWN_FORMAT", "Unknown format %s", x.format)
		}
		req.external = append(req.external, x)
	}
}

// run runs req on the engine (session) and returns its whole answer.
func (s *server) run(req *request) (out []byte, st stats, err error) {
	err = s.session(req, func() error {
		var err error
		switch {
		case req.isHello:
			out, err = s.hello(req.hello)
			st = stats{resultRows: 1}
		case req.data != nil:
			out, st, err = s.insert(req.query, req.data)
		default:
			out, st, err = s.e.query(req.query, req.format)
		}
		return err
	})
	return out, st, err
}

// stream runs req on the engine (session), handing its answer to chunk a
// piece at a time as the engine produces it (engine.stream).
func (s *server) stream(req *request, chunk func([]byte) error) error {
	return s.session(req, func() error { return s.e.stream(req.query, req.format, chunk) })
}

// session runs do on the engine with req's database, external tables and
// settings set up, and undoes them after it, holding the engine (one query
// at a time).
func (s *server) session(req *request, do func() error) (err error) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	exec := func(q string) error {
		_, _, err := e.query([]byte(q), "TabSeparated")
		return err
	}
	if err := exec("USE `" + req.database + "`"); err != nil {
		return err
	}
	var made []string
	defer func() {
		for _, t := range made {
			if derr := exec("DROP TEMPORARY TABLE IF EXISTS `" + t + "`"); derr != nil && err == nil {
				err = derr
			}
		}
	}()
	for _, x := range req.external {
		if err := exec("CREATE TEMPORARY TABLE `" + x.name + "` (" + x.structure + ")"); err != nil {
			return err
		}
		made = append(made, x.name)
		if len(x.data) == 0 {
			continue
		}
		if _, _, err := s.insert([]byte("INSERT INTO `"+x.name+"` FORMAT "+x.format), x.data); err != nil {
			return err
		}
	}
	var set []string
	defer func() {
		// Back to the defaults in reverse, readonly last set, first undone.
		for _, k := range slices.Backward(set) {
			if derr := exec("SET " + k + " = DEFAULT"); derr != nil {
				s.log.Error("chdbhttp: undoing a setting", "setting", k, "err", derr)
				if err == nil {
					err = derr
				}
			}
		}
	}()
	for _, kv := range req.settings {
		if err := exec("SET " + kv[0] + " = " + literal(kv[1])); err != nil {
			return err
		}
		set = append(set, kv[0])
	}
	return do()
}

// insertFormat matches an INSERT that ends with its FORMAT, its data to
// follow.
var insertFormat = regexp.MustCompile(`(?is)^\s*INSERT\s.*\sFORMAT\s+\w+\s*$`)

// insert runs the INSERT statement q, which ends with its FORMAT, on data.
// The engine is given the data in a file (FROM INFILE), not after the
// statement as a server is: there, it skips every whitespace byte between
// the statement and the data, the data's own first bytes included (a
// Native block of 9 to 13 or 32 columns starts with one). The caller holds
// mu.
func (s *server) insert(q, data []byte) ([]byte, stats, error) {
	f, err := os.CreateTemp(s.tmp, "insert-*.data")
	if err != nil {
		return nil, stats{}, err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, stats{}, err
	}
	i := formatAt.FindIndex(q)
	stmt := append(append(slices.Clip(q[:i[0]]), " FROM INFILE "+literal(f.Name())...), q[i[0]:]...)
	return s.e.query(stmt, "TabSeparated")
}

// formatAt finds an INSERT's closing FORMAT.
var formatAt = regexp.MustCompile(`(?is)\sFORMAT\s+\w+\s*$`)

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// literal returns v as a ClickHouse string literal: settings take their
// values as strings, as from a URL.
func literal(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// fail answers err as ClickHouse answers an exception.
func (s *server) fail(w http.ResponseWriter, err error) {
	code, msg := s.exception(err)
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=UTF-8")
	h.Set("X-ClickHouse-Exception-Code", strconv.Itoa(code))
	h.Set("X-ClickHouse-Server-Display-Name", "chdbhttp")
	w.WriteHeader(httpStatus(code))
	io.WriteString(w, msg+"\n")
}

// message is err's text as ClickHouse words an exception.
func (s *server) message(err error) string {
	_, msg := s.exception(err)
	return msg
}

// exception is err's code and text as ClickHouse words them.
func (s *server) exception(err error) (int, string) {
	var ce *chError
	var ee *errEngine
	code, msg := 1001, err.Error() // STD_EXCEPTION
	switch {
	case errors.As(err, &ce):
		code, msg = ce.code, ce.msg
	case errors.As(err, &ee):
		if m := codeRe.FindStringSubmatch(ee.msg); m != nil {
			code, _ = strconv.Atoi(m[1])
		}
	}
	if !strings.HasPrefix(msg, "Code: ") {
		msg = fmt.Sprintf("Code: %d. DB::Exception: %s", code, msg)
	}
	return code, msg + " (version " + s.version + ")"
}

// httpStatus is the HTTP status ClickHouse answers an exception of code
// with (src/Server/HTTPHandler.cpp, exceptionCodeToHTTPStatus).
func httpStatus(code int) int {
	switch code {
	case 516, 192, 193, 194, 195: // AUTHENTICATION_FAILED, UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, IP_ADDRESS_NOT_ALLOWED
		return http.StatusUnauthorized
	case 164, 497: // READONLY, ACCESS_DENIED
		return http.StatusForbidden
	case 62, 26, 27, 72, 6, 32, 33, 38, 41, 69, 35, 36, 42, 44, 43, 53, 70, 80, 113, 115, 117, 118, 128, 130, 167, 473:
		return http.StatusBadRequest
	case 81, 60, 16, 46, 47, 73, 75, 85, 86, 87, 63: // UNKNOWN_DATABASE, UNKNOWN_TABLE, ...
		return http.StatusNotFound
	case 48:
		return http.StatusNotImplemented
	case 202, 203:
		return http.StatusServiceUnavailable
	case 394:
		return 499
	case 159:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// contentType is the Content-Type of output in format.
func contentType(format string) string {
	switch format {
	case "TabSeparated", "TSV", "TabSeparatedRaw", "TSVRaw", "TabSeparatedWithNames", "TSVWithNames":
		return "text/tab-separated-values; charset=UTF-8"
	case "CSV", "CSVWithNames":
		return "text/csv; charset=UTF-8; header=absent"
	case "JSON", "JSONEachRow", "JSONCompact":
		return "application/json; charset=UTF-8"
	}
	return "application/octet-stream"
}

// truncate shortens a query for a log line.
func truncate(q []byte) string {
	if len(q) > 200 {
		return string(q[:200]) + "…"
	}
	return string(q)
}
