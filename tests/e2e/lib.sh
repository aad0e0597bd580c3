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
# namespaces, then removes $E2E_TMP.
mkdir -p "$E2E_TMP/.guard"
e2e_guard() {
	local main=$1 tmp=$2 pid start f ns
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
	find /run/sluice/idmap -maxdepth 1 -type l -lname "$tmp/*" -delete 2>/dev/null
	rm -rf "$tmp"
}
# pstart PID: the process's start time (field 22 of /proc/PID/stat, read
# after the command name, which may hold spaces).
pstart() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# netns_new VAR NAME: makes a fresh namespace with loopback up, removed on
# exit, and stores its name in VAR. (Not $(netns_new): a subshell could not
# record it for the cleanup.)
netns_new() {
	local -n _ns_out=$1
	local _ns_name="sl-$2-$$"
	ip netns add "$_ns_name"
	E2E_NETNS+=("$_ns_name")
	echo "$_ns_name" >>"$E2E_TMP/.guard/netns"
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

# Start the guard (see e2e_guard), detached from ctest's pipes.
(setsid bash -c "$(declare -f e2e_guard pstart end_left_sandboxes); e2e_guard $$ '$E2E_TMP'" \
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
}
jget() { "$PY" -c 'import json,sys; v=json.loads(sys.argv[1]); 
for k in sys.argv[2].split("."): v = v[int(k)] if isinstance(v, list) else v.get(k)
print(v if not isinstance(v, bool) else str(v).lower())' "$R" "$1"; }
