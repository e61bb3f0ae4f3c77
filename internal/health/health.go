// Package health is what /readyz says: whether the service takes data and
// answers, and, when something outside it is wrong, what and how to fix
// it. Components report a problem under a key of their own (a broker, the
// store, the trace routing) and clear it once it is gone; the server reads
// the whole at each request.
package health

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
)

// Status is a service's readiness. The zero value is not ready (starting)
// and has no problems; it is safe for concurrent use.
type Status struct {
	mu       sync.Mutex
	ready    bool
	problems map[string]problem
}

type problem struct {
	msg   string
	fatal bool // not ready while it lasts
}

// SetReady says the service takes data and answers (true), or is
// starting or stopping (false).
func (s *Status) SetReady(ok bool) {
	s.mu.Lock()
	s.ready = ok
	s.mu.Unlock()
}

// Fail reports a problem that keeps the service not ready until Clear(key):
// it cannot do its work (a broker refuses its credentials…). msg says what
// is wrong and which setting fixes it.
func (s *Status) Fail(key, msg string) { s.set(key, problem{msg: msg, fatal: true}) }

// Warn reports a problem shown in /readyz without making the service not
// ready: it works, but some of what it reports is missing or excluded.
func (s *Status) Warn(key, msg string) { s.set(key, problem{msg: msg}) }

// Clear removes key's problem, if any.
func (s *Status) Clear(key string) {
	s.mu.Lock()
	delete(s.problems, key)
	s.mu.Unlock()
}

func (s *Status) set(key string, p problem) {
	s.mu.Lock()
	if s.problems == nil {
		s.problems = map[string]problem{}
	}
	s.problems[key] = p
	s.mu.Unlock()
}

// Ready reports whether the service is ready, and its problems, one line
// each ("key: message", fatal ones first, then by key).
func (s *Status) Ready() (bool, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.ready
	var fatal, warn []string
	for _, k := range slices.Sorted(maps.Keys(s.problems)) {
		p := s.problems[k]
		line := fmt.Sprintf("%s: %s", k, p.msg)
		if p.fatal {
			ok = false
			fatal = append(fatal, "not ready: "+line)
		} else {
			warn = append(warn, "warning: "+line)
		}
	}
	return ok, append(fatal, warn...)
}

// ServeHTTP answers /readyz: 200 "ready" or 503, then a line per problem.
func (s *Status) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	ok, lines := s.Ready()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	s.mu.Lock()
	starting := !s.ready
	s.mu.Unlock()
	switch {
	case ok:
		fmt.Fprintln(w, "ready")
	default:
		w.WriteHeader(http.StatusServiceUnavailable)
		if starting {
			fmt.Fprintln(w, "starting or stopping")
		}
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
