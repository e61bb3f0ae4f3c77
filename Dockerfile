# syntax=docker/dockerfile:1
# The stormradius image: cmd/stormradius, cmd/ingest and cmd/api, static,
# on distroless (CA certificates, tzdata, no shell), as UID 65532.
#
#   docker build -t stormradius .
#   docker run -p 4317:4317 -p 4318:4318 -p 8080:8080 -v stormradius:/data stormradius
#   docker run stormradius ingest --store clickhouse://clickhouse:9000/stormradius --kafka-brokers kafka:9092
#   docker run stormradius api --store clickhouse://clickhouse:9000/stormradius
#
# deploy/compose and deploy/k8s run it; docs/operations.md explains both.

# The Go release of go.mod's go line (deploy/deploy_test.go checks it).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
# The toolchain of the image, never one downloaded by go.mod's line.
ENV GOTOOLCHAIN=local
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The same build as CI's (.ci/run): scripts/build.sh, static binaries.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    scripts/build.sh /out/bin
# The embedded store's directory, 0700 like the one serve creates: a
# directory that exists keeps its mode.
RUN install -d -m 0700 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
# serve's embedded store (spans.db, results.db). cmd/ingest and cmd/api keep
# nothing on disk: their store is ClickHouse.
VOLUME /data
# OTLP/gRPC, OTLP/HTTP, serve's and cmd/api's --http, cmd/ingest's --http
# in deploy/ (health, readiness, /metrics).
EXPOSE 4317 4318 8080 8081
# serve's and cmd/api's --http default; cmd/ingest's is set where it runs
# (deploy/compose: stormradius healthcheck --url http://127.0.0.1:8081/readyz).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["stormradius", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"]
CMD ["stormradius", "serve", "--data", "/data"]
