# syntax=docker/dockerfile:1
#
# Tollgate container image: a static Go binary on distroless (CA certificates included, no shell).
# Build:  docker build --build-arg VERSION=$(git describe --tags) --build-arg REVISION=$(git rev-parse HEAD) -t tollgate:dev .
# The go build flags must match the Makefile's `build` target (checked by test/deploy).

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src

# Dependencies first so that source edits do not invalidate the module download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .

ARG VERSION=dev
ARG REVISION=
ARG TARGETOS
ARG TARGETARCH
# Cross-compile for the target platform instead of emulating it; CGO off gives a static binary
# that runs on distroless/static.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${REVISION}" -o /out/tollgate ./cmd/tollgate

FROM gcr.io/distroless/static-debian12:nonroot

ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="tollgate" \
      org.opencontainers.image.description="Policy-enforcing MCP gateway: forwards, denies or holds tool calls for human approval" \
      org.opencontainers.image.source="https://github.com/tollgate-mcp/tollgate" \
      org.opencontainers.image.url="https://github.com/tollgate-mcp/tollgate" \
      org.opencontainers.image.documentation="https://github.com/tollgate-mcp/tollgate/blob/main/docs/kubernetes.md" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

COPY --from=build /out/tollgate /tollgate

# nonroot (65532) of distroless, numeric so that Kubernetes runAsNonRoot can verify it.
USER 65532:65532

# MCP (TOLLGATE_LISTEN) and admin: /healthz /readyz /metrics, approvals (TOLLGATE_ADMIN_LISTEN).
# No HEALTHCHECK: Kubernetes probes /healthz and /readyz on the admin port instead.
EXPOSE 7467 7469

ENTRYPOINT ["/tollgate"]
CMD ["run", "--config", "/etc/tollgate/config.yaml"]
