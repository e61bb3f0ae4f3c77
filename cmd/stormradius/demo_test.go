package main

import (
	"strings"
	"testing"
)

// The demo's bad command lines are usage errors (exit 2) that say what is
// wrong before anything starts; the demo itself is tested in
// internal/demo.
func TestDemoUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--format", "xml"}, `unknown --format "xml"`},
		{[]string{"demo", "--duration", "10ms"}, "too short"},
		{[]string{"demo", "--error-rate", "1.5"}, "--error-rate"},
		{[]string{"demo", "--error-rate", "0"}, "--error-rate"},
		{[]string{"demo", "--rate", "-3"}, "--rate"},
		{[]string{"demo", "--log-level", "loud"}, "--log-level"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
	} {
		code, _, stderr := runCmd(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}
