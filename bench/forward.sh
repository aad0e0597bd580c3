#!/bin/bash
# bench/forward.sh: the forward door against a direct connection, tinyproxy
# and squid, side by side, on loopback inside a network namespace of its own
# (removed on exit). ./build.sh bench runs it; bench/README.md explains the
# figures. Needs root, nginx, wrk, tinyproxy, squid, curl and python3.
#
#   SLUICED   the daemon (default: build/gateway/sluiced)
#   SLUICED_BASE  another sluiced to measure beside it (column "base")
#   BENCH_SECONDS  length of each wrk and CONNECT run (default 10)
set -euo pipefail

BENCH_NAME=forward
BENCH_TOOLS="nginx wrk tinyproxy squid curl"
. "$(dirname "$0")/common.bash"

SL=127.0.0.1:3128 TP=127.0.0.1:8888 SQ=127.0.0.1:3129 BASE=127.0.0.1:3130

bench_origin

# --- sluiced (and the baseline build, when given) --------------------------------
sluiced_start sluiced "$SLUICED" "$SL" off "$NS-fleet"
[ -z "$SLUICED_BASE" ] || sluiced_start base "$SLUICED_BASE" "$BASE" off "$NS-fleetb"

# --- tinyproxy ---------------------------------------------------------------
cat > "$TMP/tinyproxy.conf" <<TINY
Port ${TP##*:}
Listen ${TP%:*}
Timeout 60
MaxClients 2000
Allow 127.0.0.1
DisableViaHeader No
LogLevel Error
PidFile "$TMP/tinyproxy.pid"
TINY
ip netns exec "$NS" tinyproxy -d -c "$TMP/tinyproxy.conf" 2>"$TMP/tinyproxy.log" >&2 &
PIDS+=($!)

# --- squid (one worker, no cache) --------------------------------------------
mkdir -p "$TMP/squid"
chown proxy: "$TMP/squid" 2>/dev/null || true
chmod 755 "$TMP"
cat > "$TMP/squid.conf" <<SQUID
http_port $SQ
acl localnet src 127.0.0.0/8
http_access allow localnet
http_access deny all
cache deny all
cache_mem 8 MB
access_log none
cache_store_log none
cache_log $TMP/squid/cache.log
pid_filename $TMP/squid/squid.pid
coredump_dir $TMP/squid
visible_hostname bench
dns_nameservers 127.0.0.1
max_filedescriptors 65536
workers 1
shutdown_lifetime 1 second
SQUID
ip netns exec "$NS" squid -N -f "$TMP/squid.conf" 2>"$TMP/squid.log" &
PIDS+=($!)

# --- every one answers 200 before anything is measured --------------------------
answers() { # NAME CURL-ARGS...
	local name=$1 code=
	shift
	for _ in $(seq 100); do
		code=$(N curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$@" "http://$ORIGIN/1k" || true)
		[ "$code" = 200 ] && return 0
		sleep 0.1
	done
	echo "bench/forward.sh: $name does not answer 200 (last: $code); its log:" >&2
	tail -n 20 "$TMP/$name"*.log >&2 2>/dev/null || true
	exit 1
}
answers nginx
answers sluiced -x "http://$SL"
answers tinyproxy -x "http://$TP"
answers squid -x "http://$SQ"
answers sluiced -p -x "http://$SL"
if [ -n "$SLUICED_BASE" ]; then
	answers base -x "http://$BASE"
	answers base -p -x "http://$BASE"
fi
answers tinyproxy -p -x "http://$TP"
answers squid -p -x "http://$SQ"

# --- 1: requests per second, wrk -t2 -c50, 1 KiB bodies, keep-alive -----------
cat > "$TMP/abs.lua" <<LUA
-- absolute-form requests: wrk talks to the proxy, the request names the origin
wrk.path = "http://$ORIGIN/1k"
wrk.headers["Host"] = "$ORIGIN"
LUA
wrk_rps() { # NAME URL [wrk args...]: prints requests/s (and complains of errors)
	local name=$1 out
	shift
	out=$(N wrk -t2 -c50 -d"${SECS}s" "$@")
	if grep -Eq 'Non-2xx|Socket errors' <<<"$out"; then
		grep -E 'Non-2xx|Socket errors' <<<"$out" | sed "s/^/  wrk, $name: /" >&2
	fi
	awk '/^Requests\/sec:/ { printf "%.0f\n", $2 }' <<<"$out"
}

# --- 2: CONNECT set-up rate -----------------------------------------------------
conn_rate() { # NAME PROXY|- : prints connections/s; errors to stderr
	local out
	out=$(N "$PY" "$ROOT/bench/connrate.py" http "$2" "$ORIGIN" "$SECS" 50)
	[ "${out#* }" = 0 ] || echo "  connrate.py, $1: ${out#* } failed connections" >&2
	echo "${out% *}"
}

# --- 3: one tunnel's throughput, 1 GiB -------------------------------------------
mbps() { # CURL-ARGS...: MB/s of one 1 GiB download
	N curl -s -o /dev/null --max-time 60 -w '%{speed_download}' "$@" "http://$ORIGIN/big" |
		awk '{ printf "%.0f\n", $1 / 1e6 }'
}

echo "==> measuring: ${SECS}s per wrk and CONNECT run, 2 CPUs, $(nproc) online"
declare -A R
echo "  GET 1 KiB, wrk -t2 -c50 ..." >&2
R[rps,direct]=$(wrk_rps direct "http://$ORIGIN/1k")
R[rps,sluice]=$(wrk_rps sluice "http://$SL/" -s "$TMP/abs.lua")
[ -z "$SLUICED_BASE" ] || R[rps,base]=$(wrk_rps base "http://$BASE/" -s "$TMP/abs.lua")
R[rps,tinyproxy]=$(wrk_rps tinyproxy "http://$TP/" -s "$TMP/abs.lua")
R[rps,squid]=$(wrk_rps squid "http://$SQ/" -s "$TMP/abs.lua")
echo "  CONNECT + one GET + close, 50 in parallel ..." >&2
R[conn,direct]=$(conn_rate direct -)
R[conn,sluice]=$(conn_rate sluice "$SL")
[ -z "$SLUICED_BASE" ] || R[conn,base]=$(conn_rate base "$BASE")
R[conn,tinyproxy]=$(conn_rate tinyproxy "$TP")
R[conn,squid]=$(conn_rate squid "$SQ")
echo "  one tunnel, 1 GiB ..." >&2
R[tput,direct]=$(mbps)
R[tput,sluice]=$(mbps -p -x "http://$SL")
[ -z "$SLUICED_BASE" ] || R[tput,base]=$(mbps -p -x "http://$BASE")
R[tput,tinyproxy]=$(mbps -p -x "http://$TP")
R[tput,squid]=$(mbps -p -x "http://$SQ")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
cell() { printf '%s (%s)' "$1" "$(ratio "$1" "$2")"; }
echo
printf '%-34s %10s ' "forward door, figure (ratio to direct)" direct
for who in $SLUICES tinyproxy squid; do printf ' %-16s' "$who"; done
echo
for row in "rps:GET 1 KiB keep-alive, req/s" "conn:CONNECT+GET+close, conn/s" "tput:one tunnel, 1 GiB, MB/s"; do
	k=${row%%:*}
	printf '%-34s %10s ' "${row#*:}" "${R[$k,direct]}"
	for who in $SLUICES tinyproxy squid; do
		printf ' %-16s' "$(cell "${R[$k,$who]}" "${R[$k,direct]}")"
	done
	echo
done
