#!/bin/bash
# bench/dns.sh: the DNS door (issue 21) against dnsmasq answering the same
# names from a hosts file, each loaded by dnsperf over UDP from a network
# namespace of its own through one veth. ./build.sh bench runs it;
# bench/README.md explains the figures. Needs root, dnsperf, dnsmasq, curl.
#
#   SLUICED        the daemon (default: build/gateway/sluiced)
#   BENCH_SECONDS  the time each server is loaded, in all (default 10)
#   BENCH_AB       rounds, taken in turn (sluice, dnsmasq, sluice, ...) and
#                  summed, each BENCH_SECONDS / BENCH_AB long, so that both
#                  share the machine's moods (default 2)
#   DNS_CLIENTS    dnsperf's clients (sockets, so source ports: the door's
#                  SO_REUSEPORT sockets share them out; default 8)
#   DNS_THREADS    dnsperf's threads (default 1)
#   DNS_OUTSTANDING  queries in flight at most (default 200)
#
# sluiced runs in $NS with one lane (10.88.1.0/24, the DNS door on
# 10.88.1.1:53) and one ns pool; a claimed sandbox is the client: dnsperf
# runs in its network namespace (entered with nsenter from the host, so
# dnsperf is not held to the sandbox's CPU quota), and its source address
# is how the door knows it. Column sluice+log is a second sluiced, the same
# but for an access line per query written to a file (the default is one
# to stderr; other benchmarks turn it off). dnsmasq runs in $NS-peer
# (10.89.0.1), dnsperf for it in $NS (10.89.0.2): the same one veth hop as
# sandbox -> gateway.
set -euo pipefail
BENCH_NAME=dns
BENCH_TOOLS="dnsperf dnsmasq curl nsenter"
. "$(dirname "$0")/common.bash"
AB=${BENCH_AB:-2}
CLIENTS=${DNS_CLIENTS:-8}
THREADS=${DNS_THREADS:-1}
OUTSTANDING=${DNS_OUTSTANDING:-200}
ROUND=$(((SECS + AB - 1) / AB))
PEER=$NS-peer
GOAL=20000

# The daemon's sandboxes, if it did not end them itself (fleet_teardown
# ends them on SIGTERM; a daemon killed after 3 s would not): found through
# their cgroups only, by the ids its log names.
bench_cleanup_extra() {
	local id d pid
	for id in $(cat "$TMP"/sluice*.log 2>/dev/null | grep -oE 'sandbox sbx-[0-9a-f]+: started' |
		cut -d' ' -f2 | tr -d : | sort -u); do
		for d in $(find /sys/fs/cgroup -maxdepth 8 -type d -name "$id" 2>/dev/null); do
			for pid in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
		done
		sleep 0.2
		find /sys/fs/cgroup -maxdepth 8 -depth -type d -name "$id" -exec rmdir {} \; 2>/dev/null || true
	done
	ip netns del "$PEER" 2>/dev/null || true
}

# --- the names: 16 allowed (A), 16 refused, in turn --------------------------------
ALLOW=() QUERIES=$TMP/queries HOSTS=$TMP/hosts
: >"$QUERIES"
: >"$HOSTS"
for i in $(seq 0 15); do
	ALLOW+=("\"a$i.bench.test\"")
	printf 'a%d.bench.test A\nr%d.bench.test A\n' "$i" "$i" >>"$QUERIES"
	printf '10.99.0.%d a%d.bench.test\n' $((i + 10)) "$i" >>"$HOSTS"
done

# --- sluiced: one lane, one ns pool, the API on a unix socket ----------------------
# sluice_up NAME FLEET ACCESS_LOG: a sluiced in $NS (its log $TMP/NAME.log)
# whose fleet namespace is FLEET, with one warm sandbox, claimed; sets
# SPID[NAME] (the daemon) and SBXNET[NAME] (the claim's network namespace).
declare -A SPID SBXNET
sluice_up() {
	local name=$1 fleet=$2 alog=$3 sock=$TMP/$1.sock pid claim sbx d p=
	cat >"$TMP/$name.yaml" <<YAML
daemon:
  data_dir: $TMP/$name-data
  fleet_netns: $fleet
  fleet_teardown: true
  control_socket: off
  log: { level: info, format: text }
api: { listen: off, socket: $sock }
gateway:
  workers: auto
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
  access_log: $alog
lanes:
  - name: egress
    subnet: 10.88.1.0/24
    doors: { forward: 3128 }
policies:
  - name: names
    allow: [$(IFS=,; echo "${ALLOW[*]}")]
pools:
  - { name: bench, backend: ns, template: busybox, lane: egress, policy: names, warm: 1, warm_max: 1 }
YAML
	nsenter --net="/run/netns/$NS" "$SLUICED" --config "$TMP/$name.yaml" 2>"$TMP/$name.log" &
	pid=$!
	PIDS+=("$pid")
	SPID[$name]=$pid
	for _ in $(seq 300); do
		[ -S "$sock" ] && api "$sock" http://x/v1/info 2>/dev/null | grep -q '"warm": *1' && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	api "$sock" http://x/v1/info 2>/dev/null | grep -q '"warm": *1' ||
		{ echo "bench/dns.sh: $name did not start with a warm sandbox:" >&2; tail -n 20 "$TMP/$name.log" >&2; exit 1; }
	claim=$(api "$sock" -X POST -H 'Content-Type: application/json' --data-binary '{"pool":"bench"}' http://x/v1/claims)
	sbx=$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$claim") ||
		{ echo "bench/dns.sh: $name: the claim failed: $claim" >&2; exit 1; }
	# Its network namespace: that of any process in its cgroup (the agent).
	for d in $(find /sys/fs/cgroup -maxdepth 8 -type d -name "$sbx" 2>/dev/null); do
		p=$(head -n 1 "$d/cgroup.procs" 2>/dev/null) && [ -n "$p" ] && break
	done
	[ -n "$p" ] || { echo "bench/dns.sh: $name: no process of sandbox $sbx found" >&2; exit 1; }
	SBXNET[$name]=/proc/$p/ns/net
}
api() { local sock=$1; shift; curl -sS -m 30 --unix-socket "$sock" "$@"; }
sluice_up sluice "$NS-fleet" off
# The same with an access line per query, to a file (the default is stderr).
sluice_up sluice+log "$NS-fleetb" "$TMP/access.log"

# --- dnsmasq: the same names, authoritative for test, no upstream ------------------
ip netns add "$PEER"
ip -n "$PEER" link set lo up
ip -n "$NS" link add vdc type veth peer name vdd netns "$PEER"
ip -n "$NS" addr add 10.89.0.2/24 dev vdc
ip -n "$NS" link set vdc up
ip -n "$PEER" addr add 10.89.0.1/24 dev vdd
ip -n "$PEER" link set vdd up
ip netns exec "$PEER" dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-daemon --user=root \
	--listen-address=10.89.0.1 --bind-interfaces --local=/test/ --addn-hosts="$HOSTS" \
	--cache-size=1000 2>"$TMP/dnsmasq.log" &
DPID=$!
PIDS+=("$DPID")
IN_PEER=(ip netns exec "$NS")

# --- each answers as it should before anything is measured --------------------------
cat >"$TMP/ask.py" <<'PY'
import random, socket, struct, sys
server, name = sys.argv[1], sys.argv[2]
q = struct.pack(">HHHHHH", random.getrandbits(16), 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for _ in range(20):
    try:
        s.sendto(q, (server, 53))
        r = s.recv(2048)
        break
    except (socket.timeout, ConnectionRefusedError):
        continue
else:
    print("no-answer"); sys.exit(0)
addr = "-"
if struct.unpack(">H", r[6:8])[0]:
    addr = socket.inet_ntoa(r[-4:])
print("rcode=%d %s" % (r[3] & 15, addr))
PY
# ask WHO NAME: the rcode and the first A record's address WHO answers with.
ask() {
	case $1 in
	dnsmasq) "${IN_PEER[@]}" "$PY" "$TMP/ask.py" 10.89.0.1 "$2" ;;
	*) nsenter --net="${SBXNET[$1]}" "$PY" "$TMP/ask.py" 10.88.1.1 "$2" ;;
	esac
}
WHO="sluice sluice+log dnsmasq"
for who in $WHO; do
	want='^rcode=0 198\.1[89]\.[0-9]+\.[0-9]+$'
	[ "$who" != dnsmasq ] || want='^rcode=0 10\.99\.0\.10$'
	got=$(ask "$who" a0.bench.test)
	[[ $got =~ $want ]] ||
		{ echo "bench/dns.sh: $who answered a0.bench.test with '$got' (wanted /$want/)" >&2; exit 1; }
	got=$(ask "$who" r0.bench.test)
	[ "$got" = "rcode=3 -" ] ||
		{ echo "bench/dns.sh: $who answered r0.bench.test with '$got' (wanted NXDOMAIN)" >&2; exit 1; }
done
grep -q 'door=dns .*host=r0\.bench\.test .*status=3 ' "$TMP/access.log" ||
	{ echo "bench/dns.sh: sluice+log wrote no access line for r0.bench.test" >&2; exit 1; }

# --- the measurements ----------------------------------------------------------------
CLK_TCK=$(getconf CLK_TCK)
ticks() { # PID: its user+system clock ticks, every thread's
	local s
	s=$(cat "/proc/$1/stat")
	s=${s##*) }   # the fields after comm, which may hold spaces
	awk '{ print $12 + $13 }' <<<"$s"
}
declare -A N_Q S_T T_CPU LOST CODES
# load WHO: one dnsperf run of ROUND seconds; adds to that server's sums.
load() {
	local who=$1 pid out t0 t1 n secs lost
	local args=(dnsperf -m udp -d "$QUERIES" -l "$ROUND" -c "$CLIENTS" -T "$THREADS" -q "$OUTSTANDING" -t 2)
	case $who in
	dnsmasq) pid=$DPID args=("${IN_PEER[@]}" "${args[@]}" -s 10.89.0.1) ;;
	*) pid=${SPID[$who]} args=(nsenter --net="${SBXNET[$who]}" "${args[@]}" -s 10.88.1.1) ;;
	esac
	t0=$(ticks "$pid")
	out=$("${args[@]}" 2>&1) || true
	t1=$(ticks "$pid")
	n=$(awk '/Queries completed:/ { print $3 }' <<<"$out")
	secs=$(awk '/Run time \(s\):/ { print $4 }' <<<"$out")
	lost=$(awk '/Queries lost:/ { print $3 }' <<<"$out")
	if [ -z "$n" ] || [ -z "$secs" ]; then
		echo "bench/dns.sh: dnsperf against $who printed no statistics:" >&2
		echo "$out" >&2
		exit 1
	fi
	N_Q[$who]=$((${N_Q[$who]:-0} + n))
	S_T[$who]=$(awk -v a="${S_T[$who]:-0}" -v b="$secs" 'BEGIN { printf "%.3f", a + b }')
	T_CPU[$who]=$((${T_CPU[$who]:-0} + t1 - t0))
	LOST[$who]=$((${LOST[$who]:-0} + lost))
	CODES[$who]=$(sed -n 's/^ *Response codes: *//p' <<<"$out")
	echo "    $who: $(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.0f", n / s }') q/s," \
		"$(awk -v d=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$n" 'BEGIN { if (n > 0) printf "%.1f", d * 1e6 / hz / n; else print "-" }') us CPU per query;" \
		"lost $lost; ${CODES[$who]}" >&2
}

echo "==> DNS door: dnsperf over UDP, $AB round(s) of ${ROUND}s per server in turn;" \
	"$CLIENTS clients, $THREADS thread(s), $OUTSTANDING in flight; $(nproc) CPUs online, load $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$AB"); do
	for who in $WHO; do load "$who"; done
done

rate() { awk -v n="${N_Q[$1]}" -v s="${S_T[$1]}" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print 0 }'; }
cpu() { awk -v d="${T_CPU[$1]}" -v hz="$CLK_TCK" -v n="${N_Q[$1]}" 'BEGIN { if (n > 0) printf "%.1f", d * 1e6 / hz / n; else print "-" }'; }
RD=$(rate dnsmasq)
echo
printf '%-36s' "DNS door, UDP (ratio to dnsmasq)"
for who in $WHO; do printf ' %-18s' "$who"; done
echo
printf '%-36s' "queries/s"
for who in $WHO; do
	r=$(rate "$who")
	[ "$who" = dnsmasq ] || r="$r ($(awk -v a="$r" -v b="$RD" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'))"
	printf ' %-18s' "$r"
done
echo
printf '%-36s' "  CPU per query, us"
for who in $WHO; do printf ' %-18s' "$(cpu "$who")"; done
echo
printf '%-36s' "  answered / lost"
for who in $WHO; do printf ' %-18s' "${N_Q[$who]} / ${LOST[$who]}"; done
echo
echo "(half the queries an allowed name's A, half a refused name's; CPU: user+system of the server's"
echo " process, every thread; sluice+log writes an access line per query to a file; the last round's codes:"
for who in $WHO; do printf '  %-11s %s\n' "$who:" "${CODES[$who]}"; done
echo ")"
RS=$(rate sluice) RL=$(rate sluice+log)
verdict() { awk -v v="$1" -v g="$GOAL" 'BEGIN { print (v + 0 >= g) ? "met" : "MISSED" }'; }
echo "goal (issue 21), the DNS door answers >= $GOAL queries/s: sluice $RS $(verdict "$RS"), sluice+log $RL $(verdict "$RL")"
