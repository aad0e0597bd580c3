#!/bin/bash
# The `sluice` client's user side end to end (issue 23): the real sluiced in
# a network namespace of its own, two pools of real `ns` sandboxes, the
# operator on the unix socket.
#
# Checks: every error names what was wrong, with one code once (a cwd that
# does not exist blames the directory, not the program; options after the
# sandbox ID; an unknown id; a missing file); a timeout and a kill say so on
# stderr and keep their exit codes; with --json errors are the API's JSON
# on stdout; `sluice usage` and `sluice metrics [PREFIX]`; `pools diff`,
# `PUT /v1/pools?dry_run=1` changing nothing, `pools apply` refusing to
# remove pools or drain warm sandboxes without --yes when no terminal can
# ask (`pools: []` drains nothing), and applying with --yes.
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

SL_BUILD=${SL_BUILD:?SL_BUILD must name the build tree}
CLI=$SL_BUILD/cli/sluice
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY
unset SLUICE_API SLUICE_TOKEN

gw=''
netns_new gw clid
FLEET="sl-clif-$$"
netns_owned "$FLEET"
SOCK=$E2E_TMP/api.sock
LOG=$E2E_TMP/sluiced.log
: >"$LOG"
export SL_E2E_OPTOK="op-$RANDOM$RANDOM-$$"

cat > "$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  fleet_teardown: true
  control_socket: off
  log: { level: info, format: text }
api: { listen: 127.0.0.1:8080, socket: $SOCK, operator_token: "\${env:SL_E2E_OPTOK}" }
gateway:
  workers: 1
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
lanes:
  - name: egress
    subnet: 10.88.1.0/24
    doors: { forward: 3128 }
policies:
  - { name: wide, allow: ["example.com"] }
  - { name: narrow, allow: ["example.org"] }
pools:
  - { name: main, template: busybox, lane: egress, policy: wide, warm: 2, warm_max: 4 }
  - { name: spare, template: busybox, lane: egress, policy: wide, warm: 1, warm_max: 1 }
certs: { ca_cert: $E2E_TMP/ca.pem, ca_key: $E2E_TMP/ca.key }
YAML

# shellcheck source=tests/e2e/api_lib.sh
. "$(dirname "$0")/api_lib.sh"
dump_log() { echo "--- the daemon's log (last 60 lines):" >&2; tail -n 60 "$LOG" >&2; }
# S ARGS: the CLI on the unix socket (its output kept for the canary scan);
# in a session of its own, so that no terminal can answer its questions.
S() { kept "sluice $1" setsid -w "$CLI" --api "unix:$SOCK" "$@"; }
# run ARGS: S with stdout in OUT, stderr in ERR, the exit code in RC.
OUT='' ERR='' RC=''
run() {
	S "$@" >"$E2E_TMP/out" 2>"$E2E_TMP/err" && RC=0 || RC=$?
	OUT=$(cat "$E2E_TMP/out") ERR=$(cat "$E2E_TMP/err")
}
# said RC STDERR: the last run exited RC with exactly this on stderr.
said() {
	[ "$RC" = "$1" ] && [ "$ERR" = "$2" ] && return 0
	echo "    exit $RC (wanted $1); stderr: '$ERR'" >&2
	echo "    wanted: '$2'; stdout: '${OUT:0:300}'" >&2
	return 1
}
# json_err RC CODE: the last run exited RC, printed nothing on stderr, and
# its stdout is one JSON error with this code.
json_err() {
	[ "$RC" = "$1" ] && [ -z "$ERR" ] && B=$OUT && is 'd["error"]["code"]' "$2" && return 0
	echo "    exit $RC (wanted $1); stderr: '$ERR'; stdout: '${OUT:0:300}'" >&2
	return 1
}
settled() {
	local i b
	for ((i = 0; i < 300; i++)); do
		b=$(curl -sS -m 10 --unix-socket "$SOCK" http://sluice/v1/info 2>/dev/null) || true
		keep_text "unix GET /v1/info" "$b"
		"$PY" -c 'import json,sys
ps = json.loads(sys.argv[1])["pools"]
sys.exit(0 if all(p["warm"] == p["target"] and p["booting"] == 0 for p in ps) else 1)' "$b" 2>/dev/null &&
			return 0
		sleep 0.1
	done
	echo "    not settled: $b" >&2
	return 1
}

PID=
nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>>"$LOG" &
PID=$!
track "$PID"
if ! wait_for "$LOG" "sluiced [0-9.]+ started" 10; then
	fail "the daemon starts"
	dump_log
	finish
fi
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
check "the daemon starts and answers on its socket" test -S "$SOCK"
check "the pools fill (main 2 warm, spare 1)" eval 'settled && [ "$(info_pool main warm)" = 2 ] && [ "$(info_pool spare warm)" = 1 ]'

CID=$(S claim -q --pool main 2>"$E2E_TMP/err") || true
check "a claim to work in ($CID)" eval '[[ $CID =~ ^sbx-[0-9a-f]{16}$ ]]'
run exec "$CID" -- pwd
check "exec ID -- pwd works ($OUT)" eval '[ "$RC" = 0 ] && [ -n "$OUT" ]'

# --- 1. errors that name what was wrong, one code once -----------------------
run exec --cwd /nope "$CID" -- pwd
check "exec --cwd /nope: the directory is blamed, not the program" \
	said 1 "sluice: bad-cwd: working directory /nope: No such file or directory"
run exec "$CID" --cwd /nope -- pwd
check "exec ID --cwd /nope -- pwd: options after the ID parse (the same error)" \
	said 1 "sluice: bad-cwd: working directory /nope: No such file or directory"
run exec "$CID" --cwd /tmp -- pwd
check "exec ID --cwd /tmp -- pwd runs in /tmp ($OUT)" eval '[ "$RC" = 0 ] && [ "$OUT" = /tmp ]'
run exec "$CID" -- /no/such-program
check "a missing program is still blamed on the program" \
	said 1 "sluice: bad-request: exec /no/such-program: No such file or directory"
run exec "$CID" pwd
check "exec ID pwd (no --): says what follows the ID and exits 2" \
	eval '[ "$RC" = 2 ] && grep -qF "exec: '"'"'pwd'"'"' follows the sandbox ID $CID: put -- between the ID and the command" <<<"$ERR"'
run exec --timeout 1 "$CID" -- sleep 30
check "a timeout exits 124 and says so on stderr" \
	said 124 "sluice: warning: exec: the command timed out after 1 s (--timeout) and was killed"
run exec "$CID" -- sh -c 'kill -9 $$'
check "a kill exits 137 and says so on stderr" \
	said 137 "sluice: warning: exec: the command was killed by signal 9 (KILL)"
run exec "$CID" -- sh -c 'exit 3'
check "a plain exit 3 says nothing on stderr" said 3 ""
run show sbx-0000000000000000
check "show of an unknown id: one code, naming the id" \
	said 1 "sluice: not-found: no sandbox sbx-0000000000000000"
run cp "$CID:/no/such/file" "$E2E_TMP/x"
check "cp of a missing file: one code, naming the file ($ERR)" \
	eval '[ "$RC" = 1 ] && grep -q "^sluice: not-found: .*/no/such/file" <<<"$ERR" && ! grep -q not_found <<<"$ERR"'

# --- 2. --json: errors are the API's JSON on stdout --------------------------
run --json show sbx-0000000000000000
check "--json show of an unknown id: {\"error\": not-found} on stdout, exit 1" json_err 1 not-found
check "... with the API's message" is 'd["error"]["message"]' "no sandbox sbx-0000000000000000"
run show --json sbx-0000000000000000
check "show --json (after the command): the same" json_err 1 not-found
run --json exec --cwd /nope "$CID" -- pwd
check "--json exec --cwd /nope: bad-cwd as JSON" json_err 1 bad-cwd
run --json exec "$CID" --bogus -- pwd
check "--json with a bad option: bad-usage as JSON, exit 2" json_err 2 bad-usage
check "... naming the option" eval 'grep -qF -- "--bogus" <<<"$OUT"'
run --json pools apply "$E2E_TMP/no-such.yaml"
check "--json with a missing local file: local-error naming it" \
	eval 'json_err 1 local-error && grep -qF "no-such.yaml" <<<"$OUT"'

# --- 3. usage and metrics ------------------------------------------------------
run usage
check "sluice usage: a table with main's claim ($OUT)" \
	eval '[ "$RC" = 0 ] && grep -q "^TENANT *POOL *CLAIMS *CLAIM_SECONDS" <<<"$OUT" && grep -Eq "^- +main +1 " <<<"$OUT"'
run --json usage
check "sluice --json usage: the API's JSON" \
	eval '[ "$RC" = 0 ] && B=$OUT && is "[u[\"claims\"] for u in d[\"usage\"] if u[\"pool\"] == \"main\"]" "[1]"'
run usage --since yesterday
check "usage --since yesterday: the API's bad-request, once" \
	said 1 "sluice: bad-request: since: epoch seconds or an RFC 3339 UTC time"
run metrics
check "sluice metrics: the Prometheus text" \
	eval '[ "$RC" = 0 ] && grep -q "^sluice_claims_total{pool=\"main\",tier=\"warm\"} 1" <<<"$OUT"'
run metrics sluice_claims
check "sluice metrics sluice_claims: only that family, its HELP and TYPE" \
	eval '[ "$RC" = 0 ] && grep -q "^# TYPE sluice_claims_total" <<<"$OUT" && ! grep -v -e "^sluice_claims" -e "^# [A-Z]* sluice_claims" <<<"$OUT" | grep -q .'
run metrics no_such_metric_
check "sluice metrics of a prefix nothing has: exit 1, naming it" \
	said 1 "sluice: metrics: no metric named no_such_metric_..."

# --- 4. pools: diff, dry run, apply and --yes ----------------------------------
cat > "$E2E_TMP/empty.yaml" <<'YAML'
pools: []
YAML
cat > "$E2E_TMP/same.yaml" <<'YAML'
pools:
  - { name: main, template: busybox, lane: egress, policy: wide, warm: 2, warm_max: 4 }
  - { name: spare, template: busybox, lane: egress, policy: wide, warm: 1, warm_max: 1 }
YAML
cat > "$E2E_TMP/change.yaml" <<'YAML'
pools:
  - { name: main, template: busybox, lane: egress, policy: narrow, warm: 2, warm_max: 4 }
YAML
op GET /v1/pools
POOLS0=$B
run pools diff "$E2E_TMP/same.yaml"
check "pools diff of the same set: both unchanged, nothing drains" \
	eval '[ "$RC" = 0 ] && grep -Eq "^= main +unchanged$" <<<"$OUT" && grep -q "0 added, 0 removed, 0 changed, 2 unchanged; 0 warm sandboxes drain" <<<"$OUT"'
run pools diff "$E2E_TMP/empty.yaml"
check "pools diff of pools: [] shows both removed, their warm sandboxes and main's live claim ($OUT)" \
	eval '[ "$RC" = 0 ] && grep -Eq "^- main +removed: 2 warm sandboxes drain; 1 live claim keeps its sandbox and pinned layer$" <<<"$OUT" &&
	      grep -Eq "^- spare +removed: 1 warm sandbox drains$" <<<"$OUT"'
run pools diff "$E2E_TMP/change.yaml"
check "pools diff of a policy change: the key, no drain, spare removed" \
	eval 'grep -Eq "^~ main +changed: policy; 1 live claim" <<<"$OUT" && grep -q "^- spare" <<<"$OUT"'
op PUT '/v1/pools?dry_run=1' "${JS[@]}" '{"pools": []}'
check "PUT /v1/pools?dry_run=1: 200, the diff, dry_run true" \
	eval 'status 200 && is "d[\"dry_run\"]" true && is "d[\"summary\"][\"removed\"]" 2 && is "d[\"summary\"][\"warm_drained\"]" 3 && is "d[\"pools\"]" "[]"'
op PUT '/v1/pools?dry_run=maybe' "${JS[@]}" '{"pools": []}'
check "PUT /v1/pools?dry_run=maybe: 400 naming dry_run" \
	eval 'status 400 && is "d[\"error\"][\"message\"]" "dry_run: 1, true, 0 or false"'
op GET /v1/pools
check "... the dry runs and diffs changed no pool" test "$B" = "$POOLS0"
check "... and drained nothing (main 2 warm, spare 1)" \
	eval '[ "$(info_pool main warm)" = 2 ] && [ "$(info_pool spare warm)" = 1 ] && [ "$(info_pool main draining)" = False ]'

run pools apply "$E2E_TMP/empty.yaml"
check "pools apply pools: [] without --yes and no terminal: refused, exit 1, saying why" \
	eval '[ "$RC" = 1 ] && grep -qF "sluice: pools apply: $E2E_TMP/empty.yaml would remove 2 pools and drain 3 warm sandboxes; no terminal to ask on: give --yes to apply it (nothing was changed)" <<<"$ERR"'
check "... after showing the diff" eval 'grep -q "^- main" <<<"$OUT"'
run --json pools apply "$E2E_TMP/empty.yaml"
check "... with --json: not-confirmed as JSON" json_err 1 not-confirmed
op GET /v1/pools
check "... no pool was removed" test "$B" = "$POOLS0"
sleep 0.5
check "... no warm sandbox drained (main 2, spare 1, none draining)" \
	eval '[ "$(info_pool main warm)" = 2 ] && [ "$(info_pool spare warm)" = 1 ] && [ "$(info_pool spare draining)" = False ]'
run pools apply "$E2E_TMP/same.yaml"
check "pools apply of an unchanged set needs no --yes" \
	eval '[ "$RC" = 0 ] && grep -q "^applied 2 pools: main, spare$" <<<"$OUT"'
run pools apply "$E2E_TMP/change.yaml" --yes
check "pools apply FILE --yes removes spare and changes main's policy" \
	eval '[ "$RC" = 0 ] && grep -q "^- spare" <<<"$OUT" && grep -q "^applied 1 pool: main$" <<<"$OUT"'
op GET /v1/pools
check "... the API shows the new set" is '[(p["name"], p["policy"]) for p in d["pools"]]' '[["main", "narrow"]]'
run exec "$CID" -- echo still-here
check "... the live claim goes on" eval '[ "$RC" = 0 ] && [ "$OUT" = still-here ]'
check "... main kept its warm sandboxes (a policy change replaces none)" \
	eval '[ "$(info_pool main warm)" = 2 ]'
run --json pools apply --yes "$E2E_TMP/empty.yaml"
check "pools apply --yes pools: [] (with --json): the diff in the answer" \
	eval '[ "$RC" = 0 ] && B=$OUT && is "d[\"summary\"][\"removed\"]" 1 && is "d[\"dry_run\"]" false'
check "... main is draining now" eval '[ "$(info_pool main draining)" = True ]'

S rm "$CID" >/dev/null 2>&1 || true
kill -TERM "$PID"
for _ in $(seq 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
check "the daemon stops" eval '! kill -0 "$PID" 2>/dev/null'
[ "$E2E_FAILS" = 0 ] || dump_log
finish
