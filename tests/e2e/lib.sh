# lib.sh: shared by the end-to-end tests. Source it; it sets a trap that
# removes every namespace the test made and ends every process it started,
# by pid, on any exit.
set -euo pipefail

: "${SLUICED:?SLUICED must name the sluiced binary (ctest sets it)}"
: "${SL_SRC:?SL_SRC must name the source tree}"

E2E_NAME=$(basename "$0" .sh)
E2E_TMP=$(mktemp -d "/tmp/sl-e2e-$E2E_NAME.XXXXXX")
E2E_NETNS=()
E2E_PIDS=()
E2E_FAILS=0
E2E_PASSES=0

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
	rm -rf "$E2E_TMP"
	exit $rc
}
trap e2e_cleanup EXIT
trap 'exit 130' INT TERM

# netns_new VAR NAME: makes a fresh namespace with loopback up, removed on
# exit, and stores its name in VAR. (Not $(netns_new): a subshell could not
# record it for the cleanup.)
netns_new() {
	local -n _ns_out=$1
	local _ns_name="sl-$2-$$"
	ip netns add "$_ns_name"
	E2E_NETNS+=("$_ns_name")
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
track() { E2E_PIDS+=("$1"); }

pass() { E2E_PASSES=$((E2E_PASSES + 1)); printf 'ok   %s\n' "$*"; }
fail() { E2E_FAILS=$((E2E_FAILS + 1)); printf 'FAIL %s\n' "$*"; }

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

# Prints the summary line and exits non-zero if anything failed.
finish() {
	echo "$E2E_PASSES passed, $E2E_FAILS failed"
	[ "$E2E_FAILS" -eq 0 ]
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
