#!/bin/bash
# Faults end to end (issue 16): the real sluiced with real `ns` sandboxes
# (busybox template), a damaged journal, a failing fsync, a full data_dir
# and a file-size limit. Two rules: a sandbox is never lent twice, and
# nothing is acknowledged that is not durable.
#
# A. A flipped byte in the middle of a claimed sandbox X's claim line, no
#    state.json: the default start refuses (non-zero exit, the log names
#    the damage and X) and leaves X running, untouched; a start with
#    daemon.journal_damage: destroy journals X gone (journal-damaged) and
#    ends it, re-adopts Y (claimed after X, its record readable) as the
#    second tenant's, and every warm sandbox the pool then lends to the
#    second tenant is free of the first tenant's file.
# B. The same damage, but covered by a state.json written after X's claim:
#    the default start goes on, and X is the first tenant's claim still,
#    with its file.
# C. fdatasync()/fsync() failing with EIO (the LD_PRELOAD shim faultfs.c
#    while a control file exists): claims answer 503 journal-unavailable
#    and their sandboxes are ended, a release answers 503 and the claim
#    stays; once the disk is back the journal is rewritten into a new file
#    and claims and releases are acknowledged again; after a kill -9 the
#    journal holds exactly the acknowledged claims and releases.
# D. data_dir on a 2 MiB tmpfs, filled in the middle of a burst of claims:
#    the claims that failed answer 503 journal-unavailable, the daemon
#    stays up, and after a kill -9 every 201 is in the journal.
# E. The daemon under `ulimit -f`: writes past the limit fail (EFBIG,
#    SIGXFSZ ignored): it survives, claims answer 503 journal-unavailable,
#    and "File too large" is logged once per run of failures.
#
# Every daemon runs in a network namespace of the test's and in a mount
# namespace of its own whose /run is a private tmpfs (the sandboxes' state
# directories, the fleet namespace), held by a `sleep` (durability.sh's
# approach): a restart's sweep never sees another test's sandboxes. The
# daemons keep their sandboxes at a stop (fleet_teardown: false); at the
# end every sandbox a log names is ended through its cgroups, then the
# holders (and their mounts) go.
#
# FLT_CASES="A B C D E" picks cases (B needs A); a case left out is
# reported skipped (the script exits 77: CI runs them all); FLT_KEEP=DIR
# keeps the logs and journals there.
# shellcheck disable=SC2016,SC2034 # the checks' single-quoted expressions (and their variables) are eval'd later
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/holder_lib.sh
. "$(dirname "$0")/holder_lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY
SL_BUILD=${SL_BUILD:?SL_BUILD must name the build tree}
FAULTFS=${SL_FAULTFS:-$SL_BUILD/tests/libsl_faultfs.so}
CASES=" ${FLT_CASES:-A B C D E} "
T_START=$(date +%s)

export SL_E2E_OPTOK="op-$RANDOM$RANDOM-$$"
ACME="acme-$RANDOM$RANDOM"
OTHER="other-$RANDOM$RANDOM"
SECRET="tenant-a-secret-$RANDOM$RANDOM"

LOGS=()
DATAS=()
CLEANED=

# The end: every sandbox a log names is ended through its cgroups, then
# the holders go (with their mount namespaces: /run, the tmpfs data_dir,
# the fleet namespaces). Idempotent; done only once it got to its end (a
# cleanup cut short, by set -e say, is done again by the trap).
cleanup_all() {
	local log h
	[ -n "$CLEANED" ] && return 0
	for log in "${LOGS[@]}"; do end_left_sandboxes "$log" || true; done
	for h in "${HOLDERS[@]}"; do
		kill "$h" 2>/dev/null || true
		wait "$h" 2>/dev/null || true
	done
	CLEANED=1
}
e2e_cleanup_extra() {
	local d
	if [ -n "${FLT_KEEP:-}" ]; then
		{ mkdir -p "$FLT_KEEP" && cp "${LOGS[@]}" "$FLT_KEEP"/; } 2>/dev/null || true
		for d in "${DATAS[@]}"; do
			cp "$d/journal.jsonl" "$FLT_KEEP/$(basename "$d").journal.jsonl" 2>/dev/null || true
		done
	fi
	cleanup_all || true
}

# mkconf FILE TAG WARM [DAEMON_KEY...]: a configuration whose data_dir is
# $E2E_TMP/data-TAG, API socket $E2E_TMP/api-TAG.sock, fleet sl-fl-TAG-PID,
# one pool "warm" of WARM busybox sandboxes; DAEMON_KEYs ("key: value")
# go under daemon:.
mkconf() {
	local f=$1 tag=$2 warm=$3 k extra=''
	shift 3
	for k in "$@"; do extra+="  $k"$'\n'; done
	cat > "$f" <<YAML
daemon:
  data_dir: $E2E_TMP/data-$tag
  fleet_netns: sl-fl-$tag-$$
  fleet_teardown: false
  control_socket: off
  log: { level: info, format: text }
${extra}api: { listen: off, socket: $E2E_TMP/api-$tag.sock, operator_token: "\${env:SL_E2E_OPTOK}" }
gateway:
  workers: 2
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
  access_log: stderr
lanes:
  - name: egress
    subnet: 10.88.1.0/24
    doors: { forward: 3128, socks: 1080 }
tenants:
  - { name: acme, keys: [$ACME] }
  - { name: other, keys: [$OTHER] }
policies:
  - { name: wide, allow: ["example.com"] }
pools:
  - name: warm
    template: busybox
    lane: egress
    policy: wide
    warm: $warm
    warm_max: $warm
    ttl: { default_seconds: 900, max_seconds: 3600 }
certs: { ca_cert: $E2E_TMP/ca-$tag.pem, ca_key: $E2E_TMP/ca-$tag.key }
YAML
}

# exited PID [SECONDS]: the process ended by itself; its exit code in RC
# (empty, and the process killed, if it did not).
RC=
exited() {
	local i
	RC=
	for ((i = 0; i < ${2:-30} * 10; i++)); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1" && RC=0 || RC=$?
			untrack "$1"
			return 0
		fi
		sleep 0.1
	done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	untrack "$1"
	return 1
}
# refused_start PID LOG: waits for the daemon to exit (its code in RC) or
# to log its start (RC empty; then it is killed: kill9).
refused_start() {
	local i
	RC=
	for ((i = 0; i < 600; i++)); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1" && RC=0 || RC=$?
			untrack "$1"
			return 0
		fi
		grep -Eq "sluiced [0-9.]+ started \(pid $1," "$2" 2>/dev/null && break
		sleep 0.05
	done
	kill9 "$1"
}
# kill9 PID: SIGKILL (the sandboxes outlive it), waited for.
kill9() {
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	untrack "$1"
}
# stop PID: SIGTERM, waited for; the exit code in RC.
stop() {
	kill -TERM "$1" 2>/dev/null || true
	exited "$1" 20
}

# req SOCK METHOD PATH TOKEN [curl args...]: the status in ST, the body
# in B. TOKEN empty: the operator (the unix socket needs none).
ST='' B=''
req() {
	local sock=$1 m=$2 p=$3 tok=$4 out
	shift 4
	out=$(curl -sS -m 60 --unix-socket "$sock" -X "$m" ${tok:+-H "Authorization: Bearer $tok"} \
		"$@" -w '\n%{http_code}' "http://sluice$p" 2>/dev/null) || true
	ST=${out##*$'\n'}
	B=${out%$'\n'*}
	keep_text "$m $p -> $ST" "$B"
}
# claim SOCK TOKEN [BODY]: POST /v1/claims; the id in ID on a 201.
ID=''
claim() {
	local body=${3:-}
	[ -n "$body" ] || body='{"pool":"warm"}'
	req "$1" POST /v1/claims "$2" -H 'Content-Type: application/json' --data-binary "$body"
	ID=''
	[ "$ST" = 201 ] && ID=$(j 'd["id"]')
	return 0
}
# xc SOCK TOKEN ID SCRIPT: runs `sh -c SCRIPT` in the sandbox (ST, B).
xc() {
	local body
	body=$("$PY" -c 'import json,sys; print(json.dumps({"argv": ["sh", "-c", sys.argv[1]]}))' "$4")
	req "$1" POST "/v1/sandboxes/$3/exec" "$2" -H 'Content-Type: application/json' --data-binary "$body"
}
# code: the JSON error code of the answer in B.
code() { j 'd["error"]["code"]'; }
# refused503: the answer is 503 journal-unavailable.
refused503() { [ "$ST" = 503 ] && [ "$(code)" = journal-unavailable ]; }
# settled SOCK [SECONDS]: every pool's warm == target, nothing booting.
settled() {
	local i
	for ((i = 0; i < ${2:-30} * 10; i++)); do
		req "$1" GET /v1/info ""
		[ "$ST" = 200 ] && [ "$(j 'all(p["warm"] == p["target"] and p["booting"] == 0 for p in d["pools"])')" = true ] &&
			return 0
		sleep 0.1
	done
	echo "    not settled: $ST ${B:0:300}" >&2
	return 1
}
warm_count() { req "$1" GET /v1/info ""; j 'd["pools"][0]["warm"]'; }
# listed SOCK: the ids GET /v1/sandboxes gives the operator, sorted.
listed() { req "$1" GET /v1/sandboxes ""; j '" ".join(sorted(s["id"] for s in d["sandboxes"]))'; }

# A sandbox's processes, found through its cgroups only.
cg_pids() {
	{ find /sys/fs/cgroup -maxdepth 8 -type d -name "$1" -exec cat {}/cgroup.procs \; 2>/dev/null || true; } |
		sort -u | tr '\n' ' ' | sed 's/ $//'
}
# cg_gone ID [SECONDS]: no process is left in the sandbox's cgroups.
cg_gone() {
	local i
	for ((i = 0; i < ${2:-10} * 10; i++)); do
		[ -z "$(cg_pids "$1")" ] && return 0
		sleep 0.1
	done
	echo "    $1 still has processes: $(cg_pids "$1")" >&2
	return 1
}
# The sandboxes any of our logs names as started.
log_ids() {
	cat "${LOGS[@]}" 2>/dev/null | grep -oE 'sandbox sbx-[0-9a-f]+: started' |
		cut -d' ' -f2 | tr -d : | sort -u | tr '\n' ' '
	return 0
}
# The sandboxes any of our logs names that still have processes.
left_sandboxes() {
	local id
	for id in $(log_ids); do
		[ -n "$(cg_pids "$id")" ] && printf '%s ' "$id"
	done
	return 0
}

# The journal, from the host (jt.py FILE CMD ARGS...):
#   line ID          the 1-based line of ID's claim event, and the count
#   flip LINE        makes that line unparsable by changing one byte (a
#                    quote nearest its middle; checked); prints the offset
#   has EVENT ID [REASON]  exit 0 if such an event is there
#   ids EVENT        the ids of the readable events of that type, sorted
#   seq ID           the seq of ID's claim event
cat > "$E2E_TMP/jt.py" <<'PY'
import json, sys
path, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
raw = open(path, "rb").read()
lines = raw.split(b"\n")[:-1]
def evs():
    for l in lines:
        try:
            yield json.loads(l)
        except ValueError:
            pass
if cmd == "line":
    for i, l in enumerate(lines, 1):
        try:
            e = json.loads(l)
        except ValueError:
            continue
        if e.get("event") == "claim" and e.get("claim") == args[0]:
            print(i, len(lines))
            sys.exit(0)
    sys.exit(1)
elif cmd == "flip":
    n = int(args[0])
    if not 1 <= n <= len(lines):
        sys.exit(1)
    start = sum(len(l) + 1 for l in lines[:n - 1])
    l = lines[n - 1]
    mid = len(l) // 2
    quotes = sorted((abs(i - mid), i) for i, c in enumerate(l) if c == ord('"'))
    for _, i in quotes:
        b = bytearray(l)
        b[i] ^= 0x40            # '"' -> 'b'
        try:
            json.loads(bytes(b))
            continue
        except ValueError:
            pass
        with open(path, "r+b") as f:
            f.seek(start + i)
            f.write(bytes([b[i]]))
        print(start + i)
        sys.exit(0)
    sys.exit(1)
elif cmd == "has":
    for e in evs():
        if e.get("event") == args[0] and e.get("claim") == args[1] and \
                (len(args) < 3 or e.get("reason") == args[2]):
            sys.exit(0)
    sys.exit(1)
elif cmd == "ids":
    print(" ".join(sorted({e["claim"] for e in evs() if e.get("event") == args[0] and "claim" in e})))
elif cmd == "seq":
    for e in evs():
        if e.get("event") == "claim" and e.get("claim") == args[0]:
            print(e["seq"])
            sys.exit(0)
    sys.exit(1)
PY
jt() { "$PY" "$E2E_TMP/jt.py" "$@"; }
# state_seq DIR: the state file's journal_seq (0: none).
state_seq() {
	"$PY" -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["journal_seq"])
except Exception: print(0)' "$1/state.json"
}

BIG=$("$PY" -c 'import json; print(json.dumps({"pool": "warm", "labels": {"pad%d" % i: "x" * 250 for i in range(20)}}))')

# ============================================================================
# A. A flipped byte in a claim line, no state.json
# ============================================================================
if [[ $CASES == *" A "* ]]; then
	gwA=''
	netns_new gwA flta
	LOG=$E2E_TMP/log-a
	LOGS+=("$LOG")
	: >"$LOG"
	DA=$E2E_TMP/data-a
	DATAS+=("$DA")
	SA=$E2E_TMP/api-a.sock
	# The restarts' pool is a size larger (warm 3): the sandboxes found
	# warm then (X's readable record says warm, and two refills) are not
	# a surplus to drain; what is lent from them is up to the restore.
	mkconf "$E2E_TMP/a0.yaml" a 2
	mkconf "$E2E_TMP/a.yaml" a 3
	mkconf "$E2E_TMP/a-destroy.yaml" a 3 "journal_damage: destroy"
	HA=''
	holder_start HA "$gwA" "" || { fail "A: the mount namespace holder starts"; finish; }
	daemon_in "$HA" "$E2E_TMP/a0.yaml" "$LOG"
	PA=$DPID
	if ! started "$PA" "$LOG" 30 || ! settled "$SA" 30; then
		fail "A: the daemon starts and fills its pool"
		tail -n 30 "$LOG" >&2
		finish
	fi
	pass "A: the daemon starts and fills its pool (warm 2)"

	claim "$SA" "$ACME"
	X=$ID
	check "A: tenant acme claims X ($X): 201" test "$ST" = 201
	[ -n "$X" ] || { tail -n 20 "$LOG" >&2; finish; }
	xc "$SA" "$ACME" "$X" "echo $SECRET > /tmp/mine && cat /tmp/mine"
	check "A: acme writes /tmp/mine in X (exec 200, exit 0)" \
		eval '[ "$ST" = 200 ] && [ "$(j "d[\"exit_code\"]")" = 0 ] && [ "$(j "d[\"stdout\"].strip()")" = "$SECRET" ]'
	claim "$SA" "$OTHER"
	Y=$ID
	check "A: tenant other claims Y ($Y): 201" test "$ST" = 201
	check "A: the pool settled" settled "$SA" 30
	read -r xline nlines < <(jt "$DA/journal.jsonl" line "$X" || echo "0 0")
	check "A: X's claim line ($xline of $nlines) has more events after it" \
		eval '[ "$xline" -gt 0 ] && [ "$nlines" -gt "$xline" ]'
	XPIDS=$(cg_pids "$X")
	XINIT=${XPIDS%% *}
	check "A: X runs (pids $XPIDS) and its file is there (seen from the host)" \
		eval '[ -n "$XPIDS" ] && grep -qx "$SECRET" "/proc/$XINIT/root/tmp/mine"'
	kill9 "$PA"
	rm -f "$DA/state.json"
	off=$(jt "$DA/journal.jsonl" flip "$xline") || off=''
	check "A: kill -9; state.json removed; one byte of X's claim line flipped (offset ${off:-none}): no longer JSON" \
		eval '[ -n "$off" ] && ! jt "$DA/journal.jsonl" line "$X"'
	jsum=$(md5sum <"$DA/journal.jsonl") || jsum=''

	# (1) The default: the start is refused, nothing changes.
	mark
	daemon_in "$HA" "$E2E_TMP/a.yaml" "$LOG"
	P=$DPID
	refused_start "$P" "$LOG"
	check "A1: the default (journal_damage: refuse): the daemon refuses to start (exit ${RC:-none: it started})" \
		eval '[ -n "$RC" ] && [ "$RC" != 0 ]'
	line=$(since | grep -F 'the journal is damaged' | head -n 1) || true
	check "A1: the log says the journal is damaged and names X (${line:0:300})" \
		eval '[[ $line == *"$X"* ]]'
	check "A1: ... and how to start anyway (daemon.journal_damage: destroy)" \
		eval '[[ $line == *"daemon.journal_damage: destroy"* ]]'
	check "A1: nothing was lent or ended: X runs with the same processes and its file" \
		eval '[ "$(cg_pids "$X")" = "$XPIDS" ] && grep -qx "$SECRET" "/proc/$XINIT/root/tmp/mine"'
	check "A1: the refused start wrote nothing (the journal unchanged, no state.json)" \
		eval '[ "$(md5sum <"$DA/journal.jsonl")" = "$jsum" ] && [ ! -e "$DA/state.json" ]'

	# (2) journal_damage: destroy: it starts, X is destroyed, never lent.
	mark
	daemon_in "$HA" "$E2E_TMP/a-destroy.yaml" "$LOG"
	PA=$DPID
	if ! started "$PA" "$LOG" 30; then
		fail "A2: journal_damage: destroy: the daemon starts"
		tail -n 30 "$LOG" >&2
	else
		pass "A2: journal_damage: destroy: the daemon starts"
		check "A2: the log names X as destroyed ($(since | grep -F "$X" | grep -m1 -F destroyed | cut -c1-200))" \
			eval 'since | grep -F "warm sandbox $X" | grep -qF "destroyed, never lent"'
		check "A2: the log says the journal is damaged (daemon.journal_damage: destroy)" \
			eval 'since | grep -qE "journal .* is damaged: .*daemon.journal_damage: destroy"'
		check "A2: the journal has a gone event for X with reason journal-damaged" \
			jt "$DA/journal.jsonl" has gone "$X" journal-damaged
		check "A2: X's processes are gone (its cgroups are empty)" cg_gone "$X" 15
		req "$SA" GET "/v1/sandboxes/$Y" "$OTHER"
		check "A2: Y is re-adopted as other's claim (GET as other: 200 claimed)" \
			eval '[ "$ST" = 200 ] && [ "$(j "d[\"state\"]")" = claimed ] && [ "$(j "d[\"tenant\"]")" = other ]'
		xc "$SA" "$OTHER" "$Y" "echo ok"
		check "A2: the claim/exec path works: exec in Y answers ok" \
			eval '[ "$ST" = 200 ] && [ "$(j "d[\"stdout\"].strip()")" = ok ]'
		req "$SA" GET "/v1/sandboxes/$X" "$ACME"
		check "A2: X is no claim of acme's (GET as acme: $ST)" test "$ST" = 404
		# Every warm sandbox the pool offers goes to the other tenant:
		# none has the first tenant's file.
		check "A2: the pool settled" settled "$SA" 30
		nw=$(warm_count "$SA")
		[[ $nw =~ ^[0-9]+$ ]] || nw=0
		got=() bad=0
		for ((i = 0; i < nw; i++)); do
			claim "$SA" "$OTHER"
			[ "$ST" = 201 ] || { bad=1; echo "    claim $i: $ST ${B:0:200}" >&2; continue; }
			got+=("$ID $(j 'd["tier"]')")
			xc "$SA" "$OTHER" "$ID" 'echo ok; cat /tmp/mine'
			if [ "$ST" != 200 ] || [ "$(j 'd["stdout"].strip()')" != ok ] ||
				[ "$(j 'd["exit_code"]')" = 0 ] || [ "$(j '"No such file" in d["stderr"]')" != true ] ||
				[ "$ID" = "$X" ] || [ "${got[-1]#* }" != warm ]; then
				bad=1
				echo "    $ID: exec $ST ${B:0:300}" >&2
			fi
		done
		check "A2: other claims every warm sandbox ($nw: ${got[*]}): each from warm, runs 'echo ok', has no /tmp/mine, is not X" \
			eval '[ "$nw" -ge 1 ] && [ "$bad" = 0 ]'
	fi
else
	skip "A: not selected by FLT_CASES"
fi

# ============================================================================
# B. The same damage, covered by a state.json written after the claim
# ============================================================================
if [[ $CASES == *" B "* ]] && [ -n "${PA:-}" ] && kill -0 "$PA" 2>/dev/null; then
	# Back to the default configuration (the damage of A is now behind
	# the state file's point: it does not refuse a start).
	stop "$PA" || true
	mark
	daemon_in "$HA" "$E2E_TMP/a.yaml" "$LOG"
	PA=$DPID
	if ! started "$PA" "$LOG" 30 || ! settled "$SA" 30; then
		fail "B: the default daemon starts again on A's journal (its damage is behind state.json)"
		tail -n 30 "$LOG" >&2
	else
		pass "B: the default daemon starts again on A's journal (its damage is behind state.json)"
		claim "$SA" "$ACME"
		X2=$ID
		check "B: acme claims X2 ($X2): 201" test "$ST" = 201
		xc "$SA" "$ACME" "$X2" "echo $SECRET-2 > /tmp/mine"
		check "B: acme writes /tmp/mine in X2" eval '[ "$ST" = 200 ] && [ "$(j "d[\"exit_code\"]")" = 0 ]'
		check "B: the pool settled" settled "$SA" 30
		xseq=$(jt "$DA/journal.jsonl" seq "$X2" || echo 999999999)
		for _ in $(seq 100); do
			[ "$(state_seq "$DA")" -ge "$xseq" ] && break
			sleep 0.1
		done
		read -r xline nlines < <(jt "$DA/journal.jsonl" line "$X2" || echo "0 0")
		check "B: state.json is written after X2's claim (its seq $(state_seq "$DA") >= $xseq; line $xline of $nlines)" \
			eval '[ "$(state_seq "$DA")" -ge "$xseq" ] && [ "$nlines" -gt "$xline" ]'
		kill9 "$PA"
		off=$(jt "$DA/journal.jsonl" flip "$xline") || off=''
		check "B: kill -9; one byte of X2's claim line flipped (offset ${off:-none}); state.json kept" \
			eval '[ -n "$off" ] && ! jt "$DA/journal.jsonl" line "$X2" && [ -s "$DA/state.json" ]'
		mark
		daemon_in "$HA" "$E2E_TMP/a.yaml" "$LOG"
		PA=$DPID
		if ! started "$PA" "$LOG" 30; then
			fail "B: the default start is not refused (the state file covers the damaged line)"
			tail -n 20 "$LOG" >&2
		else
			pass "B: the default start is not refused (the state file covers the damaged line)"
			check "B: ... and the log still reports the unreadable line ($(since | grep -m1 DAMAGED | cut -c1-160))" \
				eval 'since | grep -q "DAMAGED"'
			req "$SA" GET "/v1/sandboxes/$X2" "$ACME"
			check "B: X2 is acme's claim still (GET as acme: 200 claimed)" \
				eval '[ "$ST" = 200 ] && [ "$(j "d[\"state\"]")" = claimed ] && [ "$(j "d[\"tenant\"]")" = acme ]'
			xc "$SA" "$ACME" "$X2" "cat /tmp/mine"
			check "B: ... with its file" \
				eval '[ "$ST" = 200 ] && [ "$(j "d[\"stdout\"].strip()")" = "$SECRET-2" ]'
		fi
	fi
elif [[ $CASES == *" B "* ]]; then
	fail "B: not run: it goes on from A's daemon, which does not run"
else
	skip "B: not selected by FLT_CASES"
fi
[ -n "${PA:-}" ] && { stop "$PA" || true; }

# ============================================================================
# C. fdatasync/fsync failing (EIO) through the LD_PRELOAD shim
# ============================================================================
if [[ $CASES == *" C "* ]]; then
	gwC=''
	netns_new gwC fltc
	LOG=$E2E_TMP/log-c
	LOGS+=("$LOG")
	: >"$LOG"
	DC=$E2E_TMP/data-c
	DATAS+=("$DC")
	SC=$E2E_TMP/api-c.sock
	CTL=$E2E_TMP/fault.ctl
	mkconf "$E2E_TMP/c.yaml" c 3
	HC=''
	holder_start HC "$gwC" "" || { fail "C: the mount namespace holder starts"; finish; }
	if [ ! -r "$FAULTFS" ]; then
		fail "C: the shim $FAULTFS is built"
	else
		daemon_in "$HC" "$E2E_TMP/c.yaml" "$LOG" LD_PRELOAD="$FAULTFS" SL_FAULT_CTL="$CTL" \
			ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
		PC=$DPID
		if ! started "$PC" "$LOG" 30 || ! settled "$SC" 30; then
			fail "C: the daemon starts under the shim and fills its pool"
			tail -n 30 "$LOG" >&2
		else
			pass "C: the daemon starts under the shim and fills its pool (warm 3)"
			ACKED=() RELEASED=() FAILED=()
			claim "$SC" "$ACME"
			C1=$ID
			check "C: a claim answers 201 ($C1)" test "$ST" = 201
			[ -n "$C1" ] && ACKED+=("$C1")
			settled "$SC" 30 || true
			# The disk fails.
			mark
			: >"$CTL"
			ok=1
			for tok in "$ACME" "$OTHER"; do
				claim "$SC" "$tok"
				refused503 || { ok=0; echo "    claim: $ST ${B:0:300}" >&2; }
				[ "$ST" = 201 ] && ACKED+=("$ID")
			done
			check "C: fdatasync fails: 2 claims answer 503 journal-unavailable" test "$ok" = 1
			check "C: the log says the fdatasync failed ($(since | grep -m1 'fdatasync failed' | cut -c1-200))" \
				eval 'since | grep -q "fdatasync failed: Input/output error"'
			mapfile -t F < <(since | grep -oE 'claim sbx-[0-9a-f]+ from pool warm not acknowledged' | cut -d' ' -f2)
			FAILED+=("${F[@]}")
			gone=1
			for id in "${F[@]}"; do cg_gone "$id" 15 || gone=0; done
			check "C: their sandboxes are ended (${F[*]}: 2 named in the log, no process left)" \
				eval '[ "${#F[@]}" = 2 ] && [ "$gone" = 1 ]'
			check "C: ... and not listed (GET /v1/sandboxes: $(listed "$SC"))" test "$(listed "$SC")" = "$C1"
			req "$SC" DELETE "/v1/sandboxes/$C1" "$ACME"
			check "C: a release answers 503 journal-unavailable ($ST $(code))" refused503
			req "$SC" GET "/v1/sandboxes/$C1" "$ACME"
			check "C: ... and the claim stays (GET: $ST $(j 'd.get("state")'))" \
				eval '[ "$ST" = 200 ] && [ "$(j "d[\"state\"]")" = claimed ]'
			xc "$SC" "$ACME" "$C1" "echo ok"
			check "C: ... and works (exec: ok)" eval '[ "$ST" = 200 ] && [ "$(j "d[\"stdout\"].strip()")" = ok ]'
			# The disk is back. A rewrite is tried at most once a second:
			# a claim may still be refused right after.
			mark
			rm -f "$CTL"
			ok=1 n503=0 C4=''
			for _ in $(seq 40); do
				claim "$SC" "$ACME"
				if [ "$ST" = 201 ]; then C4=$ID; ACKED+=("$ID"); break; fi
				refused503 || { ok=0; echo "    claim: $ST ${B:0:300}" >&2; break; }
				n503=$((n503 + 1))
				sleep 0.25
			done
			check "C: the disk back: a claim answers 201 again ($C4, after $n503 more 503s)" \
				eval '[ "$ok" = 1 ] && [ -n "$C4" ]'
			mapfile -t F < <(since | grep -oE 'claim sbx-[0-9a-f]+ from pool warm not acknowledged' | cut -d' ' -f2)
			FAILED+=("${F[@]}")
			claim "$SC" "$OTHER"
			check "C: ... and the next one too ($ID)" test "$ST" = 201
			[ "$ST" = 201 ] && ACKED+=("$ID")
			req "$SC" DELETE "/v1/sandboxes/$C1" "$ACME"
			check "C: the release answers 200 released" \
				eval '[ "$ST" = 200 ] && [ "$(j "d[\"result\"]")" = released ]'
			[ "$ST" = 200 ] && RELEASED+=("$C1")
			check "C: the log says the journal was rewritten into a new file" \
				logged "journal .*rewritten into a new file"
			check "C: the shim made calls fail ($(cat "$CTL.count" 2>/dev/null || echo 0))" \
				test "$(cat "$CTL.count" 2>/dev/null || echo 0)" -gt 0
			check "C: the pool refills" settled "$SC" 30
			kill9 "$PC"
			mark
			daemon_in "$HC" "$E2E_TMP/c.yaml" "$LOG"
			PC=$DPID
			if ! started "$PC" "$LOG" 30; then
				fail "C: after kill -9 the daemon starts again"
				tail -n 20 "$LOG" >&2
			else
				pass "C: after kill -9 the daemon starts again"
				want_c=$(printf '%s\n' "${ACKED[@]}" | sort -u | tr '\n' ' ' | sed 's/ $//')
				want_r=$(printf '%s\n' "${RELEASED[@]}" | sort -u | tr '\n' ' ' | sed 's/ $//')
				got_c=$(jt "$DC/journal.jsonl" ids claim) || true
				got_r=$(jt "$DC/journal.jsonl" ids release) || true
				check "C: the journal's claim events are exactly the 201s ($got_c; wanted $want_c)" \
					test "$got_c" = "$want_c"
				check "C: its release events are exactly the 200s ($got_r; wanted $want_r)" \
					test "$got_r" = "$want_r"
				live_c=$(printf '%s\n' "${ACKED[@]}" | grep -vxF "$C1" | sort | tr '\n' ' ' | sed 's/ $//') || true
				check "C: the live claims after the restart are the acknowledged ones ($(listed "$SC"))" \
					test "$(listed "$SC")" = "$live_c"
				nf=0
				for id in "${FAILED[@]}"; do [ -z "$(cg_pids "$id")" ] || nf=$((nf + 1)); done
				check "C: none of the ${#FAILED[@]} refused claims' sandboxes runs" test "$nf" = 0
			fi
		fi
	fi
	[ -n "${PC:-}" ] && { stop "$PC" || true; }
else
	skip "C: not selected by FLT_CASES"
fi

# ============================================================================
# D. A data_dir that fills up during a burst of claims
# ============================================================================
if [[ $CASES == *" D "* ]]; then
	gwD=''
	netns_new gwD fltd
	LOG=$E2E_TMP/log-d
	LOGS+=("$LOG")
	: >"$LOG"
	DD=$E2E_TMP/data-d
	SD=$E2E_TMP/api-d.sock
	mkdir -p "$DD" "$E2E_TMP/tpl-d" "$E2E_TMP/sbx-d"
	mkconf "$E2E_TMP/d.yaml" d 4
	# data_dir: a 2 MiB tmpfs; the template cache and the sandboxes'
	# records (also under data_dir) are bound from the test's disk, so
	# that what fills up is the journal's and the state file's room.
	HD=''
	holder_start HD "$gwD" "mount -t tmpfs -o size=2m,mode=0700 sl-e2e-data '$DD' &&
		mkdir '$DD/templates' '$DD/sandboxes' && mount --bind '$E2E_TMP/tpl-d' '$DD/templates' &&
		mount --bind '$E2E_TMP/sbx-d' '$DD/sandboxes' &&" || { fail "D: the holder starts"; finish; }
	JD=/proc/$HD/root$DD
	DATAS+=("$JD")
	inD() { nsenter -t "$HD" -m "$@"; }
	daemon_in "$HD" "$E2E_TMP/d.yaml" "$LOG"
	PD=$DPID
	if ! started "$PD" "$LOG" 30 || ! settled "$SD" 30; then
		fail "D: the daemon starts on a 2 MiB data_dir"
		tail -n 30 "$LOG" >&2
	else
		pass "D: the daemon starts on a 2 MiB data_dir (warm 4)"
		mark
		ACKED=() bad=0 n503=0 avail=''
		for i in $(seq 10); do
			if [ "$i" = 4 ]; then
				inD dd if=/dev/zero of="$DD/filler" bs=64k 2>/dev/null || true
				inD dd if=/dev/zero of="$DD/filler" bs=4k oflag=append conv=notrunc 2>/dev/null || true
				avail=$(inD df -k --output=avail "$DD" | tail -n 1 | tr -d ' ') || true
			fi
			claim "$SD" "$([ $((i % 2)) = 0 ] && echo "$ACME" || echo "$OTHER")" "$BIG"
			if [ "$ST" = 201 ]; then
				ACKED+=("$ID")
			elif refused503; then
				n503=$((n503 + 1))
			else
				bad=1
				echo "    claim $i: $ST ${B:0:300}" >&2
			fi
		done
		echo "    burst: ${#ACKED[@]} claims answered 201, $n503 answered 503; the disk filled after the 3rd ($avail KiB left)"
		check "D: the data_dir filled in the middle of the burst (${avail:-?} KiB free)" test "$avail" = 0
		# Each event (over 5 KiB) needs a page the full tmpfs does not have.
		check "D: the 3 claims before the disk filled answer 201, the 7 after it 503 journal-unavailable (${#ACKED[@]} x 201, $n503 x 503)" \
			eval '[ "$bad" = 0 ] && [ "$n503" = 7 ] && [ "${#ACKED[@]}" = 3 ]'
		check "D: the log says the journal cannot be written (no space) ($(since | grep -m1 -i 'no space' | cut -c1-200))" \
			eval 'since | grep -qiE "journal .*No space left on device"'
		req "$SD" GET /v1/info ""
		check "D: the daemon stays up (kill -0; GET /v1/info: $ST)" eval 'kill -0 "$PD" 2>/dev/null && [ "$ST" = 200 ]'
		mapfile -t FD < <(since | grep -oE 'claim sbx-[0-9a-f]+ from pool warm not acknowledged' | cut -d' ' -f2)
		kill9 "$PD"
		inD rm -f "$DD/filler"
		mark
		daemon_in "$HD" "$E2E_TMP/d.yaml" "$LOG"
		PD=$DPID
		if ! started "$PD" "$LOG" 30; then
			fail "D: kill -9, room again: the daemon starts again"
			tail -n 20 "$LOG" >&2
		else
			pass "D: kill -9, room again: the daemon starts again"
			jclaims=$(jt "$JD/journal.jsonl" ids claim) || true
			miss=() extra=()
			for id in "${ACKED[@]}"; do [[ " $jclaims " == *" $id "* ]] || miss+=("$id"); done
			for id in "${FD[@]}"; do [[ " $jclaims " == *" $id "* ]] && extra+=("$id"); done
			check "D: no 201 whose claim event is missing from the journal (${#ACKED[@]} acknowledged; missing: ${miss[*]:-none})" \
				test "${#miss[@]}" = 0
			check "D: no claim event for the ${#FD[@]} refused claims (${extra[*]:-none})" \
				eval '[ "${#FD[@]}" -ge 1 ] && [ "${#extra[@]}" = 0 ]'
			want=$(printf '%s\n' "${ACKED[@]}" | sort | tr '\n' ' ' | sed 's/ $//')
			check "D: the live claims after the restart are the 201s ($(listed "$SD"))" \
				test "$(listed "$SD")" = "$want"
		fi
	fi
	[ -n "${PD:-}" ] && { stop "$PD" || true; }
else
	skip "D: not selected by FLT_CASES"
fi

# ============================================================================
# E. A file-size limit (ulimit -f)
# ============================================================================
if [[ $CASES == *" E "* ]]; then
	gwE=''
	netns_new gwE flte
	LOG=$E2E_TMP/log-e
	LOGS+=("$LOG")
	: >"$LOG"
	DE=$E2E_TMP/data-e
	DATAS+=("$DE")
	SE=$E2E_TMP/api-e.sock
	mkconf "$E2E_TMP/e.yaml" e 2
	HE=''
	holder_start HE "$gwE" "" || { fail "E: the holder starts"; finish; }
	# A first start without a limit makes the data_dir (the template
	# cache, the journal, the state file).
	daemon_in "$HE" "$E2E_TMP/e.yaml" "$LOG"
	P=$DPID
	{ started "$P" "$LOG" 30 && settled "$SE" 30; } || true
	stop "$P" || true
	jsize=$(stat -c %s "$DE/journal.jsonl" 2>/dev/null || echo 0)
	ssize=$(stat -c %s "$DE/state.json" 2>/dev/null || echo 0)
	big=$((jsize > ssize ? jsize : ssize))
	LIM=$((big / 1024 + 8))
	# The log through a pipe: the limit is on files the daemon writes.
	mkfifo "$E2E_TMP/e.fifo"
	cat "$E2E_TMP/e.fifo" >>"$LOG" &
	track $!
	mark
	nsenter -t "$HE" -m -n bash -c 'ulimit -f "$1" && exec "$2" --config "$3"' sh "$LIM" "$SLUICED" \
		"$E2E_TMP/e.yaml" 2>"$E2E_TMP/e.fifo" &
	PE=$!
	track "$PE"
	if ! started "$PE" "$LOG" 30 || ! settled "$SE" 30; then
		fail "E: the daemon starts under ulimit -f $LIM (KiB; the journal is $jsize bytes)"
		tail -n 30 "$LOG" >&2
	else
		pass "E: the daemon starts under ulimit -f $LIM (KiB; the journal is $jsize bytes, state.json $ssize)"
		n201=0 n503=0 bad=0 first=0
		for i in $(seq 12); do
			claim "$SE" "$ACME" "$BIG"
			if [ "$ST" = 201 ]; then
				n201=$((n201 + 1))
			elif refused503; then
				n503=$((n503 + 1))
				[ "$first" = 0 ] && first=$i
			else
				bad=1
				echo "    claim $i: $ST ${B:0:300}" >&2
			fi
			[ "$n503" -ge 4 ] && break
		done
		echo "    $n201 claims answered 201, then $n503 answered 503 (the first at claim $first)"
		check "E: claims past the limit answer 503 journal-unavailable (${n201} x 201, then ${n503} x 503)" \
			eval '[ "$bad" = 0 ] && [ "$n503" -ge 4 ]'
		req "$SE" GET /v1/info ""
		check "E: the daemon survives (kill -0; GET /v1/info: $ST)" eval 'kill -0 "$PE" 2>/dev/null && [ "$ST" = 200 ]'
		# The failure is logged once per run, by each layer that sees it:
		# the journal's write, the claims' refusal, the state file's wait;
		# each refused claim then has its own warn line (the sandbox ended).
		nj=$(since | grep -c 'err .*journal: .*write failed: File too large' || true)
		nm=$(since | grep -c 'err .*File too large: claims and releases are refused' || true)
		ne=$(since | grep -c 'err .*File too large' || true)
		nw=$(since | grep -c 'warn .*not acknowledged: .*File too large' || true)
		check "E: the journal's write failure is logged once for the run of $n503 failures ($nj: $(since | grep -m1 'write failed: File too large' | cut -c1-160))" \
			test "$nj" = 1
		check "E: the refusal of claims is logged once ($nm)" test "$nm" = 1
		check "E: 'File too large' is logged at err level once per layer, not per attempt ($ne err lines <= 3 for $n503 failures)" \
			eval '[ "$ne" -le 3 ] && [ "$ne" -lt "$n503" ]'
		echo "    (and $nw warn lines, one per refused claim, naming the sandbox ended)"
	fi
	[ -n "${PE:-}" ] && { stop "$PE" || true; }
else
	skip "E: not selected by FLT_CASES"
fi

# ============================================================================
# The end: every sandbox these daemons started is ended.
# ============================================================================
# (Not under set -e: end_left_sandboxes's find may race with a cgroup that
# goes away.)
cleanup_all || true
# Not an empty list of sandboxes, which would make the check below pass
# without looking at anything: a sandbox the test claimed is among them.
ids=$(log_ids)
known=${X:-${C1:-}}
check "the logs name this test's sandboxes ($(wc -w <<<"$ids") started, ${known:-no known one} among them)" \
	eval '[ -n "$known" ] && [[ " $ids " == *" $known "* ]]'
left=$(left_sandboxes)
check "no sandbox of this test is left (${left:-none})" test -z "$left"
echo "total: $(($(date +%s) - T_START)) s"
finish
