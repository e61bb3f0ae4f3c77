package sim

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// The W3C tracestate and its OpenTelemetry "ot" entry, read and written as
// the collector's pkg/sampling does (opentelemetry-collector-contrib,
// pkg/sampling: w3ctracestate.go, oteltracestate.go, common.go,
// threshold.go, probability.go, randomness.go; read at the newest
// revisions available, those where UpdateTValueWithSampling takes the
// threshold alone and the syntax checks are hand-written, 2025 or later;
// not at the v0.165.0 tag itself). Written anew here from what that code
// does, so that a trace sampled by sim carries the bytes a collector
// would have written:
//
//   - The tracestate is a comma-separated list of key=value members (at
//     most 1024 bytes; fewer than 32 members, counting empty ones, as the
//     collector counts them; keys of at most 256 bytes, a tenant of 241, a
//     system of 14). Spaces and tabs around members are dropped; empty
//     members are allowed and dropped on writing.
//   - The "ot" member is a semicolon-separated list of key:value (at most
//     256 bytes; no empty member, no trailing ';'; keys [a-z][a-z0-9]*,
//     values [A-Za-z0-9._-]*). rv is exactly 14 hex digits; th is 1 to 14
//     hex digits, trailing zeros dropped (a rejection threshold out of
//     2^56: th:8 is 2^55, probability 1/2; th:0 is probability 1).
//   - A duplicate key is not an error: the last "ot" member wins; other
//     members are all kept.
//   - Written back, "ot" comes first (rv, then th, then its other
//     sub-keys, in order), then every other member in order.

// Tracestate limits and key names.
const (
	maxTraceState     = 1024
	maxTraceStateList = 32
	maxKeyLen         = 256
	maxTenantLen      = 241
	maxSystemLen      = 14
	maxOTelLen        = 256

	// hexDigits is the number of hex digits of a threshold or a
	// randomness value: 56 bits.
	hexDigits = 14
	// maxAdjusted is 2^56: a threshold of maxAdjusted never samples.
	maxAdjusted uint64 = 1 << 56
)

var (
	errTraceStateSize   = errors.New("invalid tracestate size")
	errTraceStateSyntax = errors.New("invalid tracestate syntax")
	errRValue           = errors.New("r-value must have 14 hex digits")
	errTValueSize       = errors.New("t-value exceeds 14 hex digits")
	errTValueEmpty      = errors.New("t-value is empty")
	errTValueSyntax     = errors.New("t-value is not hex")
)

type kv struct{ key, value string }

// traceState is a parsed tracestate.
type traceState struct {
	rv      string // as received (or written by setRV): 14 hex digits
	rnd     uint64 // rv's value
	th      string // as received (or written by setTH)
	thr     uint64 // th's threshold, out of 2^56
	otExtra []kv   // other "ot" sub-keys
	others  []kv   // other members
}

func (ts *traceState) hasRV() bool { return ts.rv != "" }
func (ts *traceState) hasTH() bool { return ts.th != "" }

// setRV sets explicit randomness (lower-case, 14 digits).
func (ts *traceState) setRV(r uint64) {
	ts.rnd = r
	ts.rv = formatHex56(r)
}

// updateTH records threshold t, unless the tracestate already has a
// higher one (a lower probability), which it keeps: a sampler may only
// lower a probability. It reports whether it changed.
func (ts *traceState) updateTH(t uint64) bool {
	if ts.hasTH() && ts.thr > t {
		return false
	}
	ts.thr, ts.th = t, tValue(t)
	return true
}

func (ts *traceState) clearTH() { ts.th, ts.thr = "", 0 }

// String writes the tracestate back.
func (ts *traceState) String() string {
	var b strings.Builder
	var ot []string
	if ts.rv != "" {
		ot = append(ot, "rv:"+ts.rv)
	}
	if ts.th != "" {
		ot = append(ot, "th:"+ts.th)
	}
	for _, e := range ts.otExtra {
		ot = append(ot, e.key+":"+e.value)
	}
	if len(ot) > 0 {
		b.WriteString("ot=")
		b.WriteString(strings.Join(ot, ";"))
	}
	for _, e := range ts.others {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.key)
		b.WriteByte('=')
		b.WriteString(e.value)
	}
	return b.String()
}

// parseTraceState reads a W3C tracestate. On error the result is partial
// and must not be used (the collector's samplers do not).
func parseTraceState(s string) (traceState, error) {
	var ts traceState
	if s == "" {
		return ts, nil
	}
	if len(s) > maxTraceState {
		return ts, errTraceStateSize
	}
	members := strings.Split(s, ",")
	for _, m := range members {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue
		}
		eq := strings.IndexByte(m, '=')
		if eq < 1 || !validKey(m[:eq]) || !validValue(m[eq+1:]) {
			return ts, errTraceStateSyntax
		}
	}
	// Members are counted as the collector counts them: every member,
	// empty ones too, except after a trailing comma.
	n := len(members)
	if strings.HasSuffix(s, ",") {
		n--
	}
	if n >= maxTraceStateList {
		return ts, errTraceStateSize
	}
	var err error
	for _, m := range members {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue
		}
		key, value, _ := strings.Cut(m, "=")
		if len(key) > maxKeyLen {
			return ts, errTraceStateSize
		}
		if tenant, system, ok := strings.Cut(key, "@"); ok && (len(tenant) > maxTenantLen || len(system) > maxSystemLen) {
			return ts, errTraceStateSize
		}
		if key != "ot" {
			ts.others = append(ts.others, kv{key, value})
			continue
		}
		if e := ts.parseOT(value); e != nil && err == nil {
			err = e
		}
	}
	return ts, err
}

// parseOT reads the value of the "ot" member into ts, replacing what an
// earlier "ot" member set.
func (ts *traceState) parseOT(s string) error {
	ts.rv, ts.rnd, ts.th, ts.thr, ts.otExtra = "", 0, "", 0, nil
	if len(s) > maxOTelLen {
		return errTraceStateSize
	}
	if s == "" || strings.HasSuffix(s, ";") {
		return errTraceStateSyntax
	}
	members := strings.Split(s, ";")
	for _, m := range members {
		colon := strings.IndexByte(m, ':')
		if colon < 1 || !validOTelKey(m[:colon]) || !validOTelValue(m[colon+1:]) {
			return errTraceStateSyntax
		}
	}
	var err error
	for _, m := range members {
		key, value, _ := strings.Cut(m, ":")
		var e error
		switch key {
		case "rv":
			ts.rv, ts.rnd = "", 0
			if r, ok := parseRV(value); ok {
				ts.rv, ts.rnd = value, r
			} else {
				e = errRValue
			}
		case "th":
			ts.th, ts.thr = "", 0
			if t, pe := parseTH(value); pe == nil {
				ts.th, ts.thr = value, t
			} else {
				e = pe
			}
		default:
			ts.otExtra = append(ts.otExtra, kv{key, value})
		}
		if e != nil && err == nil {
			err = e
		}
	}
	return err
}

func parseRV(s string) (uint64, bool) {
	if len(s) != hexDigits {
		return 0, false
	}
	r, err := strconv.ParseUint(s, 16, 64)
	return r, err == nil
}

// parseTH reads a t-value: 1 to 14 hex digits, extended with the zeros
// that were dropped.
func parseTH(s string) (uint64, error) {
	switch {
	case len(s) > hexDigits:
		return 0, errTValueSize
	case s == "":
		return 0, errTValueEmpty
	}
	t, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, errTValueSyntax
	}
	return t << (4 * (hexDigits - len(s))), nil
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isKeyChar(c byte) bool {
	return isLower(c) || isDigit(c) || c == '_' || c == '-' || c == '*' || c == '/'
}

func allKeyChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isKeyChar(s[i]) {
			return false
		}
	}
	return true
}

// validKey: a simple key starts with a lower-case letter; a multi-tenant
// key is tenant@system, the tenant starting with a letter or digit, the
// system with a letter.
func validKey(k string) bool {
	if tenant, system, ok := strings.Cut(k, "@"); ok {
		return tenant != "" && system != "" && (isLower(tenant[0]) || isDigit(tenant[0])) &&
			isLower(system[0]) && allKeyChars(tenant[1:]) && allKeyChars(system[1:])
	}
	return k != "" && isLower(k[0]) && allKeyChars(k[1:])
}

// validValue: 1 to 256 printable ASCII characters but ',' and '=', the
// last not a space.
func validValue(v string) bool {
	if v == "" || len(v) > 256 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 || c > 0x7e || c == ',' || c == '=' || (c == ' ' && i == len(v)-1) {
			return false
		}
	}
	return true
}

func validOTelKey(k string) bool {
	if k == "" || !isLower(k[0]) {
		return false
	}
	for i := 1; i < len(k); i++ {
		if !isLower(k[i]) && !isDigit(k[i]) {
			return false
		}
	}
	return true
}

func validOTelValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !isLower(c) && !isDigit(c) && !(c >= 'A' && c <= 'Z') && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// formatHex56 writes v < 2^56 as 14 lower-case hex digits.
func formatHex56(v uint64) string {
	return strconv.FormatUint(maxAdjusted|v, 16)[1:]
}

// tValue encodes threshold t: "0" for probability 1, "" for never, else
// 14 hex digits without their trailing zeros.
func tValue(t uint64) string {
	switch {
	case t == 0:
		return "0"
	case t >= maxAdjusted:
		return ""
	}
	return strings.TrimRight(formatHex56(t), "0")
}

// thresholdProbability is the probability of threshold t: (2^56-t)/2^56.
func thresholdProbability(t uint64) float64 {
	if t >= maxAdjusted {
		return 0
	}
	return float64(maxAdjusted-t) / float64(maxAdjusted)
}

// probabilityThreshold turns probability p into a threshold rounded to
// precision hex digits (0: all 14), as the collector does: the precision
// grows by one digit for every leading 0 or f the exact threshold would
// have (so small and large probabilities keep their relative precision),
// the threshold is rounded to nearest (half up) at that many digits. It
// reports false when p is outside [2^-56, 1].
func probabilityThreshold(p float64, precision int) (uint64, bool) {
	if precision == 0 {
		precision = hexDigits
	}
	if !(p >= 1/float64(maxAdjusted) && p <= 1) {
		return 0, false
	}
	if p == 1 {
		return 0, true
	}
	_, expP := math.Frexp(p)
	_, expQ := math.Frexp(1 - p)
	precision = min(hexDigits, max(precision+expP/-4, precision+expQ/-4))
	t := maxAdjusted - uint64(math.Round(p*float64(maxAdjusted)))
	if shift := 4 * (hexDigits - precision); shift > 0 {
		t += 1 << (shift - 1)
		t = t >> shift << shift
	}
	return t, true
}
