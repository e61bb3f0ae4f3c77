package sampling

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// adjustedCountKey is the span attribute stormradius reads a span's
// adjusted count from by default, and the one tail-sampling.yaml writes.
const adjustedCountKey = "sampling.adjusted_count"

// fleetTrace is one generated trace: what the checks expect of it.
type fleetTrace struct {
	id       pcommon.TraceID
	spans    int    // spans sent (late ones apart)
	hasError bool   // one of its spans has status ERROR
	upstream int64  // the sampling.adjusted_count its spans carry as sent (0: none)
	th       string // the ot=th its spans carry as sent ("": none)

	// The calls model's (fleetOptions.calls; callsmodel_test.go): which
	// API it roots in, what failed, and how many INTERNAL spans each
	// backend attempt's server made.
	api       string
	outcome   outcome
	internals []int
}

// fleet is generated traffic: traces of two services (a frontend's
// SERVER and CLIENT spans, then 1 to 4 backend spans), a known share of
// them with an error on one span (the root or any other), sent in
// requests that each hold the frontend half of some traces and the
// backend half of the traces before them, so that a tail sampler must
// put every trace together from two requests.
type fleet struct {
	traces   []*fleetTrace
	byID     map[pcommon.TraceID]*fleetTrace
	requests []ptrace.Traces // in sending order
	errors   int             // traces with an error

	rng *rand.Rand
}

// fleetOptions says how the traffic looks.
type fleetOptions struct {
	traces     int
	errorEvery int // every errorEvery-th trace has an error
	// Every upstreamEvery-th trace (0: none) arrives with
	// sampling.adjusted_count = upstreamCount on every span, as if
	// sampled once before.
	upstreamEvery int
	upstreamCount int64
	// Every headEvery-th trace whose randomness allows it (0: none)
	// arrives with tracestate ot=th:8, as if an SDK had sampled it at 50 %.
	headEvery int
	// calls generates the calls model instead (callsmodel_test.go): the
	// frontend's two APIs, its calls to the backend retried once when the
	// first attempt fails, the backend's database calls; errorEvery does
	// not apply.
	calls bool
}

// tracesPerRequest is how many traces start in each request.
const tracesPerRequest = 250

// seed makes every run generate the same traffic, so that a run that
// passed passes again; the checks are exact where the samplers are.
const seed = 27

// newFleet generates the traffic.
func newFleet(o fleetOptions) *fleet {
	f := &fleet{byID: map[pcommon.TraceID]*fleetTrace{}, rng: rand.New(rand.NewPCG(seed, uint64(o.traces)))}
	type half struct{ frontend, backend []spanSpec }
	var halves []half
	for i := range o.traces {
		if o.calls {
			tr := &fleetTrace{id: f.traceID()}
			front, back := f.callsTrace(tr)
			halves = append(halves, half{front, back})
			f.traces = append(f.traces, tr)
			f.byID[tr.id] = tr
			if tr.hasError {
				f.errors++
			}
			continue
		}
		tr := &fleetTrace{id: f.traceID(), hasError: i%o.errorEvery == 0}
		if o.upstreamEvery > 0 && i%o.upstreamEvery == o.upstreamEvery/2 {
			tr.upstream = o.upstreamCount
		}
		if o.headEvery > 0 && i%o.headEvery == 1 && w3cRandomness(tr.id) >= thresholdOf("8") {
			tr.th = "8"
		}
		backends := 1 + f.rng.IntN(4)
		tr.spans = 2 + backends
		errAt := -1
		if tr.hasError {
			f.errors++
			errAt = f.rng.IntN(tr.spans)
		}
		root, client := f.spanID(), f.spanID()
		h := half{frontend: []spanSpec{
			{trace: tr, id: root, name: "GET /dispatch", kind: ptrace.SpanKindServer, statusError: errAt == 0},
			{trace: tr, id: client, parent: root, name: "GET backend", kind: ptrace.SpanKindClient, statusError: errAt == 1},
		}}
		for b := range backends {
			kind := ptrace.SpanKindServer
			if b > 0 {
				kind = ptrace.SpanKindInternal
			}
			h.backend = append(h.backend, spanSpec{trace: tr, id: f.spanID(), parent: client, name: "GET /work", kind: kind, statusError: errAt == 2+b})
		}
		halves = append(halves, h)
		f.traces = append(f.traces, tr)
		f.byID[tr.id] = tr
	}
	for lo := 0; lo < len(halves)+tracesPerRequest; lo += tracesPerRequest {
		var frontend, backend []spanSpec
		for _, h := range halves[lo:min(lo+tracesPerRequest, len(halves))] {
			frontend = append(frontend, h.frontend...)
		}
		if lo > 0 {
			for _, h := range halves[lo-tracesPerRequest : min(lo, len(halves))] {
				backend = append(backend, h.backend...)
			}
		}
		if len(frontend)+len(backend) > 0 {
			f.requests = append(f.requests, request(frontend, backend))
		}
	}
	return f
}

// spanSpec is a span to generate.
type spanSpec struct {
	trace       *fleetTrace
	id, parent  pcommon.SpanID
	name        string
	kind        ptrace.SpanKind
	statusError bool
	// from, to: when it starts and ends after start (0, 0: 0 to 1 ms).
	from, to time.Duration
	// resend is its http.request.resend_count (0: none); peer its
	// peer.service ("": none).
	resend int64
	peer   string
}

// request builds an OTLP request of the frontend's and the backend's
// spans, one resource each.
func request(frontend, backend []spanSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, svc := range []struct {
		name  string
		spans []spanSpec
	}{{"frontend", frontend}, {"backend", backend}} {
		if len(svc.spans) == 0 {
			continue
		}
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc.name)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("stormradius/e2e/sampling")
		for _, s := range svc.spans {
			s.appendTo(ss.Spans())
		}
	}
	return td
}

// start is the generated spans' start time: recent, so that nothing
// downstream takes them for stale.
var start = pcommon.NewTimestampFromTime(time.Now())

func (s spanSpec) appendTo(spans ptrace.SpanSlice) {
	sp := spans.AppendEmpty()
	sp.SetTraceID(s.trace.id)
	sp.SetSpanID(s.id)
	sp.SetParentSpanID(s.parent)
	sp.SetName(s.name)
	sp.SetKind(s.kind)
	from, to := s.from, s.to
	if to == 0 {
		from, to = 0, time.Millisecond
	}
	sp.SetStartTimestamp(start + pcommon.Timestamp(from))
	sp.SetEndTimestamp(start + pcommon.Timestamp(to))
	if s.statusError {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("upstream failed")
	}
	if s.resend != 0 {
		sp.Attributes().PutInt("http.request.resend_count", s.resend)
	}
	if s.peer != "" {
		sp.Attributes().PutStr("peer.service", s.peer)
	}
	if s.trace.upstream != 0 {
		sp.Attributes().PutInt(adjustedCountKey, s.trace.upstream)
	}
	if s.trace.th != "" {
		sp.TraceState().FromRaw("ot=th:" + s.trace.th)
	}
}

// lateSpans is one more backend span for each of traces, as arriving
// after the sampler decided; withError gives it status ERROR.
func (f *fleet) lateSpans(traces []*fleetTrace, withError bool) ptrace.Traces {
	var specs []spanSpec
	for _, tr := range traces {
		specs = append(specs, spanSpec{trace: tr, id: f.spanID(), name: "GET /late", kind: ptrace.SpanKindInternal, statusError: withError})
	}
	return request(nil, specs)
}

func (f *fleet) traceID() pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[:8], f.rng.Uint64())
	binary.BigEndian.PutUint64(id[8:], f.rng.Uint64())
	return id
}

func (f *fleet) spanID() pcommon.SpanID {
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], f.rng.Uint64()|1)
	return id
}

// What the samplers decide, computed here as their sources do, so that
// the checks can name the exact traces each must keep.

// maxAdjustedCount is 2^56, the range of OpenTelemetry's randomness and
// thresholds.
const maxAdjustedCount = 1 << 56

// tailProbabilistic reports whether tail_sampling's probabilistic policy
// keeps the trace id at pct percent: without tracestate sampling
// information it hashes salt then the id's 16 bytes with FNV-1a (64
// bits) and keeps hashes at most MaxUint64 × pct/100, the product taken
// with big.Float as the policy does (contrib v0.161.0,
// processor/tailsamplingprocessor/internal/sampling/probabilistic.go:
// hashTraceID, calculateThreshold; salt "" is its "default-hash-seed").
func tailProbabilistic(id pcommon.TraceID, salt string, pct float64) bool {
	if salt == "" {
		salt = "default-hash-seed"
	}
	h := fnv.New64a()
	h.Write([]byte(salt))
	h.Write(id[:])
	bound := new(big.Float).SetInt(new(big.Int).SetUint64(math.MaxUint64))
	threshold, _ := bound.Mul(bound, big.NewFloat(pct/100)).Uint64()
	return h.Sum64() <= threshold
}

// w3cRandomness is a trace id's randomness by W3C trace context level 2:
// its last 56 bits (contrib pkg/sampling TraceIDToRandomness), which the
// probabilistic_sampler's proportional mode decides on.
func w3cRandomness(id pcommon.TraceID) uint64 {
	return binary.BigEndian.Uint64(id[8:]) & (maxAdjustedCount - 1)
}

// hashSeedRandomness is the randomness the probabilistic_sampler's
// hash_seed mode makes of a trace id (contrib v0.165.0,
// processor/probabilisticsamplerprocessor: fnvhasher.go computeHash,
// sampler_mode.go randomnessFromBytes): FNV-1a (32 bits) of the seed's 4
// little-endian bytes then the id, 14 bits of it spread over 56.
func hashSeedRandomness(id pcommon.TraceID, hashSeed uint32) uint64 {
	h := fnv.New32a()
	var s [4]byte
	binary.LittleEndian.PutUint32(s[:], hashSeed)
	h.Write(s[:])
	h.Write(id[:])
	hashed32 := h.Sum32()
	const buckets = 0x4000
	hashed := uint64(hashed32 & (buckets - 1))
	rprime14 := buckets - 1 - hashed
	unused18 := uint64(hashed32 >> (32 - 14))
	mixed28 := unused18 ^ (unused18 << 10)
	return rprime14<<42 | mixed28<<14 | hashed
}

// thresholdOf is the threshold a th value (1 to 14 hex digits) encodes,
// out of 2^56: a span is kept when its randomness is at least that.
func thresholdOf(th string) uint64 {
	v, err := strconv.ParseUint(th, 16, 64)
	if err != nil || len(th) == 0 || len(th) > 14 {
		panic(fmt.Sprintf("th %q: %v", th, err))
	}
	return v << (4 * (14 - len(th)))
}

// probabilityOf is the sampling probability a th value says: 1 - T/2^56.
func probabilityOf(th string) float64 {
	return float64(maxAdjustedCount-thresholdOf(th)) / maxAdjustedCount
}
