#!/bin/bash
# bench/socks.sh: the SOCKS5 door against a direct connection, microsocks
# and dante, side by side, on loopback inside a network namespace of its own
# (removed on exit). ./build.sh bench runs it; bench/README.md explains the
# figures. Needs root, nginx, microsocks, danted (dante-server), curl and
# python3.
#
#   SLUICED        the daemon (default: build/gateway/sluiced)
#   SLUICED_BASE   another sluiced to measure beside it (column "base")
#   BENCH_SECONDS  length of each connection-rate run (default 10)
set -euo pipefail

BENCH_NAME=socks
BENCH_TOOLS="nginx microsocks danted curl"
. "$(dirname "$0")/common.bash"
# danted forks helpers of its own: end those of ours, by pid, too.
bench_cleanup_extra() {
	if [ -f "$TMP/danted.pid" ]; then
		for pid in $(pgrep -P "$(cat "$TMP/danted.pid")" 2>/dev/null || true); do
			kill -9 "$pid" 2>/dev/null || true
		done
	fi
}

SL=127.0.0.1:1080 MS=127.0.0.1:1081 DA=127.0.0.1:1082 BASE=127.0.0.1:1083

bench_origin

# --- sluiced: the SOCKS door only (and the baseline build, when given) ----------
sluiced_start sluiced "$SLUICED" 127.0.0.1:3128 "$SL" "$NS-fleet"
[ -z "$SLUICED_BASE" ] || sluiced_start base "$SLUICED_BASE" 127.0.0.1:3130 "$BASE" "$NS-fleetb"

# --- microsocks (a thread per connection) ---------------------------------------
ip netns exec "$NS" microsocks -i "${MS%:*}" -p "${MS##*:}" >"$TMP/microsocks.log" 2>&1 &
PIDS+=($!)

# --- dante (its own configuration, in the foreground, no auth) -------------------
cat > "$TMP/danted.conf" <<DANTE
logoutput: $TMP/danted.log
errorlog: $TMP/danted.log
internal: ${DA%:*} port = ${DA##*:}
external: 127.0.0.1
socksmethod: none
clientmethod: none
user.privileged: root
user.unprivileged: nobody
client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
socks pass { from: 127.0.0.0/8 to: 127.0.0.0/8 command: connect }
DANTE
ip netns exec "$NS" danted -f "$TMP/danted.conf" -p "$TMP/danted.pid" &
PIDS+=($!)

# --- every one relays a request before anything is measured -----------------------
answers() { # NAME CURL-ARGS...
	local name=$1 code=
	shift
	for _ in $(seq 100); do
		code=$(N curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$@" "http://$ORIGIN/1k" || true)
		[ "$code" = 200 ] && return 0
		sleep 0.1
	done
	echo "bench/socks.sh: $name does not answer 200 (last: $code); its log:" >&2
	tail -n 20 "$TMP/$name"*.log >&2 2>/dev/null || true
	exit 1
}
answers nginx
answers sluiced --socks5 "$SL"
[ -z "$SLUICED_BASE" ] || answers base --socks5 "$BASE"
answers microsocks --socks5 "$MS"
answers danted --socks5 "$DA"

# --- 1: connection set-up rate ------------------------------------------------------
conn_rate() { # NAME PROXY|- : prints connections/s; errors to stderr
	local out
	out=$(N "$PY" "$ROOT/bench/connrate.py" socks "$2" "$ORIGIN" "$SECS" 50)
	[ "${out#* }" = 0 ] || echo "  connrate.py, $1: ${out#* } failed connections" >&2
	echo "${out% *}"
}

# --- 2: one stream's throughput, 1 GiB -----------------------------------------------
mbps() { # CURL-ARGS...: MB/s of one 1 GiB download
	N curl -s -o /dev/null --max-time 60 -w '%{speed_download}' "$@" "http://$ORIGIN/big" |
		awk '{ printf "%.0f\n", $1 / 1e6 }'
}

echo "==> measuring: ${SECS}s per connection-rate run, $(nproc) CPUs online"
declare -A R
echo "  greeting + CONNECT + one GET + close, 50 in parallel ..." >&2
R[conn,direct]=$(conn_rate direct -)
R[conn,sluice]=$(conn_rate sluice "$SL")
[ -z "$SLUICED_BASE" ] || R[conn,base]=$(conn_rate base "$BASE")
R[conn,microsocks]=$(conn_rate microsocks "$MS")
R[conn,dante]=$(conn_rate dante "$DA")
echo "  one stream, 1 GiB ..." >&2
R[tput,direct]=$(mbps)
R[tput,sluice]=$(mbps --socks5 "$SL")
[ -z "$SLUICED_BASE" ] || R[tput,base]=$(mbps --socks5 "$BASE")
R[tput,microsocks]=$(mbps --socks5 "$MS")
R[tput,dante]=$(mbps --socks5 "$DA")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
cell() { printf '%s (%s)' "$1" "$(ratio "$1" "$2")"; }
echo
printf '%-34s %10s ' "SOCKS door, figure (ratio to direct)" direct
for who in $SLUICES microsocks dante; do printf ' %-16s' "$who"; done
echo
for row in "conn:CONNECT+GET+close, conn/s" "tput:one stream, 1 GiB, MB/s"; do
	k=${row%%:*}
	printf '%-34s %10s ' "${row#*:}" "${R[$k,direct]}"
	for who in $SLUICES microsocks dante; do
		printf ' %-16s' "$(cell "${R[$k,$who]}" "${R[$k,direct]}")"
	done
	echo
done
