// Package query answers the questions stormradius is asked — the docs/SPEC.md §5.2
// document, per-API call graphs and radius series, the fleet, claim
// integrity, traces, incidents, what-if and the rollout gate — once, for
// every front end: the CLI, the REST handlers and the web UI share these
// answers and their errors.
package query

import "errors"

// Errors the front ends map to statuses (404, 400) and exit codes.
var (
	// ErrNotFound: no such API, trace or incident.
	ErrNotFound = errors.New("not found")
	// ErrBadRequest: the question cannot be answered as asked (a bad
	// parameter); the message says which.
	ErrBadRequest = errors.New("bad request")
)
