package ingest

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unsafe"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// DefaultClaimHeader is the response header (HTTP) and response metadata key
// (gRPC) that carries the error claim when DecoderConfig.ClaimHeader is empty.
const DefaultClaimHeader = "x-error-claim"

// UnknownService is the service name of spans whose resource has no
// service.name.
const UnknownService = "unknown_service"

// UnknownPeer is the peer (callee) name of spans that carry none of the peer
// attributes of docs/SPEC.md §2.
const UnknownPeer = "unknown"

// maxInterned bounds the intern table: when it is full it is emptied and
// refilled, so that high-cardinality span names cannot grow it forever.
// Names are at most graph.MaxNameLen bytes: the table holds at most 32 MiB
// of them.
const maxInterned = 1 << 17

// DecoderConfig configures a Decoder.
type DecoderConfig struct {
	// ClaimHeader is the name of the header (HTTP, captured as
	// http.response.header.<name>) and of the metadata key (gRPC, captured as
	// rpc.response.metadata.<name>) that carry the error claim. Empty means
	// DefaultClaimHeader. It is matched case-insensitively, and '-' matches
	// '_' (older semantic conventions normalised header names that way).
	ClaimHeader string
	// SamplingConfig says where each span's sampling probability is read
	// from, or what it is assumed to be (docs/SPEC.md §2, "sampling").
	// Check it with its Validate: the decoder ignores a probability out
	// of range.
	SamplingConfig
}

// Decoder converts OTLP trace data into graph.Span records, applying the span
// conventions of docs/SPEC.md §2. It interns the strings it produces (service,
// version, operation, name, peer) so that repeated names share memory.
//
// A Decoder is not safe for concurrent use: use one per goroutine.
type Decoder struct {
	// Progress, when not nil, is called by ReadFile with the number of
	// (compressed) bytes read so far from the file: at most about once per
	// MiB, and once more when the file is done.
	Progress func(bytesRead int64)
	// Workers, above 1, makes ReadFile decode requests on that many
	// goroutines while it reads: emit and onBad are then called from them,
	// one call at a time, and requests are emitted in no particular order.
	Workers int

	cfg         DecoderConfig // as given: ReadFile's workers are configured alike
	claimHeader string
	strs        map[string]string
	recent      *[recentSize]string // a cache in front of strs (see intern)
	buf         []byte
	attrs       attrSet

	// Names past graph.MaxNameLen are cut (graph.CapName) in capped;
	// cut says that a name of the span being decoded was, resCut that
	// its resource's were.
	capped      []byte
	cut, resCut bool

	// Sampling (sampling.go). countKey is the adjusted-count attribute
	// ("" for none), read from the span's slot countSlot (sAdjCount, or
	// the slot of a key that has one) when countOn; countDyn is countKey
	// when its slot is sAdjCount. inputCount and serviceCount are the
	// configured adjusted counts (1/p; 0 for none). res is what the
	// resource of the spans being decoded says.
	countKey     string
	countDyn     string
	countOn      bool
	countSlot    slot
	inputCount   float64
	serviceCount map[string]float64
	res          resSampling
	// The last tracestate read (Decoder.traceState), and what it says.
	tsLast          []byte
	tsAdjusted      float64
	tsPresent, tsOK bool

	// ReadFile scratch.
	spans    []graph.Span
	line     []byte
	longLine []byte // jsonLines: a line longer than the read buffer, read whole
	frame    []byte
	whole    []byte
	unz      []byte // a zstd-compressed message, decompressed
	zmsg     *zstd.Decoder

	// skipped holds spans decoded only to be checked (appendProto), or
	// kept aside until it is known whether they count (the deprecated
	// scope spans of a JSON resource).
	skipped []graph.Span

	// JSON decoding scratch (jsondec.go).
	depth  int     // open containers
	arrays uint64  // bit k set: the container at depth k+1 is an array
	jv     attrVal // the value of the attribute being read
	esc    []byte  // a string with escapes, decoded
	arena  []byte  // decoded strings the span being read keeps
}

// NewDecoder returns a Decoder configured by cfg. (A zero Decoder works too,
// with the default configuration.)
func NewDecoder(cfg DecoderConfig) *Decoder {
	d := &Decoder{}
	d.init(cfg)
	return d
}

func (d *Decoder) init(cfg DecoderConfig) {
	d.cfg = cfg
	h := strings.TrimSpace(cfg.ClaimHeader)
	if h == "" {
		h = DefaultClaimHeader
	}
	b := []byte(h)
	for i, c := range b {
		b[i] = normHeaderByte(c)
	}
	d.claimHeader = string(b)
	d.strs = make(map[string]string, 256)
	d.recent = new([recentSize]string)
	d.buf = make([]byte, 0, 256)

	switch key := strings.TrimSpace(cfg.AdjustedCountKey); key {
	case "":
		d.countKey = DefaultAdjustedCountKey
	case NoAdjustedCountKey:
	default:
		d.countKey = key
	}
	if d.countKey != "" {
		d.countOn = true
		// A key the decoder reads anyway is read from its own slot.
		if s, ok := d.slotOf(d.countKey); ok {
			d.countSlot = s
		} else {
			d.countSlot, d.countDyn = sAdjCount, d.countKey
		}
	}
	d.tsLast = make([]byte, 0, maxMemoTraceState)
	d.inputCount = countOfProbability(cfg.Probability)
	for svc, p := range cfg.ServiceProbability {
		if n := countOfProbability(p); n > 0 {
			if d.serviceCount == nil {
				d.serviceCount = make(map[string]float64, len(cfg.ServiceProbability))
			}
			d.serviceCount[svc] = n
		}
	}
}

// AppendTraces appends one graph.Span per span of td to dst and returns the
// extended slice. It never panics, whatever td holds; a zero ptrace.Traces
// appends nothing.
func (d *Decoder) AppendTraces(dst []graph.Span, td ptrace.Traces) []graph.Span {
	if td == (ptrace.Traces{}) {
		return dst
	}
	if d.strs == nil {
		d.init(DecoderConfig{})
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		d.cut = false
		service, version, count := d.resource(rs.Resource().Attributes())
		d.resCut = d.cut
		d.res = d.resSampling(service, count)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			n := spans.Len()
			dst = slices.Grow(dst, n)
			for k := 0; k < n; k++ {
				dst = append(dst, graph.Span{})
				d.span(&dst[len(dst)-1], spans.At(k), service, version)
			}
		}
	}
	return dst
}

// AppendRequest decodes b, one OTLP ExportTraceServiceRequest (OTLP JSON when
// json is true, else protobuf), and appends its spans to dst as AppendTraces
// does. On error dst is returned unchanged.
//
// Protobuf is decoded by a single pass over the bytes that builds the spans
// directly (see appendProto), with no intermediate pdata objects: it
// accepts and rejects what pdata's ExportRequest.UnmarshalProto does,
// including the deprecated instrumentation_library_spans (field 1000) of a
// resource that has no scope_spans, and gives the same spans. An attribute
// value nested deeper than MaxProtoDepth is rejected with an error wrapping
// ErrLimit; a field that runs past the end of b with one wrapping
// io.ErrUnexpectedEOF.
//
// JSON nested deeper than MaxJSONDepth or with more than MaxJSONElements
// elements is rejected with an error wrapping ErrLimit, and one that is not
// valid JSON with an error that says where (the scanner's, checkJSON). It
// too is decoded in one pass straight to spans (see decodeJSON), accepting and rejecting what pdata's JSONUnmarshaler
// does and giving the same spans, but for a field named "" (rejected);
// its errors name the field and the byte offset. Trace and span ids in
// base64 (protobuf's generic JSON mapping) are accepted as well as hex. A request that decodes to no span
// because it holds OTLP logs, metrics or profiles, or Jaeger or Zipkin JSON,
// is rejected with an error wrapping ErrNotTraces; an empty trace request
// ({} or {"resourceSpans":[]}) is not an error.
func (d *Decoder) AppendRequest(dst []graph.Span, b []byte, json bool) ([]graph.Span, error) {
	if json {
		if countElements(b) > MaxJSONElements {
			return dst, elementsError()
		}
		out, err := d.decodeJSON(dst, b)
		if err != nil {
			// The scanner says what is wrong with a request that is not
			// JSON, or too deep, as it did when it ran first.
			if serr := checkJSON(b); serr != nil {
				return dst, serr
			}
		}
		return out, err
	}
	return d.appendProto(dst, b)
}

// resource reads service.name, service.version and the adjusted-count
// attribute (as resSampling.count) in one pass.
func (d *Decoder) resource(m pcommon.Map) (service, version string, count float64) {
	service = UnknownService
	seen := false
	m.Range(func(k string, v pcommon.Value) bool {
		if k == d.countKey && d.countKey != "" {
			av := valOf(v)
			resourceCount(&count, &seen, &av)
		}
		switch k {
		case "service.name":
			if s, ok := strOf(v); ok && s != "" {
				service = d.intern(s)
			}
		case "service.version":
			if s, ok := strOf(v); ok {
				version = d.intern(s)
			}
		}
		return true
	})
	return service, version, count
}

// span fills out (a zero Span) from sp.
func (d *Decoder) span(out *graph.Span, sp ptrace.Span, service, version string) {
	out.TraceID = graph.TraceID(sp.TraceID())
	out.SpanID = graph.SpanID(sp.SpanID())
	out.ParentID = graph.SpanID(sp.ParentSpanID())
	out.Kind = kindOf(int32(sp.Kind()))
	out.Service = service
	out.Version = version
	d.cut = d.resCut
	out.Name = d.intern(sp.Name())
	out.Start = unixNanos(uint64(sp.StartTimestamp()))
	out.End = unixNanos(uint64(sp.EndTimestamp()))

	a := &d.attrs
	d.collect(a, sp.Attributes())
	d.derive(out, a, sp.Status().Code() == ptrace.StatusCodeError, sp.TraceState().AsRaw())
	d.res.finish(out)
}

// kindOf maps an OTLP span kind; values out of range are unspecified.
func kindOf(k int32) graph.Kind {
	if k >= 0 && k <= int32(graph.KindConsumer) {
		return graph.Kind(k)
	}
	return graph.KindUnspecified
}

// derive fills the fields of out that docs/SPEC.md §2 derives from the span's
// attributes a (out.Kind and out.Name are set); statusError is whether the
// span status is ERROR, traceState its W3C tracestate. Every decoding path,
// pdata's, the protobuf wire decoder and the JSON decoder, ends here, so
// they apply the same rules. Its sampling is left for the resource to
// complete (resSampling.finish).
func (d *Decoder) derive(out *graph.Span, a *attrSet, statusError bool, traceState string) {
	out.Operation = out.Name
	if out.Kind == graph.KindServer {
		out.Operation = d.operation(a, out.Name)
	}
	out.Failed, out.StatusCode = failure(a, statusError)

	for _, s := range [...]slot{sClaimAttr, sClaimHeader, sClaimMeta} {
		if c, ok := a.claim(s); ok {
			out.Claim = c
			break
		}
	}

	n, ok := a.num(sResendCount)
	if !ok || n < 0 {
		n, ok = a.num(sRetryAttempt)
	}
	if ok && n >= 0 {
		out.HasResend = true
		out.Resend = int32(min(n, math.MaxInt32))
	}

	out.CriteriaSatisfied = a.tri(sCriteria) == graph.True
	out.Suppressed = a.tri(sSuppressed) == graph.True
	out.FailOpen = a.tri(sFailOpen)

	out.Peer = d.peer(a)

	for _, s := range [...]slot{sURLFull, sHTTPURL, sDBQueryText, sDBStatement} {
		if v, ok := a.str(s); ok && v != "" {
			out.Target = fnv1a(v)
			break
		}
	}
	out.Truncated = d.cut
	d.spanSampling(out, a, traceState)
}

// peer names the callee as a span that may call an uninstrumented one sees
// it: docs/SPEC.md §2's list first (service.peer.name or peer.service, else
// server.address, else db.system.name or db.system), then what older or
// other instrumentation writes instead: the old semantic conventions'
// net.peer.name, the host of url.full or of the old http.url, and Envoy's
// upstream cluster (upstream_cluster.name, its observability name, before
// upstream_cluster, its configuration name); else UnknownPeer.
func (d *Decoder) peer(a *attrSet) string {
	for _, s := range [...]slot{sPeerServiceName, sPeerService, sServerAddress, sDBSystemName, sDBSystem, sNetPeerName} {
		if v, ok := a.str(s); ok && v != "" {
			return d.intern(v)
		}
	}
	for _, s := range [...]slot{sURLFull, sHTTPURL} {
		if v, ok := a.str(s); ok {
			if h := urlHost(v); h != "" {
				return d.intern(h)
			}
		}
	}
	for _, s := range [...]slot{sUpstreamClusterName, sUpstreamCluster} {
		if v, ok := a.str(s); ok && v != "" {
			return d.intern(v)
		}
	}
	return UnknownPeer
}

// urlHost returns the host of an absolute URL
// (scheme://[userinfo@]host[:port][/path][?query][#fragment]), without the
// user info, the port or an IPv6 address's brackets: what names a service.
// It returns "" when s has no host. The host is a substring of s: nothing is
// allocated.
func urlHost(s string) string {
	i := strings.Index(s, "://")
	if i <= 0 || !isScheme(s[:i]) {
		return ""
	}
	h := s[i+3:]
	if j := strings.IndexAny(h, "/?#"); j >= 0 {
		h = h[:j]
	}
	if j := strings.LastIndexByte(h, '@'); j >= 0 {
		h = h[j+1:]
	}
	if strings.HasPrefix(h, "[") {
		if j := strings.IndexByte(h, ']'); j > 0 {
			return h[1:j]
		}
		return ""
	}
	if j := strings.LastIndexByte(h, ':'); j >= 0 {
		h = h[:j]
	}
	return h
}

// isScheme reports whether s is a URL scheme: a letter, then letters,
// digits, '+', '-' or '.'.
func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20 // ASCII lower case
		switch {
		case 'a' <= c && c <= 'z':
		case i > 0 && ('0' <= s[i] && s[i] <= '9' || s[i] == '+' || s[i] == '-' || s[i] == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// operation names a SERVER span: "METHOD route", "rpc.service/rpc.method",
// a fully-qualified rpc.method, or the span name.
func (d *Decoder) operation(a *attrSet, name string) string {
	method, ok := a.str(sHTTPMethod)
	if !ok || method == "" {
		method, ok = a.str(sHTTPMethodOld)
	}
	if route, rok := a.str(sHTTPRoute); ok && rok && method != "" && route != "" {
		d.buf = append(append(append(d.buf[:0], method...), ' '), route...)
		return d.internBytes(d.buf)
	}
	rm, mok := a.str(sRPCMethod)
	if !mok || rm == "" {
		return name
	}
	// Newer conventions put the fully-qualified "pkg.Service/Method" in
	// rpc.method (and drop rpc.service); when it already has a '/', it is
	// the whole name even if an older rpc.service is also present.
	if strings.IndexByte(rm, '/') >= 0 {
		return d.intern(rm)
	}
	if rs, sok := a.str(sRPCService); sok && rs != "" {
		d.buf = append(append(append(d.buf[:0], rs...), '/'), rm...)
		return d.internBytes(d.buf)
	}
	return name
}

// failure applies the failure rules: HTTP status, else gRPC status, else the
// span status (statusError: it is ERROR). It returns the failed flag and the
// display status code.
func failure(a *attrSet, statusError bool) (bool, int32) {
	for _, s := range [...]slot{sHTTPStatus, sHTTPStatusOld} {
		// Codes below 100 are not HTTP statuses (browser instrumentation
		// records 0 for a request that got no response): treat as absent.
		if c, ok := a.num(s); ok && c >= 100 {
			return c >= 500, int32(min(c, math.MaxInt32))
		}
	}
	for _, s := range [...]slot{sGRPCStatus, sRPCStatus} {
		if c, ok := a.grpcCode(s); ok {
			return grpcFailing(c), int32(1000 + c)
		}
	}
	return statusError, 0
}

// grpcFailing reports whether a gRPC status code is a server-side failure:
// UNKNOWN, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL,
// UNAVAILABLE or DATA_LOSS.
func grpcFailing(c int64) bool {
	switch c {
	case 2, 4, 8, 10, 13, 14, 15:
		return true
	}
	return false
}

// grpcCodeNames are the gRPC status code names, indexed by code.
var grpcCodeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

// grpcCodeByName returns the code of a gRPC status name (case-insensitive;
// the American "CANCELED" is accepted too).
func grpcCodeByName(s string) (int64, bool) {
	for i, n := range grpcCodeNames {
		if len(n) == len(s) && strings.EqualFold(n, s) {
			return int64(i), true
		}
	}
	if strings.EqualFold(s, "CANCELED") {
		return 1, true
	}
	return 0, false
}

// claimOf maps a claim value: claimed/claim, unclaimed/unclaim
// (case-insensitive, trimmed), anything else invalid.
func claimOf(s string) graph.Claim {
	s = strings.TrimSpace(s)
	switch {
	case strings.EqualFold(s, "claimed"), strings.EqualFold(s, "claim"):
		return graph.ClaimClaimed
	case strings.EqualFold(s, "unclaimed"), strings.EqualFold(s, "unclaim"):
		return graph.ClaimUnclaimed
	}
	return graph.ClaimInvalid
}

// slot names an attribute the decoder reads.
type slot uint8

const (
	sHTTPMethod          slot = iota // http.request.method
	sHTTPMethodOld                   // http.method
	sHTTPRoute                       // http.route
	sRPCService                      // rpc.service
	sRPCMethod                       // rpc.method
	sHTTPStatus                      // http.response.status_code
	sHTTPStatusOld                   // http.status_code
	sGRPCStatus                      // rpc.grpc.status_code
	sRPCStatus                       // rpc.response.status_code
	sClaimAttr                       // error.claim
	sClaimHeader                     // http.response.header.<claim header>
	sClaimMeta                       // rpc.response.metadata.<claim header>
	sResendCount                     // http.request.resend_count
	sRetryAttempt                    // retry.attempt
	sCriteria                        // retry.criteria_satisfied
	sSuppressed                      // retry.suppressed
	sFailOpen                        // dependency.fail_open
	sPeerServiceName                 // service.peer.name
	sPeerService                     // peer.service
	sServerAddress                   // server.address
	sNetPeerName                     // net.peer.name
	sDBSystemName                    // db.system.name
	sDBSystem                        // db.system
	sURLFull                         // url.full
	sHTTPURL                         // http.url
	sDBQueryText                     // db.query.text
	sDBStatement                     // db.statement
	sUpstreamCluster                 // upstream_cluster (Envoy)
	sUpstreamClusterName             // upstream_cluster.name (Envoy)
	sSamplerType                     // sampler.type (Jaeger)
	sSamplerParam                    // sampler.param (Jaeger)
	sAdjCount                        // the adjusted-count attribute (configured)
	nSlots
)

// attrSet.has has one bit per slot: this fails to compile past 32 slots.
const _ = uint32(1 << (nSlots - 1))

// attrSet holds, per slot, the first value seen for it in one span.
type attrSet struct {
	has uint32 // bit s set: v[s] is valid
	v   [nSlots]attrVal
}

// valType is the type of an attribute value, as pcommon.ValueType has it.
type valType uint8

const (
	vEmpty valType = iota // no value, or a string_value_strindex (profiles only)
	vStr
	vBool
	vInt
	vDouble
	vMap
	vSlice
	vBytes
)

// attrVal is what the decoder keeps of one attribute value: the type, a
// string or a number, and for an array whether it has elements and its first
// element's type (and string). In the protobuf path str is a view of the
// request's bytes: it is hashed, parsed, compared or interned (copied), and
// never kept.
type attrVal struct {
	typ   valType
	first valType // vSlice with elems: the first element's type
	elems bool    // vSlice: the array has at least one element
	num   uint64  // vInt: the int64; vDouble: the float64's bits; vBool: 0 or 1
	str   string  // vStr: the value; vSlice: the first element's, when a string
}

// valOf converts a pdata value.
func valOf(v pcommon.Value) attrVal {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return attrVal{typ: vStr, str: v.Str()}
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return attrVal{typ: vBool, num: 1}
		}
		return attrVal{typ: vBool}
	case pcommon.ValueTypeInt:
		return attrVal{typ: vInt, num: uint64(v.Int())}
	case pcommon.ValueTypeDouble:
		return attrVal{typ: vDouble, num: math.Float64bits(v.Double())}
	case pcommon.ValueTypeMap:
		return attrVal{typ: vMap}
	case pcommon.ValueTypeBytes:
		return attrVal{typ: vBytes}
	case pcommon.ValueTypeSlice:
		out := attrVal{typ: vSlice}
		if sl := v.Slice(); sl.Len() > 0 {
			out.elems = true
			e := valOf(sl.At(0))
			out.first, out.str = e.typ, e.str
		}
		return out
	}
	return attrVal{}
}

const (
	headerPrefix   = "http.response.header."
	metadataPrefix = "rpc.response.metadata."
)

// collect reads the span's attributes in one pass.
func (d *Decoder) collect(a *attrSet, m pcommon.Map) {
	a.has = 0
	m.Range(func(k string, v pcommon.Value) bool {
		if s, ok := d.slotOf(k); ok && a.has&(1<<s) == 0 {
			a.has |= 1 << s
			a.v[s] = valOf(v)
		}
		return true
	})
}

// slotKeys are the attribute keys the decoder reads, but for the claim
// header's and the adjusted count's (which depend on the configuration).
var slotKeys = [...]struct {
	key  string
	slot slot
}{
	{"http.request.method", sHTTPMethod},
	{"http.method", sHTTPMethodOld},
	{"http.route", sHTTPRoute},
	{"rpc.service", sRPCService},
	{"rpc.method", sRPCMethod},
	{"http.response.status_code", sHTTPStatus},
	{"http.status_code", sHTTPStatusOld},
	{"rpc.grpc.status_code", sGRPCStatus},
	{"rpc.response.status_code", sRPCStatus},
	{"error.claim", sClaimAttr},
	{"http.request.resend_count", sResendCount},
	{"retry.attempt", sRetryAttempt},
	{"retry.criteria_satisfied", sCriteria},
	{"retry.suppressed", sSuppressed},
	{"dependency.fail_open", sFailOpen},
	{"service.peer.name", sPeerServiceName},
	{"peer.service", sPeerService},
	{"server.address", sServerAddress},
	{"net.peer.name", sNetPeerName},
	{"db.system.name", sDBSystemName},
	{"db.system", sDBSystem},
	{"url.full", sURLFull},
	{"http.url", sHTTPURL},
	{"db.query.text", sDBQueryText},
	{"db.statement", sDBStatement},
	{"upstream_cluster", sUpstreamCluster},
	{"upstream_cluster.name", sUpstreamClusterName},
	{"sampler.type", sSamplerType},
	{"sampler.param", sSamplerParam},
}

// slotTable finds a key's slot with one hash and one comparison: a
// direct-mapped table where every key of slotKeys has a bucket of its own
// (newSlotTable picks a multiplier that makes it so). Every key is at least
// minSlotKey bytes long.
type slotTable struct {
	mult  uint64
	keys  [256]string
	slots [256]slot
}

const minSlotKey = 8

var slots = newSlotTable()

func newSlotTable() *slotTable {
	for _, e := range slotKeys {
		if len(e.key) < minSlotKey {
			panic("ingest: slot key shorter than minSlotKey: " + e.key)
		}
	}
	for mult := uint64(0x9e3779b97f4a7c15); ; mult += 2 {
		t := &slotTable{mult: mult}
		ok := true
		for _, e := range slotKeys {
			i := t.bucket(e.key)
			if t.keys[i] != "" {
				ok = false
				break
			}
			t.keys[i], t.slots[i] = e.key, e.slot
		}
		if ok {
			return t
		}
	}
}

// bucket hashes the length and the first and last 8 bytes of k (len(k) ≥
// 8).
func (t *slotTable) bucket(k string) uint8 {
	b := unsafe.Slice(unsafe.StringData(k), len(k))
	h := binary.LittleEndian.Uint64(b) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(b[len(b)-8:]), 29) ^ uint64(len(b))
	return uint8((h * t.mult) >> 56)
}

func (d *Decoder) slotOf(k string) (slot, bool) {
	if len(k) >= minSlotKey {
		if i := slots.bucket(k); slots.keys[i] == k {
			return slots.slots[i], true
		}
	}
	if len(k) == len(d.countDyn) && k == d.countDyn && k != "" {
		return sAdjCount, true
	}
	if strings.HasPrefix(k, headerPrefix) && headerEqual(k[len(headerPrefix):], d.claimHeader) {
		return sClaimHeader, true
	}
	if strings.HasPrefix(k, metadataPrefix) && headerEqual(k[len(metadataPrefix):], d.claimHeader) {
		return sClaimMeta, true
	}
	return 0, false
}

// normHeaderByte lowercases ASCII and maps '_' to '-'.
func normHeaderByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	if c == '_' {
		return '-'
	}
	return c
}

// headerEqual reports whether the header name h matches want (already
// normalised by normHeaderByte), ignoring ASCII case and '-'/'_'.
func headerEqual(h, want string) bool {
	if len(h) != len(want) {
		return false
	}
	for i := 0; i < len(h); i++ {
		if normHeaderByte(h[i]) != want[i] {
			return false
		}
	}
	return true
}

// str returns the slot's value if it is a string.
func (a *attrSet) str(s slot) (string, bool) {
	if a.has&(1<<s) == 0 || a.v[s].typ != vStr {
		return "", false
	}
	return a.v[s].str, true
}

// num returns the slot's value as an integer: an int, a finite double
// (truncated), or a string holding a decimal number.
func (a *attrSet) num(s slot) (int64, bool) {
	if a.has&(1<<s) == 0 {
		return 0, false
	}
	return numOf(&a.v[s])
}

// grpcCode returns the slot's value as a gRPC status code (0..16): a number,
// a numeric string or a status name.
func (a *attrSet) grpcCode(s slot) (int64, bool) {
	if a.has&(1<<s) == 0 {
		return 0, false
	}
	v := &a.v[s]
	c, ok := numOf(v)
	if !ok && v.typ == vStr {
		c, ok = grpcCodeByName(strings.TrimSpace(v.str))
	}
	if !ok || c < 0 || c >= int64(len(grpcCodeNames)) {
		return 0, false
	}
	return c, true
}

// tri returns the slot's value as a Tri: a bool, or the string "true" or
// "false" (case-insensitive, trimmed); anything else is Unset.
func (a *attrSet) tri(s slot) graph.Tri {
	if a.has&(1<<s) == 0 {
		return graph.Unset
	}
	v := &a.v[s]
	switch v.typ {
	case vBool:
		return graph.TriOf(v.num != 0)
	case vStr:
		t := strings.TrimSpace(v.str)
		if strings.EqualFold(t, "true") {
			return graph.True
		}
		if strings.EqualFold(t, "false") {
			return graph.False
		}
	}
	return graph.Unset
}

// claim returns the claim in the slot and whether the slot is present: a
// string, or a string array (the captured-header convention; its first
// element counts). An empty array is absent; any other type is invalid.
func (a *attrSet) claim(s slot) (graph.Claim, bool) {
	if a.has&(1<<s) == 0 {
		return graph.ClaimMissing, false
	}
	v := &a.v[s]
	switch v.typ {
	case vStr:
		return claimOf(v.str), true
	case vSlice:
		if !v.elems {
			return graph.ClaimMissing, false
		}
		if v.first == vStr {
			return claimOf(v.str), true
		}
	case vEmpty:
		return graph.ClaimMissing, false
	}
	return graph.ClaimInvalid, true
}

func strOf(v pcommon.Value) (string, bool) {
	if v.Type() != pcommon.ValueTypeStr {
		return "", false
	}
	return v.Str(), true
}

func numOf(v *attrVal) (int64, bool) {
	switch v.typ {
	case vInt:
		return int64(v.num), true
	case vDouble:
		f := math.Float64frombits(v.num)
		if f != f || f < -9e18 || f > 9e18 {
			return 0, false
		}
		return int64(f), true
	case vStr:
		return parseNum(v.str)
	}
	return 0, false
}

// parseNum parses an optionally signed decimal integer, optionally followed
// by a fraction (ignored), surrounded by optional spaces. Unlike strconv it
// never allocates, even on failure.
func parseNum(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var n int64
	i := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if n > (math.MaxInt64-9)/10 {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	if i == 0 {
		return 0, false
	}
	if i < len(s) {
		if s[i] != '.' {
			return 0, false
		}
		for _, c := range []byte(s[i+1:]) {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

func unixNanos(t uint64) int64 {
	if t > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(t)
}

// fnv1a is the 64-bit FNV-1a hash of s.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// intern returns the shared copy of the name s, as the analysis keeps it:
// cut to graph.MaxNameLen, and without the reserved names' first rune
// (graph.CapName; d.cut is set when it was cut). Every name a span brings
// (service, version, span name, operation, peer) goes through it, in
// every decoding path, so `analyze` and the service read the same names.
// s may be a view of bytes that are reused later (the protobuf path's
// request): what is returned never is.
//
// The strings last returned sit in a direct-mapped cache indexed by a cheap
// hash of their length and ends: most names repeat from span to span, and a
// hit costs that hash and one comparison, not a map lookup.
func (d *Decoder) intern(s string) string {
	if graph.NeedsCap(s) {
		return d.internCapped(s)
	}
	return d.internName(s)
}

// internCapped interns the name s that graph.NeedsCap.
//
//go:noinline
func (d *Decoder) internCapped(s string) string {
	var cut bool
	d.capped, cut = graph.CapName(d.capped[:0], s)
	d.cut = d.cut || cut
	return d.internName(bytesView(d.capped))
}

// internName is intern for a name that needs no cap.
func (d *Decoder) internName(s string) string {
	i := recentIndex(s)
	if v := d.recent[i]; v == s {
		return v
	}
	v, ok := d.strs[s]
	if !ok {
		v = strings.Clone(s)
		if len(d.strs) >= maxInterned {
			clear(d.strs)
			clear(d.recent[:])
		}
		d.strs[v] = v
	}
	d.recent[i] = v
	return v
}

// recentSize is how many names the cache in front of the intern table
// holds: the names of a mesh of a thousand services (their operations,
// versions and peers) find their slots there.
const recentSize = 4096

// recentIndex hashes the length of s, and its first and last 8 bytes (or
// three of its bytes when it is shorter).
func recentIndex(s string) uint16 {
	n := len(s)
	var h uint64
	switch {
	case n >= 8:
		b := unsafe.Slice(unsafe.StringData(s), n)
		h = binary.LittleEndian.Uint64(b) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(b[n-8:]), 29)
	case n > 0:
		h = uint64(s[0]) | uint64(s[n/2])<<8 | uint64(s[n-1])<<16
	}
	return uint16(((h ^ uint64(n)) * 0x9e3779b97f4a7c15) >> 52)
}

// internBytes returns the shared string equal to b; it allocates only the
// first time a value is seen.
func (d *Decoder) internBytes(b []byte) string {
	return d.intern(bytesView(b))
}
