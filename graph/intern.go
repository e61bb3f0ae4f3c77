package graph

// Interner shares repeated names among decoded records (its Intern is
// what DecodeSpans, DecodeTraceInterned and TraceDecoder take): the same
// bytes give the same string. It holds at most 65,536 names, forgetting
// them all when full, so that hostile input cannot grow it without
// bound. The zero value is not ready: make one with Interner{}.
type Interner map[string]string

// Intern returns the string of b's bytes.
func (in Interner) Intern(b []byte) string {
	if v, ok := in[string(b)]; ok {
		return v
	}
	if len(in) >= 1<<16 {
		clear(in)
	}
	v := string(b)
	in[v] = v
	return v
}
