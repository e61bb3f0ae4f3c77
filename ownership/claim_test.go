package ownership_test

import (
	"testing"

	"github.com/stormradius/stormradius/ownership"
)

func TestParseClaim(t *testing.T) {
	for _, c := range []struct {
		in   string
		want ownership.Claim
	}{
		{"", ownership.Missing},
		{"   ", ownership.Missing},
		{"claimed", ownership.Claimed},
		{"Claimed", ownership.Claimed},
		{"CLAIM", ownership.Claimed},
		{" claim ", ownership.Claimed},
		{"unclaimed", ownership.Unclaimed},
		{"UnClaim", ownership.Unclaimed},
		{"yes", ownership.Invalid},
		{"claimedx", ownership.Invalid},
		{"claimed,unclaimed", ownership.Invalid},
	} {
		if got := ownership.ParseClaim(c.in); got != c.want {
			t.Errorf("ParseClaim(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	for c, s := range map[ownership.Claim]string{
		ownership.Missing: "missing", ownership.Claimed: "claimed",
		ownership.Unclaimed: "unclaimed", ownership.Invalid: "invalid", 9: "Claim(9)",
	} {
		if c.String() != s {
			t.Errorf("%d.String() = %q, want %q", c, c.String(), s)
		}
	}
}

// TestDecide walks the decision matrix of docs/SPEC.md §4.2 with the at-least-once
// rule. Each row's expectation is read off the SPEC, not the code.
func TestDecide(t *testing.T) {
	failed := ownership.Outcome{Failed: true}                                // fail-close, nobody retried
	retried := ownership.Outcome{Failed: true, CriteriaSatisfied: true}      // fail-close, criteria satisfied
	unclaimed := ownership.Outcome{Failed: true, Claim: ownership.Unclaimed} // last response unclaimed
	open := ownership.Outcome{Failed: true, FailOpen: true}                  // fail-open, absorbed
	ok := ownership.Outcome{}                                                // succeeded
	okRetried := ownership.Outcome{CriteriaSatisfied: true}                  // succeeded after a retry
	claimedLast := ownership.Outcome{Failed: true, Claim: ownership.Claimed} // claimed, not retried
	for _, c := range []struct {
		name  string
		calls []ownership.Outcome
		want  ownership.Claim
	}{
		{"no call: own error", nil, ownership.Claimed},
		{"only successful calls: own error", []ownership.Outcome{ok, okRetried}, ownership.Claimed},
		{"failed fail-open only: own error", []ownership.Outcome{open, open}, ownership.Claimed},
		{"propagated, retried below", []ownership.Outcome{retried}, ownership.Unclaimed},
		{"propagated, last response unclaimed", []ownership.Outcome{unclaimed}, ownership.Unclaimed},
		{"propagated, nobody retried: at least once", []ownership.Outcome{failed}, ownership.Claimed},
		{"propagated, claimed and not retried", []ownership.Outcome{claimedLast}, ownership.Claimed},
		{"two propagated, both satisfied", []ownership.Outcome{retried, unclaimed}, ownership.Unclaimed},
		{"two propagated, one unsatisfied", []ownership.Outcome{retried, failed}, ownership.Claimed},
		{"fail-open failure and a retried propagation", []ownership.Outcome{open, retried, ok}, ownership.Unclaimed},
		{"fail-open failure and an unretried propagation", []ownership.Outcome{open, failed}, ownership.Claimed},
		{"fail-open, even if retried below, does not count", []ownership.Outcome{{Failed: true, FailOpen: true, CriteriaSatisfied: true}}, ownership.Claimed},
	} {
		if got := ownership.Decide(c.calls); got != c.want {
			t.Errorf("%s: Decide = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPolicyString(t *testing.T) {
	if ownership.Ownership.String() != "ownership" || ownership.Naive.String() != "naive" || ownership.Policy(7).String() != "Policy(7)" {
		t.Error("Policy.String")
	}
}
