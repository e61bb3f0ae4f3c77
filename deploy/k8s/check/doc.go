// Package check builds deploy/k8s with kustomize's own API (krusty, what
// `kubectl apply -k` runs) and checks what it renders against the release
// binaries; and runs the Argo Rollouts template (deploy/argo-rollouts) as
// Argo Rollouts does — its argument substitution (valyala/fasttemplate),
// JSONPath (k8s.io/client-go/util/jsonpath) and conditions
// (expr-lang/expr) — against the gate's handler. A module of its own:
// kustomize's API and Argo's libraries bring modules the service does not
// need. .ci/run runs it:
//
//	cd deploy/k8s/check && go test ./...
package check
