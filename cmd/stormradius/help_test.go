package main

import (
	"regexp"
	"strings"
	"testing"
)

// serve --help lists the embedded store's --data, and --http as serving
// the API and the UI, which serve does (unlike cmd/ingest).
func TestServeHelp(t *testing.T) {
	_, _, help := runCmd(t, "serve", "--help")
	if !regexp.MustCompile(`(?m)^  -data string$`).MatchString(help) {
		t.Errorf("serve --help lacks --data:\n%s", help)
	}
	if m := regexp.MustCompile(`(?m)^  -http string\n\s+(.*)$`).FindStringSubmatch(help); m == nil || !strings.HasPrefix(m[1], "API, UI, /healthz") {
		t.Errorf("serve --http is described as %q", m)
	}
}
