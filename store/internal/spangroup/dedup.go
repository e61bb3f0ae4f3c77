package spangroup

import "github.com/stormradius/stormradius/graph"

// DedupSpans drops, from dst[start:], spans whose id came earlier (a
// trace's spans read back from several writes).
func DedupSpans(dst []graph.Span, start int) []graph.Span {
	seen := make(map[graph.SpanID]struct{}, len(dst)-start)
	n := start
	for i := start; i < len(dst); i++ {
		if _, dup := seen[dst[i].SpanID]; dup {
			continue
		}
		seen[dst[i].SpanID] = struct{}{}
		dst[n] = dst[i]
		n++
	}
	return dst[:n]
}
