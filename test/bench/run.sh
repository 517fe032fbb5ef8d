#!/usr/bin/env bash
# Builds Tollgate and the bench helpers into bin/, runs the hot-path Go benchmarks and the
# load harness, and writes the report to docs/PERFORMANCE.md (or $OUT).
#   test/bench/run.sh           full run (≈ 7 min)
#   test/bench/run.sh -quick    quick run (< 2 min)
# Extra arguments go to the harness (go run ./test/bench/cmd/loadtest -h lists them).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
OUT=${OUT:-docs/PERFORMANCE.md}
BENCHTIME=${BENCHTIME:-1s}

mkdir -p bin
# The product binary is built as `make build` builds it; the helpers are not part of it.
CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o bin/tollgate ./cmd/tollgate
$GO build -o bin/benchupstream ./test/bench/cmd/benchupstream
$GO build -o bin/bareproxy ./test/bench/cmd/bareproxy

quick=false
for a in "$@"; do [[ $a == -quick || $a == --quick ]] && quick=true; done
$quick && BENCHTIME=${BENCHTIME_QUICK:-200ms}

gobench=$(mktemp)
trap 'rm -f "$gobench"' EXIT
echo "run.sh: go benchmarks (-benchtime $BENCHTIME)" >&2
$GO test -run '^$' -bench . -benchmem -benchtime "$BENCHTIME" \
  ./internal/jsonrpc/ ./internal/intercept/ ./internal/rules/ ./internal/policy/ ./internal/sse/ ./internal/proxy/ ./internal/upstream/ ./internal/tasks/ ./internal/gwtools/ \
  | tee "$gobench" >&2

echo "run.sh: load harness" >&2
$GO run ./test/bench/cmd/loadtest -bin bin -gobench "$gobench" -notes test/bench/analysis.md -out "$OUT" "$@"
echo "run.sh: wrote $OUT" >&2
