package query

import (
	"fmt"
	"math"
	"net/url"
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

// ParseGate reads the gate's parameters (GET /api/v1/gate's, which
// `stormradius gate` sends too): api; the thresholds max_radius,
// max_radius_increase, max_amplification, min_traces; from and to (the
// candidate's window, default the last hour); baseline and candidate,
// windows "FROM/TO" unless service is given, when they are versions of
// that service (baseline_version and candidate_version say the same).
func ParseGate(v url.Values, now time.Time) (GateRequest, error) {
	req := GateRequest{API: v.Get("api"), Service: v.Get("service")}
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
