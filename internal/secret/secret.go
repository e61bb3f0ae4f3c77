// Package secret keeps credentials out of what the process prints: error
// messages and logs name a store or broker URL with its password
// replaced, also when the URL does not parse (an unescaped '@', '/', ':'
// or '#' in the password).
package secret

import (
	"net/url"
	"strings"
)

// Mask replaces a password in what is printed.
const Mask = "xxxxx"

// URLPassword returns the password in raw's userinfo ("" when none):
// what lies between the first ':' after "scheme://" and the last '@',
// so that a password holding '/', '@' or '#' unescaped is found whole.
func URLPassword(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return ""
	}
	rest := raw[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pass, _ := strings.Cut(rest[:at], ":")
	return pass
}

// URL returns raw with its password masked.
func URL(raw string) string {
	p := URLPassword(raw)
	if p == "" {
		return raw
	}
	i := strings.Index(raw, "://") + 3
	at := i + strings.LastIndex(raw[i:], "@")
	user, _, _ := strings.Cut(raw[i:at], ":")
	return raw[:i] + user + ":" + Mask + raw[at:]
}

// Scrub returns msg with raw's password masked in every form it may be
// printed in: as written, unescaped and escaped.
func Scrub(msg, raw string) string {
	p := URLPassword(raw)
	if p == "" {
		return msg
	}
	forms := []string{p, url.QueryEscape(p), url.PathEscape(p), url.UserPassword("", p).String()[1:]}
	if u, err := url.PathUnescape(p); err == nil {
		forms = append(forms, u)
	}
	for _, f := range forms {
		if f != "" {
			msg = strings.ReplaceAll(msg, f, Mask)
		}
	}
	return msg
}
