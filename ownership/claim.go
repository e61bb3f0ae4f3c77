package ownership

import (
	"strconv"
	"strings"
)

// Claim is what a failed response says about who owns its error.
type Claim uint8

const (
	// Missing: the response carries no claim (the callee does not speak
	// the protocol). Callers treat it as Claimed.
	Missing Claim = iota
	// Claimed: the error is the callee's own, or nobody below retried it;
	// the caller may retry.
	Claimed
	// Unclaimed: the error was propagated from below and was already
	// retried (or would have been); the caller must not retry it.
	Unclaimed
	// Invalid: the header holds something else. Callers treat it as
	// Missing.
	Invalid
)

// ParseClaim reads a claim header value: "claimed" or "claim" is Claimed,
// "unclaimed" or "unclaim" is Unclaimed (case-insensitive, surrounding
// spaces ignored), "" is Missing and anything else Invalid.
func ParseClaim(v string) Claim {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return Missing
	case strings.EqualFold(v, "claimed"), strings.EqualFold(v, "claim"):
		return Claimed
	case strings.EqualFold(v, "unclaimed"), strings.EqualFold(v, "unclaim"):
		return Unclaimed
	}
	return Invalid
}

// String returns "missing", "claimed", "unclaimed" or "invalid": the header
// value for Claimed and Unclaimed.
func (c Claim) String() string {
	switch c {
	case Missing:
		return "missing"
	case Claimed:
		return "claimed"
	case Unclaimed:
		return "unclaimed"
	case Invalid:
		return "invalid"
	}
	return "Claim(" + strconv.Itoa(int(c)) + ")"
}

// retryable reports whether the ownership policy retries a failure that
// carries c: everything but Unclaimed.
func (c Claim) retryable() bool { return c != Unclaimed }

// Outcome is what one outbound call made while serving a request came to.
type Outcome struct {
	// Failed: the call's last attempt failed (a transport error or a
	// status ≥ 500; a 4xx is the caller's own error, not a failure).
	Failed bool
	// FailOpen: the serving request absorbs this dependency's failure
	// (WithFailOpen, FailOpen).
	FailOpen bool
	// CriteriaSatisfied: the retry criteria is satisfied for the call
	// (docs/SPEC.md §4.2): it was retried, or one of its failed attempts met the
	// caller's retry rule even if the retry was then denied (attempt
	// limit, budget, deadline, non-idempotent method).
	CriteriaSatisfied bool
	// Claim is the claim of the call's last response.
	Claim Claim
}

// satisfied reports whether the retry criteria is satisfied for o: as
// declared, or because its last response was unclaimed (whoever answered
// it retried, or would have).
func (o Outcome) satisfied() bool { return o.CriteriaSatisfied || o.Claim == Unclaimed }

// Decide returns the claim a request that fails with a status ≥ 500
// answers, given the outcomes of the outbound calls made while serving it
// (the decision matrix of docs/SPEC.md §4.2 with the at-least-once rule):
//
//   - no failed fail-close call: the error is the request's own → Claimed;
//   - every failed fail-close call has its retry criteria satisfied: the
//     error is propagated and was retried below → Unclaimed;
//   - otherwise the error is propagated but nobody below retried it →
//     Claimed, so that the caller retries it at least once.
//
// Failed fail-open calls are ignored: their failure was absorbed.
func Decide(calls []Outcome) Claim {
	var s summary
	for _, o := range calls {
		s.add(o)
	}
	return s.claim()
}

// summary is what Decide needs of a set of outcomes.
type summary struct {
	failedClose, unsatisfied int
}

func (s *summary) add(o Outcome) {
	if o.Failed && !o.FailOpen {
		s.failedClose++
		if !o.satisfied() {
			s.unsatisfied++
		}
	}
}

func (s summary) claim() Claim {
	if s.failedClose == 0 || s.unsatisfied > 0 {
		return Claimed
	}
	return Unclaimed
}
