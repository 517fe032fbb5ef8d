#!/usr/bin/env bash
# fuzz.sh — run every Fuzz target in the module for FUZZTIME (default 30s) each.
# Targets are discovered with `go test -list`, so new ones are picked up without edits.
# Go runs one -fuzz target per invocation, hence the loop.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME="${FUZZTIME:-30s}"
n=0
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "== $pkg $target ($FUZZTIME)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
		n=$((n + 1))
	done
done
echo "fuzzed $n targets"
