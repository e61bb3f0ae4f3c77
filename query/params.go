package query

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/query/timerange"
	"github.com/stormradius/stormradius/store"
)

// DefaultRange is the range a question without from and to covers: the
// last hour.
const DefaultRange = time.Hour

// badParam is an ErrBadRequest naming the parameter.
func badParam(name, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrBadRequest, name, fmt.Sprintf(format, a...))
}

// ParseRange reads from and to (RFC 3339, unix seconds or now-DURATION,
// within timerange.Min … timerange.Max), by default the last hour before
// now; to must be after from.
func ParseRange(v url.Values, now time.Time) (store.Query, error) {
	q := store.Query{From: now.Add(-DefaultRange).UnixNano(), To: now.UnixNano()}
	fromSet, toSet := false, false
	for _, p := range []struct {
		name string
		dst  *int64
		set  *bool
	}{{"from", &q.From, &fromSet}, {"to", &q.To, &toSet}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		t, err := timerange.Parse(s, now)
		if err != nil {
			return q, badParam(p.name, "%v", err)
		}
		*p.dst, *p.set = t, true
	}
	if !fromSet && toSet {
		// An hour before the given end, or from the first instant.
		q.From = math.MinInt64
		if q.To > math.MinInt64+int64(DefaultRange) {
			q.From = q.To - int64(DefaultRange)
		}
	}
	if q.To <= q.From {
		if !toSet {
			return q, badParam("to", "must be after from (to is now when not given)")
		}
		return q, badParam("to", "must be after from")
	}
	q.From, q.To = store.Bound(q.From), store.Bound(q.To)
	return q, nil
}

// GateParams are the parameters of GET /api/v1/gate (and the keys of
// POST's metadata): ParseGate's, and how the answer is given
// (ParseGateAnswer's). Any other is a 400.
var GateParams = []string{"api", "max_radius", "max_radius_increase", "max_amplification", "min_traces",
	"from", "to", "baseline", "candidate", "service", "baseline_version", "candidate_version",
	"always_200", "undecided"}

// CheckGateParams reports the names that are not GateParams, every one,
// each with the nearest known name when one is close: a misspelt
// threshold must not be ignored. prefix is put before each name
// ("metadata." for a webhook's keys).
func CheckGateParams(names []string, prefix string) error {
	var unknown []string
	guessed := true
	for _, n := range slices.Sorted(slices.Values(names)) {
		if slices.Contains(GateParams, n) {
			continue
		}
		s := prefix + n
		if len(n) > 64 {
			s = prefix + strings.ToValidUTF8(n[:64], "") + "…"
		}
		if n == "" || strings.ContainsFunc(n, func(r rune) bool {
			return r != '_' && r != '-' && r != '.' && (r < 'a' || r > 'z') && (r < '0' || r > '9')
		}) {
			s = strconv.Quote(s) // the name as sent, whatever it holds
		}
		if near := nearest(n, GateParams); near != "" {
			s += " (did you mean " + near + "?)"
		} else {
			guessed = false
		}
		unknown = append(unknown, s)
	}
	if len(unknown) == 0 {
		return nil
	}
	err := fmt.Errorf("%w: unknown parameter(s): %s", ErrBadRequest, strings.Join(unknown, ", "))
	if !guessed {
		err = fmt.Errorf("%w; the gate's are %s", err, strings.Join(GateParams, ", "))
	}
	return err
}

// nearest returns the known name closest to n by edit distance, when it is
// within a quarter of n's length, at least 1 (maxradius, max-radius,
// form); "" when none is.
func nearest(n string, known []string) string {
	if len(n) > 64 {
		return ""
	}
	best, bestD := "", max(1, len(n)/4)+1
	for _, k := range known {
		if d := editDistance(n, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance, over bytes:
// insertions, deletions, substitutions and swaps of two neighbours.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			sub := d[i-1][j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			d[i][j] = min(sub, d[i-1][j]+1, d[i][j-1]+1)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// DefaultUndecidedGrace is how long an undecided decision answers 200 to a
// Flagger canary, from the first request the gate saw of it, when
// undecided is not given.
const DefaultUndecidedGrace = 10 * time.Minute

// MaxUndecidedGrace bounds undecided=DURATION.
const MaxUndecidedGrace = 24 * time.Hour

// GateAnswer is how GET and POST /api/v1/gate answer a decision: pass is
// 200, fail 412, undecided as Undecided says; Always200 answers 200
// whatever the decision (the decision is in the body).
type GateAnswer struct {
	Always200 bool
	// Undecided: with Pass, 200; otherwise 200 while a Flagger canary
	// (the payload's namespace, name and checksum) was first seen less
	// than Grace ago, and 412 after — at once without Grace, or without a
	// canary to age (a GET, a body without a name).
	Undecided struct {
		Pass  bool
		Grace time.Duration
	}
}

// ParseGateAnswer reads always_200 (a boolean) and undecided: "pass",
// "fail", or a grace DURATION (default DefaultUndecidedGrace, at most
// MaxUndecidedGrace).
func ParseGateAnswer(v url.Values) (GateAnswer, error) {
	var a GateAnswer
	if s := v.Get("always_200"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return a, badParam("always_200", "%q: want true or false", s)
		}
		a.Always200 = b
	}
	switch s := v.Get("undecided"); s {
	case "":
		a.Undecided.Grace = DefaultUndecidedGrace
	case "pass":
		a.Undecided.Pass = true
	case "fail":
	default:
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > MaxUndecidedGrace {
			return a, badParam("undecided", "%q: want pass, fail, or how long a canary may stay undecided before it fails (a duration: 10m; at most %s)", s, MaxUndecidedGrace)
		}
		a.Undecided.Grace = d
	}
	return a, nil
}

// ParseGate reads the gate's parameters (GET /api/v1/gate's, which
// `stormradius gate` sends too): api; the thresholds max_radius,
// max_radius_increase, max_amplification, min_traces; from and to (the
// candidate's window, default the last hour); baseline and candidate,
// windows "FROM/TO" unless service is given, when they are versions of
// that service (baseline_version and candidate_version say the same).
// A name that is not one of GateParams is a 400.
func ParseGate(v url.Values, now time.Time) (GateRequest, error) {
	req := GateRequest{API: v.Get("api"), Service: v.Get("service")}
	if err := CheckGateParams(slices.Collect(maps.Keys(v)), ""); err != nil {
		return req, err
	}
	if req.API == "" {
		return req, badParam("api", `required: the root API as "service operation"`)
	}
	var err error
	if req.Candidate, err = ParseRange(v, now); err != nil {
		return req, err
	}
	if req.Thresholds, err = parseThresholds(v); err != nil {
		return req, err
	}
	base, cand := v.Get("baseline"), v.Get("candidate")
	if s := v.Get("baseline_version"); s != "" {
		base = s
	}
	if s := v.Get("candidate_version"); s != "" {
		cand = s
	}
	if req.Service != "" {
		req.BaselineVersion, req.CandidateVersion = base, cand
		if cand == "" {
			return req, badParam("candidate", "the candidate version is required with service")
		}
		return req, req.Validate()
	}
	if v.Get("baseline_version") != "" || v.Get("candidate_version") != "" {
		return req, badParam("service", "required to compare versions")
	}
	if cand != "" {
		if req.Candidate, err = ParseWindow(cand, now); err != nil {
			return req, badParam("candidate", "%v", err)
		}
	}
	if base != "" {
		w, err := ParseWindow(base, now)
		if err != nil {
			return req, badParam("baseline", "%v", err)
		}
		req.BaselineWindow = &w
	}
	return req, req.Validate()
}

// ParseWindow reads a window "FROM/TO", each end as from and to take; it
// must not end before it starts.
func ParseWindow(s string, now time.Time) (store.Query, error) {
	from, to, ok := strings.Cut(s, "/")
	if !ok {
		return store.Query{}, fmt.Errorf("%q: want a window FROM/TO (e.g. now-2h/now-1h), or service= to compare versions", s)
	}
	var q store.Query
	var err error
	if q.From, err = timerange.Parse(from, now); err != nil {
		return q, err
	}
	if q.To, err = timerange.Parse(to, now); err != nil {
		return q, err
	}
	if q.To <= q.From {
		return q, fmt.Errorf("%q: the window ends before it starts", s)
	}
	q.From, q.To = store.Bound(q.From), store.Bound(q.To)
	return q, nil
}

func parseThresholds(v url.Values) (gate.Thresholds, error) {
	var t gate.Thresholds
	for _, p := range []struct {
		name string
		dst  **int
	}{{"max_radius", &t.MaxRadius}, {"max_radius_increase", &t.MaxRadiusIncrease}} {
		if s := v.Get(p.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return t, badParam(p.name, "%q is not a whole number", s)
			}
			*p.dst = &n
		}
	}
	if s := v.Get("max_amplification"); s != "" {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return t, badParam("max_amplification", "%q is not a number", s)
		}
		t.MaxAmplification = &x
	}
	if s := v.Get("min_traces"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return t, badParam("min_traces", "%q is not a whole number", s)
		}
		t.MinTraces = n
	}
	return t, nil
}
