package query

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A misspelt parameter is a 400 naming it, never ignored.
func TestCheckGateParams(t *testing.T) {
	for _, c := range []struct {
		names  []string
		prefix string
		want   string // "" for none
	}{
		{[]string{"api", "max_radius", "undecided", "always_200"}, "", ""},
		{[]string{"api", "max_radius_increas"}, "",
			"bad request: unknown parameter(s): max_radius_increas (did you mean max_radius_increase?)"},
		// Every one, sorted, each with its guess; the list of names when
		// one has none.
		{[]string{"min-traces", "maxradius", "form", "api", "colour"}, "metadata.",
			"bad request: unknown parameter(s): metadata.colour, metadata.form (did you mean from?), metadata.maxradius (did you mean max_radius?), " +
				"metadata.min-traces (did you mean min_traces?); the gate's are api, max_radius, max_radius_increase, max_amplification, " +
				"min_traces, from, to, baseline, candidate, service, baseline_version, candidate_version, always_200, undecided"},
		// "foo" is two edits from "to": too far for three letters.
		{[]string{"foo"}, "", "bad request: unknown parameter(s): foo; the gate's are"},
		{[]string{"Max Radius"}, "", `bad request: unknown parameter(s): "Max Radius"; the gate's are`},
		{[]string{strings.Repeat("x", 100)}, "", "unknown parameter(s): " + strings.Repeat("x", 64) + "…;"},
	} {
		err := CheckGateParams(c.names, c.prefix)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.names, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrBadRequest)):
			t.Errorf("%v: %v\nwant %q", c.names, err, c.want)
		}
	}
	// ParseGate checks them before anything else.
	_, err := ParseGate(url.Values{"api": {"a b"}, "max_radius": {"1"}, "max_radius_increas": {"0"}}, time.Now())
	if err == nil || !strings.Contains(err.Error(), "max_radius_increas (did you mean max_radius_increase?)") {
		t.Errorf("ParseGate: %v", err)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"to", "", 2}, {"foo", "to", 2}, {"form", "from", 1}, {"maxradius", "max_radius", 1},
		{"max-radius-increase", "max_radius_increase", 2}, {"kitten", "sitting", 3}} {
		if d := editDistance(c.a, c.b); d != c.d {
			t.Errorf("%q %q: %d, want %d", c.a, c.b, d, c.d)
		}
	}
}

func TestParseGateAnswer(t *testing.T) {
	for _, c := range []struct {
		v         url.Values
		always200 bool
		pass      bool
		grace     time.Duration
		err       string
	}{
		{url.Values{}, false, false, 10 * time.Minute, ""},
		{url.Values{"always_200": {"true"}, "undecided": {"pass"}}, true, true, 0, ""},
		{url.Values{"always_200": {"false"}, "undecided": {"fail"}}, false, false, 0, ""},
		{url.Values{"undecided": {"90s"}}, false, false, 90 * time.Second, ""},
		{url.Values{"undecided": {"24h"}}, false, false, 24 * time.Hour, ""},
		{url.Values{"undecided": {"25h"}}, false, false, 0, "undecided: \"25h\""},
		{url.Values{"undecided": {"0s"}}, false, false, 0, "undecided"},
		{url.Values{"undecided": {"wait"}}, false, false, 0, "want pass, fail"},
		{url.Values{"always_200": {"yes"}}, false, false, 0, "always_200: \"yes\""},
	} {
		a, err := ParseGateAnswer(c.v)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrBadRequest) {
				t.Errorf("%v: %v, want an error with %q", c.v, err, c.err)
			}
			continue
		}
		if err != nil || a.Always200 != c.always200 || a.Undecided.Pass != c.pass || a.Undecided.Grace != c.grace {
			t.Errorf("%v: %+v %v", c.v, a, err)
		}
	}
}
