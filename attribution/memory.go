// Package attribution decides who owns each error of a trace (docs/SPEC.md §4.1),
// what claim every failed hop should have answered and how that compares
// with what it did answer (§4.2), which dependencies are fail-open, learned
// from a failure memory (§4.3), and which errors were blamed on the wrong
// service (§4.4). It is pure: no I/O, no globals.
package attribution

import "github.com/stormradius/stormradius/graph"

// Config holds the failure memory's rules. The zero value means the
// defaults of docs/SPEC.md §4.3.
type Config struct {
	// MinFailedCalls is how many failed calls an edge needs before its
	// fail-open state is learned rather than defaulted (default 20).
	MinFailedCalls int64
	// Threshold: an edge is learned fail-open when the fraction of its
	// failed calls whose caller also failed is below it (default 0.5).
	Threshold float64
}

func (c Config) minFailed() int64 {
	if c.MinFailedCalls <= 0 {
		return 20
	}
	return c.MinFailedCalls
}

func (c Config) threshold() float64 {
	if c.Threshold <= 0 {
		return 0.5
	}
	return c.Threshold
}

// Source says where an edge's fail-open state came from.
type Source uint8

// Sources of fail-open states.
const (
	SourceDefault  Source = iota // fewer failed calls than needed: fail-close
	SourceLearned                // learned by the failure memory
	SourceDeclared               // declared with dependency.fail_open
)

var sourceNames = [...]string{"default", "learned", "declared"}

// String returns "default", "learned" or "declared".
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "default"
}

// FailOpen returns the fail-open state of an edge from its window stats.
// Declarations win (a majority of them; a tie declares fail-close); then,
// with at least MinFailedCalls failed calls, the edge is fail-open when the
// fraction of failed calls whose caller also failed is below Threshold;
// otherwise it is fail-close by default, so errors are blamed downstream
// first.
func (c Config) FailOpen(e *graph.EdgeStats) (bool, Source) {
	if e == nil {
		return false, SourceDefault
	}
	if e.DeclaredOpen+e.DeclaredClose > 0 {
		return e.DeclaredOpen > e.DeclaredClose, SourceDeclared
	}
	if e.Failed >= c.minFailed() {
		return float64(e.CallerFailed) < c.threshold()*float64(e.Failed), SourceLearned
	}
	return false, SourceDefault
}

// CallFailOpen returns the fail-open state of call c: its own declaration
// when it carries one, else its edge's state.
func (c Config) CallFailOpen(call *graph.Call, edge *graph.EdgeStats) (bool, Source) {
	switch call.FailOpen {
	case graph.True:
		return true, SourceDeclared
	case graph.False:
		return false, SourceDeclared
	}
	return c.FailOpen(edge)
}
