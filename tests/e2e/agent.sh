#!/bin/bash
# sluice-agent end to end, outside any sandbox: tests/e2e/agent_driver runs
# the real static agent as its child over a socketpair and drives it with
# sandbox/agent_client.c (hello, exec, stdin, signals, timeouts, a slow
# reader with the agent's VmRSS bounded, 50 MiB written and read back,
# list/stat/mkdir/remove, malformed frames). Needs no network namespace:
# it opens no socket but the socketpair.
. "$(dirname "$0")/lib.sh"

: "${SL_BUILD:?SL_BUILD must name the build tree (ctest sets it)}"
AGENT=$SL_BUILD/agent/sluice-agent
DRIVER=$SL_BUILD/tests/agent_driver

# static: the agent exists and is an ELF executable whose program headers
# readelf could read (binutils: build-essential brings it) and name no
# interpreter, with no shared library needed; and, where `file` is there,
# it says so too. (Not `! ldd`: that is true of a file that is missing.)
static_agent() {
	local ph dyn
	[ -f "$AGENT" ] && [ -x "$AGENT" ] || { echo "    no executable $AGENT" >&2; return 1; }
	ph=$(readelf -lW "$AGENT") && dyn=$(readelf -dW "$AGENT") || return 1
	grep -q '^Elf file type is EXEC' <<<"$ph" && grep -Eq '^ +LOAD ' <<<"$ph" &&
		! grep -q INTERP <<<"$ph" && ! grep -q '(NEEDED)' <<<"$dyn" || {
		echo "    readelf: $(grep -E 'Elf file type|INTERP|NEEDED' <<<"$ph$dyn" | tr '\n' ' ')" >&2
		return 1
	}
	if command -v file >/dev/null; then
		file -L "$AGENT" | grep -q 'statically linked' || return 1
	fi
}
check "sluice-agent is statically linked" static_agent
check "sluice-agent --version" \
	bash -c "'$AGENT' --version | grep -Eq '^sluice-agent [0-9.]+ \(protocol 1\)$'"
set +e
"$AGENT" >/dev/null 2>&1
rc=$?
set -e
check "sluice-agent with no stream exits 2" test "$rc" = 2
set +e
"$AGENT" --listen >/dev/null 2>&1
rc=$?
set -e
check "sluice-agent --listen without a path exits 2" test "$rc" = 2
# --listen PATH alone (a container's PID 1, the rpc backend): no stream
# yet, it waits on PATH for its first host.
"$AGENT" --listen "$E2E_TMP/agent.sock" >/dev/null 2>&1 &
apid=$!
track "$apid"
for _ in $(seq 100); do [ -S "$E2E_TMP/agent.sock" ] && break; sleep 0.05; done
check "sluice-agent --listen PATH alone waits for its first host on PATH" \
	eval '[ -S "$E2E_TMP/agent.sock" ] && kill -0 "$apid"'
check "... a socket only its owner may use (0600)" \
	test "$(stat -c %a "$E2E_TMP/agent.sock" 2>/dev/null)" = 600
kill -TERM "$apid" 2>/dev/null || true
wait "$apid" 2>/dev/null || true

mkdir -p "$E2E_TMP/work"
rc=0
"$DRIVER" "$AGENT" "$E2E_TMP/work" || rc=$?
case $rc in
0) pass "agent_driver scenarios" ;;
77) skip "agent_driver scenarios: some need root" ;;
*) fail "agent_driver scenarios (rc $rc)" ;;
esac
finish
