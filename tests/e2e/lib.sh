# lib.sh: shared by the end-to-end tests. Source it; it sets a trap that
# removes every namespace the test made and ends every process it started,
# by pid, on any exit.
set -euo pipefail

: "${SLUICED:?SLUICED must name the sluiced binary (ctest sets it)}"
# SL_E2E_SLUICED replaces it: ./build.sh test runs every suite a second
# time against the ASan+UBSan build of the daemon (build/asan).
SLUICED=${SL_E2E_SLUICED:-$SLUICED}
: "${SL_SRC:?SL_SRC must name the source tree}"

E2E_NAME=$(basename "$0" .sh)
E2E_TMP=$(mktemp -d "/tmp/sl-e2e-$E2E_NAME.XXXXXX")
# The canary scan (issue 19, "secrets stay secret"): see "What the canary
# scan reads" below. $E2E_SECRET holds the files that legitimately hold a
# secret and is never scanned; $E2E_TMP/answers/ the answers kept.
E2E_SECRET=$E2E_TMP/secret
E2E_ANS=$E2E_TMP/answers
mkdir -m 700 "$E2E_SECRET" "$E2E_ANS"
E2E_NANS=0
E2E_NETNS=()
E2E_PIDS=()
E2E_FAILS=0
E2E_PASSES=0
E2E_SKIPS=0

e2e_cleanup() {
	local rc=$?
	for pid in "${E2E_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${E2E_PIDS[@]}"; do
		# Give each a moment, then insist.
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	done
	if declare -F e2e_cleanup_extra >/dev/null; then e2e_cleanup_extra || true; fi
	for ns in "${E2E_NETNS[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	local t0=$EPOCHREALTIME
	if e2e_keep "$E2E_TMP" "${SL_E2E_KEEP:-}"; then
		[ -z "${SL_E2E_KEEP:-}" ] ||
			echo "kept for the canary scan in $(awk "BEGIN { printf \"%.2f\", $EPOCHREALTIME - $t0 }") s"
	else
		echo "e2e: $E2E_TMP could not be kept for the canary scan" >&2
	fi
	# The host id ranges of sandboxes ended by their cgroup rather than
	# stopped (sandbox/idmap.c): free anyway once $E2E_TMP is gone, but
	# nothing of a test stays.
	find /run/sluice/idmap -maxdepth 1 -type l -lname "$E2E_TMP/*" -delete 2>/dev/null || true
	rm -rf "$E2E_TMP"
	exit $rc
}
trap e2e_cleanup EXIT
trap 'exit 130' INT TERM

# The guard: ctest ends a test that overruns its TIMEOUT with SIGKILL, to
# the script and its children, and no trap runs then. So every namespace
# and tracked pid is also written under $E2E_TMP/.guard, and a detached
# process (its own session: not a child ctest can find) waits for this
# shell to end. If it ends without cleaning up ($E2E_TMP still there), the
# guard ends the tracked processes (by pid, checked against their start
# time), the sandboxes any daemon log under $E2E_TMP names, and the
# namespaces, keeps $E2E_TMP for the canary scan (e2e_keep), then removes
# it.
mkdir -p "$E2E_TMP/.guard"
e2e_guard() {
	local main=$1 tmp=$2 keep=$3 pid start f ns
	while kill -0 "$main" 2>/dev/null; do sleep 1; done
	[ -d "$tmp/.guard" ] || exit 0
	echo "e2e guard: $tmp was left behind; cleaning up" >&2
	while read -r pid start; do
		[ -n "$start" ] && [ "$(pstart "$pid")" = "$start" ] && kill -9 "$pid" 2>/dev/null
	done < <(cat "$tmp/.guard/pids" 2>/dev/null)
	for f in $(grep -rlE 'sandbox sbx-[0-9a-f]+: started' "$tmp" 2>/dev/null); do
		end_left_sandboxes "$f"
	done
	while read -r ns; do
		[ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
	done < <(cat "$tmp/.guard/netns" 2>/dev/null)
	findmnt -rn -o TARGET | grep "^$tmp/" | sort -r | while read -r m; do
		umount -l "$m"
	done
	e2e_keep "$tmp" "$keep" || echo "e2e guard: $tmp could not be kept for the canary scan" >&2
	find /run/sluice/idmap -maxdepth 1 -type l -lname "$tmp/*" -delete 2>/dev/null
	rm -rf "$tmp"
}
# pstart PID: the process's start time (field 22 of /proc/PID/stat, read
# after the command name, which may hold spaces).
pstart() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# netns_owned NAME: a namespace someone else makes (the daemon's fleet
# namespace) is this test's to remove, on every exit path: the trap's and,
# after a SIGKILL, the guard's.
netns_owned() {
	E2E_NETNS+=("$1")
	echo "$1" >>"$E2E_TMP/.guard/netns"
}

# netns_new VAR NAME: makes a fresh namespace with loopback up, removed on
# exit, and stores its name in VAR. (Not $(netns_new): a subshell could not
# record it for the cleanup.)
netns_new() {
	local -n _ns_out=$1
	local _ns_name="sl-$2-$$"
	ip netns add "$_ns_name"
	netns_owned "$_ns_name"
	ip -n "$_ns_name" link set lo up
	_ns_out=$_ns_name
}

# end_left_sandboxes LOG: sandboxes outlive the daemon that started them;
# this ends every one a daemon's log names ("sandbox ID: started") that is
# still there, found through its cgroups only (never by process name),
# and removes those cgroups.
end_left_sandboxes() {
	local id d pid left
	for id in $(grep -oE 'sandbox sbx-[0-9a-f]+: started' "$1" 2>/dev/null |
		cut -d' ' -f2 | tr -d : | sort -u); do
		for d in $(find /sys/fs/cgroup -maxdepth 8 -type d -name "$id" 2>/dev/null); do
			for pid in $(cat "$d/cgroup.procs" 2>/dev/null); do
				kill -9 "$pid" 2>/dev/null || true
			done
		done
		for _ in $(seq 50); do
			left=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$id" \
				-exec cat {}/cgroup.procs \; 2>/dev/null | head -1)
			[ -z "$left" ] && break
			sleep 0.1
		done
		find /sys/fs/cgroup -maxdepth 8 -depth -type d -name "$id" -exec rmdir {} \; 2>/dev/null || true
	done
}

# --- What the canary scan reads -------------------------------------------
# After the whole ctest run, e2e_zz_canary (tests/e2e/canary.py) looks for
# every value a test declared with `canary` in everything the tests kept,
# and fails naming the file and the spelling it found. On every exit (the
# trap above; the guard after a SIGKILL) a test's $E2E_TMP is copied to
# $SL_E2E_KEEP/kept/ (tests/CMakeLists.txt sets SL_E2E_KEEP; e2e_keep_reset
# empties it when a ctest run starts): every regular file, never crossing
# into a mount, so the daemons' logs and access logs, each data_dir's
# journal, state file and sandboxes' records (a vm's QEMU and console
# logs), and whatever the test wrote. Not kept:
#  - $E2E_SECRET ($E2E_TMP/secret/): the files that legitimately hold a
#    secret (what a ${file:...} reference reads, an origin's own record of
#    what it received, an environment file). Put such files there and only
#    there: anything else that holds a canary fails the scan;
#  - .guard/, and a file over 64 MiB (the origins' payloads, vm template
#    images), listed in $SL_E2E_KEEP/skipped/ instead.
# What a test only held in a variable is not in a file: the API helpers
# (req, bg and info_pool in api_lib.sh, ctl below) keep every answer under
# $E2E_TMP/answers/ (keep_path, keep_text), and `kept` runs a command (the
# sluice CLI: a guest's output) keeping what it printed. None of them
# starts a process but `kept` (a cat): forks are dear on a loaded machine.
# Without SL_E2E_KEEP (a script run by hand) nothing is kept.

# e2e_keep TMP KEEP: copies TMP (a test's $E2E_TMP) to KEEP/kept/ as above;
# nothing without KEEP. A copy that did not finish stays KEEP/kept/*.partial
# (the scan fails on it).
e2e_keep() {
	local tmp=$1 keep=$2 run
	[ -n "$keep" ] && [ -d "$tmp" ] || return 0
	run=${tmp##*/}
	mkdir -p "$keep/kept/$run.partial" "$keep/skipped" || return 1
	# -size counts KiB rounded up: -65537k is 64 MiB at most.
	(cd "$tmp" && find . -xdev \( -path ./secret -o -path ./.guard \) -prune -o \
		-type f -size -65537k -print0 | tar --null -T - -cf -) |
		tar -C "$keep/kept/$run.partial" -xf - || return 1
	(cd "$tmp" && find . -xdev \( -path ./secret -o -path ./.guard \) -prune -o \
		-type f -size +65536k -printf '%s %P\n') >"$keep/skipped/$run" || return 1
	mv -T "$keep/kept/$run.partial" "$keep/kept/$run"
}

# canary NAME=VALUE...: VALUE is a secret (a credential the daemon injects,
# a token): the scan fails if the value, its base64 (also inside a longer
# encoded string, at any of the three offsets), its %-encoding or its JSON
# escaping is in anything kept. NAME (letters, digits, _ . -) names it in
# the scan's report; the value itself is never printed. 16 bytes at least:
# a shorter one (its base64 shorter still) could turn up by chance.
canary() {
	local a name val i=0
	for a in "$@"; do
		i=$((i + 1))
		name=${a%%=*} val=${a#*=}
		if [[ $a != *=* || ! $name =~ ^[A-Za-z0-9_.-]+$ ]]; then
			fail "canary: argument $i is not NAME=VALUE (NAME: letters, digits, _ . -)"
		elif [ "${#val}" -lt 16 ]; then
			fail "canary $name: ${#val} bytes, 16 at least (a shorter value could turn up by chance)"
		elif [ -z "${SL_E2E_KEEP:-}" ]; then
			echo "canary $name: no SL_E2E_KEEP (ctest sets it): not scanned" >&2
		else
			mkdir -p "$SL_E2E_KEEP/canaries"
			printf '%s %s\n' "$name" "$(printf '%s' "$val" | base64 -w0)" \
				>>"$SL_E2E_KEEP/canaries/${E2E_TMP##*/}"
		fi
	done
}

# keep_path VAR WHAT: a fresh path under $E2E_TMP/answers/ in VAR, for a
# command to write an answer the test receives into (curl -o, -D: nothing
# copied), WHAT (no secret in it) beside its name in answers/index.
# keep_text WHAT TEXT keeps an answer held in a variable.
keep_path() {
	printf -v "$1" '%s/%s.%s' "$E2E_ANS" "$BASHPID" "$((E2E_NANS += 1))"
	printf '%s %s\n' "${!1##*/}" "$2" >>"$E2E_ANS/index"
}
keep_text() {
	local f=$E2E_ANS/$BASHPID.$((E2E_NANS += 1))
	printf '%s %s\n' "${f##*/}" "$1" >>"$E2E_ANS/index"
	printf '%s\n' "$2" >"$f"
}
# kept WHAT COMMAND...: runs COMMAND and returns its status; what it
# printed goes where it would have (its stdout, then its stderr, once it
# ended) and is kept in answers/ too, WHAT in the index. Not for a command
# whose output is read while it runs.
kept() {
	local f=$E2E_ANS/$BASHPID.$((E2E_NANS += 1)) rc=0
	printf '%s %s\n' "${f##*/}" "$1" >>"$E2E_ANS/index"
	shift
	"$@" >"$f.out" 2>"$f.err" || rc=$?
	if [ -s "$f.out" ]; then cat "$f.out" || true; fi
	if [ -s "$f.err" ]; then cat "$f.err" >&2 || true; fi
	return "$rc"
}

# Start the guard (see e2e_guard), detached from ctest's pipes.
(setsid bash -c "$(declare -f e2e_guard pstart end_left_sandboxes e2e_keep); e2e_guard $$ '$E2E_TMP' $(printf %q "${SL_E2E_KEEP:-}")" \
	</dev/null >>/tmp/sl-e2e-guard.log 2>&1 &)

# j EXPR: EXPR (python; d = the JSON document in $B) printed; JSON for
# lists, dicts, booleans and null; "<Error: ...>" when it cannot be.
j() {
	"${PY:-python3}" -c 'import json,sys
try:
    d = json.loads(sys.stdin.read())
    r = eval(sys.argv[1])
except Exception as e:
    print("<%s: %s>" % (type(e).__name__, e)); sys.exit(0)
print(r if isinstance(r, str) else json.dumps(r))' "$1" <<<"$B"
}

# track PID: end this process on exit.
track() {
	E2E_PIDS+=("$1")
	guard_pid "$1"
}
# guard_pid PID: only the guard ends it (a test that ends it itself, in its
# own order, on the normal paths).
guard_pid() { echo "$1 $(pstart "$1")" >>"$E2E_TMP/.guard/pids"; }

pass() { E2E_PASSES=$((E2E_PASSES + 1)); printf 'ok   %s\n' "$*"; }
fail() { E2E_FAILS=$((E2E_FAILS + 1)); printf 'FAIL %s\n' "$*"; }
# skip WHY: a check that could not run here. Never a pass: the script then
# exits 77 (ctest reports it as Skipped) and ./build.sh test, as root, fails.
skip() { E2E_SKIPS=$((E2E_SKIPS + 1)); printf 'SKIP %s\n' "$*"; }

# check DESCRIPTION COMMAND...: passes if the command succeeds.
check() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

# wait_for FILE PATTERN [SECONDS]: until a line matching PATTERN appears.
wait_for() {
	local file=$1 pat=$2 secs=${3:-5} i
	for ((i = 0; i < secs * 20; i++)); do
		grep -Eq -- "$pat" "$file" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "--- $file (waiting for /$pat/):" >&2
	tail -n 20 "$file" >&2 || true
	return 1
}

# Prints the summary line and exits non-zero if anything failed, 77 if
# nothing failed but something was skipped.
finish() {
	echo "$E2E_PASSES passed, $E2E_FAILS failed, $E2E_SKIPS skipped"
	[ "$E2E_FAILS" -eq 0 ] || return 1
	[ "$E2E_SKIPS" -eq 0 ] || exit 77
}

# Log helpers: LOG names the log file; mark it, then look only at what
# came after the mark.
LOG=
mark() { MARK=$(wc -l < "$LOG"); }
since() { tail -n "+$((MARK + 1))" "$LOG"; }
# logged PATTERN: a line matching PATTERN appears after the mark (waits 3 s).
logged() {
	for _ in $(seq 60); do
		since | grep -Eq -- "$1" && return 0
		sleep 0.05
	done
	echo "--- no line /$1/ in the log since the mark; the last ones:" >&2
	since | grep ' access ' | tail -n 3 >&2
	return 1
}

# ctl JSON: one request on the control socket $CTL (python3 as $PY); the
# answer in $R. jget KEY.PATH: a field of it ("error.code", "env.0").
R=
ctl() {
	R=$("$PY" - "$CTL" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().readline().strip())
PY
)
	keep_text "ctl $1" "$R"
}
jget() { "$PY" -c 'import json,sys; v=json.loads(sys.argv[1]); 
for k in sys.argv[2].split("."): v = v[int(k)] if isinstance(v, list) else v.get(k)
print(v if not isinstance(v, bool) else str(v).lower())' "$R" "$1"; }
