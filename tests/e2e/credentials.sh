#!/bin/bash
# Credential injection (issue 19) from a static client: a real sluiced
# between curl / python and a TLS echo origin (python, under a test CA
# given as certs.upstream_ca) that answers every request with the headers
# and target it received, in private network namespaces.
#
# Checks: header, basic and query credentials reach the origin exactly once
# with the real value (every client copy of the header, in any case,
# removed first) on intercepted CONNECTs and on absolute-form https://
# URLs; a host with credentials is intercepted without being listed; none
# on cleartext http:// (and one with cleartext: true does), on a plain
# tunnel, on TRACE, toward an origin whose certificate fails, for another
# host after a redirect; the access line names the credentials in inject=
# with the layer's version; a configuration with a forbidden header or a
# literal value is refused naming file:line:col without the value. Every
# value is a canary (lib.sh): the suite's scan after the run (e2e_zz_canary,
# which also follows this test run alone) finds none, in any spelling, in
# the daemon's log and access log, its data directory, its --check
# output, its error pages or anything else kept. The password file and the origin's log (its targets carry the
# query key) are in $E2E_SECRET, the files that may hold one.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY
FLEET="sl-fleet-$$"
netns_owned "$FLEET"

netns_new gw gw
netns_new inet inet
G() { ip netns exec "$gw" "$@"; }
ip -n "$gw" link add vgi type veth peer name vin netns "$inet"
ip -n "$gw" addr add 10.99.0.1/24 dev vgi
ip -n "$gw" link set vgi up
for a in 10.99.0.10/24 10.99.0.11/24 10.99.0.53/24; do ip -n "$inet" addr add "$a" dev vin; done
ip -n "$inet" link set vin up

# --- the secrets: canaries that must appear nowhere but at the origin ------------
TOKEN="canary-hdr-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PASSWORD="canary-pw-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
QKEY="canary-q-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')/+="
CLEAR="canary-clear-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$PASSWORD" >"$E2E_SECRET/password"
chmod 600 "$E2E_SECRET/password"
export SL_E2E_TOKEN=$TOKEN SL_E2E_QKEY=$QKEY SL_E2E_CLEAR=$CLEAR
canary header-token="$TOKEN" basic-password="$PASSWORD" query-key="$QKEY" cleartext-key="$CLEAR"
ORIGIN_LOG=$E2E_SECRET/origin.log

# --- a test CA, the origin's certificates ------------------------------------------
. "$(dirname "$0")/pki_lib.sh"
pki_ca
leaf api.test "DNS:api.test,DNS:other.test,DNS:plain.test"
leaf elsewhere.test "DNS:elsewhere.test"        # served as wrong.test: the wrong name

# --- the echo origin: every request's target and headers, as JSON ------------------
cat >"$E2E_TMP/echo.py" <<'PY'
import http.server, json, socketserver, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "https://other.test/echo?m=redirected")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        b = json.dumps({"method": self.command, "target": self.path,
                        "headers": [[k, v] for k, v in self.headers.items()]}).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(b)
        sys.stderr.write("origin: %s %s\n" % (self.command, self.path))
        sys.stderr.flush()
    do_GET = do_POST = do_TRACE = do_HEAD = answer
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
srv = []
for addr, port, cert, key, tls in [("10.99.0.10", 443, "api.test", "api.test", True),
                                   ("10.99.0.10", 80, None, None, False),
                                   ("10.99.0.11", 443, "elsewhere.test", "elsewhere.test", True)]:
    s = S((addr, port), H)
    if tls:
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        c.load_cert_chain(sys.argv[1] + "/" + cert + ".pem", sys.argv[1] + "/" + key + ".key")
        s.socket = c.wrap_socket(s.socket, server_side=True)
    srv.append(s)
import threading
for s in srv[1:]:
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
srv[0].serve_forever()
PY
ip netns exec "$inet" "$PY" "$E2E_TMP/echo.py" "$PKI" >"$ORIGIN_LOG" 2>&1 &
track $!
ip netns exec "$inet" dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-daemon --user=root \
	--listen-address=10.99.0.53 --bind-interfaces --local=/test/ \
	--host-record=api.test,10.99.0.10 --host-record=other.test,10.99.0.10 \
	--host-record=plain.test,10.99.0.10 --host-record=wrong.test,10.99.0.11 \
	2>"$E2E_TMP/dnsmasq.log" &
track $!
wait_for "$ORIGIN_LOG" ready 10 || { fail "the echo origin starts"; finish; }

# --- sluiced ---------------------------------------------------------------------
LOG=$E2E_TMP/sluiced.log
conf() { # the policy's credentials, as YAML lines; the rest fixed
	cat >"$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  control_socket: off
  log: { level: info, format: text }
api: { listen: off, socket: $E2E_TMP/api.sock }
gateway:
  workers: 2
  listen: { forward: 127.0.0.1:3128, socks: off }
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
    allow: ["api.test", "other.test", "plain.test", "wrong.test"]
    allow_private: [10.99.0.0/24]
    credentials:
$1
YAML
}
CREDS='      - { name: api-token, host: api.test, header: Authorization, value: "Bearer ${env:SL_E2E_TOKEN}" }
      - { name: other-basic, kind: basic, host: other.test, user: robot, password: "${file:'"$E2E_SECRET"'/password}" }
      - { name: other-key, kind: query, host: other.test, param: key, value: "${env:SL_E2E_QKEY}" }
      - { name: wrong-token, host: wrong.test, header: X-Api-Key, value: "${env:SL_E2E_TOKEN}" }
      - { name: clear-key, host: "plain.test:80", header: X-Clear, value: "${env:SL_E2E_CLEAR}", cleartext: true }'

# A forbidden header and a literal value: refused at load, the value not echoed.
conf '      - { host: api.test, header: Content-Length, value: "${env:SL_E2E_TOKEN}" }
      - { host: api.test, header: X-Lit, value: "literal-canary-value" }'
out=$(G "$SLUICED" --config "$E2E_TMP/sluice.yaml" --check 2>&1 || true)
keep_text "sluiced --check" "$out"
check "a credential setting Content-Length is refused at load, naming file:line:col" \
	eval '[[ $out == *"sluice.yaml:"*":"*": policies[0].credentials[0].header: Content-Length frames"* ]]'
check "... a literal value too, and neither value is echoed" \
	eval '[[ $out == *"credentials[1].value: give the secret as"* && $out != *literal-canary-value* && $out != *"$TOKEN"* ]]'

conf "$CREDS"
nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>"$LOG" &
PID=$!
track "$PID"
if ! wait_for "$LOG" "sluiced [0-9.]+ started" 10; then
	fail "the daemon starts"
	finish
fi
pass "the daemon starts"
SLCA=$E2E_TMP/data/ca.pem
for _ in $(seq 50); do [ -s "$SLCA" ] && break; sleep 0.1; done
PX=http://127.0.0.1:3128
B64PW=$(printf 'robot:%s' "$PASSWORD" | base64 -w0)

# get URL [curl args]: the origin's JSON (or curl's error) through CONNECT
get() { local u=$1; shift; G curl -sS --max-time 10 -p -x "$PX" --cacert "$SLCA" "$@" "$u" 2>&1 || true; }
# hdrs NAME: the values of header NAME (any case) the origin saw, one a line
hdrs() { "$PY" -c 'import json,sys
d = json.loads(sys.stdin.read())
for k, v in d["headers"]:
    if k.lower() == sys.argv[1].lower(): print(v)' "$1" 2>/dev/null || true; }
target() { "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read())["target"])' 2>/dev/null || true; }

# --- header: exactly one, the real value, client copies gone -----------------------------
mark
OUT=$(get https://api.test/echo -H "authorization: Bearer forged" -H "AUTHORIZATION: Bearer forged2")
check "api.test (no intercept: rule) is intercepted because it has credentials: a leaf from sluice's CA" \
	eval '[[ $OUT == *'"'"'"target"'"'"'* ]]'
V=$(hdrs Authorization <<<"$OUT" 2>/dev/null)
check "the origin saw exactly one Authorization, the real one (client copies in two cases removed)" \
	test "$V" = "Bearer $TOKEN"
check "the access line names it: inject=api-token, with the layer's version" \
	logged "method=GET host=api.test port=443 .*status=200 .* layer=[0-9a-f]{16} inject=api-token$"
check "the daemon logged that api.test is intercepted for its credentials" \
	grep -q "policy web: credential api-token (header) for api.test: the host is intercepted" "$LOG"

# --- basic and query on other.test ---------------------------------------------------------
OUT=$(get "https://other.test/echo?a=1&key=forged&b=2" -u "someone:else")
V=$(hdrs Authorization <<<"$OUT" 2>/dev/null)
check "basic: Authorization: Basic base64(robot:password), the client's replaced" test "$V" = "Basic $B64PW"
T=$(target <<<"$OUT" 2>/dev/null)
QENC=$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="-._~"))' "$QKEY")
check "query: key=<value %-encoded> added, the client's key= removed, the others kept in order ($T)" \
	test "$T" = "/echo?a=1&b=2&key=$QENC"
check "... inject= names both" logged "host=other.test .* inject=other-basic,other-key$"
OUT=$(get "https://other.test/echo?a=1&%6Bey=forged&b=2&%6b%65%79=again")
T=$(target <<<"$OUT" 2>/dev/null)
check "query: the client's key= spelled with %XX (%6Bey, %6b%65%79) is the same parameter: removed ($T)" \
	test "$T" = "/echo?a=1&b=2&key=$QENC"

# --- absolute-form https:// on the forward door ------------------------------------------
OUT=$(G "$PY" - <<PYEOF 2>&1
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"GET https://api.test/echo?m=abs HTTP/1.1\r\nHost: api.test\r\nAuthorization: x\r\nConnection: close\r\n\r\n")
d = b""
while True:
    b = s.recv(65536)
    if not b: break
    d += b
print(d.split(b"\r\n\r\n", 1)[1].decode())
PYEOF
)
V=$(hdrs Authorization <<<"$OUT" 2>/dev/null)
check "absolute-form https://: the real Authorization, once" test "$V" = "Bearer $TOKEN"

# --- where nothing is injected ------------------------------------------------------------
n0=$(wc -l <"$ORIGIN_LOG")
OUT=$(G curl -sS --max-time 10 -x "$PX" http://api.test/echo 2>&1 || true)
V=$(hdrs Authorization <<<"$OUT" 2>/dev/null)
check "cleartext http:// to api.test: the origin answered, no credential ($OUT)" \
	eval '[[ $OUT == *'"'"'"target"'"'"'* && -z $V ]]'
OUT=$(G curl -sS --max-time 10 -x "$PX" http://plain.test/echo 2>&1 || true)
V=$(hdrs X-Clear <<<"$OUT" 2>/dev/null)
check "... unless the credential says cleartext: true (plain.test:80)" test "$V" = "$CLEAR"
OUT=$(get https://api.test/echo -X TRACE)
keep_text "sluice's answer to a TRACE" "$OUT"
V=$(hdrs Authorization <<<"$OUT" 2>/dev/null)
check "TRACE: refused inside interception (405 method-not-allowed), no credential sent ($OUT)" \
	eval '[[ $OUT == *method-not-allowed* && -z $V && $OUT != *"$TOKEN"* ]]'
n0=$(wc -l <"$ORIGIN_LOG")
OUT=$(G curl -sS --max-time 10 -p -x "$PX" --cacert "$SLCA" -D - https://wrong.test/echo?m=wrong 2>&1 || true)
keep_text "sluice's error page for wrong.test" "$OUT"
check "an origin whose certificate fails: 502 upstream-cert-invalid ($OUT)" \
	eval '[[ $OUT == *"HTTP/1.1 502"* && $OUT == *"Sluice-Reason: upstream-cert-invalid"* ]]'
check "... and its origin saw no request at all" eval '[ "$(wc -l <"$ORIGIN_LOG")" = "$n0" ]'
OUT=$(get https://api.test/redirect -L)
V=$(hdrs Authorization <<<"$OUT" 2>/dev/null)
T=$(target <<<"$OUT" 2>/dev/null)
check "a redirect from api.test to other.test: api.test's token does not follow ($T)" \
	eval '[ "$T" = "/echo?m=redirected&key=$QENC" ] && [ "$V" != "Bearer $TOKEN" ]'

# A plain tunnel: a policy without interception for api.test is not possible
# while it has credentials; a host without credentials stays a tunnel.
mark
OUT=$(G curl -sS --max-time 10 -p -x "$PX" --cacert "$PKI/ca.pem" https://plain.test/echo 2>&1 || true)
V=$(hdrs X-Clear <<<"$OUT" 2>/dev/null)
check "plain.test:443 (its credential is for port 80): a plain tunnel, the origin's own certificate, nothing injected" \
	eval '[[ $OUT == *'"'"'"target"'"'"'* && -z $V ]]'
check "... its line says mode=tunnel" logged "method=CONNECT host=plain.test port=443 .* mode=tunnel "

# Nothing leaks: the canaries declared above are looked for after the run,
# in what the daemon left once stopped.
check "the daemon is alive" kill -0 "$PID"
kill -TERM "$PID"
for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
finish
