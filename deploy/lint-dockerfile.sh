#!/bin/sh
# Optional: lint the Dockerfile with dockerfile-utils from npm (it understands BuildKit
# syntax such as RUN --mount and FROM --platform). Skips, successfully, when npx is missing.
# Usage: deploy/lint-dockerfile.sh [Dockerfile]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
file=${1:-"$root/Dockerfile"}
if ! command -v npx >/dev/null 2>&1; then
	echo "lint-dockerfile: npx not found; Dockerfile lint skipped"
	exit 0
fi
npx --yes dockerfile-utils@0.16.3 lint "$file"
echo "lint-dockerfile: $file OK"
