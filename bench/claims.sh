#!/bin/bash
# bench/claims.sh: the API's claim path. sluiced runs in a namespace of its
# own with one pool (busybox template, warm 8) of the backend CLAIMS_BACKEND
# (ns, the default, or vm: parked microVM clones); a python client on the
# API's unix socket (operator) measures
#   1. the latency of a warm claim (POST /v1/claims until the 201), median
#      and p99 over CLAIMS (default 200) claims, each released after;
#   2. claims per second with 4 clients claiming and releasing in a loop
#      for BENCH_SECONDS (default 10): once the warm sandboxes are used up
#      the rate is the refill rate, and claims turn cold.
# Every claim waits for its journal event to be fsync'd (data_dir in $TMP).
# Goals: a warm `ns` claim's median under 1 ms and p99 under 5 ms (issue
# 7); a warm `vm` claim (resume a parked clone, give it the time and fresh
# entropy) under 25 ms (issue 9).
# There is no peer to compare with here (no other sandbox manager is
# packaged for Debian); the figures stand against the goal.
set -euo pipefail
BENCH_NAME=claims
BENCH_TOOLS=""
. "$(dirname "$0")/common.bash"
CLAIMS=${CLAIMS:-200}
BACKEND=${CLAIMS_BACKEND:-ns}

cat > "$TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $TMP/data
  fleet_netns: $NS-fleet
  fleet_teardown: true
  control_socket: off
  log: { level: warn, format: text }
api: { listen: off, socket: $TMP/api.sock }
gateway:
  workers: 1
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
  access_log: off
lanes:
  - name: egress
    subnet: 10.88.0.0/20
    doors: { forward: 3128, socks: 1080 }
policies:
  - { name: web, allow: ["example.com"] }
pools:
  - { name: bench, backend: $BACKEND, template: busybox, lane: egress, policy: web, warm: 8, warm_max: 8 }
YAML

nsenter --net="/run/netns/$NS" "$SLUICED" --config "$TMP/sluice.yaml" 2>"$TMP/log" &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$TMP/api.sock" ] && break; sleep 0.1; done
[ -S "$TMP/api.sock" ] || { cat "$TMP/log" >&2; exit 1; }
# The pool full before the first claim (a vm pool's first boot makes its
# snapshot: seconds under TCG).
for _ in $(seq 1200); do
	w=$(curl -s --unix-socket "$TMP/api.sock" http://x/v1/info |
		$PY -c 'import json,sys; print(json.load(sys.stdin)["pools"][0]["warm"])')
	[ "$w" = 8 ] && break
	sleep 0.1
done

echo "==> $BACKEND pool: warm claims, one at a time ($CLAIMS)"
$PY "$ROOT/bench/claims.py" latency "$TMP/api.sock" "$CLAIMS"
echo "==> 4 clients, claim and release, ${SECS}s"
$PY "$ROOT/bench/claims.py" rate "$TMP/api.sock" "$SECS" 4

# The vm backend as well, where its guest images are built: the same run
# against a pool of parked microVM clones (after this daemon has stopped).
if [ -z "${CLAIMS_BACKEND:-}" ] && [ -f "$ROOT/build/vm/vmlinux" ]; then
	kill "${PIDS[0]}"
	wait "${PIDS[0]}" 2>/dev/null || true
	CLAIMS_BACKEND=vm CLAIMS=${VM_CLAIMS:-50} bash "$0"
fi
