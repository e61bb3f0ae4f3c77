package chsource

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// This file decodes ClickHouse's Native format as the HTTP interface
// writes it for a client that gives no client_protocol_version (protocol
// revision 0: no block info, no custom serializations): blocks of columns,
// each a header (column and row counts, each column's name and type) and
// the columns' data. Only the types Read's query asks for are decoded;
// every buffer is reused from block to block, so nothing is allocated per
// row and memory is bounded by a block (ClickHouse's max_block_size rows).

// Bounds on what a block may declare: past them the stream is not one this
// reader can trust (or is an error message the server appended).
const (
	maxBlockRows = 1 << 24
	maxStringLen = 64 << 20
)

// nativeReader reads a Native stream from rd through its own buffer.
type nativeReader struct {
	rd       io.Reader
	buf      []byte
	pos, end int
	eof      bool
	// read counts the bytes consumed, for error messages.
	read int64
}

func newNativeReader(rd io.Reader) *nativeReader {
	return &nativeReader{rd: rd, buf: make([]byte, 256<<10)}
}

// fill reads until n bytes are buffered or the stream ends (n is at most
// len(r.buf)).
func (r *nativeReader) fill(n int) error {
	if r.end-r.pos >= n || r.eof {
		return nil
	}
	if r.pos > 0 {
		copy(r.buf, r.buf[r.pos:r.end])
		r.end -= r.pos
		r.read += int64(r.pos)
		r.pos = 0
	}
	for r.end < n {
		m, err := r.rd.Read(r.buf[r.end:])
		r.end += m
		if errors.Is(err, io.EOF) {
			r.eof = true
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// errShort is a stream that ends inside a block.
var errShort = errors.New("the answer ends inside a block")

// bytes copies the next len(dst) bytes into dst.
func (r *nativeReader) bytes(dst []byte) error {
	for len(dst) > 0 {
		if r.pos == r.end {
			if err := r.fill(1); err != nil {
				return err
			}
			if r.pos == r.end {
				return errShort
			}
		}
		n := copy(dst, r.buf[r.pos:r.end])
		r.pos += n
		dst = dst[n:]
	}
	return nil
}

func (r *nativeReader) uvarint() (uint64, error) {
	if err := r.fill(binary.MaxVarintLen64); err != nil {
		return 0, err
	}
	v, n := binary.Uvarint(r.buf[r.pos:r.end])
	if n <= 0 {
		if r.pos == r.end {
			return 0, errShort
		}
		return 0, errors.New("a bad length")
	}
	r.pos += n
	return v, nil
}

func (r *nativeReader) uint64() (uint64, error) {
	if err := r.fill(8); err != nil {
		return 0, err
	}
	if r.end-r.pos < 8 {
		return 0, errShort
	}
	v := binary.LittleEndian.Uint64(r.buf[r.pos:])
	r.pos += 8
	return v, nil
}

// str reads a length-prefixed string (a column's name or type).
func (r *nativeReader) str() (string, error) {
	n, err := r.uvarint()
	if err != nil {
		return "", err
	}
	if n > 1<<16 {
		return "", fmt.Errorf("a name of %d bytes", n)
	}
	b := make([]byte, n)
	if err := r.bytes(b); err != nil {
		return "", err
	}
	return string(b), nil
}

// atEnd reports whether the stream ended where a block would start.
func (r *nativeReader) atEnd() (bool, error) {
	if err := r.fill(1); err != nil {
		return false, err
	}
	return r.pos == r.end, nil
}

// exception returns the text of the exception the server wrote in the
// stream, if any: ClickHouse writes it after the blocks it sent when a
// query fails while it answers (after an "__exception__" line in recent
// versions), and the decoder fails somewhere in it. The bytes consumed
// lately and up to 16 KiB of those left are searched.
func (r *nativeReader) exception() (string, bool) {
	b := append([]byte(nil), r.buf[max(0, r.pos-4<<10):r.end]...)
	more, _ := io.ReadAll(io.LimitReader(r.rd, 16<<10))
	text := string(append(b, more...))
	i := strings.LastIndex(text, "Code: ")
	if i < 0 || !strings.Contains(text[i:], "Exception") {
		return "", false
	}
	text = strings.TrimSpace(text[i:])
	text = strings.TrimSpace(strings.TrimSuffix(text, "__exception__"))
	return text, true
}

// offset is how many bytes of the stream were consumed.
func (r *nativeReader) offset() int64 { return r.read + int64(r.pos) }

// strs is a String column: string i is buf[ends[i-1]:ends[i]].
type strs struct {
	buf  []byte
	ends []int
}

func (s *strs) reset() { s.buf, s.ends = s.buf[:0], s.ends[:0] }

func (s *strs) len() int { return len(s.ends) }

func (s *strs) at(i int) []byte {
	lo := 0
	if i > 0 {
		lo = s.ends[i-1]
	}
	return s.buf[lo:s.ends[i]]
}

// readStrs appends n strings to s.
func (r *nativeReader) readStrs(s *strs, n int) error {
	for range n {
		var l uint64
		if r.pos < r.end && r.buf[r.pos] < 0x80 { // a length of one byte
			l = uint64(r.buf[r.pos])
			r.pos++
		} else {
			var err error
			if l, err = r.uvarint(); err != nil {
				return err
			}
		}
		if l > maxStringLen {
			return fmt.Errorf("a string of %d bytes", l)
		}
		if int(l) <= r.end-r.pos { // the common case: in the buffer
			s.buf = append(s.buf, r.buf[r.pos:r.pos+int(l)]...)
			r.pos += int(l)
		} else {
			at := len(s.buf)
			s.buf = append(s.buf, make([]byte, l)...)
			if err := r.bytes(s.buf[at:]); err != nil {
				return err
			}
		}
		s.ends = append(s.ends, len(s.buf))
	}
	return nil
}

// text is a String or LowCardinality(String) column: row i is
// dict.at(idx[i]). Of a String column, dict holds every row.
type text struct {
	dict strs
	idx  []uint32
}

func (t *text) at(i int) []byte { return t.dict.at(int(t.idx[i])) }

// readString reads a String column of n rows into t.
func (r *nativeReader) readString(t *text, n int) error {
	t.dict.reset()
	if err := r.readStrs(&t.dict, n); err != nil {
		return err
	}
	t.idx = t.idx[:0]
	for i := range n {
		t.idx = append(t.idx, uint32(i))
	}
	return nil
}

// The LowCardinality serialization (ClickHouse's
// SerializationLowCardinality): a state prefix, the version of the keys'
// serialization; then groups until the column's rows are read, each its
// flags and index width, its own dictionary ("additional keys": Native
// never uses a global one), its row count and the rows' indexes into that
// dictionary.
const (
	lcSharedDictionaries    = 1
	lcNeedGlobalDictionary  = 1 << 8
	lcHasAdditionalKeys     = 1 << 9
	lcIndexWidthMask        = 0xff
	maxDictionaryGroupWidth = 3 // UInt64 indexes
)

// readLCPrefix reads the LowCardinality state prefix.
func (r *nativeReader) readLCPrefix() error {
	v, err := r.uint64()
	if err != nil {
		return err
	}
	if v != lcSharedDictionaries {
		return fmt.Errorf("LowCardinality serialization version %d (want %d)", v, lcSharedDictionaries)
	}
	return nil
}

// readLC reads the data of a LowCardinality(String) column of n rows into
// t (its prefix read already).
func (r *nativeReader) readLC(t *text, n int, scratch *[]byte) error {
	t.dict.reset()
	t.idx = t.idx[:0]
	for len(t.idx) < n {
		flags, err := r.uint64()
		if err != nil {
			return err
		}
		if flags&lcNeedGlobalDictionary != 0 || flags&lcHasAdditionalKeys == 0 {
			return fmt.Errorf("a LowCardinality column with a global dictionary (flags %#x)", flags)
		}
		width := flags & lcIndexWidthMask
		if width > maxDictionaryGroupWidth {
			return fmt.Errorf("a LowCardinality index of type %d", width)
		}
		keys, err := r.uint64()
		if err != nil {
			return err
		}
		if keys > maxBlockRows {
			return fmt.Errorf("a LowCardinality dictionary of %d keys", keys)
		}
		base := t.dict.len()
		if err := r.readStrs(&t.dict, int(keys)); err != nil {
			return err
		}
		rows, err := r.uint64()
		if err != nil {
			return err
		}
		if rows > uint64(n-len(t.idx)) {
			return fmt.Errorf("a LowCardinality group of %d rows in a column of %d", rows, n)
		}
		size := 1 << width
		*scratch = grow(*scratch, int(rows)*size)
		b := *scratch
		if err := r.bytes(b); err != nil {
			return err
		}
		for i := range int(rows) {
			var k uint64
			switch size {
			case 1:
				k = uint64(b[i])
			case 2:
				k = uint64(binary.LittleEndian.Uint16(b[2*i:]))
			case 4:
				k = uint64(binary.LittleEndian.Uint32(b[4*i:]))
			default:
				k = binary.LittleEndian.Uint64(b[8*i:])
			}
			if k >= keys {
				return fmt.Errorf("a LowCardinality index %d past its %d keys", k, keys)
			}
			t.idx = append(t.idx, uint32(base)+uint32(k))
		}
	}
	return nil
}

// grow returns b with length n.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, n+n/4)
	}
	return b[:n]
}

// kind is what a column holds, as Read asks for it.
type kind uint8

const (
	kindUInt8 kind = iota
	kindInt64
	kindFixed // FixedString(size)
	kindText  // String or LowCardinality(String)
	kindMap   // Map(LowCardinality(String), String) or Map(String, String)
	kindArray // Array(String)
)

// column is one of the answer's columns: its name and kind as asked, its
// data as the last block held it.
type column struct {
	name string
	kind kind
	size int

	fixed []byte // kindUInt8, kindInt64, kindFixed: rows × width
	text  text   // kindText
	// kindMap: row i's pairs are keys and vals [offs[i-1], offs[i]);
	// kindArray: its elements are vals [offs[i-1], offs[i]).
	offs       []uint64
	keys, vals text
}

// typeOK reports whether the block's type of c is one c reads.
func (c *column) typeOK(typ string) bool {
	switch c.kind {
	case kindUInt8:
		return typ == "UInt8"
	case kindInt64:
		return typ == "Int64"
	case kindFixed:
		return typ == "FixedString("+strconv.Itoa(c.size)+")"
	case kindText:
		return typ == "String" || typ == "LowCardinality(String)"
	case kindMap:
		return typ == "Map(String, String)" || typ == "Map(LowCardinality(String), String)"
	case kindArray:
		return typ == "Array(String)"
	}
	return false
}

func (c *column) uint8(i int) uint8 { return c.fixed[i] }

func (c *column) int64(i int) int64 { return int64(binary.LittleEndian.Uint64(c.fixed[8*i:])) }

func (c *column) fixedAt(i int) []byte { return c.fixed[c.size*i : c.size*(i+1)] }

// pairs returns the range of row i's pairs in keys and vals.
func (c *column) pairs(i int) (lo, hi int) {
	if i > 0 {
		lo = int(c.offs[i-1])
	}
	return lo, int(c.offs[i])
}

// block reads the next block into cols, which must be its columns in
// order; it returns its rows, and 0 with io.EOF at the stream's end.
func (r *nativeReader) block(cols []*column, scratch *[]byte) (int, error) {
	if end, err := r.atEnd(); err != nil || end {
		if err == nil {
			err = io.EOF
		}
		return 0, err
	}
	ncols, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	nrows, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	if ncols != uint64(len(cols)) || nrows > maxBlockRows {
		return 0, fmt.Errorf("a block of %d columns and %d rows, not one of the %d columns asked for", ncols, nrows, len(cols))
	}
	for _, c := range cols {
		name, err := r.str()
		if err != nil {
			return 0, err
		}
		typ, err := r.str()
		if err != nil {
			return 0, err
		}
		if name != c.name || !c.typeOK(typ) {
			return 0, fmt.Errorf("a column %s of type %s where %s was asked for", name, typ, c.name)
		}
		if nrows > 0 {
			if err := r.column(c, typ, int(nrows), scratch); err != nil {
				return 0, fmt.Errorf("column %s: %w", c.name, err)
			}
		}
	}
	return int(nrows), nil
}

// column reads n rows of c, of type typ.
func (r *nativeReader) column(c *column, typ string, n int, scratch *[]byte) error {
	switch c.kind {
	case kindUInt8, kindInt64, kindFixed:
		w := c.size
		switch c.kind {
		case kindUInt8:
			w = 1
		case kindInt64:
			w = 8
		}
		c.fixed = grow(c.fixed, n*w)
		return r.bytes(c.fixed)
	case kindText:
		if typ == "String" {
			return r.readString(&c.text, n)
		}
		if err := r.readLCPrefix(); err != nil {
			return err
		}
		return r.readLC(&c.text, n, scratch)
	}
	return r.readMap(c, typ, n, scratch) // kindMap, kindArray
}

// readMap reads n rows of a Map column, serialized as an
// Array(Tuple(K, V)): the keys' state prefix, the arrays' end offsets, then
// the keys and the values as two columns; or of an Array(String) column:
// its offsets and values.
func (r *nativeReader) readMap(c *column, typ string, n int, scratch *[]byte) error {
	lc := typ == "Map(LowCardinality(String), String)"
	if lc {
		if err := r.readLCPrefix(); err != nil {
			return err
		}
	}
	total, err := r.readOffsets(c, n, scratch)
	if err != nil {
		return err
	}
	c.keys.dict.reset()
	c.keys.idx = c.keys.idx[:0]
	if total > 0 && c.kind == kindMap { // an empty column is written as nothing at all
		if lc {
			err = r.readLC(&c.keys, total, scratch)
		} else {
			err = r.readString(&c.keys, total)
		}
		if err != nil {
			return fmt.Errorf("keys: %w", err)
		}
	}
	if err := r.readString(&c.vals, total); err != nil {
		return fmt.Errorf("values: %w", err)
	}
	return nil
}

// readOffsets reads the end offsets of n arrays into c.offs and returns
// the last.
func (r *nativeReader) readOffsets(c *column, n int, scratch *[]byte) (int, error) {
	*scratch = grow(*scratch, 8*n)
	if err := r.bytes(*scratch); err != nil {
		return 0, err
	}
	c.offs = c.offs[:0]
	var prev uint64
	for i := range n {
		o := binary.LittleEndian.Uint64((*scratch)[8*i:])
		if o < prev || o-prev > maxBlockRows {
			return 0, fmt.Errorf("bad offsets (%d after %d)", o, prev)
		}
		c.offs = append(c.offs, o)
		prev = o
	}
	if prev > maxBlockRows {
		return 0, fmt.Errorf("%d elements in a block", prev)
	}
	return int(prev), nil
}

// httpClient posts queries to a server's HTTP interface as clickhouse-go
// would with the same options (its URL, database, settings, user and
// password, TLS, proxy and timeouts), asking for the Native format without
// a client_protocol_version (revision 0).
type httpClient struct {
	client  *http.Client
	url     url.URL
	headers http.Header
}

func newHTTPClient(o *ch.Options) *httpClient {
	h := &httpClient{headers: http.Header{}}
	h.url.Scheme = "http"
	if o.TLS != nil {
		h.url.Scheme = "https"
	}
	h.url.Host = "localhost:8123"
	if len(o.Addr) > 0 {
		h.url.Host = o.Addr[0]
	}
	h.url.Path = o.HttpUrlPath
	if h.url.Path == "" {
		h.url.Path = "/"
	}
	q := url.Values{}
	if o.Auth.Database != "" {
		q.Set("database", o.Auth.Database)
	}
	for k, v := range o.Settings {
		if cv, ok := v.(ch.CustomSetting); ok {
			v = cv.Value
		}
		q.Set(k, fmt.Sprint(v))
	}
	q.Set("default_format", "Native")
	h.url.RawQuery = q.Encode()
	switch {
	case o.Auth.Username != "" && o.TLS != nil:
		h.headers.Set("X-ClickHouse-User", o.Auth.Username)
		if o.Auth.Password != "" {
			h.headers.Set("X-ClickHouse-Key", o.Auth.Password)
			h.headers.Set("X-ClickHouse-SSL-Certificate-Auth", "off")
		} else {
			h.headers.Set("X-ClickHouse-SSL-Certificate-Auth", "on")
		}
	case o.Auth.Username != "":
		h.headers.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(o.Auth.Username+":"+o.Auth.Password)))
	}
	h.headers.Set("User-Agent", "stormradius")
	for k, v := range o.HttpHeaders {
		h.headers.Set(k, v)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: o.DialTimeout}).DialContext,
		MaxIdleConns:          1,
		ResponseHeaderTimeout: o.ReadTimeout,
		TLSClientConfig:       o.TLS,
		DisableCompression:    true,
	}
	if o.HTTPProxyURL != nil {
		tr.Proxy = http.ProxyURL(o.HTTPProxyURL)
	}
	if o.DialContext != nil {
		tr.DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) { return o.DialContext(ctx, addr) }
	}
	h.client = &http.Client{Transport: tr}
	return h
}

// post sends query and returns the answer's body, or the server's error.
func (h *httpClient) post(ctx context.Context, query string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url.String(), strings.NewReader(query))
	if err != nil {
		return nil, err
	}
	for k, v := range h.headers {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
		msg := strings.TrimSpace(string(b))
		if msg == "" {
			msg = resp.Status
		}
		return nil, errors.New(msg)
	}
	return resp.Body, nil
}

func (h *httpClient) close() { h.client.CloseIdleConnections() }
