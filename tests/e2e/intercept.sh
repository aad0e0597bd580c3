#!/bin/bash
# The intercepting door, through CONNECT on the forward door: a real
# sluiced between real clients (curl, python3's ssl) and a real TLS origin
# (nginx, under a test CA given as certs.upstream_ca) with dnsmasq, in two
# private network namespaces.
#
# Checks: an intercepted host is answered with a leaf from sluice's CA
# (clients that trust only that CA succeed; ones that trust only the
# origin's CA fail), each inner request has its own access line and keep-
# alive reuses one TLS connection to the origin; a host not in intercept:
# is tunnelled untouched (the origin's own certificate reaches the client);
# bad input and bad origins: an inner Host that is not D (421
# host-mismatch), TRACE (405), forged Forwarded and X-Forwarded-For
# dropped, an SNI that differs from D (closed,
# tls-sni-mismatch), an origin whose certificate has the wrong name or is
# self-signed (502 upstream-cert-invalid inside the guest's TLS, no request
# reaching it), and the CA key never in the log. Observability: the access
# lines' mode=, sni=, alpn_down= and alpn_up= (intercepted, tunnelled, a
# guest refusing the leaf), and GET /metrics over the API's unix socket
# (TLS handshakes by side and result, leaf mints, cache hits).
. "$(dirname "$0")/lib.sh"

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
for a in 10.99.0.10/24 10.99.0.11/24 10.99.0.53/24; do ip -n "$inet" addr add "$a" dev vin; done
ip -n "$inet" link set vin up

# --- a test CA and the origin's certificates -----------------------------------
. "$(dirname "$0")/pki_lib.sh"
pki_ca
leaf origin.test "DNS:origin.test,DNS:plain.test"
leaf elsewhere.test "DNS:elsewhere.test"       # served for wrong.test: the wrong name
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=self.test" -keyout "$PKI/self.key" -out "$PKI/self.pem" \
	-addext subjectAltName=DNS:self.test

WWW=$E2E_TMP/www
mkdir -p "$WWW" "$E2E_TMP/nginx-tmp"
head -c 1024 /dev/urandom >"$WWW/1k"
echo "hello over tls" >"$WWW/index.html"
NGLOG=$E2E_TMP/nginx-access.log
cat >"$E2E_TMP/nginx.conf" <<NGINX
user root;
worker_processes 1;
pid $E2E_TMP/nginx.pid;
error_log $E2E_TMP/nginx-error.log;
events { worker_connections 256; }
http {
	log_format t '\$connection \$connection_requests \$ssl_server_name "\$request" \$status host=\$host via="\$http_via" fwd="\$http_forwarded" xff="\$http_x_forwarded_for" keep="\$http_x_keep"';
	access_log $NGLOG t;
	client_body_temp_path $E2E_TMP/nginx-tmp/body;
	proxy_temp_path $E2E_TMP/nginx-tmp/proxy;
	fastcgi_temp_path $E2E_TMP/nginx-tmp/fastcgi;
	uwsgi_temp_path $E2E_TMP/nginx-tmp/uwsgi;
	scgi_temp_path $E2E_TMP/nginx-tmp/scgi;
	default_type application/octet-stream;
	keepalive_timeout 30s;
	server {
		listen 10.99.0.10:443 ssl;
		ssl_certificate $PKI/origin.test.pem;
		ssl_certificate_key $PKI/origin.test.key;
		root $WWW;
	}
	server {
		listen 10.99.0.11:443 ssl;
		ssl_certificate $PKI/elsewhere.test.pem;
		ssl_certificate_key $PKI/elsewhere.test.key;
		root $WWW;
	}
	server {
		listen 10.99.0.11:8443 ssl;
		ssl_certificate $PKI/self.pem;
		ssl_certificate_key $PKI/self.key;
		root $WWW;
	}
}
NGINX
ip netns exec "$inet" nginx -e "$E2E_TMP/nginx-error.log" -c "$E2E_TMP/nginx.conf" -g 'daemon off;' &
track $!
ip netns exec "$inet" dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-daemon --user=root \
	--listen-address=10.99.0.53 --bind-interfaces --local=/test/ \
	--host-record=origin.test,10.99.0.10 --host-record=plain.test,10.99.0.10 \
	--host-record=other.test,10.99.0.10 \
	--host-record=wrong.test,10.99.0.11 --host-record=self.test,10.99.0.11 \
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
    allow: ["origin.test:443", "plain.test:443", "wrong.test:443", "self.test:8443"]
    intercept: ["origin.test", "wrong.test", "self.test:8443"]
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
for _ in $(seq 100); do [ -n "$(I ss -Hltn 'sport = :443')" ] && break; sleep 0.05; done
check "sluice made its CA in daemon.data_dir" test -s "$SLCA"

PX=http://127.0.0.1:3128
# cget CAFILE URL [curl args]: curl through CONNECT; prints the body
cget() { local ca=$1 url=$2; shift 2; G curl -sS --max-time 10 -p -x "$PX" --cacert "$ca" "$@" "$url"; }
# scrape: GET /metrics on the API's unix socket into $PROM, strictly parsed
# (200, text/plain; version=0.0.4, well-formed Prometheus text);
# m SERIES: one series' value from it ("none" when it is not there).
MX=$SL_SRC/tests/e2e/forward/metrics.py
PROM=$E2E_TMP/metrics.prom
scrape() { "$PY" "$MX" scrape "$E2E_TMP/api.sock" "$PROM" && "$PY" "$MX" check "$PROM" >/dev/null; }
m() { "$PY" "$MX" get "$PROM" "$1" 2>/dev/null || echo none; }
HS='sluice_tls_handshakes_total'

# --- intercepted: a leaf from sluice's CA, every request seen ------------------------
mark
check "intercepted: curl trusting only sluice's CA gets the page" \
	eval '[ "$(cget "$SLCA" https://origin.test/)" = "hello over tls" ]'
check "/metrics over the API socket is well-formed Prometheus text" scrape
v="$(m "$HS{side=\"guest\",result=\"ok\"}") $(m "$HS{side=\"upstream\",result=\"ok\"}")"
check "/metrics: one TLS handshake with the guest and one with the origin, both ok ($v)" \
	test "$v" = "1 1"
v="$(m sluice_leaf_mints_total) $(m sluice_leaf_cache_misses_total) $(m sluice_leaf_cache_hits_total)"
check "/metrics: the first connection minted origin.test's leaf: 1 mint, 1 miss, 0 hits ($v)" \
	test "$v" = "1 1 0"
check "... and the 1 KiB body intact" eval 'cget "$SLCA" https://origin.test/1k | cmp -s - "$WWW/1k"'
scrape || true
v="$(m sluice_leaf_mints_total) $(m sluice_leaf_cache_hits_total) $(m sluice_leaf_cache_entries)"
check "/metrics: the second connection's leaf came from the cache: 1 mint, 1 hit, 1 entry ($v)" \
	test "$v" = "1 1 1"
v=$(m "$HS{side=\"guest\",result=\"ok\"}")
check "/metrics: two guest handshakes ok ($v)" test "$v" = 2
G openssl s_client -proxy 127.0.0.1:3128 -connect origin.test:443 -servername origin.test \
	-CAfile "$SLCA" </dev/null 2>/dev/null | openssl x509 -noout -subject -issuer -ext subjectAltName \
	>"$E2E_TMP/leaf.txt" 2>&1 || true
check "... the leaf names origin.test (SAN exactly DNS:origin.test), issued by sluice's CA" eval \
	'grep -q "^subject=CN = origin.test" "$E2E_TMP/leaf.txt" &&
	 grep -q "^issuer=.*CN = sluice CA" "$E2E_TMP/leaf.txt" &&
	 grep -qx " *DNS:origin.test" "$E2E_TMP/leaf.txt" || { cat "$E2E_TMP/leaf.txt" >&2; false; }'
check "a client trusting only the origin's CA refuses the leaf (curl 60)" eval \
	'rc=0; cget "$PKI/ca.pem" https://origin.test/ >/dev/null 2>&1 || rc=$?; [ $rc = 60 ]'
check "the inner request has its own access line (GET origin.test 443 200)" \
	logged "access door=forward .*method=GET host=origin.test port=443 decision=allow reason=none .*status=200"
# curl offers h2 and http/1.1; sluice answers http/1.1 and offers the origin
# only that.
check "... mode=intercept, the guest's SNI, ALPN http/1.1 on both legs" \
	logged "access door=forward .*method=GET host=origin.test port=443 .*status=200 .* mode=intercept sni=origin.test alpn_down=http/1.1 alpn_up=http/1.1 layer=[0-9a-f]{16} inject=-$"
check "the CONNECT has its line too" \
	logged "access door=forward .*method=CONNECT host=origin.test port=443 .*status=200"
check "... with mode=intercept, the SNI and both ALPNs" \
	logged "access door=forward .*method=CONNECT host=origin.test port=443 .*status=200 .* mode=intercept sni=origin.test alpn_down=http/1.1 alpn_up=http/1.1 layer=[0-9a-f]{16} inject=-$"
check "the guest that refused the leaf: a log line naming the host, client-rejected-cert" \
	logged "forward 127\.0\.0\.1:[0-9]+: intercept origin\.test: client-rejected-cert: "
check "... and its access line: client, host, reason, the SNI, no ALPN with the guest" \
	logged "access door=forward client=local .*method=CONNECT host=origin.test port=443 .*reason=client-rejected-cert .* mode=intercept sni=origin.test alpn_down=- alpn_up=http/1.1 layer=[0-9a-f]{16} inject=-$"
scrape || true
v=$(m "$HS{side=\"guest\",result=\"client-rejected-cert\"}")
check "/metrics: one guest handshake refused our leaf, client-rejected-cert ($v)" test "$v" = 1
v=$(m "sluice_door_decisions_total{door=\"forward\",decision=\"allow\",reason=\"client-rejected-cert\"}")
check "... and one door decision ended so ($v)" test "$v" = 1
check "the origin saw the request with Via, SNI origin.test" \
	grep -q 'origin.test "GET /1k HTTP/1.1" 200 host=origin.test via="1.1 sluice"' "$NGLOG"
: >"$NGLOG.mark"
n0=$(wc -l <"$NGLOG")
check "keep-alive: two requests in one tunnel" eval \
	'[ "$(cget "$SLCA" https://origin.test/ https://origin.test/)" = "$(printf "hello over tls\nhello over tls")" ]'
check "... ride one TLS connection to the origin" eval \
	'tail -n +$((n0 + 1)) "$NGLOG" | awk "{print \$1}" | sort -u | wc -l | grep -qx 1 &&
	 [ "$(tail -n +$((n0 + 1)) "$NGLOG" | wc -l)" = 2 ]'

# --- not intercepted: the origin's own certificate, untouched --------------------------
mark
check "plain.test (not in intercept:) is tunnelled: the origin's CA is enough" \
	eval '[ "$(cget "$PKI/ca.pem" https://plain.test/)" = "hello over tls" ]'
check "... its line: mode=tunnel, no hello read, no TLS of ours" \
	logged "access door=forward .*method=CONNECT host=plain.test port=443 .*status=200 .* mode=tunnel sni=- alpn_down=- alpn_up=- layer=[0-9a-f]{16} inject=-$"
check "... and sluice's CA is not" eval \
	'rc=0; cget "$SLCA" https://plain.test/ >/dev/null 2>&1 || rc=$?; [ $rc = 60 ]'

# --- inside the tunnel, every request is checked ----------------------------------------
# inner HOST REQUEST-LINE SNI: a raw request inside an intercepted CONNECT
# to origin.test:443; prints the status line (or "closed: why").
cat >"$E2E_TMP/inner.py" <<'PYEOF'
import socket, ssl, sys
ca, host_hdr, line, sni = sys.argv[1:5]
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT origin.test:443 HTTP/1.1\r\nHost: origin.test:443\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
try:
    t = ctx.wrap_socket(s, server_hostname=sni)
except (ssl.SSLError, OSError) as e:
    print("closed:", type(e).__name__)
    sys.exit(0)
t.sendall(f"{line}\r\nHost: {host_hdr}\r\nConnection: close\r\n\r\n".encode())
resp = b""
try:
    while True:
        b = t.recv(4096)
        if not b:
            break
        resp += b
except (ssl.SSLError, OSError):
    pass
print(resp.split(b"\r\n")[0].decode())
for h in resp.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
    if h.lower().startswith(b"sluice-reason:"):
        print(h.decode())
PYEOF
inner() { G "$PY" "$E2E_TMP/inner.py" "$SLCA" "$@" 2>&1; }
n0=$(wc -l <"$NGLOG")
OUT=$(inner origin.test "GET /?m=ok HTTP/1.1" origin.test)
check "a raw inner request with Host origin.test: 200 ($OUT)" eval '[[ $OUT == "HTTP/1.1 200 OK"* ]]'
OUT=$(inner other.test "GET /?m=hostmismatch HTTP/1.1" origin.test)
check "an inner Host other than D: 421, Sluice-Reason host-mismatch ($OUT)" \
	eval '[[ $OUT == "HTTP/1.1 421 Misdirected Request"* && $OUT == *"Sluice-Reason: host-mismatch"* ]]'
OUT=$(inner origin.test:8443 "GET /?m=portmismatch HTTP/1.1" origin.test)
check "... a Host with another port too ($OUT)" eval '[[ $OUT == *"Sluice-Reason: host-mismatch"* ]]'
OUT=$(inner origin.test "TRACE /?m=trace HTTP/1.1" origin.test)
check "TRACE inside: 405 method-not-allowed ($OUT)" \
	eval '[[ $OUT == "HTTP/1.1 405 Method Not Allowed"* && $OUT == *"Sluice-Reason: method-not-allowed"* ]]'
# Forged identity fields are dropped inside an interception too (the
# exchange rebuilds every door's heads): X-Keep proves the path.
OUT=$(inner origin.test $'GET /?m=forged HTTP/1.1\r\nForwarded: for=6.6.6.6\r\nX-Forwarded-For: 6.6.6.6\r\nX-Keep: yes' origin.test)
check "an inner request with Forwarded and X-Forwarded-For: 200 ($OUT)" eval '[[ $OUT == "HTTP/1.1 200 OK"* ]]'
check "... the origin got X-Keep but neither forged field" \
	wait_for "$NGLOG" 'm=forged .*fwd="-" xff="-" keep="yes"'
mark
OUT=$(inner origin.test "GET /?m=sni HTTP/1.1" other.test)
check "an SNI other than D is refused: the handshake fails ($OUT)" eval '[[ $OUT == closed:* ]]'
check "... logged as tls-sni-mismatch" logged "reason=tls-sni-mismatch"
check "... the access line names the SNI the guest sent" \
	logged "reason=tls-sni-mismatch .* mode=intercept sni=other.test alpn_down=- "
# A plain tunnel (plain.test is not intercepted) gates the hello too: it
# must name the CONNECT's host.
cat >"$E2E_TMP/tunnel_sni.py" <<'PYEOF'
import socket, ssl, sys
ca, target, sni, q = sys.argv[1:5]
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
try:
    t = ctx.wrap_socket(s, server_hostname=sni)
    t.sendall(f"GET /?m={q} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n".encode())
    print(t.recv(100).split(b"\r\n")[0].decode())
except (ssl.SSLError, OSError) as e:
    print("closed:", type(e).__name__)
PYEOF
mark
OUT=$(G "$PY" "$E2E_TMP/tunnel_sni.py" "$PKI/ca.pem" plain.test:443 other.test tunsni 2>&1)
check "a plain tunnel to plain.test whose hello names other.test: closed before the origin ($OUT)" \
	eval '[[ $OUT == closed:* ]]'
check "... logged as tls-sni-mismatch, denied" \
	logged "door=forward .*method=CONNECT host=plain.test .*decision=deny reason=tls-sni-mismatch .* mode=tunnel sni=other.test "
check "... with a line naming the hello's host" logged "plain.test:443: tls-sni-mismatch: the guest's hello names other.test"
OUT=$(G "$PY" "$E2E_TMP/tunnel_sni.py" "$PKI/ca.pem" plain.test:443 plain.test tunok 2>&1)
check "... the same tunnel with the right name passes ($OUT)" eval '[[ $OUT == "HTTP/1.1 200 OK" ]]'
check "none of the refused requests reached the origin" \
	eval '! tail -n +$((n0 + 1)) "$NGLOG" | grep -Eq "m=(hostmismatch|portmismatch|trace|sni|tunsni)"'
check "the allowed one did" eval 'tail -n +$((n0 + 1)) "$NGLOG" | grep -q "m=ok"'

# --- origins whose certificate fails ------------------------------------------------------
mark
OUT=$(G curl -sS --max-time 10 -p -x "$PX" --cacert "$SLCA" -D - -o /dev/null https://wrong.test/?m=wrongname 2>&1 || true)
check "an origin presenting another name's certificate: 502 upstream-cert-invalid, inside our TLS" \
	eval '[[ $OUT == *"HTTP/1.1 502"* && $OUT == *"Sluice-Reason: upstream-cert-invalid"* ]]'
check "... the log line says why" logged "wrong.test:443: upstream-cert-invalid: "
check "... the CONNECT's line: intercepted, no ALPN with the origin" \
	logged "access door=forward .*method=CONNECT host=wrong.test port=443 .* mode=intercept sni=wrong.test alpn_down=http/1.1 alpn_up=- layer=[0-9a-f]{16} inject=-$"
scrape || true
v=$(m "$HS{side=\"upstream\",result=\"upstream-cert-invalid\"}")
check "/metrics: one upstream verification failure, upstream-cert-invalid ($v)" test "$v" = 1
OUT=$(G curl -sS --max-time 10 -p -x "$PX" --cacert "$SLCA" -D - -o /dev/null https://self.test:8443/?m=self 2>&1 || true)
check "a self-signed origin: 502 upstream-cert-invalid" \
	eval '[[ $OUT == *"HTTP/1.1 502"* && $OUT == *"Sluice-Reason: upstream-cert-invalid"* ]]'
check "no request reached either origin" eval '! grep -Eq "m=(wrongname|self)" "$NGLOG"'
scrape || true
v="$(m "$HS{side=\"upstream\",result=\"upstream-cert-invalid\"}") $(m "$HS{side=\"upstream\",result=\"failed\"}")"
check "/metrics: two upstream verification failures now, no other upstream failure ($v)" \
	test "$v" = "2 0"
v="$(m sluice_leaf_mints_total) $(m sluice_tls_sessions_resumed_total)"
check "/metrics: leaves minted for origin.test, wrong.test and self.test; upstream sessions resumed ($v)" \
	eval '[ "${v% *}" = 3 ] && [ "${v#* }" -gt 0 ]'

# --- IP-literal CONNECTs, routed by the hello's server name -----------------------------
# The policy allows names only: a literal is not-allowed by itself, and
# goes on only as a name whose addresses include it.
n0=$(wc -l <"$NGLOG")
mark
OUT=$(G "$PY" "$E2E_TMP/tunnel_sni.py" "$SLCA" 10.99.0.10:443 origin.test litok 2>&1)
check "CONNECT 10.99.0.10:443, hello naming origin.test: intercepted as origin.test ($OUT)" \
	eval '[[ $OUT == "HTTP/1.1 200 OK" ]]'
check "... its CONNECT line names the name, the literal as the upstream" \
	logged "method=CONNECT host=origin.test port=443 decision=allow reason=none upstream=10.99.0.10:443 status=200 .* mode=intercept sni=origin.test "
check "... and the inner GET has its line" logged "method=GET host=origin.test port=443 .*status=200 "
mark
OUT=$(G "$PY" "$E2E_TMP/tunnel_sni.py" "$PKI/ca.pem" 10.99.0.10:443 plain.test litplain 2>&1)
check "CONNECT 10.99.0.10:443, hello naming plain.test (not intercepted): tunnelled ($OUT)" \
	eval '[[ $OUT == "HTTP/1.1 200 OK" ]]'
check "... the line: host plain.test, upstream the literal, a tunnel" \
	logged "method=CONNECT host=plain.test port=443 decision=allow .*upstream=10.99.0.10:443 .* mode=tunnel "
mark
OUT=$(G "$PY" "$E2E_TMP/tunnel_sni.py" "$SLCA" 10.99.0.11:443 origin.test litwrong 2>&1)
check "CONNECT 10.99.0.11:443 naming origin.test (not one of its addresses): closed ($OUT)" \
	eval '[[ $OUT == closed:* ]]'
check "... as sni-address-mismatch" logged "host=origin.test port=443 decision=deny reason=sni-address-mismatch "
mark
OUT=$(G "$PY" - <<'PYEOF' 2>&1
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT 10.99.0.10:443 HTTP/1.1\r\nHost: 10.99.0.10:443\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
s.sendall(b"GET /?m=litclear HTTP/1.1\r\nHost: origin.test\r\n\r\n")
print(head.split(b"\r\n")[0].decode(), "then", repr(s.recv(100)))
PYEOF
)
check "CONNECT to the literal with clear text inside: closed, nothing answered ($OUT)" \
	eval "[[ \$OUT == 'HTTP/1.1 200 Connection established then b'\\'''\\' ]]"
check "... logged as not-allowed, naming no host" \
	logged "10.99.0.10:443 is not allowed, and the guest's first record names no host"
OUT=$(G curl -sS --max-time 10 --socks5 127.0.0.1:1080 --resolve origin.test:443:10.99.0.10 \
	--cacert "$SLCA" "https://origin.test/1k?m=litsocks" 2>&1 | cmp - "$WWW/1k" 2>&1 && echo same)
check "socks5:// (the client resolved origin.test itself): intercepted ($OUT)" test "$OUT" = same
check "... door=socks, the inner GET's line" logged "door=socks .*method=GET host=origin.test port=443 .*status=200 "
# An optimistic SOCKS5 client: greeting, request (origin.test, intercepted)
# and its ClientHello in one write, before any reply. The hello sent ahead
# is the one sluice's TLS answers.
mark
OUT=$(G "$PY" - "$SLCA" <<'PYEOF' 2>&1
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ctx.wrap_bio(inc, out, server_hostname="origin.test")
try:
    tls.do_handshake()
except ssl.SSLWantReadError:
    pass
s = socket.create_connection(("127.0.0.1", 1080), timeout=10)
s.sendall(b"\x05\x01\x00" + b"\x05\x01\x00\x03\x0borigin.test\x01\xbb" + out.read())
def exact(n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            raise SystemExit("closed after %r" % b)
        b += d
    return b
method, rep = exact(2), exact(10)
def pump(op):
    while True:
        try:
            r = op()
            s.sendall(out.read())
            return r
        except ssl.SSLWantReadError:
            s.sendall(out.read())
            d = s.recv(65536)
            if d:
                inc.write(d)
            else:
                inc.write_eof()
pump(tls.do_handshake)
pump(lambda: tls.write(b"GET /1k?m=optsocks HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n"))
data = b""
while True:
    try:
        d = pump(lambda: tls.read(65536))
    except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
        break
    if not d:
        break
    data += d
head, _, body = data.partition(b"\r\n\r\n")
print(method.hex(), rep[:2].hex(), head.split(b"\r\n")[0].decode(), len(body))
PYEOF
) || true
check "an optimistic SOCKS5 client (its hello sent with the request): intercepted ($OUT)" \
	test "$OUT" = "0500 0500 HTTP/1.1 200 OK 1024"
check "... door=socks, the inner GET's line" logged "door=socks .*method=GET host=origin.test port=443 .*status=200 "
check "the origin saw the routed requests and none of the refused" eval \
	'tail -n +$((n0 + 1)) "$NGLOG" | grep -q "m=litok" && tail -n +$((n0 + 1)) "$NGLOG" | grep -q "m=litplain" &&
	 ! tail -n +$((n0 + 1)) "$NGLOG" | grep -Eq "m=(litwrong|litclear)"'

# --- absolute-form https:// URLs: sluice makes the TLS connection itself ---------------
# abs URL...: the URLs as absolute-form GETs on one connection to the
# forward door, in the clear; prints each response's status, Sluice-Reason
# and body length.
cat >"$E2E_TMP/abs.py" <<'PYEOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
f = s.makefile("rb")
for url in sys.argv[1:]:
    host = url.split("/")[2]
    s.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    status = f.readline().decode().strip()
    n, why = 0, ""
    while True:
        h = f.readline().decode().strip()
        if not h:
            break
        k, v = h.split(":", 1)
        if k.lower() == "content-length":
            n = int(v)
        if k.lower() == "sluice-reason":
            why = v.strip()
    body = f.read(n)
    print(status, why or "-", len(body))
    if why:
        break
PYEOF
n0=$(wc -l <"$NGLOG")
OUT=$(G "$PY" "$E2E_TMP/abs.py" https://origin.test/1k?m=abs1 https://origin.test/1k?m=abs2 2>&1 || true)
check "absolute-form https://: two GETs on one connection, 200 and 1 KiB each ($OUT)" \
	eval '[ "$OUT" = "HTTP/1.1 200 OK - 1024
HTTP/1.1 200 OK - 1024" ]'
check "... over one TLS connection to the origin, SNI origin.test" eval \
	'[ "$(tail -n +$((n0 + 1)) "$NGLOG" | grep -E "m=abs[12]" | grep -c " origin.test \"GET /1k")" = 2 ] &&
	 [ "$(tail -n +$((n0 + 1)) "$NGLOG" | grep -E "m=abs[12]" | cut -d" " -f1 | sort -u | wc -l)" = 1 ]'
OUT=$(G "$PY" "$E2E_TMP/abs.py" https://wrong.test/?m=abswrong 2>&1 || true)
check "... an origin with the wrong name's certificate: 502 upstream-cert-invalid ($OUT)" \
	eval '[[ $OUT == "HTTP/1.1 502 Bad Gateway upstream-cert-invalid "* ]]'
check "... which it never reached" eval '! grep -q "m=abswrong" "$NGLOG"'

check "the daemon is alive" kill -0 "$PID"
check "the CA key never reached the log" eval '! grep -q "PRIVATE KEY" "$LOG"'
kill -TERM "$PID"
rc=
for _ in $(seq 100); do
	kill -0 "$PID" 2>/dev/null || { wait "$PID" && rc=0 || rc=$?; break; }
	sleep 0.1
done
check "sluiced exits 0 on SIGTERM (rc ${rc:-still running})" test "$rc" = 0
[ "$E2E_FAILS" = 0 ] || { echo "--- the daemon's log (last 60 lines):" >&2; tail -n 60 "$LOG" >&2; }
finish
