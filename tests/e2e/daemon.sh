#!/bin/bash
# The daemon's life cycle: --check, start on the default configuration,
# SIGHUP with a good and a bad file, JSON logs, and SIGTERM exiting 0
# within a second. Runs inside a private network namespace.
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
warm=
for _ in $(seq 100); do
	warm=$(inside "$CLI" --json info 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["pools"][0]["warm"])' || true)
	[ "$warm" = 2 ] && break
	sleep 0.1
done
check "the default pool is warm (2 sandboxes; saw ${warm:-none})" test "$warm" = 2
id=$(inside "$CLI" claim -q || true)
check "sluice claim -q prints an id ($id)" grep -Eq '^sbx-[0-9a-f]{16}$' <<<"$id"
out=$(inside "$CLI" exec "$id" -- sh -c 'echo $HTTPS_PROXY' 2>&1 || true)
check "the guest's HTTPS_PROXY is the lane's forward door ($out)" test "$out" = "http://10.88.1.1:3128"
set +e
out=$(inside "$CLI" exec "$id" -- curl -sS https://github.com 2>&1)
rc=$?
set -e
check "curl in the guest goes through the gateway, which refuses github.com (rc $rc: $out)" \
	bash -c '[ "$0" = 56 ] && grep -q "CONNECT tunnel failed, response 403" <<<"$1"' "$rc" "$out"
out=$(inside "$CLI" rm "$id" || true)
check "sluice rm releases it ($out)" test "$out" = "$id released"

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

start=$(date +%s%N)
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
check "SIGTERM exits 0" test "$rc" = 0
ids=$(grep -oE 'sandbox sbx-[0-9a-f]+: left running' "$E2E_TMP/log" | cut -d' ' -f2 | tr -d :)
alive=0
for id in $ids; do
	[ -n "$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$id" -exec cat {}/cgroup.procs \; 2>/dev/null)" ] &&
		alive=$((alive + 1))
done
check "a clean stop leaves the warm sandboxes running for the next start ($alive of 2)" test "$alive" = 2
end_left_sandboxes "$E2E_TMP/log"
check "SIGTERM exits within a second (took ${elapsed_ms} ms)" test "$elapsed_ms" -lt 1000
check "every JSON line parses" python3 -c '
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
assert lines, "no JSON lines"
for l in lines:
    json.loads(l)
' "$E2E_TMP/log"

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

finish
