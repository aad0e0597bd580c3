#!/bin/bash
# The forward-proxy door end to end: absolute-form requests and CONNECT
# through the real sluiced to a real nginx origin, python test servers and
# dnsmasq, in three private network namespaces (net.sh draws them).
#
# Checks: relaying and Via, hop-by-hop headers, keep-alive on both sides,
# 100 MiB bodies both ways (Content-Length and chunked), every refusal's
# status, Sluice-Reason and body (and that nothing reached the origin),
# identity by source and by Proxy-Authorization, report mode, the access
# log, git and urllib as clients, CONNECT (with half-close) and WebSocket
# tunnels copying and splicing (and /metrics saying which relay moved the
# bytes), GET /metrics as strict Prometheus text, max_connections, and the
# door's deadlines (an idle tunnel, an idle kept-alive connection, a head
# that never ends).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/net.sh"

# --- sluiced -------------------------------------------------------------
# write_conf MAX_CONNECTIONS [IDLE_TIMEOUT_MS [LOG_LEVEL [source-only]]]
# source-only: only the source-matched client "local", none with
# credentials (a stranger then gets 403 unknown-client, not 407).
API=$E2E_TMP/api.sock
write_conf() {
	local creds=
	[ "${4:-}" = source-only ] || creds="
    - { name: ci, match: { user: ci, password: \"\${env:CI_PW}\" }, policy: web }
    - { name: auditor, match: { user: auditor, password: \"\${env:AUDIT_PW}\" }, policy: audit }"
	cat > "$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  control_socket: off
  log: { level: ${3:-info}, format: text }
api: { listen: off, socket: $API }
gateway:
  workers: auto
  listen: { forward: 0.0.0.0:3128, socks: off }
  clients:
    - { name: local, match: { source: 127.0.0.0/8 }, policy: web }$creds
  dns: { servers: [10.99.0.53], timeout_ms: 500, attempts: 1 }
  limits: { max_connections: $1, max_header_bytes: 8192, connect_timeout_ms: 500, idle_timeout_ms: ${2:-20000} }
  access_log: stderr
lanes: []
pools: []
tenants: []
policies:
  - name: web
    allow: ["origin.test", "*.origin.test", "origin.test:81", "origin.test:8080",
            "internal.test", "meta.test", "loop.test", "mixed.test",
            "nosuch.test", "slow.test", "fail.slow.test", "slowbox.test:7001",
            "slowbox.test:7002", "slowbox.test:7003", "slowbox.test:7004",
            "slowbox.test:7006", "10.99.0.10", "127.0.0.1", "169.254.169.254"]
    deny: ["blocked.origin.test"]
    allow_private: [10.99.0.0/24]
  - name: audit
    mode: report
    allow: []
    allow_private: [10.99.0.0/24]
YAML
}

# door_up: the forward door listens in gw (up to 5 s).
door_up() {
	for _ in $(seq 100); do
		[ -n "$(G ss -Hltn 'sport = :3128')" ] && return 0
		sleep 0.05
	done
	return 1
}

PX=http://127.0.0.1:3128
PXC=http://10.200.0.1:3128
H=$E2E_TMP/h
B=$E2E_TMP/b
MARKERS=()   # query markers of refused requests: none may reach nginx

# get CURL-ARGS...: from gw through the door; head to $H, body to $B. A
# failed transfer leaves them empty for the checks to report.
get() { : > "$H"; : > "$B"; G curl -sS --max-time 5 -D "$H" -o "$B" -x "$PX" "$@" || true; }
# getc CURL-ARGS...: the same from the cl namespace (no proxy given).
getc() { : > "$H"; : > "$B"; C curl -sS --max-time 5 -D "$H" -o "$B" "$@" || true; }
# raw HOST [PORT]: stdin to the door as is; the response split to $H, $B.
raw() {
	local out=$E2E_TMP/raw rc=0
	G "$PY" "$HERE/forward/client.py" raw "$1" "${2:-3128}" > "$out" || rc=$?
	split_resp "$out"
	return $rc
}
split_resp() {
	awk -v h="$H" -v b="$B" 'BEGIN { printf "" > h; printf "" > b }
		!body && /^\r?$/ { body = 1; next }
		{ if (body) print > b; else { sub(/\r$/, ""); print > h } }' "$1"
}
# status CODE: the response in $H has this status.
status_is() { head -n1 "$H" | tr -d '\r' | grep -Eq "^HTTP/1\.[01] $1( |$)"; }
hdr() { tr -d '\r' < "$H" | grep -Ei "^$1: " | tail -n1 | cut -d' ' -f2-; }
got() { printf '%s | Sluice-Reason: %s | body: %s' "$(head -n1 "$H" | tr -d '\r')" \
	"$(hdr Sluice-Reason)" "$(head -c 80 "$B" | tr '\n' ' ')"; }

# refused WHAT STATUS REASON: $H and $B hold that refusal.
refused() {
	if status_is "$2" && [ "$(hdr Sluice-Reason)" = "$3" ] &&
		head -n1 "$B" | grep -q "^sluice: $3"; then
		pass "$1: $2 $3"
	else
		fail "$1: want $2 $3, got $(got)"
	fi
}

# ok200 WHAT WANT_BODY_FILE
body_is() {
	if status_is 200 && cmp -s "$B" "$2"; then pass "$1"; else fail "$1: got $(got)"; fi
}

# Log helpers (mark, since, logged): lib.sh.
# field_ge PATTERN FIELD MIN: the last line matching PATTERN since the mark
# has FIELD >= MIN (waits up to 3 s for the line).
field_ge() {
	local v=
	for _ in $(seq 60); do
		v=$(since | grep -E -- "$1" | tail -n1 | grep -oE " $2=[0-9]+" | cut -d= -f2) || true
		[ -n "$v" ] && break
		sleep 0.05
	done
	[ -n "$v" ] && [ "$v" -ge "$3" ] || { echo "--- /$1/: $2=${v:-(no line)}, want >= $3" >&2; return 1; }
}
A='access (door=[^ ]+ )?'
# no_access_from PORT: no line since the mark is from 127.0.0.1:PORT.
no_access_from() { [ -n "$1" ] && ! since | grep -q "src=127\.0\.0\.1:$1 "; }

# /metrics, from the API's unix socket (metrics.py: a strict parser of the
# Prometheus text format). scrape FILE: fetched and parsed, or fails.
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

# stop_sluiced: SIGTERM, at most 5 s to go, then SIGKILL; its status in rc.
stop_sluiced() {
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		# A dead child stays a zombie until waited for: kill -0 is no test.
		[[ "$(ps -o stat= -p "$pid" 2>/dev/null || echo Z)" == Z* ]] && break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	rc=0
	wait "$pid" || rc=$?
}

# tunnel_cases LABEL: every tunnel case, once per copy mode; then
# /metrics says which relay path moved their bytes. A tunnel copies until a
# direction has moved 64 KiB (SPLICE_AFTER in gateway/tunnel.c), then
# splices: splicing, almost all of the 101 MiB is spliced; copying, none.
tunnel_cases() {
	local m=$1 cp sp
	scrape "$E2E_TMP/relay0.prom" || fail "$m: GET /metrics before the tunnels"
	get -p "http://origin.test/1k?m=tun-$m"
	body_is "$m: CONNECT origin.test:80 (curl -p) relays a request" "$WWW/1k"
	check "$m: 100 MiB down through CONNECT, sha256 equal" bash -c \
		"ip netns exec $gw curl -sS --max-time 30 -p -x $PX http://origin.test/big | sha256sum | grep -q ^$BIG_SHA"
	check "$m: CONNECT half-close with an empty upload" \
		G "$PY" "$HERE/forward/client.py" halfclose 127.0.0.1 3128 slowbox.test:7001 0
	check "$m: CONNECT half-close: 1 MB up, shut down write, the count comes back" \
		G "$PY" "$HERE/forward/client.py" halfclose 127.0.0.1 3128 slowbox.test:7001 1000000
	check "$m: WebSocket upgrade through the forward door: 101 and frames round-trip" \
		G "$PY" "$HERE/forward/client.py" ws 127.0.0.1 3128 slowbox.test:7003
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
# Run 1: the door, splicing (the default).
write_conf 1000
LOG=$E2E_TMP/sluiced.log
ip netns exec "$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>"$LOG" &
pid=$!
track "$pid"
check "sluiced starts" wait_for "$LOG" "sluiced [0-9.]+ started"
check "the forward door listens on 0.0.0.0:3128 in gw" door_up

# --- relaying --------------------------------------------------------------
mark
get "http://origin.test/?m=via"
body_is "GET http://origin.test/ returns the origin's page" "$WWW/index.html"
check "the response carries Via: 1.1 sluice" bash -c "[[ '$(hdr Via)' == *'1.1 sluice'* ]]"
check "the origin saw Via: 1.1 sluice" grep -q 'm=via .*via="1.1 sluice"' "$NGLOG"

get "http://origin.test/1k"
body_is "GET /1k returns 1 KiB intact" "$WWW/1k"
check "access log: the allowed GET, every field" logged \
	"${A}client=local src=127\.0\.0\.1:[0-9]+ policy=web method=GET host=origin\.test port=80 decision=allow reason=none upstream=10\.99\.0\.10:80 status=200 bytes_in=[0-9]+ bytes_out=[0-9]+ duration_ms=[0-9]+ mode=http sni=- alpn_down=- alpn_up=- layer=[0-9a-f]{16} inject=-$"
check "access log: bytes_out counts head and body (> 1024)" \
	field_ge "${A}client=local .*status=200" bytes_out 1025
check "access log: bytes_in counts the request head (> 0)" \
	field_ge "${A}client=local .*status=200" bytes_in 1

mark
get "http://origin.test/empty"
check "an empty body (Content-Length: 0) arrives" status_is 200
check "access log: the empty response's line is written when it ends" logged \
	"${A}client=local .*method=GET host=origin\.test port=80 decision=allow reason=none upstream=10\.99\.0\.10:80 status=200 "

get "http://10.99.0.10/1k"
body_is "an allowed IP literal in allow_private works" "$WWW/1k"

# Hop-by-hop headers: the head-echo server shows what reached it.
get -H 'Proxy-Connection: keep-alive' -H 'Keep-Alive: timeout=5' -H 'TE: trailers' \
	-H 'Connection: X-Foo' -H 'X-Foo: secret' -H 'X-Keep: yes' \
	-H "Proxy-Authorization: Basic $(printf 'ci:%s' "$CI_PW" | base64 -w0)" \
	"http://slowbox.test:7004/echo"
tr -d '\r' < "$B" > "$E2E_TMP/echoed"
check "the origin gets the request" status_is 200
check "end-to-end headers reach the origin (X-Keep)" grep -qi '^x-keep: yes$' "$E2E_TMP/echoed"
for h in proxy-connection keep-alive te x-foo proxy-authorization; do
	check "hop-by-hop $h never reaches the origin" bash -c "! grep -qi '^$h:' '$E2E_TMP/echoed'"
done
check "the Connection header upstream names no client token" \
	bash -c "! grep -qi '^connection:.*x-foo' '$E2E_TMP/echoed'"
check "the request upstream carries Via: 1.1 sluice" grep -qi '^via:.*1\.1 sluice' "$E2E_TMP/echoed"

# Keep-alive: two URLs on one curl, one client connection, one upstream one.
G curl -sS -v --max-time 10 -o /dev/null -o /dev/null -x "$PX" \
	"http://origin.test/1k?m=ka1" "http://origin.test/1k?m=ka2" 2>"$E2E_TMP/ka.err" || true
check "keep-alive: curl re-uses the client connection" grep -q "Re-using existing connection" "$E2E_TMP/ka.err"
ka_same_conn() {
	local c1 c2
	c1=$(grep 'm=ka1 ' "$NGLOG" | cut -d' ' -f1)
	c2=$(grep 'm=ka2 ' "$NGLOG" | cut -d' ' -f1)
	[ -n "$c1" ] && [ "$c1" = "$c2" ] || { echo "--- nginx connections: '$c1' '$c2'" >&2; return 1; }
}
check "keep-alive: the origin sees both requests on one connection" ka_same_conn

# A chunked response (gzip on the fly).
get --compressed "http://origin.test/text"
body_is "a chunked, gzipped response arrives whole" "$WWW/text"
check "the chunked response kept Content-Encoding: gzip" bash -c "[ '$(hdr Content-Encoding)' = gzip ]"

# --- bodies ----------------------------------------------------------------
check "100 MiB download, sha256 equal" bash -c \
	"ip netns exec $gw curl -sS --max-time 30 -x $PX http://origin.test/big | sha256sum | grep -q ^$BIG_SHA"
mark
G curl -sS --max-time 30 -o /dev/null -w '%{http_code}' -x "$PX" -T "$WWW/big" \
	"http://origin.test/upload/cl.bin" > "$E2E_TMP/code" || true
check "100 MiB PUT with Content-Length: 201 ($(cat "$E2E_TMP/code"))" grep -q '^201$' "$E2E_TMP/code"
check "100 MiB PUT with Content-Length: the stored file's sha256 is equal" \
	bash -c "sha256sum < '$WWW/upload/cl.bin' | grep -q ^$BIG_SHA"
check "access log: the PUT counts the whole body in bytes_in" \
	field_ge "${A}client=local .*method=PUT .*status=201" bytes_in 104857600
G curl -sS --max-time 30 -o /dev/null -w '%{http_code}' -x "$PX" -T - \
	-H 'Transfer-Encoding: chunked' "http://origin.test/upload/chunked.bin" \
	< "$WWW/big" > "$E2E_TMP/code" || true
check "100 MiB chunked PUT: 201 ($(cat "$E2E_TMP/code"))" grep -q '^201$' "$E2E_TMP/code"
check "100 MiB chunked PUT: the stored file's sha256 is equal" \
	bash -c "sha256sum < '$WWW/upload/chunked.bin' | grep -q ^$BIG_SHA"
rm -f "$WWW/upload/"*.bin

# --- refusals --------------------------------------------------------------
mark
get "http://other.test/?m=notallowed"
refused "no allow rule" 403 not-allowed
get "http://origin.test:22/?m=notallowed-port"
refused "an allowed name on a port no rule names" 403 not-allowed
get "http://blocked.origin.test/?m=denied"
refused "a deny rule wins over *.origin.test" 403 denied
check "access log: the denied request, upstream=-" logged \
	"${A}client=local src=127\.0\.0\.1:[0-9]+ policy=web method=GET host=blocked\.origin\.test port=80 decision=deny reason=denied upstream=- status=403 bytes_in=[0-9]+ bytes_out=[0-9]+ duration_ms=[0-9]+ mode=http sni=- alpn_down=- alpn_up=- layer=[0-9a-f]{16} inject=-$"
get "http://internal.test/?m=priv-internal"
refused "a name resolving outside allow_private (10.99.1.5)" 403 private-address
get "http://meta.test/?m=priv-meta"
refused "a name resolving to the metadata address" 403 private-address
get "http://loop.test/?m=priv-loop"
refused "a name resolving to loopback" 403 private-address
get "http://mixed.test/?m=priv-mixed"
refused "a name whose answer has one forbidden address among allowed ones" 403 private-address
MARKERS+=(notallowed notallowed-port denied priv-internal priv-meta priv-loop priv-mixed)

# IP literals in other spellings (curl would normalise them: send raw).
lit() {
	printf 'GET http://%s/?m=%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$1" "$2" "$1" | raw 127.0.0.1 || true
	refused "literal http://$1/" 403 private-address
	MARKERS+=("$2")
}
lit 2130706433 lit-dec
lit 0x7f.1 lit-hex
lit 0177.0.0.1 lit-oct
lit 127.1 lit-short
lit 169.254.169.254 lit-meta
lit '[::ffff:127.0.0.1]' lit-mapped

printf 'GET http://user@origin.test/?m=userinfo HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n' |
	raw 127.0.0.1 || true
refused "userinfo in the URL" 400 userinfo
printf 'POST http://origin.test/?m=smuggle HTTP/1.1\r\nHost: origin.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n' |
	raw 127.0.0.1 || true
refused "Content-Length with Transfer-Encoding (smuggling)" 400 bad-request
get -H "X-Big: $(head -c 9000 /dev/zero | tr '\0' a)" "http://origin.test/?m=bighead"
refused "a head over max_header_bytes (8192)" 431 header-too-large
MARKERS+=(userinfo smuggle bighead)
# An https:// URL is fetched over sluice's own TLS: never in the clear,
# even to a port that speaks only HTTP.
printf 'GET https://origin.test:80/?m=httpsclear HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n' |
	raw 127.0.0.1 || true
refused "an absolute-form https:// URL to a port without TLS (sluice's TLS fails)" 502 upstream-tls-failed
check "access log: the 502's line" logged \
	"${A}client=[^ ]+ src=127\.0\.0\.1:[0-9]+ .*method=GET .*decision=allow reason=upstream-tls-failed upstream=10\.99\.0\.10:80 status=502 "
MARKERS+=(httpsclear)

get "http://nosuch.test/"
refused "an unknown name" 502 dns-nxdomain
get "http://fail.slow.test/"
refused "a name whose DNS server fails (SERVFAIL)" 502 dns-failed
check "access log: dns-failed, upstream=-" logged \
	"${A}client=local .*method=GET host=fail\.slow\.test port=80 decision=allow reason=dns-failed upstream=- status=502 "
get "http://origin.test:8080/?m=refused-port"
refused "a refused port" 502 connect-failed
get "http://slowbox.test:7002/"
refused "an origin that resets the connection" 502 upstream-reset
get "http://slowbox.test:7006/"
refused "an origin that answers garbage" 502 upstream-bad-response
check "access log: upstream-bad-response, with the upstream it came from" logged \
	"${A}client=local .*method=GET host=slowbox\.test port=7006 decision=allow reason=upstream-bad-response upstream=10\.99\.0\.20:7006 status=502 "
get "http://origin.test:81/?m=timeout"
refused "a port that drops SYNs" 504 connect-timeout
check "connect-timeout: the body names connect_timeout_ms ($(head -c 120 "$B"))" grep -q 'within 500 ms' "$B"
check "access log: connect-timeout, with the upstream it tried" logged \
	"${A}client=local .*method=GET host=origin\.test port=81 decision=allow reason=connect-timeout upstream=10\.99\.0\.10:81 status=504 "
get "http://slow.test/"
refused "a name the DNS server never answers" 504 dns-timeout

# CONNECT refusals: the same statuses.
conn() {
	printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' "$1" "$1" | raw 127.0.0.1 || true
	refused "CONNECT $1" "$2" "$3"
}
conn other.test:443 403 not-allowed
conn origin.test:22 403 not-allowed
conn blocked.origin.test:443 403 denied
conn internal.test:443 403 private-address
conn mixed.test:80 403 private-address
conn 127.0.0.1:80 403 private-address
conn nosuch.test:443 502 dns-nxdomain
conn origin.test:8080 502 connect-failed
conn origin.test:81 504 connect-timeout
conn slow.test:443 504 dns-timeout
conn fail.slow.test:443 502 dns-failed

# GET /metrics: strict Prometheus text, and its door counters agree with
# the refusals above: 4 not-allowed (2 GET, 2 CONNECT), 2 dns-failed.
check "GET /metrics is well-formed Prometheus text (200, text/plain; version=0.0.4)" \
	scrape "$E2E_TMP/m1.prom"
v=$(mval "$E2E_TMP/m1.prom" 'sluice_door_decisions_total{door="forward",decision="deny",reason="not-allowed"}')
check "/metrics: forward deny not-allowed counts the 4 refusals ($v)" test "$v" = 4
v=$(mval "$E2E_TMP/m1.prom" 'sluice_door_decisions_total{door="forward",decision="allow",reason="dns-failed"}')
check "/metrics: forward allow dns-failed counts the 2 refusals ($v)" test "$v" = 2

# --- identity ------------------------------------------------------------
mark
getc -x "$PXC" "http://origin.test/?m=authreq"
refused "cl (no source rule), no credentials" 407 auth-required
check "407 asks for Basic credentials" bash -c "[ '$(hdr Proxy-Authenticate)' = 'Basic realm=\"sluice\"' ]"
getc -x "$PXC" -U "ci:wrong" "http://origin.test/?m=authfail"
refused "cl with a wrong password" 407 auth-failed
getc -x "$PXC" -U "nobody:$CI_PW" "http://origin.test/?m=authuser"
refused "cl with an unknown user" 407 auth-failed
MARKERS+=(authreq authfail authuser)
getc -x "http://ci:$CI_PW@10.200.0.1:3128" "http://origin.test/"
body_is "cl with ci's password (policy web)" "$WWW/index.html"
check "access log: the request is ci's, from 10.200.0.2" logged \
	"${A}client=ci src=10\.200\.0\.2:[0-9]+ policy=web method=GET host=origin\.test port=80 decision=allow reason=none "
C curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -p -x "http://ci:$CI_PW@10.200.0.1:3128" \
	"http://origin.test/" > "$E2E_TMP/code" || true
check "cl with ci's password: CONNECT works too ($(cat "$E2E_TMP/code"))" grep -q '^200$' "$E2E_TMP/code"
printf 'CONNECT origin.test:80 HTTP/1.1\r\nHost: origin.test:80\r\n\r\n' |
	C "$PY" "$HERE/forward/client.py" raw 10.200.0.1 3128 > "$E2E_TMP/raw" || true
split_resp "$E2E_TMP/raw"
refused "cl CONNECT without credentials" 407 auth-required

# Report mode: the audit policy allows nothing, yet relays and says so.
mark
getc -x "http://auditor:$AUDIT_PW@10.200.0.1:3128" "http://origin.test/?m=report"
body_is "report mode: the refused request is relayed" "$WWW/index.html"
check "report mode: the access log says decision=report reason=not-allowed" logged \
	"${A}client=auditor src=10\.200\.0\.2:[0-9]+ policy=audit method=GET host=origin\.test port=80 decision=report reason=not-allowed upstream=10\.99\.0\.10:80 status=200 "

# --- real clients ----------------------------------------------------------
rm -rf "$E2E_TMP/clone"
check "git clone (dumb http) through http_proxy" \
	G env http_proxy="$PX" HOME="$E2E_TMP" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 \
	timeout 30 git clone -q http://origin.test/repo.git "$E2E_TMP/clone"
check "git clone: the work tree is right" grep -qx "cloned through sluice" "$E2E_TMP/clone/README"
check "python urllib with a ProxyHandler" G "$PY" -c '
import hashlib, sys, urllib.request
o = urllib.request.build_opener(urllib.request.ProxyHandler({"http": sys.argv[1]}))
r = o.open("http://origin.test/1k", timeout=10)
assert r.status == 200, r.status
assert hashlib.sha256(r.read()).hexdigest() == sys.argv[2]
' "$PX" "$K1_SHA"

# --- tunnels, splicing -------------------------------------------------------
mark
tunnel_cases splice
check "access log: the CONNECT tunnel's line" logged \
	"${A}client=local src=127\.0\.0\.1:[0-9]+ policy=web method=CONNECT host=origin\.test port=80 decision=allow reason=none upstream=10\.99\.0\.10:80 status=200 bytes_in=[0-9]+ bytes_out=[0-9]+ duration_ms=[0-9]+ mode=tunnel sni=- alpn_down=- alpn_up=- layer=[0-9a-f]{16} inject=-$"
check "access log: the 100 MiB tunnel counts its bytes_out" \
	field_ge "${A}client=local .*method=CONNECT host=origin\.test port=80 " bytes_out 104857600
check "access log: the half-close tunnel counts its bytes_in" \
	field_ge "${A}client=local .*method=CONNECT host=slowbox\.test port=7001 " bytes_in 1000000
check "access log: the WebSocket upgrade's line" logged \
	"${A}client=local .*method=GET host=slowbox\.test port=7003 decision=allow reason=none upstream=10\.99\.0\.20:7003 status=101 "

# Every client has gone: so must every connection the door held for them.
# (ss must answer: a failed ss is no evidence of no connections.)
no_conns_left() {
	local o
	for _ in $(seq 40); do
		o=$(G ss -Htn state established state close-wait '( sport = :3128 )' 2>/dev/null) && [ -z "$o" ] && return 0
		sleep 0.05
	done
	G ss -Htnp state established state close-wait '( sport = :3128 )' >&2 || echo "    ss failed" >&2
	return 1
}
check "no client connection is left open once the clients have gone" no_conns_left
stop_sluiced
check "sluiced exits 0 on SIGTERM (exit $rc)" test "$rc" = 0

# ===========================================================================
# Run 2: the tunnels again, copying (SLUICE_NO_SPLICE=1).
LOG=$E2E_TMP/sluiced-copy.log
ip netns exec "$gw" env SLUICE_NO_SPLICE=1 "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>"$LOG" &
pid=$!
track "$pid"
check "sluiced starts with SLUICE_NO_SPLICE=1" wait_for "$LOG" "sluiced [0-9.]+ started"
check "the forward door listens" door_up
tunnel_cases copy
stop_sluiced

# ===========================================================================
# Run 3: max_connections 2.
write_conf 2
LOG=$E2E_TMP/sluiced-max.log
ip netns exec "$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>"$LOG" &
pid=$!
track "$pid"
check "sluiced starts with max_connections: 2" wait_for "$LOG" "sluiced [0-9.]+ started"
check "the forward door listens" door_up
G "$PY" "$HERE/forward/client.py" maxconn 127.0.0.1 3128 2 > "$E2E_TMP/raw" || true
split_resp "$E2E_TMP/raw"
refused "a third connection with two tunnels open" 503 too-many-connections
check "the door has closed the two held connections" no_conns_left
get "http://origin.test/"
body_is "once they close, a new connection is served" "$WWW/index.html"
stop_sluiced

# ===========================================================================
# Run 4: the deadlines (idle_timeout_ms 1000, so the head deadline is 1 s
# too), with debug logging (each connection's states); and only the
# source-matched client, so that a stranger is an unknown client.
write_conf 1000 1000 debug source-only
LOG=$E2E_TMP/sluiced-deadlines.log
ip netns exec "$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>"$LOG" &
pid=$!
track "$pid"
check "sluiced starts with idle_timeout_ms: 1000" wait_for "$LOG" "sluiced [0-9.]+ started"
check "the forward door listens" door_up
mark
getc -x "$PXC" "http://origin.test/?m=unknown"
refused "cl, which no client matches, with no client using credentials" 403 unknown-client
check "access log: unknown-client from 10.200.0.2" logged \
	"${A}client=- src=10\.200\.0\.2:[0-9]+ .*method=GET .*decision=deny reason=unknown-client upstream=- status=403 "
MARKERS+=(unknown)

# sport OUT: the client's port in a client.py line.
sport() { grep -oE '^sport=[0-9]+' <<<"$1" | cut -d= -f2; }
OUT=$(G "$PY" "$HERE/forward/client.py" quiet 127.0.0.1 3128 slowbox.test:7001) || true
check "a CONNECT tunnel nobody speaks on is ended by the door ($OUT)" \
	grep -Eq '^sport=[0-9]+ recv=- end=(eof|rst)$' <<<"$OUT"
check "access log: the tunnel ended with reason=idle-timeout" logged \
	"${A}client=local src=127\.0\.0\.1:$(sport "$OUT") policy=web method=CONNECT host=slowbox\.test port=7001 decision=allow reason=idle-timeout upstream=10\.99\.0\.20:7001 status=200 "

OUT=$(G "$PY" "$HERE/forward/client.py" keepalive 127.0.0.1 3128 "http://origin.test/1k?m=ka-idle") || true
check "a kept-alive connection that goes quiet after its response is closed by the door ($OUT)" \
	grep -Eq '^sport=[0-9]+ recv=- end=eof$' <<<"$OUT"
check "debug log: it was waiting for the next head when the door closed it" \
	logged "forward 127\.0\.0\.1:$(sport "$OUT"): head -> closed$"
check "access log: the request itself ended well" \
	logged "${A}client=local src=127\.0\.0\.1:$(sport "$OUT") .*host=origin\.test port=80 decision=allow reason=none .*status=200 "

# A byte every 0.2 s would keep an idle timer from ever firing: only the
# head deadline, counted from the head's first byte, ends this.
OUT=$(G "$PY" "$HERE/forward/client.py" drip 127.0.0.1 3128 "http://origin.test/?m=drip") || true
DRIP=$(sed -nE 's/^sport=[0-9]+ recv=([0-9a-f]+) end=(eof|rst)$/\1/p' <<<"$OUT" | xxd -r -p | tr -d '\r')
check "a head that trickles in and never ends is answered 408 and closed ($OUT)" \
	grep -q '^HTTP/1.1 408 Request Timeout$' <<<"$DRIP"
check "the answer says why: Sluice-Reason: head-timeout" grep -qx 'Sluice-Reason: head-timeout' <<<"$DRIP"
check "debug log: the door answered it while still reading its head" \
	logged "forward 127\.0\.0\.1:$(sport "$OUT"): head -> refuse$"
check "access log: the unfinished head has its line (method -, 408, head-timeout)" \
	logged "${A}client=- src=127\.0\.0\.1:$(sport "$OUT") policy=- method=- host=- port=0 decision=allow reason=head-timeout upstream=- status=408 bytes_in=[1-9][0-9]* bytes_out=[1-9][0-9]* duration_ms=[0-9]{3,} "
MARKERS+=(drip)

# --- nothing refused reached the origin --------------------------------------
# Evidence only if nginx's log is there and holds the allowed requests,
# the last one sent after every refusal.
get "http://origin.test/?m=last"
body_is "an allowed request after every refusal" "$WWW/index.html"
check "nginx logged it" wait_for "$NGLOG" "m=last "
for m in via ka1 ka2 report tun-splice tun-copy ka-idle; do
	check "nginx logged the allowed request m=$m" grep -q "m=$m " "$NGLOG"
done
leaked=()
for m in "${MARKERS[@]}"; do
	grep -q "m=$m " "$NGLOG" && leaked+=("$m")
done
check "no refused request reached the origin (${#MARKERS[@]} refused; leaked: ${leaked[*]:-none})" \
	test ${#leaked[@]} = 0
stop_sluiced
check "sluiced exits 0 on SIGTERM (exit $rc)" test "$rc" = 0

# E2E_KEEP=DIR keeps the logs (sluiced's, nginx's, dnsmasq's) for a look.
if [ -n "${E2E_KEEP:-}" ]; then
	mkdir -p "$E2E_KEEP"
	cp "$E2E_TMP"/*.log "$E2E_TMP/sluice.yaml" "$E2E_KEEP/" 2>/dev/null || true
fi
finish
