package ingest

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stormradius/stormradius/graph"
)

// Sampling (docs/SPEC.md §2, "sampling"): how many spans of the traffic a
// decoded span stands for, from the first source present, in this order:
//
//  1. the span's adjusted-count attribute (SamplingConfig.AdjustedCountKey);
//  2. the same attribute on its resource;
//  3. the W3C tracestate's OpenTelemetry threshold, ot=th:T
//     (ParseTraceStateThreshold);
//  4. Jaeger's sampler.type and sampler.param tags;
//  5. the probability configured for its service
//     (SamplingConfig.ServiceProbability);
//  6. the probability configured for its input (SamplingConfig.Probability).
//
// A source that is present but unusable makes the span
// graph.SamplingInvalid (adjusted count 1): it does not fall through to
// the next source.

// DefaultAdjustedCountKey is the attribute read for an adjusted count when
// SamplingConfig.AdjustedCountKey is empty.
const DefaultAdjustedCountKey = "sampling.adjusted_count"

// NoAdjustedCountKey as SamplingConfig.AdjustedCountKey reads no
// adjusted-count attribute at all.
const NoAdjustedCountKey = "none"

// SamplingConfig says where the decoder reads, or what it assumes of, each
// span's sampling probability (docs/SPEC.md §2, "sampling"). The zero
// value reads DefaultAdjustedCountKey and assumes nothing.
type SamplingConfig struct {
	// AdjustedCountKey is the attribute, of the span or else of its
	// resource, that holds the span's adjusted count (1/p, ≥ 1: a
	// double, an integer or a numeric string), as Tempo's
	// span_multiplier_key. Empty means DefaultAdjustedCountKey;
	// NoAdjustedCountKey ("none") reads none.
	AdjustedCountKey string
	// Probability is the probability every span of the input was sampled
	// with when neither it nor its service says otherwise (SDKs that
	// record nothing): 0 < p ≤ 1, or 0 for none.
	Probability float64
	// ServiceProbability is the probability the spans of a service (by
	// service.name) were sampled with when they record none; it comes
	// before Probability. Every value is 0 < p ≤ 1.
	ServiceProbability map[string]float64
}

// Validate reports what is wrong with c: a probability out of (0, 1] (0
// is allowed for Probability: none), a service with an empty name.
func (c SamplingConfig) Validate() error {
	var errs []error
	if c.Probability != 0 {
		if err := checkProbability(c.Probability); err != nil {
			errs = append(errs, fmt.Errorf("sampling probability: %w", err))
		}
	}
	for svc, p := range c.ServiceProbability {
		if svc == "" {
			errs = append(errs, errors.New("sampling probability for a service with an empty name"))
		}
		if err := checkProbability(p); err != nil {
			errs = append(errs, fmt.Errorf("sampling probability of service %q: %w", svc, err))
		}
	}
	return errors.Join(errs...)
}

// checkProbability reports whether p is a probability a span can have been
// sampled with: 0 < p ≤ 1 (and 1/p finite).
func checkProbability(p float64) error {
	if !(p > 0 && p <= 1) || math.IsInf(1/p, 0) {
		return fmt.Errorf("%v: want 0 < p ≤ 1", p)
	}
	return nil
}

// countOfProbability is the adjusted count of a configured probability,
// 0 when it is not one (Validate says so; the decoder ignores it).
func countOfProbability(p float64) float64 {
	if checkProbability(p) != nil {
		return 0
	}
	return 1 / p
}

// ParseServiceProbabilities parses "svc=P,svc2=P" (spaces around the
// items allowed; an empty string is an empty map) into a map for
// SamplingConfig.ServiceProbability, checking each probability.
func ParseServiceProbabilities(s string) (map[string]float64, error) {
	m := map[string]float64{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndexByte(item, '=')
		if i < 0 {
			return nil, fmt.Errorf("%q: want service=probability", item)
		}
		svc, ps := strings.TrimSpace(item[:i]), strings.TrimSpace(item[i+1:])
		if svc == "" {
			return nil, fmt.Errorf("%q: no service name", item)
		}
		p, err := strconv.ParseFloat(ps, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not a number", item, ps)
		}
		if err := checkProbability(p); err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		if _, dup := m[svc]; dup {
			return nil, fmt.Errorf("service %q given twice", svc)
		}
		m[svc] = p
	}
	return m, nil
}

// The W3C tracestate's bounds (https://www.w3.org/TR/trace-context/):
// at most 32 list members, keys and values of at most 256 characters; and
// OpenTelemetry's: its ot member's value at most 256 characters.
const (
	maxTraceStateMembers = 32
	// maxMemberScan bounds the bytes looked at for one list member (a
	// key, '=', a value, and blanks around them): a longer one ends the
	// search.
	maxMemberScan = 1024
	maxOTelValue  = 256
	// thresholdDigits is the most hex digits of a th value: 56 bits.
	thresholdDigits = 14
)

// ParseTraceStateThreshold reads the sampling threshold of the W3C
// tracestate ts, as OpenTelemetry's probability sampling writes it in the
// ot list member: ot=th:T, T 1 to 14 hex digits, right-padded with zeros
// to 14, the rejection threshold out of 2^56; the span was sampled with
// probability 1 − T/2^56, and stands for 2^56/(2^56 − T) spans: the
// adjusted count returned (ot=th:8: 2; ot=th:0: 1).
//
// present says that ts holds an ot member with a th sub-key, or an ot
// member that cannot be read; ok then says whether it is well formed. An
// ot member's value must be a list of key:value pairs separated by ';'
// (keys a lowercase letter then lowercase letters and digits; values
// letters, digits, '.', '_' and '-'), with th at most once, of at most
// 256 characters; th's value 1 to 14 hex digits (either case, as the
// OpenTelemetry specification's hexdigit and the collector's parser
// have it). rv and every other sub-key are ignored: an ot member without
// th is absent.
//
// The list's members are split at ',', with blanks (spaces, tabs) around
// them ignored and empty members skipped; other vendors' members are not
// checked. Only the first ot member counts, and only the first 32
// non-empty members are looked at. ts may be of any size: no more of it
// is read than it takes to find the ot member, and each member within 1
// KiB: a longer one ends the search (unusable when what was read of it
// starts with ot=, blanks aside; else absent). It allocates nothing.
func ParseTraceStateThreshold(ts string) (adjusted float64, present, ok bool) {
	// What SDKs write: ot=th:T alone.
	if len(ts) > 6 && len(ts) <= 6+thresholdDigits && ts[:6] == "ot=th:" {
		if t, isHex := threshold(ts[6:]); isHex {
			return t, true, true
		}
	}
	// What the collector's probabilistic sampler writes in its default
	// mode (hash_seed): ot=rv:R;th:T, R its 14 hex digits of randomness.
	const rvth = len("ot=rv:") + randomnessDigits + len(";th:")
	if len(ts) > rvth && len(ts) <= rvth+thresholdDigits && ts[:6] == "ot=rv:" && ts[rvth-4:rvth] == ";th:" && isHex(ts[6:rvth-4]) {
		if t, ok := threshold(ts[rvth:]); ok {
			return t, true, true
		}
	}
	v, found, overlong := otMember(ts)
	if !found {
		return 0, false, false
	}
	if overlong {
		return 0, true, false
	}
	return otThreshold(v)
}

// otMember returns the value of the first ot member of the tracestate ts,
// if there is one among its first maxTraceStateMembers non-empty members;
// overlong says that the search ended at a member longer than
// maxMemberScan (found: it starts with ot=).
func otMember(ts string) (v string, found, overlong bool) {
	for n, i := 0, 0; i < len(ts) && n < maxTraceStateMembers; {
		rest := ts[i:]
		scan := rest[:min(len(rest), maxMemberScan+1)]
		m := rest
		if j := strings.IndexByte(scan, ','); j >= 0 {
			m, i = rest[:j], i+j+1
		} else if len(rest) > maxMemberScan {
			return "", strings.HasPrefix(trimOWS(scan), "ot="), true
		} else {
			i = len(ts)
		}
		m = trimOWS(m)
		if m == "" {
			continue
		}
		if len(m) >= 3 && m[0] == 'o' && m[1] == 't' && m[2] == '=' {
			return m[3:], true, false
		}
		n++
	}
	return "", false, false
}

// trimOWS trims the W3C's optional white space (spaces and tabs).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// otThreshold reads the th sub-key of an ot member's value v.
func otThreshold(v string) (adjusted float64, present, ok bool) {
	if len(v) > maxOTelValue {
		return 0, true, false
	}
	th, hasTh := "", false
	for rest := v; ; {
		sub := rest
		k := strings.IndexByte(rest, ';')
		if k >= 0 {
			sub, rest = rest[:k], rest[k+1:]
		}
		c := strings.IndexByte(sub, ':')
		if c < 0 || !otKey(sub[:c]) || !otValue(sub[c+1:]) {
			return 0, true, false
		}
		if sub[:c] == "th" {
			if hasTh {
				return 0, true, false // keys are unique
			}
			th, hasTh = sub[c+1:], true
		}
		if k < 0 {
			break
		}
	}
	if !hasTh {
		return 0, false, false
	}
	if th == "" || len(th) > thresholdDigits {
		return 0, true, false
	}
	adjusted, ok = threshold(th)
	return adjusted, true, ok
}

// randomnessDigits is the length of an rv value: 14 hex digits.
const randomnessDigits = 14

// isHex reports whether s is made of hex digits.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c|0x20 < 'a' || c|0x20 > 'f') {
			return false
		}
	}
	return true
}

// threshold returns the adjusted count of the th value th, 1 to 14 hex
// digits (len(th) is checked by the caller), and whether it is hex.
func threshold(th string) (float64, bool) {
	var t uint64
	for i := 0; i < len(th); i++ {
		c := th[i]
		var x byte
		switch {
		case '0' <= c && c <= '9':
			x = c - '0'
		case 'a' <= c && c <= 'f':
			x = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			x = c - 'A' + 10
		default:
			return 0, false
		}
		t = t<<4 | uint64(x)
	}
	t <<= 4 * (thresholdDigits - len(th))
	const max = 1 << 56
	return float64(max) / float64(max-t), true
}

// maxMemoTraceState bounds the tracestates Decoder.traceState remembers.
const maxMemoTraceState = 256

// traceState is ParseTraceStateThreshold with a memory of the last
// tracestate read (up to maxMemoTraceState bytes): the spans of a request
// mostly carry the same one.
func (d *Decoder) traceState(ts string) (adjusted float64, present, ok bool) {
	if ts == bytesView(d.tsLast) {
		return d.tsAdjusted, d.tsPresent, d.tsOK
	}
	adjusted, present, ok = ParseTraceStateThreshold(ts)
	if len(ts) <= maxMemoTraceState {
		d.tsLast = append(d.tsLast[:0], ts...)
		d.tsAdjusted, d.tsPresent, d.tsOK = adjusted, present, ok
	}
	return adjusted, present, ok
}

// otKey reports whether k is an OpenTelemetry tracestate key: a lowercase
// letter, then lowercase letters and digits.
func otKey(k string) bool {
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 1; i < len(k); i++ {
		if c := k[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// otValue reports whether v is an OpenTelemetry tracestate value: letters,
// digits, '.', '_' and '-'.
func otValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '.' || c == '_' || c == '-' {
			continue
		}
		return false
	}
	return true
}

// floatOf returns the value as a number: an int, a double, or a string
// holding a decimal number (parseDecimal). It may be NaN or infinite (a
// double).
func floatOf(v *attrVal) (float64, bool) {
	switch v.typ {
	case vInt:
		return float64(int64(v.num)), true
	case vDouble:
		return math.Float64frombits(v.num), true
	case vStr:
		return parseDecimal(v.str)
	}
	return 0, false
}

// parseDecimal parses a decimal number, surrounded by optional spaces:
// an optional sign, digits with an optional fraction, an optional
// exponent. Unlike strconv.ParseFloat it takes no "Inf", "NaN", hex or
// underscores, and allocates nothing unless the number is out of range.
func parseDecimal(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if len(s) > 64 {
		return 0, false
	}
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		e := i
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		}
		if i == e {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// adjustedOf reads an adjusted-count attribute's value: present unless
// it is pdata's empty value; usable when it is a finite number ≥ 1 (an
// int, a double or a numeric string).
func adjustedOf(v *attrVal) (n float64, present, ok bool) {
	if v.typ == vEmpty {
		return 0, false, false
	}
	n, ok = floatOf(v)
	if !ok || !(n >= 1) || math.IsInf(n, 1) {
		return 0, true, false
	}
	return n, true, true
}

// jaeger reads Jaeger's sampler tags: sampler.type probabilistic, with
// sampler.param the probability; const, with sampler.param 1 or true (a
// probability of 1). Other types (ratelimiting, lowerbound, remote…) say
// no probability: absent, as a missing or non-string type is.
func (a *attrSet) jaeger() (n float64, present, ok bool) {
	typ, isStr := a.str(sSamplerType)
	if !isStr {
		return 0, false, false
	}
	typ = strings.TrimSpace(typ)
	probabilistic := strings.EqualFold(typ, "probabilistic")
	if !probabilistic && !strings.EqualFold(typ, "const") {
		return 0, false, false
	}
	if a.has&(1<<sSamplerParam) == 0 {
		return 0, true, false
	}
	v := &a.v[sSamplerParam]
	if !probabilistic { // const: 1 (or true) is a probability of 1
		if p, isNum := floatOf(v); (isNum && p == 1) || (v.typ == vBool && v.num == 1) ||
			(v.typ == vStr && strings.EqualFold(strings.TrimSpace(v.str), "true")) {
			return 1, true, true
		}
		return 0, true, false
	}
	p, isNum := floatOf(v)
	if !isNum || checkProbability(p) != nil {
		return 0, true, false
	}
	return 1 / p, true, true
}

// samplingWeak marks, in a span's Sampling while it is decoded, that what
// it holds came from the span's tracestate or Jaeger tags, or from
// nothing: the resource's adjusted count, or the configured
// probabilities, are still to be applied (resSampling.finish). Without
// it, the span's own adjusted-count attribute decided.
const samplingWeak graph.Sampling = 0x80

// spanSampling sets out's Sampling and AdjustedCount from what the span
// itself records (a, its tracestate ts), marked samplingWeak unless its
// own adjusted-count attribute decided: resSampling.finish completes it.
func (d *Decoder) spanSampling(out *graph.Span, a *attrSet, ts string) {
	if d.countOn && a.has&(1<<d.countSlot) != 0 {
		if n, present, ok := adjustedOf(&a.v[d.countSlot]); present {
			setAdjusted(out, n, ok)
			return
		}
	}
	if ts != "" {
		if n, present, ok := d.traceState(ts); present {
			setAdjusted(out, n, ok)
			out.Sampling |= samplingWeak
			return
		}
	}
	if a.has&(1<<sSamplerType) != 0 {
		if n, present, ok := a.jaeger(); present {
			setAdjusted(out, n, ok)
			out.Sampling |= samplingWeak
			return
		}
	}
	out.Sampling = samplingWeak
}

// setAdjusted records a recorded adjusted count n, or, when it was not
// usable (ok false), an invalid one.
func setAdjusted(out *graph.Span, n float64, ok bool) {
	if ok {
		out.Sampling, out.AdjustedCount = graph.SamplingRecorded, n
	} else {
		out.Sampling, out.AdjustedCount = graph.SamplingInvalid, 1
	}
}

// resSampling is what a resource says of its spans' sampling.
type resSampling struct {
	// count is the resource's adjusted-count attribute: ≥ 1 when usable,
	// -1 when present and unusable, 0 when absent.
	count float64
	// fixed is the configured adjusted count of its service, else of the
	// input; 0 for none.
	fixed float64
}

// resourceCount records v, the resource's adjusted-count attribute (the
// first one: *seen says whether one was already), in *count as
// resSampling.count has it.
func resourceCount(count *float64, seen *bool, v *attrVal) {
	if *seen {
		return
	}
	*seen = true
	if n, present, ok := adjustedOf(v); ok {
		*count = n
	} else if present {
		*count = -1
	}
}

// resSampling returns what the resource of service, with the
// adjusted-count attribute count (as resSampling.count), says.
func (d *Decoder) resSampling(service string, count float64) resSampling {
	r := resSampling{count: count, fixed: d.inputCount}
	if len(d.serviceCount) > 0 {
		if n, ok := d.serviceCount[service]; ok {
			r.fixed = n
		}
	}
	return r
}

// finish completes the sampling of out, a span of the resource r, left
// by spanSampling.
func (r *resSampling) finish(out *graph.Span) {
	if out.Sampling&samplingWeak == 0 {
		return
	}
	out.Sampling &^= samplingWeak
	switch {
	case r.count >= 1:
		out.Sampling, out.AdjustedCount = graph.SamplingRecorded, r.count
	case r.count < 0:
		out.Sampling, out.AdjustedCount = graph.SamplingInvalid, 1
	case out.Sampling != graph.SamplingNone:
	case r.fixed > 0:
		out.Sampling, out.AdjustedCount = graph.SamplingConfigured, r.fixed
	}
}
