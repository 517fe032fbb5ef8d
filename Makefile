# Tollgate — build, test and CI entry points. `make help` lists the targets.
SHELL       := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
FUZZTIME ?= 30s
# Go sources outside tool caches, for gofmt.
GOFILES   = $(shell find . -name '*.go' -not -path './.tools/*' -not -path '*/node_modules/*' -not -path './bin/*')

.PHONY: help build demo deps test test-unit conformance fuzz bench bench-quick lint vet clean distclean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## static binary bin/tollgate
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/tollgate ./cmd/tollgate

demo: ## run the built-in demo server with the gateway in front of it
	$(GO) run ./cmd/tollgate demo

deps: ## install test dependencies into .tools (idempotent; see scripts/ensure-deps.sh)
	scripts/ensure-deps.sh

# The conformance comparisons (2025-11-25 suite, then the 2026-07-28 suite's server-stateless and
# tasks-* scenarios) run once, as their own step, so their tables are easy to find in CI logs.
test: deps vet ## everything CI runs: deps, vet, race tests, conformance comparison
	TOLLGATE_CONFORMANCE=skip $(GO) test -race -count=1 -timeout 15m ./...
	$(MAKE) --no-print-directory conformance-run

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
