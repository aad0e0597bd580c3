#!/bin/bash
# The fleet network end to end: the real sluiced makes its fleet namespace,
# lanes and `inet sluice` table; real `ns` sandboxes (sluice-sandbox, host
# template) are attached to lanes through the control socket and reach the
# origin of net.sh only through the lane's doors.
#
# Checks: the namespace (links, addresses, no route out, forwarding off);
# a locked sandbox reaches no door; an unlocked one reaches its lane's doors
# (forward, CONNECT, SOCKS, and the transparent ones for http and https with
# --noproxy '*') and nothing else: not the gateway's other ports, not the
# other lane's door, not another sandbox, not the internet directly, not
# with a forged source address; a denied name is refused at every door;
# the none lane has no network; counters move; lock takes effect; SIGKILL
# and restart leave exactly one ruleset; 200 attach/unlock/lock/detach
# cycles leave nothing behind; a clean exit keeps or tears down the fleet
# as configured.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/net.sh"

SBX=${SL_BUILD:?SL_BUILD must name the build tree}/sandbox/sluice-sandbox
[ -x "$SBX" ] || { echo "no $SBX: build first" >&2; exit 1; }
CTL=$E2E_TMP/control.sock
F() { ip netns exec "$FLEET" "$@"; }

# --- an HTTPS origin for the transparent TLS door ---------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=origin.test -addext subjectAltName=DNS:origin.test,DNS:other.test \
	-keyout "$E2E_TMP/tls.key" -out "$E2E_TMP/tls.crt" 2>/dev/null
cat > "$E2E_TMP/tls.py" <<'PY'
import http.server, socketserver, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b"hello over tls\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        sys.stderr.write("tls origin: %s\n" % (a[0] % a[1:]))
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("10.99.0.10", 443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print("ready", flush=True)
s.serve_forever()
PY
I "$PY" "$E2E_TMP/tls.py" "$E2E_TMP/tls.crt" "$E2E_TMP/tls.key" >"$E2E_TMP/tls.log" 2>&1 &
track $!
wait_for "$E2E_TMP/tls.log" ready || { fail "the TLS origin starts"; finish; }

# --- sluiced -------------------------------------------------------------
# write_conf TEARDOWN
write_conf() {
	cat > "$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  fleet_teardown: $1
  control_socket: $CTL
  log: { level: info, format: text }
api: { listen: off, socket: off }
gateway:
  workers: 2
  listen: { forward: 127.0.0.1:3128, socks: off }
  clients: []
  dns: { servers: [10.99.0.53], timeout_ms: 500, attempts: 1 }
  limits: { connect_timeout_ms: 1000 }
  access_log: stderr
lanes:
  - { name: none, subnet: 10.88.0.0/24 }
  - name: egress
    subnet: 10.88.1.0/24
    doors: { forward: 3128, socks: 1080, intercept: 3129 }
    transparent: true
  - name: other
    subnet: 10.88.2.0/24
    doors: { forward: 3128 }
pools: []
tenants:
  - { name: narrow, keys: [k], egress: ["nothing.test"] }
policies:
  - name: web
    allow: ["origin.test", "*.origin.test", "other.test:80"]
    deny: ["blocked.origin.test"]
    allow_private: [10.99.0.0/24]
YAML
}

LOG=$E2E_TMP/sluiced.log
: >"$LOG"
PID=
# Not `ip netns exec`: it gives the daemon a slave mount namespace, and the
# fleet namespace the daemon binds under /run/netns must be seen by the
# sandboxes started from here.
start_daemon() {
	mark
	nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>>"$LOG" &
	PID=$!
	track "$PID"
	logged "sluiced [0-9.]+ started" && [ -S "$CTL" ] || { cat "$LOG" >&2; return 1; }
}
stop_daemon() { # SIGNAL
	kill "-$1" "$PID"
	wait "$PID" 2>/dev/null || true
}

# ctl JSON: one request on the control socket; the answer in $R.
R=
ctl() {
	R=$("$PY" - "$CTL" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().readline().strip())
PY
)
}
jget() { "$PY" -c 'import json,sys; v=json.loads(sys.argv[1]); 
for k in sys.argv[2].split("."): v = v[int(k)] if isinstance(v, list) else v.get(k)
print(v if not isinstance(v, bool) else str(v).lower())' "$R" "$1"; }

# attach ID LANE: sets ADDR_ID, IF_ID, ENV_ID (as -e options).
attach() {
	ctl "{\"op\":\"attach\",\"id\":\"$1\",\"lane\":\"$2\"}"
	[ "$(jget ok)" = true ] || { echo "attach $1: $R" >&2; return 1; }
	printf -v "ADDR_$1" %s "$(jget address)"
	printf -v "IF_$1" %s "$(jget ifname)"
	printf -v "GW_$1" %s "$(jget gateway)"
	local -n envs="ENV_$1"
	envs=()
	for e in $("$PY" -c 'import json,sys; print(" ".join(json.loads(sys.argv[1])["env"]))' "$R"); do
		envs+=(-e "$e")
	done
}

# sbx ID [--proxy] -- CMD...: runs CMD in a fresh sandbox on ID's address
# (host template); with --proxy the lane's proxy variables are set.
CACHE=$E2E_TMP/templates
sbx() {
	local id=$1 addr ifn g
	shift
	addr=ADDR_$id ifn=IF_$id g=GW_$id
	local -a env=()
	if [ "$1" = --proxy ]; then
		local -n e="ENV_$id"
		env=("${e[@]}")
		shift
	fi
	[ "$1" = -- ] && shift
	"$SBX" --cache "$CACHE" --state "$E2E_TMP/state" --id "sl$id$$" -t host \
		--netns "$FLEET" --peer "${!ifn}" --addr "${!addr}/24" --gw "${!g}" \
		--peer-addr "${!g}" "${env[@]}" --timeout 20 -- "$@"
}
quiet() { "$@" >/dev/null 2>&1; }
fails() { ! "$@" >/dev/null 2>&1; }
CURL=(curl -sS --connect-timeout 2 -m 8)

write_conf false
check "the daemon starts and makes its fleet" start_daemon
check "the fleet namespace exists" test -e "/run/netns/$FLEET"
check "sluice0 holds the egress lanes' gateways" \
	bash -c "ip -n '$FLEET' -4 -o addr show dev sluice0 | grep -q '10.88.1.1/32' &&
		 ip -n '$FLEET' -4 -o addr show dev sluice0 | grep -q '10.88.2.1/32' &&
		 ! ip -n '$FLEET' -4 -o addr show | grep -q '10.88.0.1'"
check "no route leaves the fleet" test -z "$(ip -n "$FLEET" route show default)"
check "forwarding is off in the fleet" test "$(F cat /proc/sys/net/ipv4/ip_forward)" = 0
check "the lane doors listen in the fleet" \
	bash -c "F() { ip netns exec '$FLEET' \"\$@\"; }; F ss -Hltn | grep -q '10.88.1.1:3128' &&
		 F ss -Hltn | grep -q '10.88.1.1:1080' && F ss -Hltn | grep -q '10.88.1.1:3129' &&
		 F ss -Hltn | grep -q '10.88.2.1:3128'"
check "the host door stays in the daemon's namespace" bash -c "ip netns exec '$gw' ss -Hltn | grep -q '127.0.0.1:3128'"
TABLE0=$(F nft list table inet sluice)
check "the table has its five chains" \
	test "$(grep -cE '^\s+chain (pre|nat_pre|input|forward|output) ' <<<"$TABLE0")" = 5
check "the daemon changed nothing in its own namespace's firewall" \
	test -z "$(ip netns exec "$gw" nft list tables | grep -v sl_e2e || true)"

# --- attach, locked -----------------------------------------------------
check "attach a (egress)" attach a egress
check "attach b (egress)" attach b egress
check "attach o (other lane)" attach o other
check "a got the first address, its link name and the proxy variables" \
	test "$ADDR_a $IF_a ${#ENV_a[@]}" = "10.88.1.2 slv0a580102 16"
check "b got the next address" test "$ADDR_b" = 10.88.1.3
check "o is on its own lane" test "$ADDR_o" = 10.88.2.2
ctl '{"op":"attach","id":"n","lane":"none"}'
check "the none lane attaches without a link or variables" \
	test "$(jget linked) $(jget env)" = "false []"
ctl '{"op":"attach","id":"a","lane":"other"}'
check "attach of an attached id on another lane is a conflict" test "$(jget error.code)" = conflict
ctl '{"op":"attach","id":"../x","lane":"egress"}'
check "a bad id is refused" test "$(jget error.code)" = bad_request
ctl '{"op":"unlock","id":"a","policy":"nosuch"}'
check "unlock with an unknown policy is refused" test "$(jget error.code)" = not_found
ctl 'not json'
check "a line that is not JSON gets an error" test "$(jget error.code)" = bad_request

check "locked: the forward door is unreachable" \
	fails sbx a -- "${CURL[@]}" -x http://10.88.1.1:3128 http://origin.test/
check "locked: the SOCKS door is unreachable" \
	fails sbx a -- "${CURL[@]}" --socks5-hostname 10.88.1.1:1080 http://origin.test/
check "locked: transparent http goes nowhere" \
	fails sbx a -- "${CURL[@]}" --resolve origin.test:80:10.99.0.10 http://origin.test/

# --- unlocked -------------------------------------------------------------
ctl '{"op":"unlock","id":"a","policy":"web"}'
check "unlock a with policy web" test "$(jget unlocked) $(jget policy)" = "true web"
ctl '{"op":"unlock","id":"a","policy":"web"}'
check "unlock is idempotent" test "$(jget ok)" = true

out=$(sbx a --proxy -- "${CURL[@]}" http://origin.test/ 2>&1 || true)
check "proxy variables: http through the forward door ($out)" test "$out" = "hello from origin"
out=$(sbx a --proxy -- "${CURL[@]}" -k https://origin.test/ 2>&1 || true)
check "proxy variables: https through CONNECT ($out)" test "$out" = "hello over tls"
out=$(sbx a -- "${CURL[@]}" --socks5-hostname 10.88.1.1:1080 http://origin.test/ 2>&1 || true)
check "the SOCKS door ($out)" test "$out" = "hello from origin"
mark
out=$(sbx a -- "${CURL[@]}" --noproxy '*' --resolve origin.test:80:10.99.0.10 http://origin.test/ 2>&1 || true)
check "transparent http, no proxy ($out)" test "$out" = "hello from origin"
check "transparent http is attributed to the sandbox" logged "door=forward .*client=a .*GET .*origin.test"
out=$(sbx a -- "${CURL[@]}" --noproxy '*' -k --resolve origin.test:443:203.0.113.9 https://origin.test/ 2>&1 || true)
check "transparent https, routed by SNI whatever the address ($out)" test "$out" = "hello over tls"
check "transparent https has an access line" logged "door=tls .*client=a .*origin.test"
out=$(sbx a --proxy -- env)
check "the proxy variables are in the guest's environment" \
	bash -c "grep -qx 'HTTP_PROXY=http://10.88.1.1:3128' <<<\"\$0\" && grep -qx 'all_proxy=socks5h://10.88.1.1:1080' <<<\"\$0\"" "$out"

# A denied name at every door.
out=$(sbx a --proxy -- "${CURL[@]}" -o /dev/null -w '%{http_code}' http://blocked.origin.test/ 2>&1 || true)
check "denied: forward door 403 ($out)" test "$out" = 403
check "denied: CONNECT refused" fails sbx a --proxy -- "${CURL[@]}" -k https://blocked.origin.test/
check "denied: SOCKS refused" \
	fails sbx a -- "${CURL[@]}" --socks5-hostname 10.88.1.1:1080 http://blocked.origin.test/
out=$(sbx a -- "${CURL[@]}" --noproxy '*' -o /dev/null -w '%{http_code}' \
	--resolve blocked.origin.test:80:10.99.0.10 http://blocked.origin.test/ 2>&1 || true)
check "denied: transparent http 403 ($out)" test "$out" = 403
mark
check "denied: transparent https refused" \
	fails sbx a -- "${CURL[@]}" --noproxy '*' -k --resolve blocked.origin.test:443:10.99.0.10 https://blocked.origin.test/
check "denied: transparent https has a deny line" logged "door=tls .*blocked.origin.test.*deny"
check "not allowed on 443: other.test refused at the TLS door" \
	fails sbx a -- "${CURL[@]}" --noproxy '*' -k --resolve other.test:443:10.99.0.10 https://other.test/
mark
check "a ClientHello without SNI is refused" \
	fails sbx a -- "$PY" -c 'import socket,ssl; c=ssl.create_default_context(); c.check_hostname=False; c.verify_mode=ssl.CERT_NONE; s=socket.create_connection(("10.99.0.10",443),timeout=5); c.wrap_socket(s).sendall(b"x")'
check "... with a log line that says so" logged "tls.*(no-sni|no SNI|tls-no-sni)"

# Nothing else is reachable.
# A server of the test's own on another port of the gateway address.
F "$PY" -m http.server --bind 10.88.1.1 8080 >/dev/null 2>&1 &
track $!
for _ in $(seq 50); do [ -n "$(F ss -Hltn 'sport = :8080')" ] && break; sleep 0.1; done
check "(the fleet itself reaches 10.88.1.1:8080)" quiet F "${CURL[@]}" http://10.88.1.1:8080/
check "not the gateway's other ports" fails sbx a -- "${CURL[@]}" --noproxy '*' http://10.88.1.1:8080/
check "not the other lane's door" fails sbx a -- "${CURL[@]}" -x http://10.88.2.1:3128 http://origin.test/
check "(the daemon's namespace reaches 10.99.0.20:7004)" quiet G "${CURL[@]}" http://10.99.0.20:7004/
check "not the internet directly (a port with no redirect)" \
	fails sbx a -- "${CURL[@]}" --noproxy '*' http://10.99.0.20:7004/

# Another sandbox: b runs a server; a cannot reach it, and b's own
# network, entered with host tools (a guest with CAP_NET_ADMIN), cannot
# forge a's address.
sbx b -- python3 -c 'import http.server as h; h.HTTPServer(("0.0.0.0", 8000), h.SimpleHTTPRequestHandler).serve_forever()' \
	>/dev/null 2>&1 &
BJOB=$!
track $BJOB
# The server's pid, found by the sandbox's own cgroup (never by a pattern
# that could name a process of the host), and B runs host tools in its
# network namespace only if that is not the test's own.
sbx_pids() {
	local d
	d=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "sl$1$$" 2>/dev/null | head -n1)
	[ -n "$d" ] && cat "$d/cgroup.procs" 2>/dev/null
}
sbx_pid() { sbx_pids "$@" | head -n1; }
BPID=
for _ in $(seq 100); do
	BPID=$(sbx_pid b || true)
	[ -n "$BPID" ] && [ -n "$(nsenter --net="/proc/$BPID/ns/net" ss -Hltn 'sport = :8000' 2>/dev/null)" ] && break
	sleep 0.1
done
B() {
	[ -n "$BPID" ] && [ "$(readlink "/proc/$BPID/ns/net")" != "$(readlink /proc/$$/ns/net)" ] ||
		{ echo "refusing to enter $BPID: not a sandbox's namespace" >&2; return 1; }
	nsenter --net="/proc/$BPID/ns/net" "$@"
}
check "b's server runs" test -n "$BPID"
check "not another sandbox" fails sbx a -- "${CURL[@]}" --noproxy '*' http://10.88.1.3:8000/
B ip addr add 10.88.1.2/32 dev eth0 || true
check "forged source (a's address, a unlocked) reaches no door" \
	fails B "${CURL[@]}" --interface 10.88.1.2 -x http://10.88.1.1:3128 http://origin.test/
check "b, locked, reaches no door from its own address" \
	fails B "${CURL[@]}" --interface 10.88.1.3 -x http://10.88.1.1:3128 http://origin.test/
ctl '{"op":"unlock","id":"b","policy":"web"}'
out=$(B "${CURL[@]}" --interface 10.88.1.3 -x http://10.88.1.1:3128 http://origin.test/ 2>&1 || true)
check "b, unlocked, reaches the door from its own address ($out)" test "$out" = "hello from origin"
check "... but still not with a's address" \
	fails B "${CURL[@]}" --interface 10.88.1.2 -x http://10.88.1.1:3128 http://origin.test/
ctl '{"op":"unlock","id":"b","policy":"web","tenant":"narrow"}'
out=$(B "${CURL[@]}" --interface 10.88.1.3 -o /dev/null -w '%{http_code}' -x http://10.88.1.1:3128 http://origin.test/ 2>&1 || true)
check "a tenant's egress list narrows the layer ($out)" test "$out" = 403
# End b's server (its sandbox then ends and takes its link with it).
for p in $(sbx_pids b); do
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = python3 ] && kill "$p"
done
wait "$BJOB" 2>/dev/null || true
check "b's sandbox ended and its link went with it" test -z "$(ip -n "$FLEET" -o link | grep slv || true)"

# The none lane: loopback only.
out=$("$SBX" --cache "$CACHE" --state "$E2E_TMP/state" --id "sln$$" -t host -- ip -o link 2>&1 || true)
check "the none lane has loopback only" test "$(grep -c . <<<"$out") $(grep -c ' lo:' <<<"$out")" = "1 1"
check "the none lane reaches nothing" \
	fails "$SBX" --cache "$CACHE" --state "$E2E_TMP/state" --id "sln$$" -t host -- "${CURL[@]}" http://10.88.0.1:3128/

# Counters.
ctl '{"op":"get","id":"a"}'
check "a's counters moved ($(jget tx_packets) tx, $(jget rx_bytes) rx bytes)" \
	test "$(jget tx_packets)" -gt 10 -a "$(jget rx_bytes)" -gt 1000

# Lock takes effect, on connections already open too: a tunnel that
# carried one request carries nothing once the sandbox is locked.
cat > "$E2E_TMP/tunnel.py" <<'PY'
import socket, sys, time
s = socket.create_connection(("10.88.1.1", 3128), timeout=3)
s.sendall(b"CONNECT origin.test:80 HTTP/1.1\r\nHost: origin.test:80\r\n\r\n")
assert s.recv(4096).startswith(b"HTTP/1.1 200")
req = b"GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n"
def answer():
    got = b""
    while b"hello from origin" not in got:
        b = s.recv(4096)
        if not b:
            return "eof"
        got += b
    return "ok"
s.sendall(req)
print("first=" + answer(), flush=True)
time.sleep(2)                   # the test locks the sandbox meanwhile
try:
    s.sendall(req)
    print("second=" + answer())
except OSError as e:
    print("second=" + type(e).__name__)
PY
sbx a -- python3 -c "$(cat "$E2E_TMP/tunnel.py")" >"$E2E_TMP/tunnel.out" 2>&1 &
TJOB=$!
wait_for "$E2E_TMP/tunnel.out" first= 10 || true
ctl '{"op":"lock","id":"a"}'
check "lock a" test "$(jget unlocked)" = false
wait "$TJOB" || true
check "a tunnel open before the lock carries nothing after it ($(tr '\n' ' ' <"$E2E_TMP/tunnel.out"))" \
	bash -c "grep -qx first=ok '$E2E_TMP/tunnel.out' && grep -Eqx 'second=(timeout|TimeoutError)' '$E2E_TMP/tunnel.out'"
check "locked again: the forward door is unreachable" \
	fails sbx a --proxy -- "${CURL[@]}" http://origin.test/
ctl '{"op":"lock","id":"a"}'
check "lock is idempotent" test "$(jget ok)" = true

# --- SIGKILL and restart: exactly one ruleset -----------------------------
# a's sandbox keeps running across the restart: the new daemon must not
# give its address (and so its link name and identity) to anyone else.
sbx a -- sleep 30 >/dev/null 2>&1 &
SJOB=$!
track $SJOB
for _ in $(seq 50); do ip -n "$FLEET" link show "$IF_a" >/dev/null 2>&1 && break; sleep 0.1; done
stop_daemon KILL
check "after SIGKILL the table is still there" quiet F nft list table inet sluice
check "the daemon restarts" start_daemon
check "the fleet is adopted" logged "fleet namespace $FLEET adopted"
check "exactly one table" test "$(F nft list tables | grep -c .)" = 1
check "the ruleset is rebuilt from the daemon's state (none yet)" \
	test "$(F nft list table inet sluice)" = "$TABLE0"
ctl '{"op":"attach","id":"n2","lane":"egress"}'
check "a new sandbox is not given the address of one still running ($(jget address))" \
	test "$(jget address)" = 10.88.1.3
check "... and the log says why" logged "10.88.1.2 still has a link \(slv0a580102\)"
ctl '{"op":"detach","id":"n2"}'
for p in $(sbx_pids a); do
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ] && kill "$p"
done
wait "$SJOB" 2>/dev/null || true
check "no sandbox link is left" test -z "$(ip -n "$FLEET" -o link | grep slv || true)"

# --- 200 cycles -------------------------------------------------------------
"$PY" - "$CTL" <<'PY' >"$E2E_TMP/cycles.out" 2>&1
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile()
def call(**kw):
    s.sendall(json.dumps(kw).encode() + b"\n")
    r = json.loads(f.readline())
    if not r["ok"]:
        raise SystemExit("%s: %s" % (kw, r))
    return r
for i in range(200):
    call(op="attach", id="c%d" % i, lane="egress")
    call(op="unlock", id="c%d" % i, policy="web")
    call(op="lock", id="c%d" % i)
    call(op="detach", id="c%d" % i)
print("200 cycles")
PY
check "200 attach/unlock/lock/detach cycles ($(cat "$E2E_TMP/cycles.out"))" grep -q '^200 cycles' "$E2E_TMP/cycles.out"
check "... leave the ruleset as it was" test "$(F nft list table inet sluice)" = "$TABLE0"
check "... and no counter object" test -z "$(F nft list counters table inet sluice | grep -E 'counter (tx|rx)-' || true)"
check "... and the addresses as they were" \
	test "$(ip -n "$FLEET" -4 -o addr | grep -c .)" = 3

# --- clean exits ------------------------------------------------------------
stop_daemon TERM
check "a clean exit keeps the fleet by default" quiet F nft list table inet sluice
write_conf true
check "the daemon starts with fleet_teardown" start_daemon
stop_daemon TERM
check "with fleet_teardown a clean exit removes the namespace" test ! -e "/run/netns/$FLEET"
check "the control socket is removed" test ! -e "$CTL"

finish
