package attribution

import "github.com/stormradius/stormradius/graph"

// Audit is the verdict of the claim audit on one failed hop (docs/SPEC.md §4.2).
type Audit uint8

// Audit verdicts. AuditNone is for hops that are not audited: hops that did
// not fail, virtual nodes, which do not speak claims, and CLIENT-span
// fragment roots, whose answer is in another trace.
const (
	AuditNone Audit = iota
	AuditCorrect
	AuditFalseClaim   // claimed, expected unclaimed: callers above retry
	AuditFalseUnclaim // unclaimed, expected claimed: legitimate retries lost
	AuditMissing
	AuditInvalid
	numAudits
)

var auditNames = [...]string{"none", "correct", "false_claim", "false_unclaim", "missing", "invalid"}

// String returns the verdict as it appears in reports.
func (a Audit) String() string {
	if int(a) < len(auditNames) {
		return auditNames[a]
	}
	return "none"
}

// Verdict is the attribution of one hop.
type Verdict struct {
	// Owner: the hop failed and owns its error (none of its failed calls is
	// fail-close). A failed virtual node always owns its error.
	Owner bool
	// Expected is the claim the hop should have answered (failed hops only).
	Expected graph.Claim
	// Observed is the claim it was seen to answer.
	Observed graph.Claim
	Audit    Audit
	// FailedCalls and FailedOpen count the hop's failed calls and those of
	// them that are fail-open.
	FailedCalls, FailedOpen int32
	// Misattributed: the hop answered unclaimed although all its failed
	// calls are fail-open, so the error was its own (docs/SPEC.md §4.4).
	Misattributed bool
	// NaiveMisattributed: what an attributor without failure memory, which
	// blames any failed downstream, would have misattributed.
	NaiveMisattributed bool
}

// Attribute computes the verdict of every hop of t. failOpen[i] is the
// fail-open state of call i. The verdicts are appended to out[:0].
func Attribute(t *graph.Trace, failOpen []bool, out []Verdict) []Verdict {
	out = out[:0]
	for i := range t.Hops {
		h := &t.Hops[i]
		v := Verdict{}
		if !h.Failed {
			out = append(out, v)
			continue
		}
		v.Observed = t.ObservedClaim(int32(i))
		close, satisfied := 0, 0
		for c := h.CallStart; c < h.CallEnd; c++ {
			call := &t.Calls[c]
			if !call.Failed {
				continue
			}
			v.FailedCalls++
			if failOpen[c] {
				v.FailedOpen++
				continue
			}
			close++
			if CriteriaSatisfied(call) {
				satisfied++
			}
		}
		switch {
		case close == 0:
			v.Owner = true
			v.Expected = graph.ClaimClaimed
		case satisfied == close:
			v.Expected = graph.ClaimUnclaimed
		default:
			v.Expected = graph.ClaimClaimed // at least once: let somebody retry
		}
		if !h.Audited() {
			out = append(out, v)
			continue
		}
		v.Audit = audit(v.Observed, v.Expected)
		allOpen := v.FailedCalls > 0 && v.FailedOpen == v.FailedCalls
		v.NaiveMisattributed = allOpen
		v.Misattributed = allOpen && v.Observed == graph.ClaimUnclaimed
		out = append(out, v)
	}
	return out
}

// CriteriaSatisfied reports whether the retry criteria were satisfied for a
// failed call: it was retried, an attempt said so, or its last response was
// unclaimed (docs/SPEC.md §4.2).
func CriteriaSatisfied(c *graph.Call) bool {
	return c.Retried() || c.Criteria || c.Claim == graph.ClaimUnclaimed
}

func audit(observed, expected graph.Claim) Audit {
	switch {
	case observed == graph.ClaimMissing:
		return AuditMissing
	case observed == graph.ClaimInvalid:
		return AuditInvalid
	case observed == expected:
		return AuditCorrect
	case observed == graph.ClaimClaimed:
		return AuditFalseClaim
	}
	return AuditFalseUnclaim
}

// Counts tallies audit verdicts, indexed by Audit.
type Counts [numAudits]int64

// MisattributionRate returns misattributed / eligible, 0 when nothing was
// eligible. Eligible are failed hops with a failed fail-open call.
func MisattributionRate(misattributed, eligible int64) float64 {
	if eligible == 0 {
		return 0
	}
	return float64(misattributed) / float64(eligible)
}
