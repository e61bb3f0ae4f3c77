package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Sampling: what the fleets' samplers do to the traffic before a reader
// of traces sees it. Sample applies a Sampler to exports (or to the traces
// of a Result) and returns what is left, with what each sampler writes on
// the spans it keeps, and the stats a test needs to compare estimates
// against the unsampled truth (the input, left unchanged).
//
//   - Probabilistic: the collector's probabilistic_sampler processor, span
//     by span (a decision from the trace id, so every span of a trace gets
//     the same one).
//   - Head: an SDK at each root service with a parent-based probability
//     sampler, the root's decision and its ot=th on every span of the
//     trace; or the Jaeger client's probabilistic sampler, with its
//     sampler.type and sampler.param tags on the root span.
//   - Tail: keep every trace with a failed span and a fraction of the
//     others, recording the adjusted count as an attribute, or not.
//   - Corrupt: any of them, then a fraction of the kept traces made
//     unreadable (malformed tracestate, impossible sampler.param or
//     adjusted counts).

// Attribute keys written by the samplers.
const (
	// AdjustedCountKey is the span (or resource) attribute Tail writes:
	// how many traces of the traffic a kept trace stands for, 1/q.
	AdjustedCountKey = "sampling.adjusted_count"
	// SamplerTypeKey and SamplerParamKey are the Jaeger client's sampler
	// tags on a root span: "probabilistic" and the probability (a double).
	SamplerTypeKey  = "sampler.type"
	SamplerParamKey = "sampler.param"
	// DefaultPrecision is the collector's default sampling_precision: the
	// hex digits of a threshold (more near 0 and 1).
	DefaultPrecision = 4
	// DefaultTailSalt is the tail_sampling processor's default hash_salt
	// for its probabilistic policy.
	DefaultTailSalt = "default-hash-seed"
)

// Sampler is a way of sampling traces: Probabilistic, Head, Tail or
// Corrupt.
type Sampler interface {
	compile() (sampler, error)
}

type sampler interface {
	// sample decides trace t (every span's drop flag) and writes on the
	// spans it keeps; it fills t.st.
	sample(r *sampleRun, t *sampleTrace)
}

// SampleStats says what Sample saw and kept.
type SampleStats struct {
	Traces, Kept       int // trace ids seen; those with a span kept
	Spans, KeptSpans   int
	Failed, KeptFailed int // traces with a span of status ERROR
	Corrupted          int // kept traces whose record Corrupt spoiled
	// PerTrace holds every trace, in order of first appearance.
	PerTrace []TraceSample

	byID map[pcommon.TraceID]int
}

// TraceSample is what happened to one trace.
type TraceSample struct {
	ID pcommon.TraceID
	// Root is the service.name of the trace's root span (the first span
	// without a parent), "" when the input has none.
	Root             string
	Spans, KeptSpans int
	// Failed: a span of the trace has status ERROR (what tail sampling
	// keeps).
	Failed bool
	Kept   bool // KeptSpans > 0
	// P is the probability with which the sampler keeps such a trace,
	// kept or not: the probability of the threshold it decided on (the
	// inverse of the adjusted count it records on a kept trace; for
	// thresholds, exactly the chance that random trace ids pass). 1 for a
	// trace kept for its failure or left alone (Head without a rate for
	// its root); 0 when the sampler dropped it for unreadable input.
	// Horvitz–Thompson: Σ over kept traces of x/P estimates Σ of x over
	// all of them, without bias.
	P float64
	// Recorded: the kept spans carry P (an ot=th, Jaeger tags or an
	// adjusted-count attribute). False for Tail with RecordNone, for roots
	// Head leaves alone, and for traces Corrupt spoiled.
	Recorded   bool
	Corruption Corruption
}

// Trace returns the stats of trace id.
func (st *SampleStats) Trace(id pcommon.TraceID) (TraceSample, bool) {
	i, ok := st.byID[id]
	if !ok {
		return TraceSample{}, false
	}
	return st.PerTrace[i], true
}

// Estimate is the Horvitz–Thompson estimate of Σ f over every trace seen:
// Σ f(t)/t.P over the kept traces.
func (st *SampleStats) Estimate(f func(TraceSample) float64) float64 {
	var s float64
	for _, t := range st.PerTrace {
		if t.Kept && t.P > 0 {
			s += f(t) / t.P
		}
	}
	return s
}

// TraceData returns the data of every simulated trace (Trace.Data, not
// copied), in order: Sample's input when exports are not needed.
func (r *Result) TraceData() []ptrace.Traces {
	out := make([]ptrace.Traces, len(r.Traces))
	for i := range r.Traces {
		out[i] = r.Traces[i].Data
	}
	return out
}

// Sample applies s to a copy of batches (exports, or Result.TraceData) and
// returns the kept spans, in their batches, resources and order (a batch
// left empty is dropped), and what happened to every trace. Head and Tail
// decide a trace from all of its spans in batches, wherever they are;
// Probabilistic decides span by span, as the processor does. batches are
// unchanged: they are the truth to compare against. Sample is
// deterministic: the decisions depend on the trace ids and the samplers'
// fields only.
func Sample(batches []ptrace.Traces, s Sampler) ([]ptrace.Traces, *SampleStats, error) {
	if s == nil {
		return nil, nil, errors.New("sim: nil Sampler")
	}
	smp, err := s.compile()
	if err != nil {
		return nil, nil, err
	}
	out := make([]ptrace.Traces, len(batches))
	for i, b := range batches {
		out[i] = ptrace.NewTraces()
		b.CopyTo(out[i])
	}
	r := &sampleRun{resCount: map[int]float64{}}
	st := &SampleStats{byID: map[pcommon.TraceID]int{}}
	var traces []*sampleTrace
	total := 0
	eachSpan(out, func(res int, rs ptrace.ResourceSpans, sp ptrace.Span) {
		ti, ok := st.byID[sp.TraceID()]
		if !ok {
			ti = len(traces)
			st.byID[sp.TraceID()] = ti
			traces = append(traces, &sampleTrace{root: -1})
			traces[ti].st.ID = sp.TraceID()
		}
		t := traces[ti]
		if t.root < 0 && sp.ParentSpanID().IsEmpty() {
			t.root = len(t.spans)
			name, _ := rs.Resource().Attributes().Get("service.name")
			t.st.Root = name.Str()
		}
		if sp.Status().Code() == ptrace.StatusCodeError {
			t.st.Failed = true
		}
		t.spans = append(t.spans, spanRef{span: sp, res: rs.Resource(), resKey: res})
		total++
	})
	for _, t := range traces {
		smp.sample(r, t)
		if r.err != nil {
			return nil, nil, r.err
		}
	}
	// Spans in walk order, to remove the dropped ones.
	flat := make([]*spanRef, 0, total)
	next := make([]int, len(traces))
	eachSpan(out, func(_ int, _ ptrace.ResourceSpans, sp ptrace.Span) {
		ti := st.byID[sp.TraceID()]
		flat = append(flat, &traces[ti].spans[next[ti]])
		next[ti]++
	})
	n := 0
	kept := out[:0]
	for _, b := range out {
		b.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				ss.Spans().RemoveIf(func(ptrace.Span) bool {
					n++
					return flat[n-1].drop
				})
				return ss.Spans().Len() == 0
			})
			return rs.ScopeSpans().Len() == 0
		})
		if b.ResourceSpans().Len() > 0 {
			kept = append(kept, b)
		}
	}
	for _, t := range traces {
		st.add(t)
	}
	return kept, st, nil
}

// eachSpan calls fn with every span of batches, in walk order, with its
// resource spans and their index among every batch's.
func eachSpan(batches []ptrace.Traces, fn func(res int, rs ptrace.ResourceSpans, sp ptrace.Span)) {
	res := 0
	for _, b := range batches {
		rss := b.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					fn(res, rs, spans.At(k))
				}
			}
			res++
		}
	}
}

// add counts trace t, sampled, in st.
func (st *SampleStats) add(t *sampleTrace) {
	t.st.Spans = len(t.spans)
	for i := range t.spans {
		if !t.spans[i].drop {
			t.st.KeptSpans++
		}
	}
	t.st.Kept = t.st.KeptSpans > 0
	st.Traces++
	st.Spans += t.st.Spans
	st.KeptSpans += t.st.KeptSpans
	if t.st.Kept {
		st.Kept++
	}
	if t.st.Failed {
		st.Failed++
		if t.st.Kept {
			st.KeptFailed++
		}
	}
	if t.st.Corruption != CorruptNone {
		st.Corrupted++
	}
	st.PerTrace = append(st.PerTrace, t.st)
}

type sampleRun struct {
	// resCount: the adjusted count written on each resource (by index in
	// walk order), for RecordResource.
	resCount map[int]float64
	err      error
}

type sampleTrace struct {
	spans []spanRef
	root  int // index in spans of the root span, -1 if none
	st    TraceSample
}

type spanRef struct {
	span   ptrace.Span
	res    pcommon.Resource
	resKey int
	drop   bool
}

// rootOrFirst is the index of the span that carries a trace-level
// record: the root span, else the first span.
func (t *sampleTrace) rootOrFirst() int {
	return max(t.root, 0)
}

func (t *sampleTrace) dropAll() {
	for i := range t.spans {
		t.spans[i].drop = true
	}
}

// low56 is the randomness of a trace id by the W3C: its last 7 bytes.
func low56(id pcommon.TraceID) uint64 {
	return binary.BigEndian.Uint64(id[8:]) & (maxAdjusted - 1)
}

// --- The collector's probabilistic_sampler processor ---------------------

// ProbMode is the probabilistic_sampler's mode.
type ProbMode uint8

// Modes. The zero value is the collector's default.
const (
	// ModeHashSeed ("hash_seed", the collector's default when mode is not
	// set, whatever hash_seed is): 14 bits of an FNV-1a hash of the seed
	// and the trace id decide, against floor(percentage × 163.84) out of
	// 2^14 computed in float32; a kept span gets rv (the hash as
	// randomness) and th: 10 % writes ot=rv:…;th:e668. A span that arrives
	// with an rv or a th is refused (an error, see FailOpen).
	ModeHashSeed ProbMode = iota
	// ModeProportional ("proportional"): the randomness is the rv of the
	// tracestate, else the trace id's last 56 bits; the threshold is that
	// of (the arriving th's probability, or 1) × percentage, at Precision;
	// a span is kept when randomness ≥ threshold, and gets that th.
	ModeProportional
	// ModeEqualizing ("equalizing"): the threshold is that of percentage,
	// or the arriving th if higher.
	ModeEqualizing
)

var probModeNames = [...]string{"hash_seed", "proportional", "equalizing"}

func (m ProbMode) String() string {
	if int(m) < len(probModeNames) {
		return probModeNames[m]
	}
	return "ProbMode(" + fmt.Sprint(uint8(m)) + ")"
}

// Probabilistic is the collector's probabilistic_sampler processor
// (opentelemetry-collector-contrib, processor/probabilisticsamplerprocessor:
// sampler_mode.go makeSampler and commonShouldSampleLogic, tracesprocessor.go
// randomnessFromSpan, fnvhasher.go, factory.go; the expected values of
// tracesprocessor_test.go; read at the newest revisions available, 2025 or
// later, not at the v0.165.0 tag itself: createDefaultConfig sets
// FailClosed true, Mode unset (→ hash_seed, whatever hash_seed is) and
// SamplingPrecision 4, as since the modes came in v0.102). Each span is
// decided alone, as the processor does, from its trace id and tracestate:
//
//   - randomness: the hash (hash_seed) or rv or the trace id (otherwise);
//     an unreadable tracestate, an empty trace id, an arriving th the
//     randomness does not pass (cleared), or, in hash_seed mode, an
//     arriving rv or th are errors: the span is dropped, or kept
//     untouched with FailOpen (fail_closed: false; an inconsistent th is
//     then replaced by th:0).
//   - a kept span's tracestate is written back: ot first (rv, th, its
//     other sub-keys), then the other vendors' members in order; a th is
//     never lowered (probability never raised).
//
// The sampling.priority attribute is not read (sim never writes it).
type Probabilistic struct {
	// Percentage is sampling_percentage (a float32, as configured): ≥ 100
	// keeps everything, 0 nothing.
	Percentage float32
	Mode       ProbMode
	// Precision is sampling_precision, 1 to 14 (0: DefaultPrecision). The
	// hash_seed mode ignores it.
	Precision int
	// HashSeed is hash_seed (hash_seed mode).
	HashSeed uint32
	// FailOpen is fail_closed: false.
	FailOpen bool
}

type probSampler struct {
	Probabilistic
	never  bool
	ratio  float64
	thresh uint64 // hash_seed, equalizing
}

// hashScale is 2^14/100: hash buckets per percent.
const hashScale = 0x4000 / 100.0

func (p Probabilistic) compile() (sampler, error) {
	pct := p.Percentage
	if pct < 0 || math.IsNaN(float64(pct)) || math.IsInf(float64(pct), 0) {
		return nil, fmt.Errorf("sim: Probabilistic: Percentage %v", pct)
	}
	if p.Precision < 0 || p.Precision > hexDigits {
		return nil, fmt.Errorf("sim: Probabilistic: Precision %d outside 1..14", p.Precision)
	}
	if p.Mode > ModeEqualizing {
		return nil, fmt.Errorf("sim: Probabilistic: unknown mode %d", p.Mode)
	}
	if p.Precision == 0 {
		p.Precision = DefaultPrecision
	}
	ps := &probSampler{Probabilistic: p}
	pct = min(pct, 100)
	if pct == 0 {
		ps.never = true
		return ps, nil
	}
	ps.ratio = max(float64(pct)/100, 1/float64(maxAdjusted))
	switch p.Mode {
	case ModeHashSeed:
		// In float32, truncated: the processor's legacy arithmetic.
		scaled := uint32(pct * hashScale)
		if scaled == 0 {
			ps.never = true
			return ps, nil
		}
		ps.thresh = uint64(0x4000-scaled) << 42
	case ModeEqualizing:
		ps.thresh, _ = probabilityThreshold(ps.ratio, p.Precision)
	}
	return ps, nil
}

// hashRandomness is the hash_seed mode's randomness of a trace id: the
// FNV-1a hash (32 bits) of the seed (4 bytes, little-endian) and the 16
// bytes of the id; its low 14 bits h give the top 14 bits of the
// randomness as 2^14-1-h (so that "h < scaled" reads "randomness ≥
// threshold"), 28 bits mixed from the other 18 follow, then h.
func hashRandomness(id pcommon.TraceID, seed uint32) uint64 {
	f := fnv.New32a()
	var s [4]byte
	binary.LittleEndian.PutUint32(s[:], seed)
	f.Write(s[:])
	f.Write(id[:])
	x := f.Sum32()
	h := uint64(x & 0x3fff)
	rest := uint64(x >> 14)
	return (0x3fff-h)<<42 | (rest^rest<<10)<<14 | h
}

// errSampling marks the processor's refusals (dropped, or kept untouched
// with FailOpen).
var errSampling = errors.New("sampling error")

// span decides one span and rewrites its tracestate when it keeps it. It
// returns whether it keeps it and the probability of the threshold decided
// (recorded: the span's tracestate now says so).
func (ps *probSampler) span(sp ptrace.Span) (keep bool, p float64, recorded bool) {
	ts, err := parseTraceState(sp.TraceState().AsRaw())
	carrier := err == nil
	id := sp.TraceID()
	rnd, haveRnd := maxAdjusted-1, false
	switch {
	case ps.never:
		haveRnd = true // the processor's never-sampler fakes full randomness
	case ps.Mode == ModeHashSeed:
		if !id.IsEmpty() {
			rnd, haveRnd = hashRandomness(id, ps.HashSeed), true
		}
		switch {
		case !carrier:
		case ts.hasRV(), ts.hasTH():
			err, carrier = errSampling, false
		default:
			ts.setRV(rnd)
		}
	default:
		switch {
		case !carrier:
		case ts.hasRV():
			rnd, haveRnd = ts.rnd, true
		case !id.IsEmpty():
			rnd, haveRnd = low56(id), true
		}
	}
	if err == nil {
		switch {
		case !haveRnd:
			err = errSampling
		case carrier && ts.hasTH() && ts.thr > rnd:
			ts.clearTH()
			err = errSampling
		}
	}
	var t uint64
	switch {
	case err != nil && ps.FailOpen:
		t = 0
	case err != nil:
		t = maxAdjusted
	case ps.never:
		t = maxAdjusted
	case ps.Mode == ModeHashSeed:
		t = ps.thresh
	case ps.Mode == ModeEqualizing:
		t = ps.thresh
		if ts.hasTH() && ts.thr > t {
			t = ts.thr
		}
	default:
		in := 1.0
		if ts.hasTH() {
			in = thresholdProbability(ts.thr)
		}
		var ok bool
		if t, ok = probabilityThreshold(in*ps.ratio, ps.Precision); !ok {
			t = maxAdjusted
		}
	}
	keep = t <= rnd
	if keep && carrier {
		ts.updateTH(t)
		sp.TraceState().FromRaw(ts.String())
		return true, thresholdProbability(ts.thr), true
	}
	return keep, thresholdProbability(t), false
}

func (ps *probSampler) sample(_ *sampleRun, t *sampleTrace) {
	at := t.rootOrFirst()
	for i := range t.spans {
		keep, p, rec := ps.span(t.spans[i].span)
		t.spans[i].drop = !keep
		if i == at {
			t.st.P, t.st.Recorded = p, rec
		}
	}
}

// --- Head sampling at the roots ----------------------------------------

// Head is head sampling by the SDK of each root service, parent-based:
// the root decides, every span of the trace follows its decision and
// carries what it wrote. The root is the trace's span without a parent
// (a fragment's parentless CLIENT span included), its service its
// resource's service.name.
//
// OpenTelemetry (default): a consistent probability sampler at
// probability p. The threshold is p's at Precision (the collector's
// rounding); the randomness the root's rv, else the trace id's last 56
// bits; the trace is kept when randomness ≥ threshold, and every span gets
// ot=th:<threshold> in its tracestate (other members kept; an unreadable
// tracestate is replaced). P is the threshold's probability, which is p
// rounded to Precision.
//
// Jaeger: the Jaeger client's probabilistic sampler: kept when the last
// 8 bytes of the trace id, top bit cleared, are ≤ uint64(float64(2^63-1)
// × p); the root span gets sampler.type=probabilistic and sampler.param=p
// (a double), no tracestate. P is p.
type Head struct {
	// Rates: each root service's probability, in [0, 1]. A root not listed
	// samples nothing out and records nothing (an SDK without a sampler),
	// as does a trace whose root span is not in the input.
	Rates map[string]float64
	// Precision: hex digits of the thresholds, 1 to 14 (0:
	// DefaultPrecision).
	Precision int
	Jaeger    bool
}

type headSampler struct {
	Head
	thresh map[string]uint64
}

func (h Head) compile() (sampler, error) {
	if h.Precision < 0 || h.Precision > hexDigits {
		return nil, fmt.Errorf("sim: Head: Precision %d outside 1..14", h.Precision)
	}
	if h.Precision == 0 {
		h.Precision = DefaultPrecision
	}
	hs := &headSampler{Head: h, thresh: map[string]uint64{}}
	for svc, p := range h.Rates {
		if !(p >= 0 && p <= 1) {
			return nil, fmt.Errorf("sim: Head: rate %v of %q outside [0,1]", p, svc)
		}
		t, ok := probabilityThreshold(p, h.Precision)
		if !ok {
			t = maxAdjusted
		}
		hs.thresh[svc] = t
	}
	return hs, nil
}

func (hs *headSampler) sample(_ *sampleRun, t *sampleTrace) {
	p, ok := hs.Rates[t.st.Root]
	if t.root < 0 || !ok {
		t.st.P = 1
		return
	}
	root := t.spans[t.root].span
	if hs.Jaeger {
		const maxRandom = 1<<63 - 1
		boundary := uint64(float64(maxRandom) * p)
		t.st.P = p
		if boundary < binary.BigEndian.Uint64(t.st.ID[8:])&maxRandom {
			t.dropAll()
			return
		}
		a := root.Attributes()
		a.PutStr(SamplerTypeKey, "probabilistic")
		a.PutDouble(SamplerParamKey, p)
		t.st.Recorded = true
		return
	}
	th := hs.thresh[t.st.Root]
	t.st.P = thresholdProbability(th)
	rnd := low56(t.st.ID)
	if ts, err := parseTraceState(root.TraceState().AsRaw()); err == nil && ts.hasRV() {
		rnd = ts.rnd
	}
	if th > rnd {
		t.dropAll()
		return
	}
	for i := range t.spans {
		ts := t.spans[i].span.TraceState()
		st, err := parseTraceState(ts.AsRaw())
		if err != nil {
			st = traceState{}
		}
		st.thr, st.th = th, tValue(th)
		ts.FromRaw(st.String())
	}
	t.st.Recorded = true
}

// --- Tail sampling -------------------------------------------------------

// Record is where Tail records the adjusted count of a kept trace.
type Record uint8

// Records.
const (
	// RecordEverySpan: sampling.adjusted_count on every span.
	RecordEverySpan Record = iota
	// RecordRootSpan: on the root span only (the first span of the trace
	// without a parent; if the input has none, nowhere).
	RecordRootSpan
	// RecordResource: on the resource of every resource spans holding a
	// kept span (Sample fails if one holds traces of different counts).
	RecordResource
	// RecordNone: nothing; tail sampling a reader cannot tell from
	// unsampled traffic but by the missing traces.
	RecordNone
)

// Tail is tail sampling as the collector's tail_sampling processor does
// with two policies, status_code [ERROR] and probabilistic
// (processor/tailsamplingprocessor/internal/sampling: status_code.go,
// probabilistic.go): a trace with any span of status ERROR is kept, with
// an adjusted count of 1; of the others, those whose FNV-1a (64 bits) of
// Salt and the 16 bytes of the trace id is ≤ ⌊(2^64-1) × Fraction⌋ (in
// 64-bit big.Float) are kept, with an adjusted count of 1/Fraction,
// written as a double where Record says.
type Tail struct {
	// Fraction q, in (0, 1], of the traces without a failure kept.
	Fraction float64
	// Salt is the probabilistic policy's hash_salt ("": DefaultTailSalt).
	Salt   string
	Record Record
}

type tailSampler struct {
	Tail
	thresh uint64
}

func (tl Tail) compile() (sampler, error) {
	if !(tl.Fraction > 0 && tl.Fraction <= 1) {
		return nil, fmt.Errorf("sim: Tail: Fraction %v outside (0,1]", tl.Fraction)
	}
	if tl.Record > RecordNone {
		return nil, fmt.Errorf("sim: Tail: unknown Record %d", tl.Record)
	}
	if tl.Salt == "" {
		tl.Salt = DefaultTailSalt
	}
	b := new(big.Float).SetInt(new(big.Int).SetUint64(math.MaxUint64))
	thresh, _ := b.Mul(b, big.NewFloat(tl.Fraction)).Uint64()
	return &tailSampler{Tail: tl, thresh: thresh}, nil
}

func (ts *tailSampler) sample(r *sampleRun, t *sampleTrace) {
	count := 1.0
	t.st.P = 1
	if !t.st.Failed {
		f := fnv.New64a()
		f.Write([]byte(ts.Salt))
		f.Write(t.st.ID[:])
		t.st.P = ts.Fraction
		if f.Sum64() > ts.thresh {
			t.dropAll()
			return
		}
		count = 1 / ts.Fraction
	}
	t.st.Recorded = ts.Record != RecordNone && (ts.Record != RecordRootSpan || t.root >= 0)
	switch ts.Record {
	case RecordEverySpan:
		for i := range t.spans {
			t.spans[i].span.Attributes().PutDouble(AdjustedCountKey, count)
		}
	case RecordRootSpan:
		if t.root >= 0 {
			t.spans[t.root].span.Attributes().PutDouble(AdjustedCountKey, count)
		}
	case RecordResource:
		for i := range t.spans {
			s := &t.spans[i]
			if c, ok := r.resCount[s.resKey]; ok && c != count {
				r.err = fmt.Errorf("sim: Tail: RecordResource: a resource holds spans of traces with adjusted counts %v and %v", c, count)
				return
			}
			r.resCount[s.resKey] = count
			s.res.Attributes().PutDouble(AdjustedCountKey, count)
		}
	}
}

// --- Bad input ---------------------------------------------------------

// Corruption is a way of spoiling a trace's sampling record.
type Corruption uint8

// Corruptions. Those of the tracestate replace the tracestate of every
// kept span; those of sampler.param set sampler.type=probabilistic and
// the bad sampler.param on the root span (else the first kept span);
// those of the adjusted count set it on every kept span. Each first
// removes what the trace recorded (tracestate, sampler tags, adjusted
// count on spans and resources).
const (
	CorruptNone    Corruption = iota
	ThNotHex                  // tracestate ot=th:zz
	ThEmpty                   // ot=th:
	ThTooLong                 // ot=th:123456789abcdef0 (16 digits)
	ThZero                    // ot=th:0: valid, probability 1, whatever the sampling was
	ThDuplicateOT             // ot=th:8,ot=th:c: two ot members (the collector reads the last)
	ThDuplicateKey            // ot=th:8;th:c: th twice in ot (the collector reads the last)
	ThHuge                    // ot=th:8 then a 4000-byte member: over the 1024-byte limit
	ParamZero                 // sampler.param 0 (a double)
	ParamNegative             // sampler.param -0.25
	ParamAboveOne             // sampler.param 1.5
	ParamNaN                  // sampler.param "NaN" (a string)
	ParamGarbage              // sampler.param "one in ten" (a string)
	CountZero                 // sampling.adjusted_count 0 (a double)
	CountNegative             // sampling.adjusted_count -4 (a double)
	CountGarbage              // sampling.adjusted_count "lots" (a string)
	CountHuge                 // sampling.adjusted_count: a 65536-byte string of digits
	numCorruptions
)

var corruptionNames = [...]string{"none", "th-not-hex", "th-empty", "th-too-long", "th-zero",
	"th-duplicate-ot", "th-duplicate-key", "th-huge", "param-zero", "param-negative",
	"param-above-one", "param-nan", "param-garbage", "count-zero", "count-negative",
	"count-garbage", "count-huge"}

func (c Corruption) String() string {
	if c < numCorruptions {
		return corruptionNames[c]
	}
	return "Corruption(" + fmt.Sprint(uint8(c)) + ")"
}

// Corruptions returns every corruption (CorruptNone excluded), in order.
func Corruptions() []Corruption {
	out := make([]Corruption, 0, numCorruptions-1)
	for c := ThNotHex; c < numCorruptions; c++ {
		out = append(out, c)
	}
	return out
}

// hugeTraceState is ot=th:8 and one 4000-byte member.
var hugeTraceState = "ot=th:8,huge=" + strings.Repeat("x", 4000)

// Corrupt applies Sampler (nil: keep every trace, record nothing), then
// spoils the record of a Fraction of the kept traces, chosen and given a
// corruption (in turn among Kinds, nil for all) by a hash of Seed and the
// trace id.
type Corrupt struct {
	Sampler  Sampler
	Fraction float64
	Seed     uint64
	Kinds    []Corruption
}

type corruptSampler struct {
	Corrupt
	inner sampler
}

func (c Corrupt) compile() (sampler, error) {
	if !(c.Fraction >= 0 && c.Fraction <= 1) {
		return nil, fmt.Errorf("sim: Corrupt: Fraction %v outside [0,1]", c.Fraction)
	}
	for _, k := range c.Kinds {
		if k == CorruptNone || k >= numCorruptions {
			return nil, fmt.Errorf("sim: Corrupt: kind %v", k)
		}
	}
	if c.Kinds == nil {
		c.Kinds = Corruptions()
	}
	if len(c.Kinds) == 0 {
		return nil, errors.New("sim: Corrupt: empty Kinds")
	}
	cs := &corruptSampler{Corrupt: c}
	if c.Sampler != nil {
		var err error
		if cs.inner, err = c.Sampler.compile(); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

func (cs *corruptSampler) sample(r *sampleRun, t *sampleTrace) {
	if cs.inner != nil {
		cs.inner.sample(r, t)
		if r.err != nil {
			return
		}
	} else {
		t.st.P = 1
	}
	first := -1
	for i := range t.spans {
		if !t.spans[i].drop {
			first = i
			break
		}
	}
	if first < 0 {
		return
	}
	h := mix64(cs.Seed*golden ^ binary.BigEndian.Uint64(t.st.ID[:8]) ^ mix64(binary.BigEndian.Uint64(t.st.ID[8:])))
	if float64(h>>11)/(1<<53) >= cs.Fraction {
		return
	}
	kind := cs.Kinds[mix64(h)%uint64(len(cs.Kinds))]
	t.st.Corruption, t.st.Recorded = kind, false
	for i := range t.spans {
		s := &t.spans[i]
		if s.drop {
			continue
		}
		s.span.TraceState().FromRaw("")
		a := s.span.Attributes()
		a.Remove(SamplerTypeKey)
		a.Remove(SamplerParamKey)
		a.Remove(AdjustedCountKey)
		s.res.Attributes().Remove(AdjustedCountKey)
	}
	at := first
	if t.root >= 0 && !t.spans[t.root].drop {
		at = t.root
	}
	for i := range t.spans {
		s := &t.spans[i]
		if s.drop {
			continue
		}
		a := s.span.Attributes()
		if raw, ok := corruptTraceStates[kind]; ok {
			s.span.TraceState().FromRaw(raw)
		}
		switch kind {
		case ParamZero, ParamNegative, ParamAboveOne, ParamNaN, ParamGarbage:
			if i != at {
				continue
			}
			a.PutStr(SamplerTypeKey, "probabilistic")
			switch kind {
			case ParamZero:
				a.PutDouble(SamplerParamKey, 0)
			case ParamNegative:
				a.PutDouble(SamplerParamKey, -0.25)
			case ParamAboveOne:
				a.PutDouble(SamplerParamKey, 1.5)
			case ParamNaN:
				a.PutStr(SamplerParamKey, "NaN")
			default:
				a.PutStr(SamplerParamKey, "one in ten")
			}
		case CountZero:
			a.PutDouble(AdjustedCountKey, 0)
		case CountNegative:
			a.PutDouble(AdjustedCountKey, -4)
		case CountGarbage:
			a.PutStr(AdjustedCountKey, "lots")
		case CountHuge:
			a.PutStr(AdjustedCountKey, hugeCount)
		}
	}
}

var hugeCount = strings.Repeat("9", 1<<16)

var corruptTraceStates = map[Corruption]string{
	ThNotHex:       "ot=th:zz",
	ThEmpty:        "ot=th:",
	ThTooLong:      "ot=th:123456789abcdef0",
	ThZero:         "ot=th:0",
	ThDuplicateOT:  "ot=th:8,ot=th:c",
	ThDuplicateKey: "ot=th:8;th:c",
	ThHuge:         hugeTraceState,
}
