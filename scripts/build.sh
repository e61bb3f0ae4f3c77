#!/bin/sh
# scripts/build.sh OUTDIR: builds the release binaries — cmd/stormradius,
# cmd/ingest and cmd/api — into OUTDIR, static (no cgo: the embedded store
# is pure Go), without local paths or debug symbols. The container image
# (Dockerfile) and CI (.ci/run) both build through this script, so they
# cannot drift apart; deploy/deploy_test.go checks that they do.
set -eu
out=${1:?usage: scripts/build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/" ./cmd/stormradius ./cmd/ingest ./cmd/api
