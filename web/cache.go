package web

import (
	"bytes"
	"compress/gzip"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCacheBytes is the default bound of the answer cache's memory.
const DefaultCacheBytes = 64 << 20

// answers is the REST API's cache of encoded answers (docs/ARCHITECTURE.md,
// "The read API's cache"): keyed by endpoint, normalised parameters (a
// range as the minutes it selects) and the store's write position, so an
// answer is reused until a write could change it. It holds at most max
// bytes, dropping the least recently used; concurrent requests for an
// answer not held compute it once. It is safe for concurrent use.
type answers struct {
	max int64

	mu      sync.Mutex
	used    int64
	lru     list.List // of *answer, most recently used first
	byKey   map[string]*list.Element
	flights map[string]*flight

	// computed counts the answers computed (tests).
	computed atomic.Int64
}

// answer is one encoded answer: the whole body, or for an answer that
// echoes the request (the range's from and to) its members, to which the
// request's own are added.
type answer struct {
	key     string
	status  int
	body    []byte   // the JSON body (members == nil)
	gz      []byte   // body gzipped, for clients that take gzip
	members []member // the answer's members, sorted by name
	tag     string   // hash of the encoding: the ETag's root
	size    int64

	// last is the body last assembled from members, with the echo it was
	// assembled for: clients asking the same range in the same instant
	// (a dashboard's panels, or a fixed range) share it and its gzip.
	lastMu sync.Mutex
	last   *assembled
}

// maxLastBody bounds the assembled body an answer keeps (last): a larger
// one (thousands of root APIs) is assembled for each request rather than
// held twice.
const maxLastBody = 1 << 20

// member is one member of a JSON object: its name and encoded value.
type member struct {
	name  string
	value []byte
}

type assembled struct {
	echo     string
	body, gz []byte
	tag      string
}

// flight is one computation that requests for the same key wait for.
type flight struct {
	done chan struct{}
	val  any
	err  error
}

func newAnswers(max int64) *answers {
	return &answers{max: max, byKey: map[string]*list.Element{}, flights: map[string]*flight{}}
}

// get returns the answer of key, computing it with compute (once for all
// the requests that ask while it runs) when it is not held. compute runs
// detached from the asking request's cancellation, bounded by timeout, so
// that a client going away does not fail the others waiting; each waits
// until its own context ends. An error is not kept.
func (c *answers) get(ctx context.Context, key string, timeout time.Duration, compute func(context.Context) (*answer, error)) (*answer, error) {
	c.mu.Lock()
	if el := c.byKey[key]; el != nil {
		c.lru.MoveToFront(el)
		c.mu.Unlock()
		return el.Value.(*answer), nil
	}
	v, err := c.share(ctx, key, timeout, func(ctx context.Context) (any, error) {
		a, err := compute(ctx)
		if err != nil {
			return nil, err
		}
		c.computed.Add(1)
		a.key = key
		c.put(a)
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*answer), nil
}

// share runs fn for key once for every caller that asks while it runs
// (called with c.mu held; returns with it released).
func (c *answers) share(ctx context.Context, key string, timeout time.Duration, fn func(context.Context) (any, error)) (any, error) {
	f := c.flights[key]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.flights[key] = f
		go func() {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			defer func() {
				// A panic fails the requests waiting, as the handler
				// stack's recoverer would have failed the one request.
				if p := recover(); p != nil {
					f.val, f.err = nil, fmt.Errorf("web: computing an answer: panic: %v", p)
				}
				c.mu.Lock()
				delete(c.flights, key)
				c.mu.Unlock()
				close(f.done)
			}()
			f.val, f.err = fn(fctx)
		}()
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// shared runs fn once for every caller asking for key while it runs,
// keeping nothing: the document /apis, /fleet and /services each pick
// parts of.
func (c *answers) shared(ctx context.Context, key string, timeout time.Duration, fn func(context.Context) (any, error)) (any, error) {
	c.mu.Lock()
	return c.share(ctx, "shared\x00"+key, timeout, fn)
}

// put keeps a, dropping the least recently used answers beyond the bound
// (an answer larger than the bound is not kept).
func (c *answers) put(a *answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a.size > c.max || c.byKey[a.key] != nil {
		return
	}
	c.byKey[a.key] = c.lru.PushFront(a)
	c.used += a.size
	for c.used > c.max {
		el := c.lru.Back()
		old := el.Value.(*answer)
		c.lru.Remove(el)
		delete(c.byKey, old.key)
		c.used -= old.size
	}
}

// bytes returns the memory the held answers count.
func (c *answers) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// encodeJSON encodes v as writeJSON does, newline included.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// gzipped compresses b at the level of the handler stack's compressor.
func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, compressLevel)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

// tagOf returns the hash of encoded bytes, as an ETag's root.
func tagOf(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{0})
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// newAnswer encodes v as a whole body with status.
func newAnswer(status int, v any) (*answer, error) {
	b, err := encodeJSON(v)
	if err != nil {
		return nil, err
	}
	a := &answer{status: status, body: b, tag: tagOf(b)}
	if status == http.StatusOK {
		a.gz = gzipped(b)
	}
	a.size = int64(len(b) + len(a.gz) + 256)
	return a, nil
}

// newMembers encodes the members of an object the request adds members to.
func newMembers(m map[string]any) (*answer, error) {
	a := &answer{status: http.StatusOK}
	var all [][]byte
	for _, name := range slices.Sorted(maps.Keys(m)) {
		b, err := encodeJSON(m[name])
		if err != nil {
			return nil, err
		}
		b = bytes.TrimSuffix(b, []byte("\n"))
		a.members = append(a.members, member{name, b})
		all = append(all, []byte(name), b)
		a.size += int64(len(name) + len(b))
	}
	a.tag = tagOf(all...)
	// Room for one assembled body and its gzip (last).
	a.size = 2*a.size + 256
	return a, nil
}

// assemble returns the body of a members answer with the request's echo
// members added: the object encoding/json writes for the map of them all
// (members sorted by name), and its ETag root.
func (a *answer) assemble(echo []member) *assembled {
	var key strings.Builder
	for _, m := range echo {
		key.WriteString(m.name)
		key.WriteByte(0)
		key.Write(m.value)
		key.WriteByte(0)
	}
	a.lastMu.Lock()
	defer a.lastMu.Unlock()
	if a.last != nil && a.last.echo == key.String() {
		return a.last
	}
	all := append(slices.Clone(a.members), echo...)
	slices.SortFunc(all, func(x, y member) int { return strings.Compare(x.name, y.name) })
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range all {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteString("}\n")
	as := &assembled{echo: key.String(), body: b.Bytes()}
	as.gz = gzipped(as.body)
	as.tag = tagOf([]byte(a.tag), []byte(as.echo))
	if len(as.body) <= maxLastBody {
		a.last = as
	}
	return as
}

// echoTime is a member holding an instant as encoding/json writes it.
func echoTime(name string, t time.Time) member {
	b, _ := t.MarshalJSON()
	return member{name, b}
}

// cacheControl makes clients ask again each time, sending the ETag they
// hold (the answer changes whenever the store does), and keeps shared
// caches from keeping answers a token guarded.
const cacheControl = "private, no-cache"

// compressLevel is the handler stack's gzip level (Handler).
const compressLevel = 5

// serveAnswer writes an answer: 304 when the request holds its ETag,
// the gzipped body when the client takes gzip.
func serveAnswer(w http.ResponseWriter, r *http.Request, a *answer, echo []member) {
	body, gz, tag := a.body, a.gz, a.tag
	if a.members != nil {
		as := a.assemble(echo)
		body, gz, tag = as.body, as.gz, as.tag
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if a.status != http.StatusOK || r.Method != http.MethodGet {
		// Only a 200 of a GET has a representation to revalidate. (A
		// POST's gzip goes through the handler stack's compressor.)
		w.WriteHeader(a.status)
		w.Write(body)
		return
	}
	etag := `"` + tag + `"`
	h.Set("ETag", etag)
	h.Set("Cache-Control", cacheControl)
	h.Add("Vary", "Accept-Encoding")
	if noneMatch(r.Header.Get("If-None-Match"), etag) {
		h.Del("Content-Type")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if gz != nil && strings.Contains(strings.ToLower(r.Header.Get("Accept-Encoding")), "gzip") {
		// Already compressed: the handler stack's compressor passes it on.
		h.Set("Content-Encoding", "gzip")
		body = gz
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// noneMatch reports whether an If-None-Match header matches etag (weak
// comparison, as RFC 9110 §13.1.2 has it for GET).
func noneMatch(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
