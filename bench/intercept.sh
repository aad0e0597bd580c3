#!/bin/bash
# bench/intercept.sh: the intercepting door (a CONNECT to an intercept: host,
# TLS terminated with a leaf of sluice's CA and made again to the origin)
# against a direct TLS connection, squid's ssl-bump, mitmproxy and privoxy's
# https-inspection, side by side, on loopback inside a network namespace of
# its own (removed on exit). ./build.sh bench runs it; bench/README.md
# explains the figures. Needs root, nginx, squid (squid-openssl), mitmdump,
# privoxy, dnsmasq, openssl, curl and build/bench/bench_tlsload.
#
#   SLUICED        the daemon (default: build/gateway/sluiced)
#   SLUICED_BASE   another sluiced to measure beside it (column "base")
#   BENCH_SECONDS  length of each timed run (default 10)
#   BENCH_PEERS    0: squid, mitmproxy and privoxy are neither started nor
#                  measured (direct and the sluice columns only; default 1)
#   BENCH_AB       rounds of the keep-alive run for the sluice columns,
#                  taken in turn (sluice, sluice+inject, sluice, ...) and
#                  summed, so that both share the machine's moods (default 2)
#
# Column "sluice+inject": a second sluiced, the same configuration plus one
# header credential (Authorization: Bearer ${env:BENCH_TOKEN}) for the
# origin, so every request it carries has the header injected (issue 19).
set -euo pipefail

BENCH_NAME=intercept
BENCH_TOOLS="nginx squid mitmdump privoxy dnsmasq openssl curl unshare"
. "$(dirname "$0")/common.bash"
LOAD=${BENCH_TLSLOAD:-$ROOT/build/bench/bench_tlsload}
[ -x "$LOAD" ] || { echo "bench/intercept.sh: no $LOAD (./build.sh build)" >&2; exit 1; }

D=origin.test                  # the intercepted host, resolved to 127.0.0.1
TLS_ORIGIN=127.0.0.1:443
SL=127.0.0.1:3128 SQ=127.0.0.1:3129 BASE=127.0.0.1:3130 MI=127.0.0.1:3131 PV=127.0.0.1:8118
IN=127.0.0.1:3132             # sluice+inject
CONNS=50 THREADS=2
AB=${BENCH_AB:-2}
PEERS="squid mitmproxy privoxy"
[ "${BENCH_PEERS:-1}" != 0 ] || PEERS=
SLUICES="sluice sluice+inject${SLUICED_BASE:+ base}"
# The secret sluice+inject adds: random, in its environment only.
BENCH_TOKEN=bench-$(openssl rand -hex 16)
bench_cleanup_extra() { ip netns del "$NS-fleeti" 2>/dev/null || true; }
chmod 755 "$TMP"               # squid and its helpers run as proxy

# --- the test PKI: the origin's CA and leaf; one CA for squid, mitmproxy, privoxy
PKI=$TMP/pki
mkdir -p "$PKI"
ossl() { openssl "$@" 2>>"$PKI/openssl.log"; }
ca() { # NAME CN: a self-signed ECDSA P-256 CA, NAME.pem and NAME.key
	ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=$2" -keyout "$PKI/$1.key" -out "$PKI/$1.pem" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
ca origin-ca "bench origin CA"
ca proxy-ca "bench proxy CA"
# privoxy (mbedtls) refuses an EC CA key ("Issuer key doesn't match issuer
# certificate"): an RSA one for it; its leaves are RSA 2048 whatever the CA.
ossl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=bench privoxy CA" \
	-keyout "$PKI/privoxy-ca.key" -out "$PKI/privoxy-ca.pem" \
	-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$D" \
	-keyout "$PKI/origin.key" -out "$PKI/origin.csr"
printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$D" >"$PKI/origin.ext"
ossl x509 -req -in "$PKI/origin.csr" -CA "$PKI/origin-ca.pem" -CAkey "$PKI/origin-ca.key" \
	-CAcreateserial -days 2 -extfile "$PKI/origin.ext" -out "$PKI/origin.pem"
chmod 644 "$PKI"/*

# --- the origin (nginx, one worker) over TLS, and its name ---------------------------
# /auth answers with the Authorization it got: the check that sluice+inject
# injects (and that plain sluice relays the client's).
bench_origin "$TLS_ORIGIN" "$PKI/origin.pem" "$PKI/origin.key" \
	'location = /auth { default_type text/plain; return 200 "[$http_authorization]"; }'
# sluiced and squid ask DNS: a dnsmasq on 127.0.0.1:53 that knows only $D.
ip netns exec "$NS" dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-daemon --user=root \
	--listen-address=127.0.0.1 --bind-interfaces --local=/test/ --pid-file="$TMP/dnsmasq.pid" \
	--host-record="$D,127.0.0.1" 2>"$TMP/dnsmasq.log" &
PIDS+=($!)
# mitmproxy and privoxy use getaddrinfo(): their own /etc/hosts, bind-mounted
# in a mount namespace of theirs only. Every step execs, so $! is the proxy.
printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$D" >"$TMP/hosts"
chmod 644 "$TMP/hosts"
WITH_HOSTS=(ip netns exec "$NS" unshare -m --propagation private
	sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$TMP/hosts")

# --- sluiced: the forward door, $D in intercept: (and the baseline build) ------------
sluiced_icpt() { # NAME BIN FORWARD FLEETNS [inject]: with inject, one header credential for $D
	local cred= env=()
	if [ "${5:-}" = inject ]; then
		cred="    credentials:
      - { name: tok, host: $D, header: Authorization, value: \"Bearer \${env:BENCH_TOKEN}\" }"
		env=(env BENCH_TOKEN="$BENCH_TOKEN")
	fi
	cat >"$TMP/$1.yaml" <<YAML
daemon:
  data_dir: $TMP/$1-data
  fleet_netns: $4
  control_socket: off
  log: { level: warn, format: text }
api: { listen: off, socket: off }
gateway:
  workers: auto
  listen: { forward: $3, socks: off }
  clients:
    - { name: bench, match: { source: 127.0.0.0/8 }, policy: bench }
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
  limits: { max_connections: 100000 }
  access_log: off
certs: { upstream_ca: $PKI/origin-ca.pem }
lanes: []
pools: []
tenants: []
policies:
  - name: bench
    allow: ["$D:443"]
    intercept: ["$D"]
    allow_private: [127.0.0.0/8]
$cred
YAML
	ip netns exec "$NS" "${env[@]}" "$2" --config "$TMP/$1.yaml" 2>"$TMP/$1.log" &
	PIDS+=($!)
	PID[$1]=$!
}
declare -A PID CA ADDR NA
PID[direct]=${PIDS[0]}       # nginx: the direct column's CPU is the origin's
CA[direct]=$PKI/origin-ca.pem
sluiced_icpt sluice "$SLUICED" "$SL" "$NS-fleet"
CA[sluice]=$TMP/sluice-data/ca.pem ADDR[sluice]=$SL
sluiced_icpt sluice+inject "$SLUICED" "$IN" "$NS-fleeti" inject
CA[sluice+inject]=$TMP/sluice+inject-data/ca.pem ADDR[sluice+inject]=$IN
if [ -n "$SLUICED_BASE" ]; then
	sluiced_icpt base "$SLUICED_BASE" "$BASE" "$NS-fleetb"
	CA[base]=$TMP/base-data/ca.pem ADDR[base]=$BASE
fi

start_peers() {
# --- squid: ssl_bump bump all, leaves from the proxy CA by security_file_certgen -----
mkdir -p "$TMP/squid"
/usr/lib/squid/security_file_certgen -c -s "$TMP/squid/ssl_db" -M 16MB >/dev/null
cp "$PKI/proxy-ca.pem" "$PKI/proxy-ca.key" "$TMP/squid/"
chown -R proxy: "$TMP/squid" 2>/dev/null || true
cat >"$TMP/squid.conf" <<SQUID
http_port $SQ ssl-bump tls-cert=$TMP/squid/proxy-ca.pem tls-key=$TMP/squid/proxy-ca.key generate-host-certificates=on dynamic_cert_mem_cache_size=16MB
sslcrtd_program /usr/lib/squid/security_file_certgen -s $TMP/squid/ssl_db -M 16MB
sslcrtd_children 5 startup=1 idle=1
ssl_bump bump all
tls_outgoing_options cafile=$PKI/origin-ca.pem
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
hosts_file $TMP/hosts
max_filedescriptors 65536
workers 1
shutdown_lifetime 1 second
pinger_enable off
SQUID
ip netns exec "$NS" squid -N -f "$TMP/squid.conf" 2>"$TMP/squid.log" &
PIDS+=($!)
PID[squid]=$! CA[squid]=$PKI/proxy-ca.pem ADDR[squid]=$SQ

# --- mitmproxy: regular proxy mode, the proxy CA in its confdir ----------------------
mkdir -p "$TMP/mitm"
cat "$PKI/proxy-ca.key" "$PKI/proxy-ca.pem" >"$TMP/mitm/mitmproxy-ca.pem"
"${WITH_HOSTS[@]}" mitmdump -q --listen-host "${MI%:*}" --listen-port "${MI##*:}" \
	--set confdir="$TMP/mitm" --set ssl_verify_upstream_trusted_ca="$PKI/origin-ca.pem" \
	--set stream_large_bodies=1m >"$TMP/mitmproxy.log" 2>&1 &
PIDS+=($!)
PID[mitmproxy]=$! CA[mitmproxy]=$PKI/proxy-ca.pem ADDR[mitmproxy]=$MI

# --- privoxy: +https-inspection for every host, the proxy CA ------------------------
mkdir -p "$TMP/privoxy/ca" "$TMP/privoxy/certs"
cp "$PKI/privoxy-ca.pem" "$TMP/privoxy/ca/cacert.crt"
cp "$PKI/privoxy-ca.key" "$TMP/privoxy/ca/cakey.pem"
printf '{+https-inspection}\n/\n' >"$TMP/privoxy/bench.action"
cat >"$TMP/privoxy/config" <<PRIVOXY
confdir $TMP/privoxy
templdir /etc/privoxy/templates
actionsfile bench.action
listen-address $PV
toggle 1
enable-remote-toggle 0
enable-remote-http-toggle 0
enable-edit-actions 0
keep-alive-timeout 300
default-server-timeout 60
socket-timeout 300
max-client-connections 4096
ca-directory $TMP/privoxy/ca
ca-cert-file cacert.crt
ca-key-file cakey.pem
certificate-directory $TMP/privoxy/certs
trusted-cas-file $PKI/origin-ca.pem
PRIVOXY
"${WITH_HOSTS[@]}" privoxy --no-daemon "$TMP/privoxy/config" >"$TMP/privoxy.log" 2>&1 &
PIDS+=($!)
PID[privoxy]=$! CA[privoxy]=$PKI/privoxy-ca.pem ADDR[privoxy]=$PV
}
[ -z "$PEERS" ] || start_peers

# --- every one answers 200 through its interception before anything is measured -----
# A peer that does not is shown as n/a with the reason; sluice must.
answers() { # NAME: 0 when curl through it (or straight, for direct) gets /1k
	local who=$1 code= args
	if [ "$who" = direct ]; then
		args=(--resolve "$D:443:127.0.0.1")
	else
		args=(-p -x "http://${ADDR[$who]}")
	fi
	for _ in $(seq 150); do
		if [ -s "${CA[$who]}" ]; then
			code=$(N curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "${CA[$who]}" \
				"${args[@]}" "https://$D/1k" || true)
			[ "$code" = 200 ] && return 0
		fi
		kill -0 "${PID[$who]}" 2>/dev/null || break
		sleep 0.1
	done
	NA[$who]="no 200 through it (last: ${code:-none})"
	echo "bench/intercept.sh: $who does not answer 200 (last: ${code:-none}); its log:" >&2
	tail -n 8 "$TMP/$who"*.log "$TMP/$who/cache.log" 2>/dev/null | sed 's/^/  /' >&2 || true
	return 1
}
answers direct || exit 1
for who in $SLUICES; do answers "$who" || exit 1; done
for who in $PEERS; do answers "$who" || true; done
# sluice+inject must put the token in place of the client's Authorization,
# and plain sluice must relay the client's untouched.
authz() { # NAME: what /auth saw through it, the client sending "Bearer guest"
	N curl -s --max-time 5 --cacert "${CA[$1]}" -p -x "http://${ADDR[$1]}" \
		-H 'Authorization: Bearer guest' "https://$D/auth" || true
}
got=$(authz sluice+inject)
[ "$got" = "[Bearer $BENCH_TOKEN]" ] ||
	{ echo "bench/intercept.sh: sluice+inject did not inject (the origin saw ${got:0:20}...)" >&2; exit 1; }
got=$(authz sluice)
[ "$got" = "[Bearer guest]" ] ||
	{ echo "bench/intercept.sh: sluice did not relay the client's Authorization (${got:0:20}...)" >&2; exit 1; }

# --- the measurements ---------------------------------------------------------------
CLK_TCK=$(getconf CLK_TCK)
tree() { # PID: PID and its descendants
	local p
	echo "$1"
	for p in $(pgrep -P "$1" 2>/dev/null || true); do tree "$p"; done
}
ticks() { # PID: user+system clock ticks of PID and its living descendants
	local p t=0 s
	for p in $(tree "$1"); do
		s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		s=${s##*) }   # the fields after comm, which may hold spaces
		t=$((t + $(awk '{ print $12 + $13 }' <<<"$s")))
	done
	echo "$t"
}
declare -A R C RC RS RT
# measure WHO KEY DIVISOR [tlsload args]: one run; R[KEY,WHO] the rate and
# C[KEY,WHO] µs of CPU per op over every run of KEY for WHO so far (a second
# run of the same KEY adds its count, seconds and CPU to the first's).
measure() {
	local who=$1 key=$2 div=$3 t0 t1 out target count secs rate errors
	shift 3
	[ -z "${NA[$who]:-}" ] || return 0
	if [ "$who" = direct ]; then target=(-a "$TLS_ORIGIN"); else target=(-x "${ADDR[$who]}"); fi
	t0=$(ticks "${PID[$who]}")
	out=$(N "$LOAD" -C "${CA[$who]}" -H "$D:443" "${target[@]}" -d "$SECS" "$@" 2> >(sed "s/^/  $who: /" >&2)) || true
	t1=$(ticks "${PID[$who]}")
	read -r count secs rate errors <<<"${out:-0 0 0 0}"
	[ "$errors" = 0 ] || echo "  $who: $errors failed connections" >&2
	RC[$key,$who]=$((${RC[$key,$who]:-0} + count))
	RS[$key,$who]=$(awk -v a="${RS[$key,$who]:-0}" -v b="$secs" 'BEGIN { printf "%.2f", a + b }')
	RT[$key,$who]=$((${RT[$key,$who]:-0} + t1 - t0))
	# div turns COUNT into operations: 1 per response, 1e6 per MB of a stream
	R[$key,$who]=$(awk -v n="${RC[$key,$who]}" -v s="${RS[$key,$who]}" -v div="$div" \
		'BEGIN { if (s > 0) printf "%.0f", n / div / s; else print 0 }')
	C[$key,$who]=$(awk -v d="${RT[$key,$who]}" -v hz="$CLK_TCK" -v n="${RC[$key,$who]}" -v div="$div" \
		'BEGIN { if (n > 0) printf "%.0f", d * 1e6 / hz / (n / div); else print "-" }')
	# this run alone, for the noise between rounds
	echo "    $who: $rate/s, $(awk -v d=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$count" -v div="$div" \
		'BEGIN { if (n > 0) printf "%.0f", d * 1e6 / hz / (n / div); else print "-" }') us CPU per op" >&2
}

echo "==> measuring: ${SECS}s per run, $CONNS connections on $THREADS client threads, $(nproc) CPUs online"
ALL="direct $SLUICES $PEERS"
echo "  keep-alive GET 1 KiB over one intercepted tunnel per connection ..." >&2
measure direct ka 1 -c "$CONNS" -t "$THREADS"
# the sluice columns in turn, AB rounds (sluice, sluice+inject, sluice, ...)
for _ in $(seq "$AB"); do
	for who in $SLUICES; do measure "$who" ka 1 -c "$CONNS" -t "$THREADS"; done
done
for who in $PEERS; do measure "$who" ka 1 -c "$CONNS" -t "$THREADS"; done
echo "  new connection per request: TCP, CONNECT, full TLS handshake, one GET ..." >&2
for who in $ALL; do measure "$who" hs 1 --new -c "$CONNS" -t "$THREADS"; done
echo "  one stream, /big (1 GiB, or ${SECS}s of it) ..." >&2
for who in $ALL; do measure "$who" st 1e6 --stream; done

# --- the table ------------------------------------------------------------------------
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
W=18
echo
printf '%-36s %10s ' "intercepting door (ratio to direct)" direct
for who in $SLUICES $PEERS; do printf ' %-*s' $W "$who"; done
echo
for row in "ka:keep-alive GET 1 KiB, req/s" "kac:  CPU per request, us" \
	"hs:new handshakes/s (+GET 1 KiB)" "hsc:  CPU per handshake, us" \
	"st:one stream, MB/s" "stc:  CPU per MB, us"; do
	k=${row%%:*}
	case $k in
	*c) k=${k%c}
	    printf '%-36s %10s ' "${row#*:}" "${C[$k,direct]}"
	    for who in $SLUICES $PEERS; do
		    if [ -n "${NA[$who]:-}" ]; then printf ' %-*s' $W "n/a"; else printf ' %-*s' $W "${C[$k,$who]}"; fi
	    done ;;
	*)  printf '%-36s %10s ' "${row#*:}" "${R[$k,direct]}"
	    for who in $SLUICES $PEERS; do
		    if [ -n "${NA[$who]:-}" ]; then printf ' %-*s' $W "n/a"
		    else printf ' %-*s' $W "${R[$k,$who]} ($(ratio "${R[$k,$who]}" "${R[$k,direct]}"))"; fi
	    done ;;
	esac
	echo
done
echo "(CPU: user+system of the proxy's processes; in the direct column, nginx's)"
for who in $PEERS; do [ -z "${NA[$who]:-}" ] || echo "$who: n/a: ${NA[$who]}"; done

# --- the issue's goals, for sluice ---------------------------------------------------
verdict() { awk -v v="$1" -v op="$2" -v g="$3" 'BEGIN {
	if (v == "-" || v == "") { print "-"; exit }
	ok = (op == ">=") ? (v + 0 >= g) : (v + 0 <= g); print ok ? "met" : "MISSED" }'; }
ka=$(ratio "${R[ka,sluice]}" "${R[ka,direct]}")
hs=$(ratio "${R[hs,sluice]}" "${R[hs,direct]}")
st=$(ratio "${R[st,sluice]}" "${R[st,direct]}")
inj=$(awk -v a="${C[ka,sluice+inject]}" -v b="${C[ka,sluice]}" \
	'BEGIN { if (a != "-" && b > 0) printf "%.2f", a / b; else print "-" }')
echo "goal (issue 19), keep-alive with a header injected, CPU per request sluice+inject / sluice <= 1.10:" \
	"${C[ka,sluice+inject]} / ${C[ka,sluice]} us = $inj $(verdict "$inj" '<=' 1.10)" \
	"(req/s ${R[ka,sluice+inject]} / ${R[ka,sluice]} = $(ratio "${R[ka,sluice+inject]}" "${R[ka,sluice]}"); $AB keep-alive round(s) of each, in turn)"
echo "goals (issue 18), sluice: keep-alive >= 0.6 of direct: $ka $(verdict "$ka" '>=' 0.6);" \
	"CPU <= 35 us/request: ${C[ka,sluice]} $(verdict "${C[ka,sluice]}" '<=' 35);" \
	"handshakes >= 0.5: $hs $(verdict "$hs" '>=' 0.5); one stream >= 0.6: $st $(verdict "$st" '>=' 0.6)"
