package otlp

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"
)

// tokens checks bearer tokens. It keeps their SHA-256 digests, not the
// tokens: comparing fixed-size digests in constant time does not leak a
// token's length, which comparing the tokens themselves would.
type tokens struct {
	sums [][sha256.Size]byte
}

// newTokens returns a checker of list, or nil (no authentication) when list
// is empty.
func newTokens(list []string) *tokens {
	if len(list) == 0 {
		return nil
	}
	t := &tokens{sums: make([][sha256.Size]byte, len(list))}
	for i, s := range list {
		t.sums[i] = sha256.Sum256([]byte(s))
	}
	return t
}

// allow reports whether authorization, an Authorization header value, holds
// one of the tokens. Every token is compared, whichever matches, so that
// the time taken says nothing about which one did.
func (t *tokens) allow(authorization string) bool {
	if t == nil {
		return true
	}
	tok, ok := bearerToken(authorization)
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

// bearerToken returns the token of "Bearer <token>" (the scheme is
// case-insensitive, RFC 7235).
func bearerToken(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(scheme):])
	return tok, tok != ""
}
