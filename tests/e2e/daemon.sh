#!/bin/bash
# The daemon's life cycle: --check, start on the default configuration,
# GET /metrics as strict Prometheus text, SIGHUP with a good and a bad
# file, JSON logs (every line, from the switch on), and SIGTERM and SIGINT
# exiting 0 and saying why. Runs inside a private network namespace.
. "$(dirname "$0")/lib.sh"
# The default configuration keeps sandboxes running after a stop (the
# next start re-adopts them); this test's are ended when it ends.
e2e_cleanup_extra() {
	local f
	for f in "$E2E_TMP"/log*; do end_left_sandboxes "$f"; done
}

netns_new ns daemon

check "--version prints the version" \
	bash -c "'$SLUICED' --version | grep -Eq '^sluiced [0-9]+\.[0-9]+\.[0-9]+$'"
check "--check accepts conf/sluice.yaml" "$SLUICED" --check "$SL_SRC/conf/sluice.yaml"
check "--check accepts the compiled-in default" "$SLUICED" --check

cat > "$E2E_TMP/bad.yaml" <<'YAML'
daemon:
  log: { level: loud }
gateway:
  listen: { forward: 127.0.0.1:99999 }
YAML
set +e
out=$("$SLUICED" --check "$E2E_TMP/bad.yaml" 2>&1)
rc=$?
set -e
check "--check exits 2 on a bad file" test "$rc" = 2
check "--check names every error by line and column" \
	bash -c "grep -q '^$E2E_TMP/bad.yaml:2:17: daemon.log.level: ' <<<\"\$0\" &&
		 grep -q '^$E2E_TMP/bad.yaml:4:22: gateway.listen.forward: port 99999 is out of range 1..65535' <<<\"\$0\"" "$out"

# The default configuration names the fleet namespace "sluice" and the
# control socket /run/sluice/control.sock. The daemon runs in the test's
# network namespace and in a mount namespace of its own whose /run is a
# private tmpfs, and so is its /var/lib (the compiled-in default keeps
# its templates in /var/lib/sluice): what it makes there (the fleet
# namespace's name, the sockets, templates) is gone with it, and nothing
# of the host's /run or /var/lib is touched.
# (exec: run as `private ... &`, $! is the daemon itself.)
private() {
	exec nsenter --net="/run/netns/$ns" unshare -m --propagation private \
		sh -c 'mount -t tmpfs sl-e2e-run /run &&
			mount -t tmpfs sl-e2e-lib /var/lib && exec "$@"' sh "$@"
}

# The running daemon, on a copy of the default that the test can rewrite.
# Its data (templates) under the test's directory, not /var/lib/sluice.
copy_default() {
	sed "s|data_dir: /var/lib/sluice|data_dir: $E2E_TMP/data|" \
		"$SL_SRC/conf/sluice.yaml" >"$E2E_TMP/sluice.yaml"
}
copy_default
private "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>"$E2E_TMP/log" &
pid=$!
track "$pid"
check "the daemon starts" wait_for "$E2E_TMP/log" "sluiced [0-9.]+ started"

# The README's first claim, on the default configuration, with the CLI on
# the default socket (in the daemon's private /run: entered, by its pid).
CLI=${SL_BUILD:?SL_BUILD must name the build tree}/cli/sluice
inside() { nsenter -t "$pid" -m -n "$@"; }
# sl ARGS...: the CLI there, its output kept for the canary scan (lib.sh).
sl() { kept "sluice $1" inside "$CLI" "$@"; }
warm=
for _ in $(seq 100); do
	warm=$(sl --json info 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["pools"][0]["warm"])' || true)
	[ "$warm" = 2 ] && break
	sleep 0.1
done
check "the default pool is warm (2 sandboxes; saw ${warm:-none})" test "$warm" = 2
id=$(sl claim -q || true)
check "sluice claim -q prints an id ($id)" grep -Eq '^sbx-[0-9a-f]{16}$' <<<"$id"
out=$(sl exec "$id" -- sh -c 'echo $HTTPS_PROXY' 2>&1 || true)
check "the guest's HTTPS_PROXY is the lane's forward door ($out)" test "$out" = "http://10.88.1.1:3128"
set +e
out=$(sl exec "$id" -- curl -sS https://github.com 2>&1)
rc=$?
set -e
check "curl in the guest goes through the gateway, which refuses github.com (rc $rc: $out)" \
	bash -c '[ "$0" = 56 ] && grep -q "CONNECT tunnel failed, response 403" <<<"$1"' "$rc" "$out"
out=$(sl rm "$id" || true)
check "sluice rm releases it ($out)" test "$out" = "$id released"

# GET /metrics on the default API socket: strict Prometheus text
# (tests/e2e/forward/metrics.py), with the pool's families.
MX=$SL_SRC/tests/e2e/forward/metrics.py
scrape() {
	inside python3 "$MX" scrape /run/sluice/api.sock "$E2E_TMP/metrics.prom" &&
		python3 "$MX" check "$E2E_TMP/metrics.prom"
}
check "GET /metrics is well-formed Prometheus text (200, text/plain; version=0.0.4)" scrape
mget() { python3 "$MX" get "$E2E_TMP/metrics.prom" "$1" 2>/dev/null || echo none; }
v=$(mget 'sluice_claims_total{pool="default",tier="warm"}')
check "/metrics: the default pool served the one claim from its warm sandboxes ($v)" test "$v" = 1
v=$(mget 'sluice_boot_seconds_count{pool="default"}')
check "/metrics: the default pool's boots are in its histogram ($v, want >= 2)" \
	bash -c '[[ "$0" =~ ^[0-9]+$ ]] && [ "$0" -ge 2 ]' "$v"

kill -HUP "$pid"
check "SIGHUP reloads a good file" wait_for "$E2E_TMP/log" "configuration reloaded \(reload 1\)"

sed -i 's/warm_max: 8/warm_max: 1/' "$E2E_TMP/sluice.yaml"
kill -HUP "$pid"
check "SIGHUP with a bad file reports the error by line" \
	wait_for "$E2E_TMP/log" "sluice.yaml:[0-9]+:[0-9]+: pools\[0\]\.warm: warm \(2\) is greater than warm_max \(1\)"
check "SIGHUP with a bad file keeps the running configuration" \
	wait_for "$E2E_TMP/log" "reload failed: keeping the running configuration"
check "the daemon survives a bad reload" kill -0 "$pid"

# Switch to JSON logs through a reload: every later line is one JSON object.
copy_default
sed -i 's/format: text }/format: json }/' "$E2E_TMP/sluice.yaml"
kill -HUP "$pid"
check "a reload switches the log to JSON" wait_for "$E2E_TMP/log" '^\{"ts":"[^"]+","level":"info","msg":"configuration reloaded \(reload 2\)"\}$'

json_from=$(grep -n '"msg":"configuration reloaded (reload 2)"' "$E2E_TMP/log" | head -n1 | cut -d: -f1)
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
check "SIGTERM exits 0" test "$rc" = 0
check "the log says why it stopped, then that it has" python3 -c '
import json, sys
msgs = [json.loads(l)["msg"] for l in open(sys.argv[1]).read().splitlines()[int(sys.argv[2]) - 1:]]
i = msgs.index("SIGTERM: shutting down")
assert "stopped" in msgs[i + 1:], msgs[i:]
' "$E2E_TMP/log" "${json_from:-999999}"
ids=$(grep -oE 'sandbox sbx-[0-9a-f]+: left running' "$E2E_TMP/log" | cut -d' ' -f2 | tr -d :)
alive=0
for id in $ids; do
	[ -n "$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$id" -exec cat {}/cgroup.procs \; 2>/dev/null)" ] &&
		alive=$((alive + 1))
done
check "a clean stop leaves the warm sandboxes running for the next start ($alive of 2)" test "$alive" = 2
end_left_sandboxes "$E2E_TMP/log"
# From the reload that switched the format on, every line is one JSON
# object with ts, level and msg: not only the lines that look like JSON.
check "every line from the switch on is a JSON object with ts, level, msg (from line ${json_from:-none})" \
	python3 -c '
import json, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "", "the log does not end with a newline"
first = int(sys.argv[2])
assert first > 1, "the reload line is the first"
json_lines = lines[first - 1:-1]
assert len(json_lines) >= 3, json_lines  # the reload, SIGTERM, stopped
for no, l in enumerate(json_lines, first):
    try:
        d = json.loads(l)
    except ValueError as e:
        sys.exit("line %d is not JSON (%s): %r" % (no, e, l))
    if not isinstance(d, dict) or not {"ts", "level", "msg"} <= d.keys():
        sys.exit("line %d lacks ts, level or msg: %r" % (no, l))
' "$E2E_TMP/log" "${json_from:-0}"

# SIGINT too, with the compiled-in default configuration.
private "$SLUICED" 2>"$E2E_TMP/log2" &
pid=$!
track "$pid"
check "the daemon starts on the compiled-in default" wait_for "$E2E_TMP/log2" "configuration <default>"
kill -INT "$pid"
set +e
wait "$pid"
rc=$?
set -e
check "SIGINT exits 0" test "$rc" = 0
check "the log says SIGINT stopped it" grep -q ' SIGINT: shutting down$' "$E2E_TMP/log2"
check "and then that it has stopped" \
	bash -c 'sed -n "/ SIGINT: shutting down$/,\$p" "$0" | grep -q " info  stopped$"' "$E2E_TMP/log2"

finish
