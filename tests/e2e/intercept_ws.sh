#!/bin/bash
# WebSocket upgrades inside the intercepting door (issue 18): a real
# sluiced between a raw WebSocket client (python3: CONNECT or SOCKS5, TLS
# trusting only sluice's CA, the RFC 6455 handshake, masked frames) and a
# WebSocket origin over TLS (intercept_ws/server.py, under a test CA given
# as certs.upstream_ca) with dnsmasq, in two private network namespaces.
#
# Checks: through CONNECT to an intercepted host the guest gets 101 with
# the right Sec-WebSocket-Accept, a text frame and a 200 KiB binary frame
# come back byte-exact, a close frame ends it cleanly (the echoed close,
# close_notify both ways, no error in the log), and the GET has its access
# line with status=101 and mode=intercept; frames the origin sends in the
# same write as its 101 (small, and larger than a TLS record) arrive; the
# same through SOCKS5 (socks5h: the name) and through a plain tunnel; an
# Upgrade to anything but websocket is not relayed as one (the origin sees
# no Upgrade, no Connection; the client gets its 200), and a 101 the
# origin sends to a request that asked for none is a 502.
. "$(dirname "$0")/lib.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY
FLEET="sl-fleet-$$"
netns_owned "$FLEET"

netns_new gw gw
netns_new inet inet
G() { ip netns exec "$gw" "$@"; }
I() { ip netns exec "$inet" "$@"; }
ip -n "$gw" link add vgi type veth peer name vin netns "$inet"
ip -n "$gw" addr add 10.99.0.1/24 dev vgi
ip -n "$gw" link set vgi up
for a in 10.99.0.10/24 10.99.0.53/24; do ip -n "$inet" addr add "$a" dev vin; done
ip -n "$inet" link set vin up

# --- a test CA and the origin's certificate -------------------------------------
. "$(dirname "$0")/pki_lib.sh"
pki_ca
leaf origin "DNS:origin.test,DNS:plain.test"

# --- the origin: WebSocket over TLS, and dnsmasq ---------------------------------
OLOG=$E2E_TMP/origin.log
: >"$OLOG"
ip netns exec "$inet" "$PY" "$HERE/intercept_ws/server.py" "$PKI/origin.pem" "$PKI/origin.key" \
	10.99.0.10 443 "$OLOG" 2>"$E2E_TMP/origin.err" &
track $!
ip netns exec "$inet" dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-daemon --user=root \
	--listen-address=10.99.0.53 --bind-interfaces --local=/test/ \
	--host-record=origin.test,10.99.0.10 --host-record=plain.test,10.99.0.10 \
	2>"$E2E_TMP/dnsmasq.log" &
track $!

# --- sluiced ---------------------------------------------------------------------
LOG=$E2E_TMP/sluiced.log
cat >"$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  control_socket: off
  log: { level: info, format: text }
api: { listen: off, socket: $E2E_TMP/api.sock }
gateway:
  workers: 2
  listen: { forward: 127.0.0.1:3128, socks: 127.0.0.1:1080 }
  clients:
    - { name: local, match: { source: 127.0.0.0/8 }, policy: web }
  dns: { servers: [10.99.0.53], timeout_ms: 500, attempts: 1 }
  access_log: stderr
certs: { upstream_ca: $PKI/ca.pem }
lanes: []
pools: []
tenants: []
policies:
  - name: web
    allow: ["origin.test:443", "plain.test:443"]
    intercept: ["origin.test"]
    allow_private: [10.99.0.0/24]
YAML
nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>"$LOG" &
PID=$!
track "$PID"
if ! wait_for "$LOG" "sluiced [0-9.]+ started" 10; then
	fail "the daemon starts"
	finish
fi
pass "the daemon starts"
SLCA=$E2E_TMP/data/ca.pem
wait_for "$OLOG" "^listening" 10 || true
check "sluice made its CA in daemon.data_dir" test -s "$SLCA"

# ws PROXY CA HOST [GREET]: one WebSocket session through sluice (client.py)
ws() { G "$PY" "$HERE/intercept_ws/client.py" "$1" "$2" "$3" ws "${4:-}" 2>&1; }
# plain PROXY PATH UPGRADE: one GET with "Upgrade: UPGRADE" to origin.test
plain() { G "$PY" "$HERE/intercept_ws/client.py" "$1" "$SLCA" origin.test plain "$2" "$3" 2>&1; }
# a whole session, as client.py prints it
SESSION="HTTP/1.1 101 Switching Protocols
accept ok upgrade=websocket via=1.1 sluice
text ok
binary ok 204800
close ok
eof ok
unwrap ok"
# no_errors: no line at warn or error level since the mark
no_errors() {
	! since | grep -Ev ' access ' | grep -Ei 'warn|error|internal'
}
# origin_since N: the origin's log after its first N lines
origin_since() { tail -n "+$(($1 + 1))" "$OLOG"; }
# origin_closed N: "closed clean" there (waits 3 s: our close_notify
# reaches the origin after the client has seen its own end)
origin_closed() {
	for _ in $(seq 60); do
		origin_since "$1" | grep -qx "closed clean" && return 0
		sleep 0.05
	done
	origin_since "$1" | tail -n 3 >&2
	return 1
}

# --- through CONNECT, intercepted --------------------------------------------------
mark
o0=$(wc -l <"$OLOG")
OUT=$(ws http "$SLCA" origin.test)
check "CONNECT, intercepted: 101, the accept key, text and 200 KiB binary echoed byte-exact, a clean close" \
	eval '[ "$OUT" = "$SESSION" ] || { echo "$OUT" >&2; false; }'
check "... the origin saw the upgrade (Upgrade: websocket, Connection: Upgrade, Via)" eval \
	'origin_since $o0 | grep -qx "req GET /ws upgrade=websocket connection=Upgrade via=1.1 sluice"'
check "... and the frames: text 5 bytes, binary 204800, close" eval \
	'[ "$(origin_since $o0 | grep ^frame | tr "\n" " ")" = "frame op=1 len=5 frame op=2 len=204800 frame op=8 len=5 " ]'
check "... its close_notify answered by ours: closed clean" eval 'origin_closed $o0'
check "the GET's access line: status=101, mode=intercept, reason=none" \
	logged "access door=forward client=local .*method=GET host=origin.test port=443 decision=allow reason=none upstream=10.99.0.10:443 status=101 .* mode=intercept sni=origin.test "
LINE=$(since | grep -E 'method=GET host=origin.test .*status=101' | tail -n 1 || true)
bin=$(sed -nE 's/.* bytes_in=([0-9]+) .*/\1/p' <<<"$LINE")
bout=$(sed -nE 's/.* bytes_out=([0-9]+) .*/\1/p' <<<"$LINE")
check "... counting the frames both ways (bytes_in=$bin bytes_out=$bout > 200 KiB)" \
	eval '[ "${bin:-0}" -gt 204800 ] && [ "${bout:-0}" -gt 204800 ]'
check "the CONNECT's line: mode=intercept, reason=none" \
	logged "access door=forward .*method=CONNECT host=origin.test port=443 decision=allow reason=none .*status=200 .* mode=intercept "
check "... and no error or warning in the daemon's log" no_errors

# --- frames sent with the 101 -------------------------------------------------------
for n in 100 20000 70000; do
	mark
	o0=$(wc -l <"$OLOG")
	OUT=$(ws http "$SLCA" origin.test "$n")
	WANT=$(sed "2a greeting ok $n" <<<"$SESSION")
	check "a $n-byte frame in the origin's write of the 101 arrives whole, then the session as before" \
		eval '[ "$OUT" = "$WANT" ] || { echo "$OUT" >&2; false; }'
	check "... closed clean, the GET logged with status=101, no error" eval \
		'origin_closed $o0 &&
		 logged "method=GET host=origin.test port=443 decision=allow reason=none .*status=101 .* mode=intercept " &&
		 no_errors'
done

# --- through SOCKS5 (the name), intercepted ---------------------------------------
mark
o0=$(wc -l <"$OLOG")
OUT=$(ws socks "$SLCA" origin.test)
check "SOCKS5 naming origin.test, intercepted: the same session" \
	eval '[ "$OUT" = "$SESSION" ] || { echo "$OUT" >&2; false; }'
check "... closed clean at the origin" eval 'origin_closed $o0'
check "... the GET's line: door=socks, status=101, mode=intercept" \
	logged "access door=socks .*method=GET host=origin.test port=443 decision=allow reason=none .*status=101 .* mode=intercept "
check "... no error" no_errors

# --- a plain tunnel (plain.test is not intercepted): the origin's certificate -----
mark
o0=$(wc -l <"$OLOG")
OUT=$(ws http "$PKI/ca.pem" plain.test)
check "CONNECT to plain.test (a tunnel, the origin's CA): the session, Via absent (not ours)" \
	eval '[ "$OUT" = "$(sed "2s/via=1.1 sluice/via=None/" <<<"$SESSION")" ] || { echo "$OUT" >&2; false; }'
check "... closed clean at the origin" eval 'origin_closed $o0'
check "... one line, the CONNECT's, mode=tunnel, reason=none" \
	logged "method=CONNECT host=plain.test port=443 decision=allow reason=none .*status=200 .* mode=tunnel "

# --- upgrades that are not WebSocket ----------------------------------------------------
mark
o0=$(wc -l <"$OLOG")
OUT=$(plain http /h2c h2c)
check "Upgrade: h2c inside the interception: answered 200 without 101, the origin saw no Upgrade ($OUT)" \
	eval '[ "$OUT" = "HTTP/1.1 200 OK
upgrade=-" ]'
check "... nor Connection (nor HTTP2-Settings' name in it)" eval \
	'origin_since $o0 | grep -qx "req GET /h2c upgrade=- connection=- via=1.1 sluice"'
check "... its line: status=200, mode=intercept" \
	logged "method=GET host=origin.test port=443 decision=allow reason=none .*status=200 .* mode=intercept "
OUT=$(plain http /h2c websocket-not)
check "Upgrade: websocket-not: not relayed either ($OUT)" eval '[ "$OUT" = "HTTP/1.1 200 OK
upgrade=-" ]'
mark
OUT=$(plain http /rogue101 foo)
check "an origin answering 101 to a request that asked for no upgrade: 502 upstream-bad-response ($OUT)" \
	eval '[[ $OUT == "HTTP/1.1 502 Bad Gateway
Sluice-Reason: upstream-bad-response"* ]]'
check "... its line says so" \
	logged "method=GET host=origin.test port=443 decision=allow reason=upstream-bad-response .*status=502 .* mode=intercept "

check "the origin logged no failed connection" eval '! grep -q "^error" "$OLOG" || { grep "^error" "$OLOG" >&2; false; }'
check "the daemon is alive" kill -0 "$PID"
kill -TERM "$PID"
rc=
for _ in $(seq 100); do
	kill -0 "$PID" 2>/dev/null || { wait "$PID" && rc=0 || rc=$?; break; }
	sleep 0.1
done
check "sluiced exits 0 on SIGTERM (rc ${rc:-still running})" test "$rc" = 0
[ "$E2E_FAILS" = 0 ] || {
	echo "--- the daemon's log (last 60 lines):" >&2
	tail -n 60 "$LOG" >&2
	echo "--- the origin's log (last 30 lines):" >&2
	tail -n 30 "$OLOG" >&2
}
finish
