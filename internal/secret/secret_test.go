package secret

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ raw, pass, masked string }{
		{"clickhouse://user:Secret123@host:9000/db", "Secret123", "clickhouse://user:xxxxx@host:9000/db"},
		{"clickhous://user:Secret123@host:9000/db", "Secret123", "clickhous://user:xxxxx@host:9000/db"},
		{"clickhouse://user:p@ss:w/rd#1@host:9000/db", "p@ss:w/rd#1", "clickhouse://user:xxxxx@host:9000/db"},
		{"clickhouse://user:p%40ss%3Aw%2Frd%231@host:9000/db", "p%40ss%3Aw%2Frd%231", "clickhouse://user:xxxxx@host:9000/db"},
		{"clickhouse://user@host:9000/db", "", "clickhouse://user@host:9000/db"},
		{"clickhouse://host:9000/db", "", "clickhouse://host:9000/db"},
		{"sqlite:///data", "", "sqlite:///data"},
		{"", "", ""},
	} {
		if got := URLPassword(c.raw); got != c.pass {
			t.Errorf("URLPassword(%q) = %q, want %q", c.raw, got, c.pass)
		}
		if got := URL(c.raw); got != c.masked {
			t.Errorf("URL(%q) = %q, want %q", c.raw, got, c.masked)
		}
	}
}

// Scrub masks the password in a parse error of the URL, and in its
// escaped and unescaped forms.
func TestScrub(t *testing.T) {
	raw := "clickhouse://user:p@ss:w/rd#1@host:9000/db"
	_, err := url.Parse(raw)
	if err == nil {
		t.Fatal("want a parse error")
	}
	for _, msg := range []string{err.Error(), "dial user:" + url.QueryEscape("p@ss:w/rd#1"), "auth p@ss:w/rd#1 refused",
		errors.New("x " + url.UserPassword("user", "p@ss:w/rd#1").String()).Error()} {
		got := Scrub(msg, raw)
		for _, leak := range []string{"p@ss:w/rd#1", "p%40ss", "rd#1", "rd%231"} {
			if strings.Contains(got, leak) {
				t.Errorf("Scrub(%q) = %q holds %q", msg, got, leak)
			}
		}
	}
	if got := Scrub("nothing here", "clickhouse://host/db"); got != "nothing here" {
		t.Errorf("no password: %q", got)
	}
}
