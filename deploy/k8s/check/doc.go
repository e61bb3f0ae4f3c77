// Package check builds deploy/k8s with kustomize's own API (krusty, what
// `kubectl apply -k` runs) and checks what it renders against the release
// binaries. A module of its own: kustomize's API brings a few dozen modules
// the service does not need. .ci/run runs it:
//
//	cd deploy/k8s/check && go test ./...
package check
