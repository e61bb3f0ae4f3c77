package bearer

import "testing"

func TestAllow(t *testing.T) {
	ts := New([]string{"first-token", "second-token"})
	for _, tc := range []struct {
		header string
		ok     bool
	}{
		{"", false},
		{"Bearer", false},
		{"Bearer ", false},
		{"Bearer nope", false},
		{"Bearer first", false},                // a prefix of a token
		{"Bearer first-token-and-more", false}, // a token as a prefix
		{"second-token", false},                // no scheme
		{"Basic c2Vjb25kLXRva2Vu", false},
		{"Bearer First-Token", false}, // the token is exact
		{"Bearer first-token", true},
		{"bearer second-token", true}, // RFC 7235: the scheme is case-insensitive
		{"BEARER second-token", true},
		{"Bearer  second-token ", true},
	} {
		if got := ts.Allow(tc.header); got != tc.ok {
			t.Errorf("Allow(%q) = %v, want %v", tc.header, got, tc.ok)
		}
	}
	if New(nil) != nil || !New(nil).Allow("") {
		t.Error("no tokens must allow everything")
	}
}
