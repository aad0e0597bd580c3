#!/bin/bash
# The SOCKS5 door end to end: the real sluiced between real clients (curl,
# git, ssh with nc -X 5) or a hand-written one (socks/client.py: reply
# codes, BND, methods, malformed and split messages) and the origin of
# net.sh (nginx over IPv4 and IPv6, dnsmasq, the python servers).
#
# Checks: method choice (no-auth by source address, RFC 1929 otherwise, in
# the client's order, 0xff and close when nothing fits or nothing is
# offered), auth failures, optimistic clients (greeting, credentials,
# request and payload in one write) served, and what they sent ahead of a
# refused request never relayed; 07 for any command but CONNECT whatever
# its address,
# CONNECT by IPv4, domain and IPv6, every refusal's reply code (02, 04, 05,
# 06, 07, 08) and its access line, malformed input whole, split and byte by
# byte, BND of the success reply, identity and report mode, tunnels (1 KiB,
# 100 MiB with sha256, half-close) copying and splicing (and /metrics saying
# which relay moved the bytes), real clients, max_connections shared with
# the forward door, and the deadlines: the handshake's 30 s and an idle
# tunnel's idle_timeout_ms. Out of descriptors (a lowered limit, 64
# connections at once): no spin, one log line, counted in /metrics, and
# every waiting connection (SOCKS, API, control) served once they free.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/net.sh"
canary SOCKS_CI_PASSWORD="$CI_PW" SOCKS_AUDIT_PASSWORD="$AUDIT_PW"

SC=$HERE/socks/client.py

# --- sluiced -------------------------------------------------------------
# write_conf MAX_CONNECTIONS [IDLE_TIMEOUT_MS]
API=$E2E_TMP/api.sock
CTL=$E2E_TMP/ctl.sock
write_conf() {
	cat > "$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  control_socket: $CTL
  log: { level: info, format: text }
api: { listen: off, socket: $API }
gateway:
  workers: auto
  listen: { forward: 0.0.0.0:3128, socks: 0.0.0.0:1080 }
  clients:
    - { name: local, match: { source: 127.0.0.0/8 }, policy: web }
    - { name: ci, match: { user: ci, password: "\${env:CI_PW}" }, policy: web }
    - { name: auditor, match: { user: auditor, password: "\${env:AUDIT_PW}" }, policy: audit }
  dns: { servers: [10.99.0.53], timeout_ms: 500, attempts: 1 }
  limits: { max_connections: $1, max_header_bytes: 8192, connect_timeout_ms: 500, idle_timeout_ms: ${2:-20000} }
  access_log: stderr
lanes: []
pools: []
tenants: []
policies:
  - name: web
    allow: ["origin.test", "*.origin.test", "origin.test:81", "origin.test:8080",
            "v6.test", "internal.test", "meta.test", "loop.test", "mixed.test",
            "nosuch.test", "slow.test", "fail.slow.test", "slowbox.test:7001", "slowbox.test:7005",
            "10.99.0.10", "fd99::10", "127.0.0.1", "169.254.169.254", "::1"]
    deny: ["blocked.origin.test"]
    allow_private: [10.99.0.0/24, "fd99::/64"]
  - name: audit
    mode: report
    allow: []
    allow_private: [10.99.0.0/24]
YAML
}

door_up() {
	for _ in $(seq 100); do
		[ -n "$(G ss -Hltn 'sport = :1080')" ] && [ -n "$(G ss -Hltn 'sport = :3128')" ] && return 0
		sleep 0.05
	done
	return 1
}

# sk ARGS...: socks/client.py socks from gw to 127.0.0.1:1080; its line in
# $OUT. skc: the same from cl to 10.200.0.1:1080.
OUT=
sk() { OUT=$(G "$PY" "$SC" socks 127.0.0.1 1080 "$@" 2>&1) || true; }
skc() { OUT=$(C "$PY" "$SC" socks 10.200.0.1 1080 "$@" 2>&1) || true; }
# rawsk STEP... [--split K|--random]: socks/client.py raw from gw.
rawsk() { OUT=$(G "$PY" "$SC" raw 127.0.0.1 1080 "$@" 2>&1) || true; }
# want WHAT REGEX: $OUT matches.
want() {
	if grep -Eq -- "$2" <<<"$OUT"; then pass "$1"; else fail "$1: want /$2/, got: $OUT"; fi
}
# refused WHAT TARGET REP [client args]: CONNECT TARGET is answered REP
# with BND 0.0.0.0:0 and then closed.
refused() {
	local what=$1 target=$2 rep=$3
	shift 3
	sk "$target" "$@"
	want "$what: reply $rep, closed" "^method=00 rep=$rep bnd=0\.0\.0\.0:0 end=(eof|rst)$"
}

# Log helpers (mark, since, logged): lib.sh.
# field_ge PATTERN FIELD MIN: some line matching PATTERN since the mark has
# FIELD >= MIN (waits up to 3 s).
field_ge() {
	local v=
	for _ in $(seq 60); do
		v=$(since | grep -E -- "$1" | grep -oE " $2=[0-9]+" | cut -d= -f2 | sort -n | tail -n1) || true
		[ -n "$v" ] && [ "$v" -ge "$3" ] && return 0
		sleep 0.05
	done
	echo "--- /$1/: the largest $2=${v:-(no line)}, want >= $3" >&2
	return 1
}
A='access door=socks '
# The line's end: a tunnel (TAIL), a request refused before any tunnel
# began (TAIL_REFUSED); SOCKS5 never reads a TLS hello.
TAIL='bytes_in=[0-9]+ bytes_out=[0-9]+ duration_ms=[0-9]+ mode=tunnel sni=- alpn_down=- alpn_up=- layer=[0-9a-f]{16} inject=-$'
TAIL_REFUSED='bytes_in=[0-9]+ bytes_out=[0-9]+ duration_ms=[0-9]+ mode=- sni=- alpn_down=- alpn_up=- layer=([0-9a-f]{16}|-) inject=-$'

# /metrics, from the API's unix socket (forward/metrics.py: a strict parser
# of the Prometheus text format). scrape FILE: fetched and parsed, or fails.
MX=$HERE/forward/metrics.py
scrape() { "$PY" "$MX" scrape "$API" "$1" && "$PY" "$MX" check "$1" >/dev/null; }
# mval FILE SERIES: one series' value ("none" if it is not there).
mval() { "$PY" "$MX" get "$1" "$2" 2>/dev/null || echo none; }
# relay_delta BEFORE AFTER MODE: bytes the MODE relay path moved between two
# scrapes ("none" if either lacks the series).
relay_delta() {
	local s="sluice_tunnel_relay_bytes_total{mode=\"$3\"}" a b
	a=$(mval "$1" "$s")
	b=$(mval "$2" "$s")
	[[ "$a" =~ ^[0-9]+$ && "$b" =~ ^[0-9]+$ ]] && echo $((b - a)) || echo none
}
# An integer comparison that fails (never errors) on "none".
ge() { [[ "$1" =~ ^-?[0-9]+$ ]] && [ "$1" -ge "$2" ]; }
lt() { [[ "$1" =~ ^-?[0-9]+$ ]] && [ "$1" -lt "$2" ]; }

# no_access_from PORT: no line in $LOG is from 127.0.0.1:PORT.
no_access_from() { [ -n "$1" ] && ! grep -q "src=127\.0\.0\.1:$1 " "$LOG"; }

# logged_in FILE PATTERN: like logged, in FILE after its mark_in.
mark_in() { MARK_IN=$(wc -l < "$1"); }
logged_in() {
	local save=$LOG save_mark=${MARK:-0} rc=0
	LOG=$1 MARK=$MARK_IN
	logged "$2" || rc=1
	LOG=$save MARK=$save_mark
	return $rc
}

stop_sluiced() {
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		[[ "$(ps -o stat= -p "$pid" 2>/dev/null || echo Z)" == Z* ]] && break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	rc=0
	wait "$pid" || rc=$?
}

# start_sluiced LOGNAME [env...]
start_sluiced() {
	LOG=$E2E_TMP/$1
	shift
	ip netns exec "$gw" env "$@" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>"$LOG" &
	pid=$!
	track "$pid"
}

# bnd_is_peer MARKER: the BND of the last success in $OUT is the address
# and port nginx saw the request tagged MARKER come from.
bnd_is_peer() {
	local bnd peer
	bnd=$(grep -oE 'bnd=[^ ]+' <<<"$OUT" | cut -d= -f2 | tr -d '[]')
	for _ in $(seq 40); do
		peer=$(grep "m=$1 " "$NGLOG" | grep -oE 'peer=[^ ]+$' | cut -d= -f2) && [ -n "$peer" ] && break
		sleep 0.05
	done
	[ -n "$bnd" ] && [ "$bnd" = "$peer" ] || { echo "--- BND '$bnd', nginx saw '$peer'" >&2; return 1; }
}

# tunnel_cases LABEL: every tunnel case, once per copy mode; then
# /metrics says which relay path moved their bytes. A tunnel copies until a
# direction has moved 64 KiB (SPLICE_AFTER in gateway/tunnel.c), then
# splices: splicing, almost all of the 101 MiB is spliced; copying, none.
tunnel_cases() {
	local m=$1 sha cp sp
	scrape "$E2E_TMP/relay0.prom" || fail "$m: GET /metrics before the tunnels"
	sha=$(G curl -sS --max-time 10 --socks5-hostname 127.0.0.1:1080 "http://origin.test/1k?m=s-$m" | sha256sum | cut -d' ' -f1) || true
	check "$m: curl --socks5-hostname (ATYP 3) fetches 1 KiB intact" test "$sha" = "$K1_SHA"
	sha=$(G curl -sS --max-time 10 --socks5 127.0.0.1:1080 "http://10.99.0.10/1k?m=s4-$m" | sha256sum | cut -d' ' -f1) || true
	check "$m: curl --socks5 to 10.99.0.10 (ATYP 1) fetches 1 KiB intact" test "$sha" = "$K1_SHA"
	sha=$(G curl -sS --max-time 10 --socks5 127.0.0.1:1080 "http://[fd99::10]/1k?m=s6-$m" | sha256sum | cut -d' ' -f1) || true
	check "$m: curl --socks5 to [fd99::10] (ATYP 4) fetches 1 KiB intact" test "$sha" = "$K1_SHA"
	sha=$(G curl -sS --max-time 10 --socks5-hostname 127.0.0.1:1080 "http://v6.test/1k?m=sv6-$m" | sha256sum | cut -d' ' -f1) || true
	check "$m: curl --socks5-hostname to v6.test (AAAA only) fetches 1 KiB intact" test "$sha" = "$K1_SHA"
	check "$m: 100 MiB down through the tunnel, sha256 equal" bash -c \
		"ip netns exec $gw curl -sS --max-time 30 --socks5-hostname 127.0.0.1:1080 http://origin.test/big | sha256sum | grep -q ^$BIG_SHA"
	sk slowbox.test:7001 --halfclose 0
	want "$m: half-close with an empty upload: the count comes back, then EOF" 'rep=0 .*halfclose=ok'
	sk slowbox.test:7001 --halfclose 1000000
	want "$m: half-close: 1 MB up, shut down write, the count comes back" 'rep=0 .*halfclose=ok'
	sk origin.test:80 --split 1 --get "/1k?m=split-$m"
	want "$m: the whole handshake byte by byte, then GET: 200 and 1 KiB intact" \
		"^method=00 rep=0 bnd=10\.99\.0\.1:[0-9]+ http=200 len=1024 sha256=$K1_SHA end=eof$"
	sk origin.test:80 --methods 02 --user ci --pass "$CI_PW" --split 3 --get "/1k?m=split3-$m"
	want "$m: auth and request in 3-byte pieces, then GET: 200" \
		"^method=02 auth=00 rep=0 bnd=10\.99\.0\.1:[0-9]+ http=200 len=1024 sha256=$K1_SHA end=eof$"
	# Bytes are counted as they are relayed (not when a tunnel ends): the
	# 100 MiB and the 1 MB, long delivered, are in the counters now.
	scrape "$E2E_TMP/relay1.prom" || fail "$m: GET /metrics after the tunnels"
	cp=$(relay_delta "$E2E_TMP/relay0.prom" "$E2E_TMP/relay1.prom" copy)
	sp=$(relay_delta "$E2E_TMP/relay0.prom" "$E2E_TMP/relay1.prom" splice)
	if [ "$m" = splice ]; then
		check "splice: /metrics: the tunnels' bulk went through splice(2) ($sp bytes spliced, want >= 99 MiB)" \
			ge "$sp" 103809024
		check "splice: /metrics: only the first bytes of each direction were copied ($cp bytes, want < 1 MiB)" \
			lt "$cp" 1048576
	else
		check "copy: /metrics: nothing was spliced ($sp bytes spliced, want 0)" test "$sp" = 0
		check "copy: /metrics: every byte was copied ($cp bytes, want >= 101 MB)" \
			ge "$cp" $((104857600 + 1000000))
	fi
}

# ===========================================================================
# Run 1: splicing (the default).
write_conf 1000
start_sluiced sluiced.log
check "sluiced starts" wait_for "$LOG" "sluiced [0-9.]+ started"
check "the SOCKS door listens on 0.0.0.0:1080 in gw" door_up

# The handshake deadline (30 s, fixed) runs meanwhile: a greeting whose
# methods trickle in, a byte every 0.2 s, never complete. Its result is
# read at the end of this run, while the daemon still runs.
ip netns exec "$gw" "$PY" "$SC" drip 127.0.0.1 1080 > "$E2E_TMP/drip.out" 2>&1 &
drip_pid=$!
track "$drip_pid"

# --- methods -----------------------------------------------------------------
mark
sk origin.test:80 --get "/?m=noauth"
want "a source-matched client (127.0.0.1) offering 00 gets 00 and a tunnel" \
	'^method=00 rep=0 bnd=10\.99\.0\.1:[0-9]+ http=200 '
check "access log: the tunnel's line, every field" logged \
	"${A}client=local src=127\.0\.0\.1:[0-9]+ policy=web method=CONNECT host=origin\.test port=80 decision=allow reason=none upstream=10\.99\.0\.10:80 status=0 $TAIL"
check "BND.ADDR:BND.PORT is the gateway's upstream socket (nginx's peer)" bnd_is_peer noauth
sk origin.test:80 --methods 00,02 --get "/?m=order1"
want "offered 00,02 from 127.0.0.1: 00 (the client's order)" '^method=00 rep=0 .*http=200'
sk origin.test:80 --methods 02,00 --user ci --pass "$CI_PW" --get "/?m=order2"
want "offered 02,00 from 127.0.0.1: 02 (the client's order), then auth" '^method=02 auth=00 rep=0 .*http=200'
check "access log: authenticated as ci from 127.0.0.1, the user wins" logged \
	"${A}client=ci src=127\.0\.0\.1:[0-9]+ policy=web method=CONNECT host=origin\.test port=80 decision=allow "
sk origin.test:80 --methods 01,03,80
want "offered only GSSAPI and others: ff, then closed" '^method=ff end=(eof|rst)$'
sk origin.test:80 --methods 02 --user ci --pass wrong
want "127.0.0.1 offering 02 with a wrong password: status 01, closed" '^method=02 auth=01 end=(eof|rst)$'

skc origin.test:80
want "cl (no source rule) offering only 00: ff, then closed" '^method=ff end=(eof|rst)$'
skc origin.test:80 --methods 02 --user ci --pass wrong
want "cl with a wrong password: status 01, closed" '^method=02 auth=01 end=(eof|rst)$'
check "the log says the authentication failed" logged "socks 10\.200\.0\.2:[0-9]+: authentication failed"
skc origin.test:80 --methods 02 --user nobody --pass "$CI_PW"
want "cl with an unknown user: status 01, closed" '^method=02 auth=01 end=(eof|rst)$'
skc origin.test:80 --methods 00,02 --user ci --pass "$CI_PW" --get "/?m=cl-ci"
want "cl offering 00,02: 02 (no-auth is for source clients), ci's password works" \
	'^method=02 auth=00 rep=0 bnd=10\.99\.0\.1:[0-9]+ http=200 '
check "access log: ci from 10.200.0.2" logged \
	"${A}client=ci src=10\.200\.0\.2:[0-9]+ policy=web method=CONNECT host=origin\.test port=80 decision=allow reason=none upstream=10\.99\.0\.10:80 status=0 $TAIL"
C curl -sS --max-time 10 -o "$E2E_TMP/b" --socks5-hostname "ci:$CI_PW@10.200.0.1:1080" \
	"http://origin.test/?m=cl-curl" 2>"$E2E_TMP/curl.err" || true
check "curl from cl with user:pass@ (RFC 1929)" cmp -s "$E2E_TMP/b" "$WWW/index.html"
C curl -sS --max-time 10 -o /dev/null --socks5-hostname "10.200.0.1:1080" \
	"http://origin.test/?m=cl-curl-noauth" 2>"$E2E_TMP/curl.err" && crc=0 || crc=$?
# shellcheck disable=SC2016 # eval'd by check
check "curl from cl without credentials fails at the method: exit 97 (rc $crc: $(head -c 100 "$E2E_TMP/curl.err"))" \
	eval '[ "$crc" = 97 ] && grep -qF "No authentication method was acceptable" "$E2E_TMP/curl.err"'
mark
skc origin.test:80 --methods 02 --user auditor --pass "$AUDIT_PW" --get "/?m=report"
want "report mode (auditor): allowed, relayed" '^method=02 auth=00 rep=0 .*http=200 '
check "report mode: decision=report reason=not-allowed" logged \
	"${A}client=auditor src=10\.200\.0\.2:[0-9]+ policy=audit method=CONNECT host=origin\.test port=80 decision=report reason=not-allowed upstream=10\.99\.0\.10:80 status=0 "

# --- CONNECT by address type ---------------------------------------------------
sk 10.99.0.10:80 --get "/1k?m=atyp1"
want "ATYP 1 (10.99.0.10): 200, 1 KiB" "^method=00 rep=0 bnd=10\.99\.0\.1:[0-9]+ http=200 len=1024 sha256=$K1_SHA"
check "ATYP 1: BND is nginx's peer" bnd_is_peer atyp1
sk origin.test:80 --get "/1k?m=atyp3"
want "ATYP 3 (origin.test), resolved by the gateway: 200, 1 KiB" "^method=00 rep=0 bnd=10\.99\.0\.1:[0-9]+ http=200 len=1024 "
sk '[fd99::10]:80' --get "/1k?m=atyp4"
want "ATYP 4 ([fd99::10]): 200, 1 KiB, BND an IPv6 address" "^method=00 rep=0 bnd=\[fd99::1\]:[0-9]+ http=200 len=1024 sha256=$K1_SHA"
check "ATYP 4: BND is nginx's peer" bnd_is_peer atyp4
mark
sk v6.test:80 --get "/1k?m=atyp3v6"
want "ATYP 3 with only an AAAA answer (v6.test): 200" "^method=00 rep=0 bnd=\[fd99::1\]:[0-9]+ http=200 len=1024 "
check "access log: v6.test's upstream is [fd99::10]:80" logged \
	"${A}client=local .*host=v6\.test port=80 decision=allow reason=none upstream=\[fd99::10\]:80 status=0 "

# --- refusals ----------------------------------------------------------------
mark
refused "no allow rule (other.test:80)" other.test:80 2
check "access log: not-allowed, upstream=-, status=2" logged \
	"${A}client=local src=127\.0\.0\.1:[0-9]+ policy=web method=CONNECT host=other\.test port=80 decision=deny reason=not-allowed upstream=- status=2 $TAIL_REFUSED"
refused "an allowed name on a port no rule names (origin.test:22)" origin.test:22 2
refused "a deny rule wins over *.origin.test" blocked.origin.test:80 2
check "access log: denied" logged "${A}client=local .*host=blocked\.origin\.test port=80 decision=deny reason=denied upstream=- status=2 "
refused "a name resolving outside allow_private (internal.test)" internal.test:80 2
check "access log: private-address" logged "${A}client=local .*host=internal\.test port=80 decision=deny reason=private-address upstream=- status=2 "
refused "a name resolving to the metadata address (meta.test)" meta.test:80 2
refused "a name resolving to loopback (loop.test)" loop.test:80 2
refused "one forbidden address among allowed ones (mixed.test)" mixed.test:80 2
refused "ATYP 1 literal 127.0.0.1" 127.0.0.1:80 2
refused "ATYP 1 literal 169.254.169.254" 169.254.169.254:80 2
refused "ATYP 4 literal ::1" '[::1]:80' 2
refused "ATYP 4 literal ::ffff:127.0.0.1" '[::ffff:127.0.0.1]:80' 2
refused "ATYP 3 carrying a literal ('127.0.0.1')" 127.0.0.1:80 2 --atyp 3
check "access log: the literals are private-address" logged \
	"${A}client=local .*host=::1 port=80 decision=deny reason=private-address upstream=- status=2 "
refused "an invalid name (a_b..test)" 'a_b..test:80' 2
refused "an unknown name (nosuch.test)" nosuch.test:80 4
check "access log: dns-nxdomain, status=4" logged "${A}client=local .*host=nosuch\.test port=80 decision=allow reason=dns-nxdomain upstream=- status=4 "
refused "a name whose DNS server fails (fail.slow.test, SERVFAIL)" fail.slow.test:80 4
check "access log: dns-failed, status=4" logged "${A}client=local .*host=fail\.slow\.test port=80 decision=allow reason=dns-failed upstream=- status=4 "
refused "a refused port (origin.test:8080)" origin.test:8080 5
check "access log: connect-failed, status=5" logged "${A}client=local .*host=origin\.test port=8080 decision=allow reason=connect-failed upstream=10\.99\.0\.10:8080 status=5 "
refused "a port that drops SYNs (origin.test:81)" origin.test:81 6
check "access log: connect-timeout, with the upstream it tried, status=6" logged \
	"${A}client=local .*host=origin\.test port=81 decision=allow reason=connect-timeout upstream=10\.99\.0\.10:81 status=6 "
refused "a name the DNS server never answers (slow.test)" slow.test:80 6
check "access log: dns-timeout, status=6" logged "${A}client=local .*host=slow\.test port=80 decision=allow reason=dns-timeout upstream=- status=6 "
refused "BIND (cmd 2)" origin.test:80 7 --cmd 2
refused "UDP ASSOCIATE (cmd 3)" origin.test:80 7 --cmd 3
check "access log: unsupported, status=7" logged "${A}client=local .*decision=deny reason=unsupported upstream=- status=7 "
check "access log: the BIND's line says method=BIND" logged "${A}client=local .*method=BIND host=- port=0 decision=deny reason=unsupported "
check "access log: the UDP ASSOCIATE's line says method=UDP-ASSOCIATE" \
	logged "${A}client=local .*method=UDP-ASSOCIATE host=- port=0 decision=deny reason=unsupported "
refused "an unknown command (cmd 9)" origin.test:80 7 --cmd 9
refused "ATYP 2" origin.test:80 8 --atyp 2
refused "ATYP 5" origin.test:80 8 --atyp 5
check "access log: ATYP refusals, status=8" logged "${A}client=local .*decision=deny reason=unsupported upstream=- status=8 "

# GET /metrics: strict Prometheus text, and its door counters agree with
# the refusals above: 2 not-allowed, 1 dns-failed.
check "GET /metrics is well-formed Prometheus text (200, text/plain; version=0.0.4)" \
	scrape "$E2E_TMP/m1.prom"
v=$(mval "$E2E_TMP/m1.prom" 'sluice_door_decisions_total{door="socks",decision="deny",reason="not-allowed"}')
check "/metrics: socks deny not-allowed counts the 2 refusals ($v)" test "$v" = 2
v=$(mval "$E2E_TMP/m1.prom" 'sluice_door_decisions_total{door="socks",decision="allow",reason="dns-failed"}')
check "/metrics: socks allow dns-failed counts the refusal ($v)" test "$v" = 1

# --- malformed input: closed, nothing relayed ----------------------------------
# Greeting errors close without a reply; a bad request gets REP 01 first.
R01=05010001000000000000
# shellcheck disable=SC2086 # $how is zero, one or two words
for how in "" "--split 1" "--random"; do
	lbl=${how:-whole}
	rawsk 040100 $how
	want "greeting with version 4 ($lbl): closed, no reply" '^recv=- end=(eof|rst)$'
	rawsk 0500 $how
	want "greeting with zero methods ($lbl): 05 ff (no acceptable method), closed" '^recv=05ff end=(eof|rst)$'
	rawsk "$(printf '41%.0s' $(seq 300))" $how
	want "300 bytes of garbage ($lbl): closed, no reply" '^recv=- end=(eof|rst)$'
	rawsk 050100 0501000300 $how
	want "a request with domain length 0 ($lbl): REP 01, closed" "^recv=0500$R01 end=(eof|rst)$"
	rawsk 050100 050101010a63000a0050 $how
	want "a request with a non-zero reserved byte ($lbl): REP 01, closed" "^recv=0500$R01 end=(eof|rst)$"
	rawsk 050100 "050100030b6f726967696e2e7465737400" --then 50 $how
	want "a request cut short ($lbl): no reply yet; its last byte gets the success reply" \
		'^recv=0500 then=050000010a630001[0-9a-f]{4} end=open$'
	rawsk 050102 0100 $how
	want "RFC 1929 with username length 0 ($lbl): status 01, closed" '^recv=05020101 end=(eof|rst)$'
	rawsk 050102 020163016b $how
	want "RFC 1929 with version 2 ($lbl): status 01, closed" '^recv=05020101 end=(eof|rst)$'
done
rawsk 05010078
want "a byte after the greeting, before the method reply, is the request's first: wrong version, REP 01" \
	"^recv=0500 end=data:$R01$"
rawsk "05ff$(printf '00%.0s' $(seq 255))$(printf '41%.0s' $(seq 43))"
want "an oversize greeting (300 bytes: 255 methods and 43 more): 05 00, then the 43 are a request of version 0x41: REP 01" \
	"^recv=0500 end=data:$R01$"
rawsk 050100 "05010001$(printf '0a63000a')0050$(printf 'GET /?m=raw-ahead HTTP/1.0\r\n\r\n' | od -An -tx1 | tr -d ' \n')"
want "bytes after the request, before the reply, are its payload: the success reply, then nginx's answer" \
	'^recv=0500050000010a630001[0-9a-f]{4} end=data:485454502f312e3120323030'
rawsk 050100 "05010003ff$(printf '61%.0s' $(seq 300))"
want "an oversize request (300 more bytes: a 255-byte name, the port, a payload): REP 02 (bad host), closed" \
	"^recv=050005020001000000000000 end=(eof|rst)$"
rawsk 050100 "05010003ff$(printf '61%.0s' $(seq 300))" --split 7
want "an oversize request in 7-byte pieces: a failure REP (01 or 02), closed" "^recv=0500050[12]0001000000000000 end=(eof|rst)$"

# --- optimistic clients and the corners of RFC 1928 ---------------------------
# A client that sends the greeting, the credentials, the request and its
# first payload in one write is served: the payload is held until the
# request is allowed. Refused, the payload reaches no upstream: the first
# request proves that such a payload does reach nginx (10.99.0.10, the
# address blocked.origin.test also has); the last proves nginx logged
# everything sent before it.
mark
sk origin.test:80 --optimistic --get "/1k?m=opt-noauth"
want "optimistic, no auth: greeting, request and GET in one write: 200, 1 KiB" \
	"^method=00 rep=0 bnd=10\.99\.0\.1:[0-9]+ http=200 len=1024 sha256=$K1_SHA end=eof$"
check "optimistic: nginx got the GET sent ahead of the replies" grep -q "m=opt-noauth " "$NGLOG"
sk origin.test:80 --optimistic --methods 02 --user ci --pass "$CI_PW" --get "/1k?m=opt-auth"
want "optimistic, RFC 1929: greeting, credentials, request and GET in one write: 200" \
	"^method=02 auth=00 rep=0 bnd=10\.99\.0\.1:[0-9]+ http=200 len=1024 sha256=$K1_SHA end=eof$"
# bytes_in: the greeting (3), the credentials, the request (18) and the GET
n=$((3 + 3 + 2 + ${#CI_PW} + 18 + $(printf 'GET /1k?m=opt-auth HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n' | wc -c)))
check "access log: the optimistic tunnel counts what was sent ahead once (bytes_in=$n)" logged \
	"${A}client=ci .*host=origin\.test port=80 decision=allow reason=none upstream=10\.99\.0\.10:80 status=0 bytes_in=$n "
sk blocked.origin.test:80 --optimistic --get "/?m=opt-denied"
want "optimistic, denied (blocked.origin.test): REP 2, closed" '^method=00 rep=2 bnd=0\.0\.0\.0:0 end=(eof|rst)$'
sk origin.test:8080 --optimistic --get "/?m=opt-refused"
want "optimistic, the connect refused (origin.test:8080): REP 5, closed" '^method=00 rep=5 bnd=0\.0\.0\.0:0 end=(eof|rst)$'
sk origin.test:80 --optimistic --methods 02 --user ci --pass wrong --get "/?m=opt-badauth"
want "optimistic, a wrong password: status 01, closed" '^method=02 auth=01 end=(eof|rst)$'
sk origin.test:80 --optimistic --get "/?m=opt-after"
want "optimistic, once more: served" '^method=00 rep=0 .*http=200 '
check "nginx logged the request sent after the refused ones" grep -q "m=opt-after " "$NGLOG"
check "the payloads of the refused requests reached no upstream (nginx never saw them)" \
	bash -c "! grep -Eq 'm=opt-(denied|refused|badauth) ' '$NGLOG'"
refused "BIND with ATYP 5: 07, whatever its address" origin.test:80 7 --cmd 2 --atyp 5
refused "UDP ASSOCIATE to 0.0.0.0:0 (RFC 1928 7): 07" 0.0.0.0:0 7 --cmd 3
refused "command 9 with ATYP 2: 07" origin.test:80 7 --cmd 9 --atyp 2
refused "BIND, optimistic, with a payload: 07" origin.test:80 7 --cmd 2 --optimistic --get "/?m=opt-bind"
check "access log: the commands the door does not serve, unsupported, status=7, host=-" logged \
	"${A}client=local .*host=- port=0 decision=deny reason=unsupported upstream=- status=7 "
check "the BIND's payload reached no upstream" bash -c "! grep -q 'm=opt-bind ' '$NGLOG'"

# --- real clients ----------------------------------------------------------
sha=$(G env ALL_PROXY=socks5h://127.0.0.1:1080 curl -sS --max-time 10 "http://origin.test/1k?m=allproxy" | sha256sum | cut -d' ' -f1) || true
check "curl with ALL_PROXY=socks5h://127.0.0.1:1080" test "$sha" = "$K1_SHA"
sha=$(G curl -sS --max-time 10 --socks5-hostname "ci:$CI_PW@127.0.0.1:1080" "http://origin.test/1k?m=curl-up" | sha256sum | cut -d' ' -f1) || true
check "curl --socks5-hostname ci:PASS@127.0.0.1:1080 (user/password from 127.0.0.1)" test "$sha" = "$K1_SHA"
sha=$(G curl -sS --max-time 10 --socks5 "ci:$CI_PW@127.0.0.1:1080" "http://10.99.0.10/1k?m=curl-up4" | sha256sum | cut -d' ' -f1) || true
check "curl --socks5 ci:PASS@127.0.0.1:1080 to 10.99.0.10" test "$sha" = "$K1_SHA"
G curl -sS --max-time 10 -o /dev/null --socks5-hostname 127.0.0.1:1080 "http://other.test/" 2>"$E2E_TMP/curl.err" || true
check "curl names the refusal ($(head -c 120 "$E2E_TMP/curl.err"))" \
	grep -Eqi 'not allowed|\(2\)' "$E2E_TMP/curl.err"
rm -rf "$E2E_TMP/clone"
check "git clone (dumb http) with http.proxy=socks5h://" \
	G env HOME="$E2E_TMP" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 \
	timeout 30 git -c http.proxy=socks5h://127.0.0.1:1080 clone -q http://origin.test/repo.git "$E2E_TMP/clone"
check "git clone: the work tree is right" grep -qx "cloned through sluice" "$E2E_TMP/clone/README"
SSHO=(-F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
	-o ConnectTimeout=5 -p 7005)
# netcat-openbsd is in build.sh's PKGS_TEST: its absence is a failure.
check "netcat-openbsd is installed (nc -X)" bash -c "nc -h 2>&1 | grep -q -- '-X proxy_protocol'"
mark_in "$E2E_TMP/servers.log"
G timeout 10 ssh -v "${SSHO[@]}" -o ProxyCommand='nc -X 5 -x 127.0.0.1:1080 %h %p' \
	slowbox.test true 2>"$E2E_TMP/ssh.err" || true
check "ssh with ProxyCommand 'nc -X 5 -x 127.0.0.1:1080 %h %p' reads the server's banner" \
	grep -q 'remote software version sluice_e2e_banner' "$E2E_TMP/ssh.err"
check "and the server read ssh's" logged_in "$E2E_TMP/servers.log" '^banner: SSH-2.0-OpenSSH'
mark_in "$E2E_TMP/servers.log"
G timeout 10 ssh -v "${SSHO[@]}" -o ProxyCommand="$PY $SC pipe 127.0.0.1 1080 %h %p" \
	slowbox.test true 2>"$E2E_TMP/ssh.err" || true
check "ssh with a python ProxyCommand reads the server's banner" \
	grep -q 'remote software version sluice_e2e_banner' "$E2E_TMP/ssh.err"
check "and the server read ssh's" logged_in "$E2E_TMP/servers.log" '^banner: SSH-2.0-OpenSSH'

# --- tunnels, splicing -------------------------------------------------------
mark
tunnel_cases splice
check "access log: the 100 MiB tunnel counts its bytes_out" \
	field_ge "${A}client=local .*host=origin\.test port=80 .*status=0 " bytes_out 104857600
check "access log: the half-close tunnel counts its bytes_in" \
	field_ge "${A}client=local .*host=slowbox\.test port=7001 .*status=0 " bytes_in 1000000

# The trickling greeting started with this run: the door has ended it
# with no reply, and no access line (there was no request).
wait "$drip_pid" || true
OUT=$(cat "$E2E_TMP/drip.out")
want "a greeting that trickles in for longer than the handshake's 30 s is cut with no reply" \
	'^sport=[0-9]+ recv=- end=(eof|rst)$'
sport=$(grep -oE '^sport=[0-9]+' <<<"$OUT" | cut -d= -f2) || true
check "no access line for the cut handshake (port ${sport:-?})" no_access_from "$sport"

# (ss must answer: a failed ss is no evidence of no connections.)
no_conns_left() {
	local o
	for _ in $(seq 40); do
		o=$(G ss -Htn state established state close-wait '( sport = :1080 )' 2>/dev/null) && [ -z "$o" ] && return 0
		sleep 0.05
	done
	G ss -Htnp state established state close-wait '( sport = :1080 )' >&2 || echo "    ss failed" >&2
	return 1
}
check "no client connection is left open once the clients have gone" no_conns_left
stop_sluiced
check "sluiced exits 0 on SIGTERM (exit $rc)" test "$rc" = 0

# ===========================================================================
# Run 2: the tunnels again, copying.
start_sluiced sluiced-copy.log SLUICE_NO_SPLICE=1
check "sluiced starts with SLUICE_NO_SPLICE=1" wait_for "$LOG" "sluiced [0-9.]+ started"
check "the doors listen" door_up
tunnel_cases copy

# --- out of descriptors ----------------------------------------------------------
# The daemon's descriptor limit is lowered (prlimit) to 16 above what it
# holds, and 64 SOCKS connections greet at once: some are served, the rest
# wait in the doors' backlogs, joined by a scrape of /metrics (the API's
# accept thread) and a control request (the main loop). A listener the
# kernel keeps readable while accept fails would spin: every worker at
# 100% of a core, logging each failure.
# cpu_ms: the daemon's CPU time (utime + stime, every thread); run_ms: the
# time its threads were runnable (on a CPU, or waiting for one: schedstat).
# A spinning thread is runnable all the time, however busy the machine is
# and however little CPU it gets: run_ms is what tells a spin apart when
# other work shares the cores.
cpu_ms() { sed 's/.*) //' "/proc/$pid/stat" | awk -v hz="$(getconf CLK_TCK)" '{ print int(($12 + $13) * 1000 / hz) }'; }
run_ms() { cat "/proc/$pid"/task/*/schedstat | awk '{ s += $1 + $2 } END { print int(s / 1000000) }'; }
scrape "$E2E_TMP/fd0.prom" || fail "GET /metrics before the exhaustion"
v=$(mval "$E2E_TMP/fd0.prom" sluice_accept_exhausted_total)
check "/metrics: sluice_accept_exhausted_total is 0 before ($v)" test "$v" = 0
soft=$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")
nfd=$(find "/proc/$pid/fd" -mindepth 1 | wc -l)
prlimit --pid "$pid" --nofile=$((nfd + 16)):
mark
rm -f "$E2E_TMP/release"
ip netns exec "$gw" "$PY" "$SC" hold 127.0.0.1 1080 64 "$E2E_TMP/release" >"$E2E_TMP/hold.out" 2>&1 &
hold_pid=$!
track "$hold_pid"
check "out of descriptors: the episode's warning names the cause and the fix" logged \
	'warn .*socks door: cannot accept connections: out of file descriptors \(the process.s limit, EMFILE\).*LimitNOFILE'
wait_for "$E2E_TMP/hold.out" '^served=' 5 || true
OUT=$(head -n1 "$E2E_TMP/hold.out")
want "out of descriptors: some greetings answered, the rest waiting (limit $((nfd + 16)): $OUT)" \
	'^served=[1-9][0-9]* pending=[1-9][0-9]*$'
pending=$(grep -oE 'pending=[0-9]+' <<<"$OUT" | cut -d= -f2) || true
"$PY" "$MX" scrape "$API" "$E2E_TMP/fd1.prom" 2>"$E2E_TMP/fd1.err" &
scrape_pid=$!
track "$scrape_pid"
"$PY" - "$CTL" >"$E2E_TMP/fdctl.out" 2>&1 <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b'{"op":"list"}\n')
print(s.makefile().readline().strip())
PY
ctl_pid=$!
track "$ctl_pid"
sleep 0.3
c0=$(cpu_ms) r0=$(run_ms)
sleep 2
c1=$(cpu_ms) r1=$(run_ms)
cpu=$(((c1 - c0) / 20)) run=$(((r1 - r0) / 20))
check "out of descriptors: the daemon does not spin: CPU ${cpu}% of a core over 2 s (want < 50%)" \
	lt "$cpu" 50
check "out of descriptors: ... nor wait to: runnable ${run}% of the 2 s, all threads (want < 50%)" \
	lt "$run" 50
touch "$E2E_TMP/release"
wait "$hold_pid" || true
OUT=$(tail -n1 "$E2E_TMP/hold.out")
want "out of descriptors: once the held connections close, all $pending waiting ones are answered ($OUT)" \
	"^later=${pending:-?} left=0 "
check "out of descriptors: the scrape that waited is answered ($(head -c 200 "$E2E_TMP/fd1.err"))" \
	wait "$scrape_pid"
v=$(mval "$E2E_TMP/fd1.prom" sluice_accept_exhausted_total)
check "/metrics: sluice_accept_exhausted_total counts the episode ($v)" test "$v" = 1
wait "$ctl_pid" || true
check "out of descriptors: the control request that waited is answered ($(head -c 100 "$E2E_TMP/fdctl.out"))" \
	grep -q '"ok": *true' "$E2E_TMP/fdctl.out"
sk origin.test:80 --get "/1k?m=after-emfile"
want "out of descriptors: a new connection is served again" "^method=00 rep=0 .*http=200 len=1024 sha256=$K1_SHA"
n=$(since | grep -c 'cannot accept connections') || true
check "out of descriptors: exactly one log line for the episode ($n)" test "$n" = 1
prlimit --pid "$pid" --nofile="$soft":
stop_sluiced

# ===========================================================================
# Run 3: max_connections 2, shared by both doors; idle_timeout_ms 1000.
write_conf 2 1000
start_sluiced sluiced-max.log
check "sluiced starts with max_connections: 2" wait_for "$LOG" "sluiced [0-9.]+ started"
check "the doors listen" door_up
OUT=$(G "$PY" "$SC" maxconn 127.0.0.1 3128 1080 2>&1) || true
want "one forward and one SOCKS connection open: a new SOCKS one is closed at once, no reply" '^probe1=(eof|rst) '
want "two SOCKS connections open: the forward door answers 503" ' probe2=503 '
want "once they close, a new SOCKS connection is served" ' probe3=0500$'
check "the log says why" grep -q 'socks door: refusing a connection: too-many-connections' "$LOG"

mark
sk slowbox.test:7001 --quiet
want "a tunnel nobody speaks on is ended by the door" '^method=00 rep=0 bnd=[^ ]+ sport=[0-9]+ end=(eof|rst)$'
check "access log: the tunnel ended with reason=idle-timeout" logged \
	"${A}client=local src=127\.0\.0\.1:$(grep -oE 'sport=[0-9]+' <<<"$OUT" | cut -d= -f2) policy=web method=CONNECT host=slowbox\.test port=7001 decision=allow reason=idle-timeout upstream=10\.99\.0\.20:7001 status=0 "
stop_sluiced
check "sluiced exits 0 on SIGTERM (exit $rc)" test "$rc" = 0

if [ -n "${E2E_KEEP:-}" ]; then
	mkdir -p "$E2E_KEEP"
	cp "$E2E_TMP"/*.log "$E2E_TMP/sluice.yaml" "$E2E_KEEP/" 2>/dev/null || true
fi
finish
