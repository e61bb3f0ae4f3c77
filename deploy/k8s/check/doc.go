// Package check builds deploy/k8s with kustomize's own API (krusty, what
// `kubectl apply -k` runs) and checks what it renders against the release
// binaries — flags, probes, the security context, and that no secret is on
// a command line or written in the build, every file a process reads lying
// in a mounted Secret; loads deploy/compose with docker compose's own
// loader (compose-go) and checks the same of it; and runs the Argo
// Rollouts template (deploy/argo-rollouts) as Argo Rollouts does — its
// argument substitution (valyala/fasttemplate), JSONPath
// (k8s.io/client-go/util/jsonpath) and conditions (expr-lang/expr) —
// against the gate's handler. A module of its own: kustomize's API,
// compose-go and Argo's libraries bring modules the service does not
// need. .ci/run runs it:
//
//	cd deploy/k8s/check && go test ./...
package check
