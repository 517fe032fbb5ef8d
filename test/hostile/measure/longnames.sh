#!/usr/bin/env bash
# longnames.sh — the item-5 measurement of docs/SECURITY.md: 100 tools/call requests whose tool
# names are 1 MB each, sent on loopback to a real Tollgate process in front of the bench
# upstream; then the size of GET /metrics and the gateway's RSS (VmRSS, VmHWM).
# Usage: test/hostile/measure/longnames.sh   (builds into a temp dir; needs python3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
tmp="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/tollgate" ./cmd/tollgate
go build -o "$tmp/upstream" ./test/bench/cmd/benchupstream
"$tmp/upstream" -tools 0 >"$tmp/up.out" &
for _ in $(seq 100); do grep -q LISTENING "$tmp/up.out" 2>/dev/null && break; sleep 0.1; done
up="$(sed -n 's/^LISTENING //p' "$tmp/up.out")"
cat >"$tmp/tollgate.yaml" <<YAML
schema: 1
sources: [{id: upstream, kind: mcp, url: "$up"}]
governance: {defaults: {action: forward}}
YAML
TOLLGATE_LISTEN=127.0.0.1:17467 TOLLGATE_ADMIN_LISTEN=127.0.0.1:17469 TOLLGATE_LOG_LEVEL=info \
	"$tmp/tollgate" run --config "$tmp/tollgate.yaml" 2>"$tmp/tollgate.log" &
gw=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:17469/readyz >/dev/null && break; sleep 0.1; done
python3 - "$gw" "$tmp/tollgate.log" <<'PY'
import json, sys, urllib.request
pid, logpath = sys.argv[1], sys.argv[2]
def post(body, sid=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if sid: h.update({"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    r = urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:17467/mcp", body.encode(), h), timeout=30)
    r.read(); return r.headers.get("Mcp-Session-Id")
sid = post('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"m","version":"1"}}}')
def rss():
    st = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status") if ":" in l)
    return st["VmRSS"].strip(), st["VmHWM"].strip()
print("before: RSS %s (peak %s)" % rss())
for i in range(100):
    name = ("%03d" % i) + "x" * (1_000_000 - 3)
    post(json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": name, "arguments": {}}}), sid)
m = urllib.request.urlopen("http://127.0.0.1:17469/metrics", timeout=60).read()
import os, re
heap = {k: int(float(v)) for k, v in re.findall(rb"^(go_memstats_heap_(?:inuse|alloc)_bytes) (\S+)$", m, re.M)}
print("after 100 calls with 1 MB tool names: /metrics %d bytes; RSS %s (peak %s); log %d bytes" % ((len(m),) + rss() + (os.path.getsize(logpath),)))
print("heap at that scrape: %s" % {k.decode(): "%.1f MB" % (v / 1e6) for k, v in heap.items()})
PY
