# Tollgate — build, test and CI entry points. `make help` lists the targets.
SHELL       := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO       ?= go
# Versions are semver tags vX.Y.Z (CHANGELOG.md); between tags `git describe` gives
# vX.Y.Z-N-gHASH, and without any tag the version is "dev". REVISION is the full commit.
VERSION  ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(REVISION)
FUZZTIME ?= 30s
# Go sources outside tool caches, for gofmt.
GOFILES   = $(shell find . -name '*.go' -not -path './.tools/*' -not -path '*/node_modules/*' -not -path './bin/*')

.PHONY: help build demo deps test test-unit conformance fuzz bench bench-quick lint vet clean distclean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## static binary bin/tollgate
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/tollgate ./cmd/tollgate

# BUILD_QUIETLY runs `make build` saying what it does: a first build downloads the modules and
# compiles for minutes on a small machine, so a line every 15 s says it is still working; an
# up-to-date bin/tollgate comes from Go's build cache in seconds.
define BUILD_QUIETLY
	@echo "[$(1)] building bin/tollgate (go build; the first time downloads modules and compiles for a few minutes, later builds take seconds)…"
	@start=$$(date +%s); last=0; \
	$(MAKE) --no-print-directory -s build >bin/.build.log 2>&1 & pid=$$!; \
	while kill -0 $$pid 2>/dev/null; do \
		sleep 1; n=$$(( $$(date +%s) - start )); \
		if (( n - last >= 15 )); then last=$$n; echo "[$(1)] still compiling… $${n}s"; fi; \
	done; \
	if ! wait $$pid; then cat bin/.build.log; echo "[$(1)] build FAILED"; exit 1; fi; \
	echo "[$(1)] bin/tollgate ready in $$(( $$(date +%s) - start ))s"
endef

demo: ## build bin/tollgate (seconds when up to date) and run the gateway in front of a built-in demo server
	@mkdir -p bin
	$(call BUILD_QUIETLY,demo)
	@echo "[demo] starting: bin/tollgate demo"
	@exec bin/tollgate demo

deps: ## install test dependencies into .tools (idempotent; see scripts/ensure-deps.sh)
	scripts/ensure-deps.sh

# The conformance comparisons (2025-11-25 suite, then the 2026-07-28 suite's server-stateless and
# tasks-* scenarios) run once, as their own step, so their tables are easy to find in CI logs.
# A phase line before each step and its duration after it, so a first run never looks stuck.
PHASE_START = @echo "[test] phase $(1): $(2)"; date +%s >bin/.phase-start
PHASE_END   = @echo "[test] phase $(1) done in $$(( $$(date +%s) - $$(cat bin/.phase-start) ))s"

test: ## everything CI runs: deps, vet, race tests, conformance comparison
	@mkdir -p bin
	@echo "[test] make test: 1 dependencies, 2 go vet (compiled with -race), 3 race tests of every package, 4 MCP conformance comparison."
	@echo "[test] Expect about 7 minutes on a 2-core machine with dependencies installed, 15 to 20 minutes on a fresh one (Node 22, npm tools, Debian packages and Go modules are downloaded first; oauth2-proxy compiles meanwhile and is cached in ~/.cache/tollgate for later clones)."
	@# Tests build into their own temp dirs; bin/tollgate (make build's stripped static binary) must survive.
	@sha256sum bin/tollgate 2>/dev/null >bin/.tollgate.sum || : >bin/.tollgate.sum
	$(call PHASE_START,1/4,dependencies (scripts/ensure-deps.sh; installs only what is missing))
	$(MAKE) --no-print-directory deps
	$(call PHASE_END,1/4)
	@# vet with -race type-checks against the same race-instrumented packages phase 3 compiles, so
	@# every package is compiled once for both (a plain `go vet` compiled the tree a second time,
	@# 249 s of the 20.5 min a fresh machine took); phase 3 then skips go test's own vet subset.
	$(call PHASE_START,2/4,go vet -race (compiles every package once for phases 2 and 3))
	$(GO) vet -race ./...
	$(call PHASE_END,2/4)
	$(call PHASE_START,3/4,go test -race of every package (the longest phase; Go prints each package as it finishes))
	TOLLGATE_CONFORMANCE=skip $(GO) test -race -vet=off -count=1 -timeout 15m ./...
	$(call PHASE_END,3/4)
	$(call PHASE_START,4/4,MCP conformance suites: direct vs through Tollgate)
	$(MAKE) --no-print-directory conformance-run
	$(call PHASE_END,4/4)
	@if [[ -s bin/.tollgate.sum ]] && ! sha256sum --quiet -c bin/.tollgate.sum >/dev/null 2>&1; then \
		echo "[test] FAIL: a test replaced or removed bin/tollgate (tests must build into their own temp dir)"; exit 1; fi

test-unit: ## go tests only (no dependency install, no conformance run)
	TOLLGATE_CONFORMANCE=skip $(GO) test -race -count=1 -timeout 15m ./...

conformance: deps conformance-run ## MCP conformance suite: direct vs through Tollgate

.PHONY: conformance-run
conformance-run:
	TOLLGATE_CONFORMANCE=require $(GO) test -count=1 -timeout 15m -v -run '^Test(Modern)?ConformanceThroughTollgate$$' ./test/conformance/

fuzz: ## each Fuzz target for FUZZTIME (30s)
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

bench: ## load harness (direct vs bare proxy vs Tollgate) and Go benchmarks; writes docs/PERFORMANCE.md
	test/bench/run.sh $(BENCHFLAGS)

bench-quick: ## the same in about two minutes (report to bin/PERFORMANCE-quick.md)
	OUT=bin/PERFORMANCE-quick.md test/bench/run.sh -quick

vet:
	$(GO) vet ./...

lint: vet ## gofmt must list nothing, go vet must pass
	@out="$$(gofmt -l $(GOFILES))"; if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean: ## remove build and test outputs (keeps .tools)
	rm -rf bin coverage.out coverage.html *.coverprofile test/conformance/last-run.md test/conformance/last-run-modern.md

distclean: clean ## also remove installed tools
	rm -rf .tools
