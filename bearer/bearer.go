// Package bearer checks bearer tokens (RFC 6750) for the services that take
// them: the OTLP receivers and the REST API.
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"
)

// Tokens is a set of accepted tokens. It keeps their SHA-256 digests, not
// the tokens: comparing fixed-size digests in constant time does not leak a
// token's length, which comparing the tokens themselves would.
type Tokens struct {
	sums [][sha256.Size]byte
}

// New returns the set of list, or nil (no authentication) when list is
// empty.
func New(list []string) *Tokens {
	if len(list) == 0 {
		return nil
	}
	t := &Tokens{sums: make([][sha256.Size]byte, len(list))}
	for i, s := range list {
		t.sums[i] = sha256.Sum256([]byte(s))
	}
	return t
}

// Allow reports whether authorization, an Authorization header value, holds
// one of the tokens; a nil set allows everything. Every token is compared,
// whichever matches, so that the time taken says nothing about which one
// did.
func (t *Tokens) Allow(authorization string) bool {
	if t == nil {
		return true
	}
	tok, ok := token(authorization)
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	match := 0
	for i := range t.sums {
		match |= subtle.ConstantTimeCompare(sum[:], t.sums[i][:])
	}
	return match == 1
}

// token returns the token of "Bearer <token>". The scheme is
// case-insensitive (RFC 7235 §2.1): "bearer" and "BEARER" are the same
// scheme; the token itself is exact.
func token(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(scheme):])
	return tok, tok != ""
}
