# holder_lib.sh: daemons in a mount namespace of their own, for the suites
# that restart sluiced on one data_dir and kill it (durability.sh,
# faults.sh). Source it after lib.sh. The caller owns HOLDERS (every
# holder's pid) and ends them in its own clean-up, after whatever it still
# needs them for; the guard (lib.sh) also knows them.

HOLDERS=()

# untrack PID: a process that was waited for leaves the trap's list (its
# pid may be reused by then).
untrack() {
	local -a keep=()
	local p
	for p in "${E2E_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	E2E_PIDS=("${keep[@]}")
}

# holder_start VAR NETNS SETUP: a process in the network namespace NETNS
# and in a new private mount namespace whose /run is a tmpfs, after SETUP
# (more shell, run there). Its pid in VAR (not a subshell: HOLDERS keeps
# it). 1 if it did not get as far as waiting.
holder_start() {
	local -n _h_out=$1
	local h
	nsenter --net="/run/netns/$2" unshare -m --propagation private \
		sh -c "mount -t tmpfs sl-e2e-run /run && $3 exec sleep 900" &
	h=$!
	HOLDERS+=("$h")
	guard_pid "$h"
	_h_out=$h
	for _ in $(seq 100); do
		[ "$(cat "/proc/$h/comm" 2>/dev/null)" = sleep ] && return 0
		kill -0 "$h" 2>/dev/null || break
		sleep 0.05
	done
	return 1
}

# daemon_in HOLDER CONFIG LOG [VAR=VALUE...]: sluiced in the holder's
# namespaces, with these variables in its environment; its pid (tracked)
# in DPID.
DPID=
daemon_in() {
	local h=$1 conf=$2 log=$3
	shift 3
	nsenter -t "$h" -m -n env "$@" "$SLUICED" --config "$conf" 2>>"$log" &
	DPID=$!
	track "$DPID"
}

# started PID LOG [SECONDS]: that daemon logged its start (1 if it ended
# or did not within SECONDS, default 30).
started() {
	local i
	for ((i = 0; i < ${3:-30} * 20; i++)); do
		grep -Eq "sluiced [0-9.]+ started \(pid $1," "$2" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
