#!/bin/bash
# The rpc backend (docs/backend-rpc.md) end to end, with no engine: the
# real sluiced runs a pool whose supervisor is tests/e2e/fake_supervisor.py
# (sluiced starts it with one end of a socketpair as fd 3; its sandboxes
# are the same sluice-agent as PID 1 of new namespaces, chrooted into an
# overlay of the template's tree, in the network namespace sluiced made).
# Checked: the pool fills; another pool whose supervisor says its engine
# cannot run here reports available: false with the reason instead of
# booting; exec, env and proxy variables, the hostname, files in and out,
# a fetch from net.sh's origin through the lane's forward door; the
# supervisor killed: the claim keeps working, the supervisor is started
# again (back-off) and the sandbox adopted again, new claims work; the
# daemon killed and started again: the claim is re-adopted; release
# removes the sandbox, its namespace and its link.
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/net.sh"

SOCK=$E2E_TMP/api.sock
LOG=$E2E_TMP/sluiced.log
FSUP=$E2E_TMP/fsup
FLOG=$E2E_TMP/fsup.log
: >"$LOG"
# shellcheck source=tests/e2e/api_lib.sh
. "$(dirname "$0")/api_lib.sh"
# On any exit: the fake supervisor's sandboxes (their records name their
# pids), their namespaces.
e2e_cleanup_extra() {
	local f pid n
	for f in "$FSUP"/*.json "$FSUP.down"/*.json; do
		[ -f "$f" ] || continue
		pid=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$f" 2>/dev/null)
		[ -n "$pid" ] && grep -q sluice-agent "/proc/$pid/cmdline" 2>/dev/null && kill -9 "$pid"
	done
	for n in $( (grep -oE 'sbx-[0-9a-f]+' "$LOG" 2>/dev/null; ls "$E2E_TMP/data/sandboxes" 2>/dev/null) | sort -u); do
		[ -e "/run/netns/sl-rpc-$n" ] && { umount -l "/run/netns/sl-rpc-$n" 2>/dev/null; rm -f "/run/netns/sl-rpc-$n"; }
	done
	return 0
}
dump_log() { echo "--- the daemon's log (last 60 lines):" >&2; tail -n 60 "$LOG" >&2; echo "--- the supervisor's:" >&2; tail -n 20 "$FLOG" >&2; }

cat >"$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  fleet_teardown: false
  control_socket: off
  log: { level: info, format: text }
api: { listen: off, socket: $SOCK }
gateway:
  workers: 2
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [10.99.0.53], timeout_ms: 500, attempts: 1 }
  limits: { connect_timeout_ms: 1000 }
lanes:
  - name: egress
    subnet: 10.88.1.0/24
    doors: { forward: 3128 }
policies:
  - name: web
    allow: ["origin.test"]
    allow_private: [10.99.0.0/24]
pools:
  - name: p
    backend: rpc
    supervisor: { command: [$PY, $HERE/fake_supervisor.py, --state, $FSUP, --log, $FLOG] }
    template: busybox
    lane: egress
    policy: web
    warm: 1
    warm_max: 2
  - name: down
    backend: rpc
    supervisor: { command: [$PY, $HERE/fake_supervisor.py, --state, $FSUP.down, --unavailable, "no engine on this host"] }
    template: busybox
    lane: egress
    policy: web
    warm: 1
YAML

PID=
start_daemon() {
	mark
	nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>>"$LOG" &
	PID=$!
	track "$PID"
	for _ in $(seq 600); do
		since | grep -Eq "sluiced [0-9.]+ started" && [ -S "$SOCK" ] && return 0
		kill -0 "$PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# sup_pid: the supervisor of pool p, a child of the daemon.
sup_pid() {
	local c
	# shellcheck disable=SC2013 # pids, one word each
	for c in $(cat /proc/"$PID"/task/*/children 2>/dev/null); do
		[[ $(tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null) == *"--state $FSUP --log"* ]] &&
			{ echo "$c"; return 0; }
	done
	return 1
}
x() { op POST "/v1/sandboxes/$1/exec" "${JS[@]}" "$2"; }
out_is() { is 'd["stdout"]' "$1"; }
# wait_avail POOL VALUE SECONDS: info's "available" of the pool
wait_avail() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		[ "$(info_pool "$1" available 2>/dev/null)" = "$2" ] && return 0
		sleep 0.1
	done
	echo "    pool $1: available $(info_pool "$1" available 2>/dev/null) (wanted $2)" >&2
	return 1
}

if ! start_daemon; then
	fail "the daemon starts with an rpc pool"
	dump_log
	finish
fi
pass "the daemon starts with an rpc pool"
check "the pool fills (warm 1)" wait_warm p 1 180 || dump_log
check "GET /v1/info names the pool's backend: rpc" eval '[ "$(info_pool p backend)" = rpc ]'
check "a pool whose supervisor says its engine cannot run here: available false" wait_avail down False 60
check "... with the supervisor's reason" eval '[[ $(info_pool down reason) == *"no engine on this host"* ]]'
check "... and nothing warm" eval '[ "$(info_pool down warm)" = 0 ]'

claim unix "" '{"pool":"p","env":{"FOO":"bar"}}'
A=$ID
check "a warm claim: 201, tier warm" eval 'status 201 && is "d[\"tier\"]" warm'
check "its network namespace is sluiced's (/run/netns/sl-rpc-$A)" test -e "/run/netns/sl-rpc-$A"
x "$A" '{"argv":["sh","-c","echo out; echo err >&2; exit 3"]}'
check "exec: stdout, stderr and the exit code" \
	eval 'status 200 && out_is out && is "d[\"stderr\"]" err && is "d[\"exit_code\"]" 3'
x "$A" '{"argv":["sh","-c","echo $FOO $http_proxy"]}'
check "exec: the claim's env and the proxy variables" out_is "bar http://10.88.1.1:3128"
x "$A" '{"argv":["hostname"]}'
check "the hostname is the sandbox's id" out_is "$A"
x "$A" '{"argv":["sh","-c","echo $$; cat /proc/1/cmdline | tr \"\\0\" \" \""]}'
check "the agent is PID 1 of the sandbox, listening on /run/sluice" \
	eval '[[ $(j "d[\"stdout\"]") == *"sluice-agent --listen /run/sluice/agent.sock"* ]]'
head -c 100000 /dev/urandom >"$E2E_TMP/blob"
op PUT "/v1/sandboxes/$A/files?path=/tmp/blob&mode=0640" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$E2E_TMP/blob"
check "a file in: 2xx" eval '[[ $ST == 2* ]]'
op GET "/v1/sandboxes/$A/files?path=/tmp/blob"
check "... and back, the same bytes" cmp -s "$BODY" "$E2E_TMP/blob"
x "$A" '{"argv":["wget","-qO-","http://origin.test/"],"timeout_seconds":30}'
check "a fetch through the lane's forward door" out_is "hello from origin"
x "$A" '{"argv":["wget","-qO-","http://other.test/"],"timeout_seconds":30}'
check "... and a host the policy does not allow is refused" eval '! is "d[\"exit_code\"]" 0 2>/dev/null'

# --- the supervisor dies -----------------------------------------------------
SP=$(sup_pid) || SP=
check "the supervisor is the daemon's child (pid ${SP:-none})" test -n "$SP"
[ -n "$SP" ] && kill -9 "$SP"
x "$A" '{"argv":["echo","still"]}'
check "the claim keeps working while its supervisor is down (the agent is sluiced's)" out_is still
claim unix "" '{"pool":"p"}'
SB=$ID
check "a claim after the supervisor died: 201 (it was started again)" status 201 || dump_log
check "... and it was: a new supervisor process" eval 'n=$(sup_pid) && [ "$n" != "$SP" ]'
check "... which adopted the running sandboxes again" logged "adopted again"
x "$SB" '{"argv":["hostname"]}'
check "the new claim runs commands" out_is "$SB"

# --- the daemon dies ---------------------------------------------------------
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
x_before=$(find "$FSUP" -maxdepth 1 -name "*.json" | wc -l)
check "the sandboxes outlive the daemon ($x_before records)" test "$x_before" -ge 2
if start_daemon; then
	pass "the daemon starts again"
	op GET "/v1/sandboxes/$A"
	check "the claim is adopted again" eval 'status 200 && is "d[\"state\"]" claimed'
	x "$A" '{"argv":["sha256sum","/tmp/blob"]}'
	check "its files are still there" eval 'is "d[\"stdout\"].split()[0]" "$(sha256sum <"$E2E_TMP/blob" | cut -d" " -f1)"'
	x "$A" '{"argv":["wget","-qO-","http://origin.test/"],"timeout_seconds":30}'
	check "its network still works" out_is "hello from origin"
else
	fail "the daemon starts again"
	dump_log
fi

# --- release -------------------------------------------------------------------
for id in "$A" "$SB"; do
	check "$id's namespace is there" test -e "/run/netns/sl-rpc-$id"
	op DELETE "/v1/sandboxes/$id"
	check "release $id" is 'd["result"]' released
	check "its namespace is gone" test ! -e "/run/netns/sl-rpc-$id"
	check "the supervisor no longer has it" test ! -e "$FSUP/fake-$id.json"
done
finish
