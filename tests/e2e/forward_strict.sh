#!/bin/bash
# The forward door's deadlines and strictness end to end (issue 20): the
# real sluiced between raw-socket clients (forward/client.py) and scripted
# upstreams (forward/servers.py on slowbox.test), in the namespaces net.sh
# draws, with short limits (response_timeout_ms 500, body_min_rate 1000
# B/s after 500 ms, body_timeout_ms 3000).
#
# Checks, each after proving that the same path works: forged identity
# fields dropped both ways; TRACE and OPTIONS with Max-Forwards: 0
# answered 405 (and Max-Forwards counted down); a Connection naming a
# framing or routing field, targets RFC 3986 does not allow, a Host with
# userinfo or non-ASCII bytes, a CONNECT with a body: 400 before anything
# is dialled; malformed chunked bodies after their head went upstream: 400
# and the request there cut; deadlines that end in an answer: a silent
# upstream (504), one that stops inside its body (the connection ends), an
# endless head and endless 1xx heads (502), a trickling body and a body
# past its whole time (408). Every refusal is checked twice: the status
# and Sluice-Reason the client saw, and its connection's access line.
# Nothing here measures time: each case waits for its end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/net.sh"

cat > "$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  control_socket: off
  log: { level: info, format: text }
api: { listen: off, socket: $E2E_TMP/api.sock }
gateway:
  workers: auto
  listen: { forward: 127.0.0.1:3128, socks: off }
  clients:
    - { name: local, match: { source: 127.0.0.0/8 }, policy: web }
  dns: { servers: [10.99.0.53], timeout_ms: 500, attempts: 1 }
  limits: { max_connections: 100, max_header_bytes: 8192, connect_timeout_ms: 500,
            idle_timeout_ms: 20000, response_timeout_ms: 500, body_timeout_ms: 3000,
            body_min_rate: 1000, body_min_rate_grace_ms: 500 }
  access_log: stderr
lanes: []
pools: []
tenants: []
policies:
  - name: web
    allow: ["slowbox.test:7001", "slowbox.test:7004", "slowbox.test:7007", "slowbox.test:7008",
            "slowbox.test:7009", "slowbox.test:7010", "slowbox.test:7011", "slowbox.test:7012"]
    allow_private: [10.99.0.0/24]
YAML

LOG=$E2E_TMP/sluiced.log
SRV=$E2E_TMP/servers.log
CLIENT=$HERE/forward/client.py
ip netns exec "$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>"$LOG" &
pid=$!
track "$pid"
check "sluiced starts" wait_for "$LOG" "sluiced [0-9.]+ started"
door_up() {
	for _ in $(seq 100); do
		[ -n "$(G ss -Hltn 'sport = :3128')" ] && return 0
		sleep 0.05
	done
	return 1
}
check "the forward door listens on 127.0.0.1:3128 in gw" door_up
mark

# --- helpers -----------------------------------------------------------------
# Each exchange leaves client.py's summary ("sport=P interim=N
# complete=yes|no") in $SUMF (sum prints it), the final response's head in
# $H, its body in $B: files, as the exchange may run in a pipeline's
# subshell.
OUT=$E2E_TMP/out
SUMF=$E2E_TMP/sum
H=$E2E_TMP/h
B=$E2E_TMP/b
sum() { cat "$SUMF"; }
take() {
	head -n1 "$OUT" > "$SUMF"
	tail -n +2 "$OUT" | awk -v h="$H" -v b="$B" 'BEGIN { printf "" > h; printf "" > b }
		!body && /^\r?$/ { body = 1; next }
		{ if (body) print > b; else { sub(/\r$/, ""); print > h } }'
}
# send: stdin through the door as is (client.py final).
send() { : > "$OUT"; G "$PY" "$CLIENT" final 127.0.0.1 3128 > "$OUT" || true; take; }
# bodydrip URL LENGTH BURST: a POST whose body trickles after BURST bytes.
bodydrip() { : > "$OUT"; G "$PY" "$CLIENT" bodydrip 127.0.0.1 3128 "$@" > "$OUT" || true; take; }
sport() { sum | grep -oE 'sport=[0-9]+' | cut -d= -f2; }
status_is() { head -n1 "$H" | tr -d '\r' | grep -Eq "^HTTP/1\.[01] $1( |$)"; }
hdr() { grep -Ei "^$1: " "$H" | tail -n1 | cut -d' ' -f2-; }
got() { printf '%s | Sluice-Reason: %s | body: %s | %s' "$(head -n1 "$H")" "$(hdr Sluice-Reason)" \
	"$(head -c 80 "$B" | tr '\n' ' ')" "$(sum)"; }
A='access door=forward client=[^ ]+'
# ok WHAT [BODY-PATTERN]: a 200 (whose body matches).
ok() {
	if status_is 200 && { [ -z "${2:-}" ] || grep -Eq -- "$2" "$B"; }; then
		pass "$1"
	else
		fail "$1: got $(got)"
	fi
}
# answered WHAT STATUS REASON: the client got STATUS with Sluice-Reason
# REASON (and sluice's one-line body), and its connection's access line
# says both.
answered() {
	local sp
	sp=$(sport)
	if status_is "$2" && [ "$(hdr Sluice-Reason)" = "$3" ] && grep -q "^sluice: $3: " "$B"; then
		pass "$1: $2 $3"
	else
		fail "$1: want $2 $3, got $(got)"
	fi
	check "$1: access line status=$2 reason=$3" \
		logged "$A src=127\.0\.0\.1:${sp:-none} .* reason=$3 upstream=[^ ]+ status=$2 "
}
req() { printf '%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s\r\n' "$1" "$2" "${3:-}"; }
ECHO=slowbox.test:7004

# --- forged identity fields ---------------------------------------------------
req "GET http://$ECHO/echo?m=ok" "$ECHO" | send
ok "the head-echo origin answers through the door" 'GET /echo\?m=ok '
req "GET http://$ECHO/echo?m=forged" "$ECHO" \
	$'Forwarded: for=6.6.6.6\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.test\r\nX-Real-IP: 6.6.6.6\r\nX-Upstream-Addr: 10.0.0.1\r\nSluice-Reason: none\r\nsluice-client: admin\r\nTrue-Client-IP: 6.6.6.6\r\nX-Keep: yes\r\n' |
	send
ok "a request with forged identity fields is relayed" '^X-Keep: yes'
check "... none of them reaches the origin (Forwarded, X-Forwarded-*, X-Real-IP, X-Upstream-*, Sluice-*, True-Client-IP)" \
	bash -c "! grep -Eiq '^(forwarded|x-forwarded-[a-z]+|x-real-ip|x-upstream-[a-z]+|sluice-[a-z]+|true-client-ip):' '$B'"
req "GET http://slowbox.test:7011/?m=spoof" slowbox.test:7011 | send
ok "an origin answering with Sluice-* fields: its answer arrives" '^spoof-check'
check "... with its other fields (X-Spoof-Test: kept)" test "$(hdr X-Spoof-Test | tr -d '\r')" = kept
check "... but no Sluice-Reason or Sluice-Extra of the origin's" \
	bash -c "! grep -Eiq '^sluice-' '$H'"

# --- methods answered here ----------------------------------------------------
req "OPTIONS http://$ECHO/echo?m=opt2" "$ECHO" $'Max-Forwards: 2\r\n' | send
ok "OPTIONS with Max-Forwards: 2 goes on" 'OPTIONS /echo\?m=opt2 '
check "... with Max-Forwards: 1" grep -Eq $'^Max-Forwards: 1\r?$' "$B"
req "OPTIONS http://$ECHO/echo?m=opt0" "$ECHO" $'Max-Forwards: 0\r\n' | send
answered "OPTIONS with Max-Forwards: 0" 405 method-not-allowed
req "TRACE http://$ECHO/echo?m=trace" "$ECHO" | send
answered "TRACE" 405 method-not-allowed
req "trace http://$ECHO/echo?m=trace-lc" "$ECHO" | send
answered "trace (lower case)" 405 method-not-allowed
check "none of them reached the origin" \
	bash -c "! grep -Eq 'echo: [A-Za-z]+ /echo\?m=(opt0|trace|trace-lc) ' '$SRV'"

# --- heads refused before anything is dialled -------------------------------------
req "GET http://$ECHO/echo?m=conn-ok" "$ECHO" $'Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\n' | send
ok "a Connection naming a hop-by-hop field is fine" 'm=conn-ok'
printf 'POST http://%s/echo?m=conn-cl HTTP/1.1\r\nHost: %s\r\nContent-Length: 2\r\nConnection: close, Content-Length\r\n\r\nhi' \
	"$ECHO" "$ECHO" | send
answered "a Connection naming Content-Length" 400 bad-request
req "GET http://$ECHO/echo?m=conn-host" "$ECHO" $'Connection: Host\r\n' | send
answered "a Connection naming Host" 400 bad-request
req "GET http://$ECHO/echo?q=%7Bx%7D%7C&m=t-ok" "$ECHO" | send
ok "a target with %-encoded braces and bar is fine" 'm=t-ok'
req "GET http://$ECHO/echo?q={x}|&m=t-raw" "$ECHO" | send
answered "a target with raw braces and bar (not RFC 3986)" 400 bad-request
req "GET http://$ECHO/echo?q=%zz&m=t-pct" "$ECHO" | send
answered "a target with a bad %-escape" 400 bad-request
req "GET http://$ECHO/echo?m=h-user" "user@$ECHO" | send
answered "a Host with userinfo" 400 userinfo
req "GET http://$ECHO/echo?m=h-utf8" $'sl\xc3\xb6wbox.test:7004' | send
answered "a Host with non-ASCII bytes" 400 non-ascii-host
check "a CONNECT tunnel works (slowbox.test:7001, 1000 bytes and back)" \
	G "$PY" "$CLIENT" halfclose 127.0.0.1 3128 slowbox.test:7001 1000
printf 'CONNECT slowbox.test:7001 HTTP/1.1\r\nHost: slowbox.test:7001\r\nContent-Length: 5\r\n\r\nhello' | send
answered "a CONNECT with a body" 400 bad-request
check "... refused before any tunnel: nothing dialled (upstream=-)" \
	logged "$A src=127\.0\.0\.1:$(sport) .* reason=bad-request upstream=- status=400 "
check "none of the refused heads reached the origin" \
	bash -c "! grep -Eq 'echo: .*m=(conn-cl|conn-host|t-raw|t-pct|h-user|h-utf8) ' '$SRV'"

# --- malformed chunked bodies, after the head went upstream -----------------------
SINK=slowbox.test:7012
chead() { printf 'POST http://%s/up?m=%s HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' "$SINK" "$1" "$SINK"; }
{ chead ch-ok; printf '5\r\nhello\r\n3;x=1\r\nabc\r\n0\r\n\r\n'; } | send
ok "a well-formed chunked body reaches the sink whole" '^whole '
check "... and the sink says so" grep -q 'sink m=ch-ok: whole' "$SRV"
# badbody M WHAT SECOND: the head and a good chunk go first; once the sink
# has the head, SECOND follows.
badbody() {
	local m=$1 what=$2 cpid
	{ chead "$m"; printf '5\r\nhello\r\n'; } > "$E2E_TMP/first"
	printf '%b' "$3" > "$E2E_TMP/second"
	rm -f "$E2E_TMP/gate"
	: > "$OUT"
	G "$PY" "$CLIENT" gated 127.0.0.1 3128 "$E2E_TMP/first" "$E2E_TMP/second" "$E2E_TMP/gate" > "$OUT" &
	cpid=$!
	wait_for "$SRV" "sink m=$m: head" 10 || true
	touch "$E2E_TMP/gate"
	wait "$cpid" || true
	take
	answered "a chunked body with $what, after its head went upstream" 400 bad-request
	check "... the request upstream was cut (the sink saw its head, then EOF)" \
		wait_for "$SRV" "sink m=$m: cut after [0-9]+"
}
badbody ch-size "a bad chunk size" 'zz\r\nabc\r\n0\r\n\r\n'
badbody ch-lf "a bare LF ending its size line" '3\nabc\r\n0\r\n\r\n'
badbody ch-long "data longer than its size" '3\r\nabcd\r\n0\r\n\r\n'
badbody ch-short "data shorter than its size" '5\r\nabc\r\n0\r\n\r\n'
badbody ch-crlf "no CRLF after its data" '3\r\nabc0\r\n\r\n'
badbody ch-trailer "a Content-Length trailer" '0\r\nContent-Length: 5\r\n\r\n'

# --- deadlines that end in an answer ------------------------------------------------
req "GET http://slowbox.test:7007/?answer=1&m=s-ok" slowbox.test:7007 | send
ok "the silent origin answers when asked to" '^answer'
req "GET http://slowbox.test:7007/?m=silent" slowbox.test:7007 | send
answered "an origin that accepts and never answers" 504 upstream-timeout
check "... the request there was cut" wait_for "$SRV" "silent m=silent: closed by the peer"

req "GET http://slowbox.test:7010/?whole=1&m=p-ok" slowbox.test:7010 | send
check "an origin's 1000-byte body arrives whole ($(sum))" \
	bash -c "grep -q complete=yes '$SUMF' && [ \$(tr -cd p < '$B' | wc -c) = 1000 ]"
req "GET http://slowbox.test:7010/?m=partial" slowbox.test:7010 | send
check "an origin silent inside its body: the client has the head and 10 bytes, then the end ($(sum))" \
	bash -c "grep -q complete=no '$SUMF' && head -n1 '$H' | grep -q '^HTTP/1.1 200 OK' && [ \$(tr -cd p < '$B' | wc -c) = 10 ] && ! grep -qi '^sluice-reason' '$H'"
check "... its access line: status=200 reason=upstream-timeout" \
	logged "$A src=127\.0\.0\.1:$(sport) .* reason=upstream-timeout upstream=[^ ]+ status=200 "
check "... the origin's connection was cut" wait_for "$SRV" "partial m=partial: closed by the peer"

req "GET http://slowbox.test:7008/?size=2000&m=bh-ok" slowbox.test:7008 | send
ok "an origin's 2000-byte response head passes" '^ok'
req "GET http://slowbox.test:7008/?size=endless&m=bh" slowbox.test:7008 | send
answered "an origin's head without end" 502 upstream-header-too-large

req "GET http://slowbox.test:7009/?n=3&m=i-ok" slowbox.test:7009 | send
ok "three 100 Continue heads, then the answer" '^answer'
check "... the client saw the three ($(sum))" grep -q 'interim=3 ' "$SUMF"
req "GET http://slowbox.test:7009/?n=endless&m=i" slowbox.test:7009 | send
answered "an origin sending 100 Continue without end" 502 upstream-too-many-1xx
check "... after the 16 it may send ($(sum))" grep -q 'interim=16 ' "$SUMF"

bodydrip "http://$SINK/up?m=b-ok" 2000 2000
ok "a 2000-byte body sent at once reaches the sink" '^whole 2000'
bodydrip "http://$SINK/up?m=b-slow" 100000 0
answered "a body trickling in a byte every 0.1 s (below body_min_rate)" 408 body-too-slow
check "... the request there was cut" wait_for "$SRV" "sink m=b-slow: cut after [0-9]+"
bodydrip "http://$SINK/up?m=b-long" 1000000 200000
answered "a body that keeps the rate but is not done within body_timeout_ms" 408 body-timeout
check "... the request there was cut" wait_for "$SRV" "sink m=b-long: cut after [0-9]+"

# --- the end -------------------------------------------------------------------
kill -TERM "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
check "sluiced exits 0 on SIGTERM (exit $rc)" test "$rc" = 0
if [ -n "${E2E_KEEP:-}" ]; then
	mkdir -p "$E2E_KEEP"
	cp "$E2E_TMP"/*.log "$E2E_TMP/sluice.yaml" "$E2E_KEEP/" 2>/dev/null || true
fi
finish
