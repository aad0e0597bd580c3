#!/bin/bash
# Restarts end to end: the real sluiced with real `ns` sandboxes, which
# outlive it (fleet_teardown: false), stopped and started again on the
# same data_dir.
#
# Checks:
#   1. a second sluiced on the same data_dir refuses to start: exit 1, its
#      log names the data_dir and the lock ("another sluiced uses it"),
#      and the first one serves on untouched;
#   2. a claim whose sandbox died while the daemon was down comes back
#      reaped: the journal has its reap with reason "gone", GET shows it
#      reaped, DELETE says already-reaped; the other claim is re-adopted;
#   3. a start with state.json missing rebuilds from the journal alone:
#      the live claim is there with the same id, lease, layer, labels and
#      address (the same sandbox: its files are there), the ended ones
#      are shown ended, the warm sandbox is re-adopted, not booted anew.
#
# The daemons run in a network namespace of the test's; their fleet
# namespace, and every sandbox their logs name, are removed on every exit.
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY

gw=''
netns_new gw rst
FLEET="sl-rstf-$$"
netns_owned "$FLEET"   # the daemons keep it at a stop; removed here on exit
SOCK=$E2E_TMP/api.sock
LOG=$E2E_TMP/sluiced.log
LOG2=$E2E_TMP/second.log
: >"$LOG"
: >"$LOG2"
DATA=$E2E_TMP/data
JOURNAL=$DATA/journal.jsonl
STATE=$DATA/state.json
e2e_cleanup_extra() { end_left_sandboxes "$LOG"; end_left_sandboxes "$LOG2"; }
ACME="acme-$RANDOM$RANDOM"

# mkconf FILE TEARDOWN
mkconf() {
	cat > "$1" <<YAML
daemon:
  data_dir: $DATA
  fleet_netns: $FLEET
  fleet_teardown: $2
  control_socket: off
  log: { level: info, format: text }
api: { listen: off, socket: $SOCK }
gateway:
  workers: 1
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
  access_log: stderr
lanes:
  - { name: egress, subnet: 10.89.3.0/24, doors: { forward: 3128 } }
tenants:
  - { name: acme, keys: [$ACME] }
policies:
  - { name: wide, allow: ["example.com"] }
pools:
  - { name: p, template: busybox, lane: egress, policy: wide, warm: 1, warm_max: 1,
      ttl: { default_seconds: 900, max_seconds: 3600 } }
certs: { ca_cert: $E2E_TMP/ca.pem, ca_key: $E2E_TMP/ca.key }
YAML
}
mkconf "$E2E_TMP/sluice.yaml" false
mkconf "$E2E_TMP/end.yaml" true

# shellcheck source=tests/e2e/api_lib.sh
. "$(dirname "$0")/api_lib.sh"
acme() { req unix "$ACME" "$@"; }
x() { op POST "/v1/sandboxes/$1/exec" "${JS[@]}" "$2"; }
dump_log() { echo "--- the daemon's log (last 60 lines):" >&2; tail -n 60 "$LOG" >&2; }

PID=
# start_daemon [CONFIG]: waits for this start's own "started" line (an
# earlier start's is in the log too, and a stopped one leaves its socket).
start_daemon() {
	mark
	nsenter --net="/run/netns/$gw" "$SLUICED" --config "${1:-$E2E_TMP/sluice.yaml}" 2>>"$LOG" &
	PID=$!
	track "$PID"
	for _ in $(seq 300); do
		since | grep -Eq "sluiced [0-9.]+ started \(pid $PID," && [ -S "$SOCK" ] && return 0
		kill -0 "$PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# stop_daemon: SIGTERM; its exit code in RC (empty if it did not exit
# within 30 s).
RC=
stop_daemon() {
	RC=
	kill -TERM "$PID" 2>/dev/null || true
	for _ in $(seq 300); do
		kill -0 "$PID" 2>/dev/null || { wait "$PID" && RC=0 || RC=$?; return 0; }
		sleep 0.1
	done
	return 1
}
# events ID [AFTER_SEQ]: the journal's events for that claim after that
# seq, as [event, reason] pairs.
events() {
	"$PY" -c 'import json,sys
out = []
for l in open(sys.argv[1], "rb"):
    try: e = json.loads(l)
    except ValueError: continue
    if e.get("claim") == sys.argv[2] and e.get("seq", 0) > int(sys.argv[3]):
        out.append([e.get("event"), e.get("reason")])
print(json.dumps(out))' "$JOURNAL" "$1" "${2:-0}"
}
last_seq() {
	"$PY" -c 'import json,sys
s = 0
for l in open(sys.argv[1], "rb"):
    try: s = max(s, json.loads(l).get("seq", 0))
    except ValueError: pass
print(s)' "$JOURNAL"
}
# view ID: the claim as GET shows it, without its counters (they move).
view() {
	op GET "/v1/sandboxes/$1"
	j 'json.dumps({k: v for k, v in d.items() if k != "counters"}, sort_keys=True)'
}

if ! start_daemon || ! wait_warm p 1 30; then
	fail "the daemon starts and fills its pool"
	dump_log
	finish
fi
pass "the daemon starts and fills its pool"
claim unix "$ACME" '{"pool":"p","ttl_seconds":1200,"labels":{"job":"7"},"env":{"FOO":"one"}}'
C1=$ID
check "C1 claimed ($C1)" status 201
x "$C1" '{"argv":["sh","-c","echo kept > /tmp/keep"]}'
check "C1 writes a file" status 200
claim unix "$ACME" '{"pool":"p"}'
C2=$ID
check "C2 claimed ($C2)" status 201
claim unix "$ACME" '{"pool":"p"}'
C3=$ID
acme DELETE "/v1/sandboxes/$C3"
check "C3 claimed and released ($C3)" is 'd["result"]' released
check "the pool refills" wait_warm p 1 30
C1_VIEW=$(view "$C1")

# --- 1. a second sluiced on the same data_dir ----------------------------------
check "the configuration is valid (--check): what follows is not a configuration error" \
	quiet "$SLUICED" --check "$E2E_TMP/sluice.yaml"
J0=$(md5sum <"$JOURNAL")
nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>>"$LOG2" &
P2=$!
track "$P2"
rc2=
for _ in $(seq 300); do
	kill -0 "$P2" 2>/dev/null || { wait "$P2" && rc2=0 || rc2=$?; break; }
	sleep 0.1
done
check "a second sluiced on the same data_dir exits 1 (rc ${rc2:-still running after 30 s})" test "$rc2" = 1
line=$(grep -F "daemon.data_dir $DATA: another sluiced uses it" "$LOG2" || true)
check "... its log names the data_dir and the lock (${line:-$(tail -n 3 "$LOG2" | tr '\n' ' ')})" test -n "$line"
check "... it did not start, nor start a sandbox" eval '! grep -Eq "sluiced [0-9.]+ started|: started, pid" "$LOG2"'
check "... the first one still runs and serves" eval 'kill -0 "$PID" && op GET /v1/info && status 200'
x "$C1" '{"argv":["cat","/tmp/keep"]}'
check "... its claims still run commands" is 'd["stdout"] == "kept\n"' true
check "... and the journal is untouched" test "$(md5sum <"$JOURNAL")" = "$J0"

# --- 2. a sandbox that dies while the daemon is down -----------------------------
P_C2=$(cg_pids "$C2")
check "C2's processes are found by its cgroup (${P_C2//$'\n'/ })" test -n "$P_C2"
stop_daemon
check "SIGTERM: the daemon exits 0 (rc ${RC:-still running})" test "$RC" = 0
# shellcheck disable=SC2086
check "C2's sandbox outlives the daemon" eval '[ "$(cg_pids "$C2")" = "$P_C2" ]'
for p in $P_C2; do kill -KILL "$p" 2>/dev/null || true; done
gone2() { [ -z "$(cg_pids "$C2")" ]; }
for _ in $(seq 100); do gone2 && break; sleep 0.05; done
check "C2's processes are killed while the daemon is down" gone2
SEQ0=$(last_seq)
if ! start_daemon; then
	fail "the daemon starts again"
	dump_log
	finish
fi
pass "the daemon starts again"
check "the log says C2 is gone" eval 'since | grep -qF "restart: claim $C2 is gone (its process ended)"'
check "the journal has C2's reap with reason gone, once ($(events "$C2" "$SEQ0"))" \
	test "$(events "$C2" "$SEQ0")" = '[["reap", "gone"]]'
acme GET "/v1/sandboxes/$C2"
check "GET C2: reaped" eval 'status 200 && is "d[\"state\"]" reaped'
acme DELETE "/v1/sandboxes/$C2"
check "DELETE C2: already-reaped" eval 'status 200 && is "d[\"result\"]" already-reaped'
check "the log says C1 is re-adopted" eval 'since | grep -qF "restart: claim $C1 re-adopted with its layer and lease"'
check "C1 is as it was (id, lease, layer, labels, address)" test "$(view "$C1")" = "$C1_VIEW"
acme GET /v1/sandboxes
check "acme's live claims: C1 only" is '[s["id"] for s in d["sandboxes"]]' "[\"$C1\"]"

# --- 3. a start with state.json missing -----------------------------------------
check "the pool is warm again" wait_warm p 1 30
stop_daemon
check "SIGTERM: the daemon exits 0 (rc ${RC:-still running})" test "$RC" = 0
W=$("$PY" -c 'import json,sys
d = json.load(open(sys.argv[1]))
print(" ".join(sorted(e["id"] for e in d["sandboxes"] if e["state"] == "warm")))' "$STATE" 2>/dev/null || true)
check "state.json names C1 claimed and one warm sandbox ($W)" \
	eval '"$PY" -c "import json,sys; d = json.load(open(sys.argv[1])); sys.exit(0 if [e[\"id\"] for e in d[\"sandboxes\"] if e[\"state\"] == \"claimed\"] == [sys.argv[2]] else 1)" "$STATE" "$C1" &&
	      [[ $W =~ ^sbx-[0-9a-f]+$ ]]'
rm "$STATE"
check "state.json is removed" test ! -e "$STATE"
if ! start_daemon; then
	fail "the daemon starts without state.json"
	dump_log
	finish
fi
pass "the daemon starts without state.json"
summary=$(since | grep -m1 'restart: journal up to seq' || true)
check "it rebuilt from the journal: 2 sandboxes re-adopted, no orphan (${summary#*restart: })" \
	eval '[[ $summary == *", 2 sandboxes re-adopted, 0 orphans ended"* ]]'
check "the log says C1 is re-adopted with its layer and lease" \
	eval 'since | grep -qF "restart: claim $C1 re-adopted with its layer and lease"'
check "the log says the warm sandbox $W is re-adopted" \
	eval 'since | grep -qF "restart: warm sandbox $W re-adopted"'
check "... and no sandbox is booted anew" eval '! since | grep -q ": started, pid"'
check "C1 is as it was (same id, expires_at, ttl, layer, labels, address)" test "$(view "$C1")" = "$C1_VIEW"
x "$C1" '{"argv":["sh","-c","cat /tmp/keep; echo $FOO"]}'
check "C1 is the same sandbox (its file) with its env" is 'd["stdout"] == "kept\none\n"' true
acme GET "/v1/sandboxes/$C3"
check "C3 is shown released" eval 'status 200 && is "d[\"state\"]" released'
acme GET "/v1/sandboxes/$C2"
check "C2 is shown reaped" eval 'status 200 && is "d[\"state\"]" reaped'
acme GET /v1/sandboxes
check "acme's live claims: C1 only" is '[s["id"] for s in d["sandboxes"]]' "[\"$C1\"]"
op GET /v1/info
check "the pool has its warm sandbox, nothing booting" is '[(p["warm"], p["booting"]) for p in d["pools"]]' '[[1, 0]]'
saved() {
	"$PY" -c 'import json,sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if sorted((e["id"], e["state"]) for e in d["sandboxes"]) == sorted([(sys.argv[2], "claimed"), (sys.argv[3], "warm")]) else 1)' \
		"$STATE" "$C1" "$W" 2>/dev/null
}
ok=
for _ in $(seq 100); do saved && { ok=1; break; }; sleep 0.1; done
check "state.json is written again, naming C1 and $W" test -n "$ok"

# --- the end --------------------------------------------------------------------
acme DELETE "/v1/sandboxes/$C1"
check "C1 released" is 'd["result"]' released
stop_daemon
check "SIGTERM: exit 0 (rc ${RC:-still running})" test "$RC" = 0
# A daemon with fleet_teardown: true ends what is left at its stop.
if start_daemon "$E2E_TMP/end.yaml"; then
	stop_daemon
	check "the teardown daemon starts and stops with exit 0 (rc ${RC:-still running})" test "$RC" = 0
else
	fail "the teardown daemon starts"
	dump_log
fi
# The sandboxes the log names as started: not an empty list, which would
# make the check below pass without looking at anything (C1 is among them).
ids=$(grep -oE 'sandbox sbx-[0-9a-f]+: started' "$LOG" | cut -d' ' -f2 | tr -d : | sort -u | tr '\n' ' ') || true
check "the log names this test's sandboxes ($(wc -w <<<"$ids") started, C1 ${C1:-unknown} among them)" \
	eval '[ -n "${C1:-}" ] && [[ " $ids " == *" $C1 "* ]]'
left=
for id in $ids; do
	[ -n "$(cg_pids "$id")" ] && left="$left $id"
done
check "no sandbox of this test has a process left (${left:-none})" test -z "$left"
check "the fleet namespace is removed" test ! -e "/run/netns/$FLEET"

[ "$E2E_FAILS" = 0 ] || dump_log
finish
