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
# other lane's door, not the internet directly (each refused at once, with
# a reset), not another sandbox, not with a forged source address (those
# dropped); a denied name is refused at every door; the none lane has no
# network; counters move; lock takes effect; the fleet refuses a guest's
# TCP and UDP that no door serves at once, counts it per sandbox and logs
# it rate-limited, refuses ICMP and drops IPv6; the lane doors refuse a locked
# sandbox (403 sandbox-locked) and a source that is no sandbox of the lane
# (403 not-a-sandbox) themselves; SIGKILL and restart leave exactly one
# ruleset; 200 attach/unlock/lock/detach cycles leave nothing behind; a
# clean exit keeps or tears down the fleet as configured.
#
# A negative check is only evidence with its setup proven: each one says
# how it fails (curl's exit code and message: 7 with "Connection refused"
# in its -v lines is the fleet's reset; 28, a connection attempt that timed
# out, is a packet dropped; 45, a source address that could not be bound,
# proves nothing) and, where a rule is what stops it, that the packets
# reached the fleet (a counter) before it shows they went no further.
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/net.sh"

SBX=${SL_BUILD:?SL_BUILD must name the build tree}/sandbox/sluice-sandbox
[ -x "$SBX" ] || { echo "no $SBX: build first" >&2; exit 1; }
CTL=$E2E_TMP/control.sock
F() { ip netns exec "$FLEET" "$@"; }

# --- an HTTPS origin for the transparent SNI door ---------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=origin.test -addext subjectAltName=DNS:origin.test,DNS:other.test,DNS:icpt.origin.test \
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
# Not through I: $! must be the server itself (lib.sh's trap ends it), not
# a subshell whose end would leave it running.
ip netns exec "$inet" "$PY" "$E2E_TMP/tls.py" "$E2E_TMP/tls.crt" "$E2E_TMP/tls.key" >"$E2E_TMP/tls.log" 2>&1 &
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
certs: { upstream_ca: $E2E_TMP/tls.crt }
pools: []
tenants:
  - { name: narrow, keys: [k], egress: ["nothing.test"] }
policies:
  - name: web
    allow: ["origin.test", "*.origin.test", "other.test:80"]
    deny: ["blocked.origin.test"]
    intercept: ["icpt.origin.test"]
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
# (host template); with --proxy the lane's proxy variables are set. With
# SBX_EXEC=1 in its environment sluice-sandbox replaces the shell: started
# with `&`, $! is then sluice-sandbox itself, whose SIGTERM (lib.sh's trap)
# stops its sandbox, not a subshell whose end would leave it running.
CACHE=$E2E_TMP/templates
# The ids of the sandboxes this test starts (sl<id><pid>): on any exit
# those still running are ended through their cgroups (never by name), as
# sluice-sandbox ended with SIGKILL leaves its sandbox behind.
SBX_IDS=(a b n u)
e2e_cleanup_extra() {
	local id p
	for id in "${SBX_IDS[@]}"; do
		find /sys/fs/cgroup -maxdepth 8 -type d -name "sl$id$$" -exec cat {}/cgroup.procs \; 2>/dev/null |
			while read -r p; do kill -9 "$p" 2>/dev/null || true; done
	done
	for id in "${SBX_IDS[@]}"; do
		for _ in $(seq 50); do
			[ -z "$(find /sys/fs/cgroup -maxdepth 8 -type d -name "sl$id$$" \
				-exec cat {}/cgroup.procs \; 2>/dev/null | head -1)" ] && break
			sleep 0.1
		done
		find /sys/fs/cgroup -maxdepth 8 -depth -type d -name "sl$id$$" -exec rmdir {} \; 2>/dev/null || true
	done
}
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
	${SBX_EXEC:+exec} "$SBX" --cache "$CACHE" --state "$E2E_TMP/state" --id "sl$id$$" -t host \
		--netns "$FLEET" --peer "${!ifn}" --addr "${!addr}/24" --gw "${!g}" \
		--peer-addr "${!g}" "${env[@]}" --timeout 20 -- "$@"
}
quiet() { "$@" >/dev/null 2>&1; }
# fails_as CODES PATTERN COMMAND...: COMMAND fails with one of the exit
# CODES (space-separated) and says PATTERN (extended regex, on its stdout
# and stderr): the failure expected, never just any non-zero exit.
fails_as() {
	local codes=$1 pat=$2 out rc=0 c
	shift 2
	out=$("$@" 2>&1) || rc=$?
	for c in $codes; do
		[ "$rc" = "$c" ] && grep -Eq -- "$pat" <<<"$out" && return 0
	done
	echo "    exit $rc (wanted $codes saying /$pat/): $(tail -c 400 <<<"$out" | tr '\n' ' ')" >&2
	return 1
}
CURL=(curl -sS --connect-timeout 2 -m 8)
# What curl says when its connection attempt timed out: the SYN (or the
# SYN-ACK) was dropped. Not "Operation timed out" (connected, no answer)
# nor 45 (the source address could not be bound) nor 7 (refused or no
# route).
DROPPED='^curl: \(28\) (Failed to connect to .* Timeout was reached|Connection timed out after)'
# What curl -v says when the fleet refused the connection: a reset came
# back (curl's own message, "Couldn't connect to server", is the same for
# a reset and for no route).
RCURL=("${CURL[@]}" -v)
REFUSED='^\* connect to [0-9.]+ port [0-9]+ failed: Connection refused'
# until_ok SECONDS COMMAND...: polls COMMAND until it succeeds. The bound
# is a safety net against a hang, not an assertion about time.
until_ok() {
	local i n=$(($1 * 20))
	shift
	for ((i = 0; i < n; i++)); do
		"$@" 2>/dev/null && return 0
		sleep 0.05
	done
	"$@"
}
# pkts ID tx|rx: the sandbox's packet counter (the control socket's get).
pkts() {
	ctl "{\"op\":\"get\",\"id\":\"$1\"}"
	jget "$2_packets"
}
pkts_at_least() { [ "$(pkts "$1" "$2")" -ge "$3" ]; }
# num VALUE: VALUE is a count (digits only: not None, not empty, which a
# failed read gives, and which would compare equal to another failed read).
num() { [[ $1 =~ ^[0-9]+$ ]]; }
# same_count BEFORE NOW: both counts, and equal.
same_count() {
	num "$1" && num "$2" && [ "$1" = "$2" ] && return 0
	echo "    counts '$1' and '$2': not both numbers, or not equal" >&2
	return 1
}
# innet PID COMMAND...: COMMAND, a host tool, in the network namespace of
# PID, a sandbox's process (a guest as privileged there as a VM's root);
# refused if that namespace is the test's own.
innet() {
	local pid=$1
	shift
	[ -n "$pid" ] && [ -e "/proc/$pid/ns/net" ] &&
		[ "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/$$/ns/net)" ] ||
		{ echo "refusing to enter ${pid:-?}: not a sandbox's namespace" >&2; return 1; }
	nsenter --net="/proc/$pid/ns/net" "$@"
}

write_conf false
check "the daemon starts and makes its fleet" start_daemon
check "the fleet namespace exists" test -e "/run/netns/$FLEET"
check "sluice0 holds the egress lanes' gateways" \
	bash -c "ip -n '$FLEET' -4 -o addr show dev sluice0 | grep -q '10.88.1.1/32' &&
		 ip -n '$FLEET' -4 -o addr show dev sluice0 | grep -q '10.88.2.1/32' &&
		 ! ip -n '$FLEET' -4 -o addr show | grep -q '10.88.0.1'"
# (Each listing is read first: a listing that failed would be empty too.)
no_default_route() { local r; r=$(ip -n "$FLEET" route show default) && [ -z "$r" ]; }
check "no route leaves the fleet" no_default_route
check "forwarding is off in the fleet" test "$(F cat /proc/sys/net/ipv4/ip_forward)" = 0
check "the lane doors listen in the fleet" \
	bash -c "F() { ip netns exec '$FLEET' \"\$@\"; }; F ss -Hltn | grep -q '10.88.1.1:3128' &&
		 F ss -Hltn | grep -q '10.88.1.1:1080' && F ss -Hltn | grep -q '10.88.1.1:3129' &&
		 F ss -Hltn | grep -q '10.88.2.1:3128'"
check "the host door stays in the daemon's namespace" bash -c "ip netns exec '$gw' ss -Hltn | grep -q '127.0.0.1:3128'"
TABLE0=$(F nft list table inet sluice)
check "the table has its six chains" \
	test "$(grep -cE '^\s+chain (pre|nat_pre|refuse|input|forward|output) ' <<<"$TABLE0")" = 6
gw_tables_untouched() {
	local t
	t=$(ip netns exec "$gw" nft list tables) && ! grep -v sl_e2e <<<"$t" | grep -q .
}
check "the daemon changed nothing in its own namespace's firewall" gw_tables_untouched

# --- attach, locked -----------------------------------------------------
check "attach a (egress)" attach a egress
check "attach b (egress)" attach b egress
check "attach o (other lane)" attach o other
check "a got the first address, its link name and the proxy variables" \
	test "$ADDR_a $IF_a ${#ENV_a[@]}" = "10.88.1.2 slv0a580102 16"
check "b got the next address" test "$ADDR_b" = 10.88.1.3
check "o is on its own lane" test "$ADDR_o" = 10.88.2.2
# The counters' listing, read first, names a's counters (the check that
# 200 cycles leave none below looks for them the same way).
sluice_counters() { local t; t=$(F nft list counters table inet sluice) && grep -E 'counter (tx|rx|refused)-' <<<"$t"; }
a_counters_listed() {
	local t re=${ADDR_a//./\\.}
	t=$(sluice_counters) && grep -Eq "counter tx-$re " <<<"$t" && grep -Eq "counter rx-$re " <<<"$t" &&
		grep -Eq "counter refused-$re " <<<"$t"
}
check "(a's counters are listed as counter objects)" a_counters_listed

# A refused or timed-out connection attempt is the table's doing only if
# the packets got to the fleet: a dead link times out too. An observer
# table of the test's own counts the SYNs (not SYN-ACKs) that come in from
# a's link with a's address before the table's pre chain (prerouting,
# -350; the table's is -300), and those that got past the table's input
# chain (input, 10; the table's is 0); the same from b's link with a's
# address (forged) before the pre chain and after it (-250), and from b's
# link with b's own address after it. A stopped attempt: "in" grew, "past"
# not.
# And, in an arp table, a's ARP requests for b's address (a's own subnet:
# a asks for b on its link) and the fleet's replies that would answer them.
F nft -f - <<NFT
table inet sl_e2e_door {
	counter a_in {}
	counter a_past {}
	counter forged_in {}
	counter forged_past {}
	counter b_past {}
	chain before {
		type filter hook prerouting priority -350; policy accept;
		iifname "$IF_a" ip saddr $ADDR_a tcp flags & (syn | ack) == syn counter name "a_in"
		iifname "$IF_b" ip saddr $ADDR_a tcp flags & (syn | ack) == syn counter name "forged_in"
	}
	chain after_pre {
		type filter hook prerouting priority -250; policy accept;
		iifname "$IF_b" ip saddr $ADDR_a tcp flags & (syn | ack) == syn counter name "forged_past"
		iifname "$IF_b" ip saddr $ADDR_b tcp flags & (syn | ack) == syn counter name "b_past"
	}
	chain after_input {
		type filter hook input priority 10; policy accept;
		iifname "$IF_a" ip saddr $ADDR_a tcp flags & (syn | ack) == syn counter name "a_past"
	}
}
table arp sl_e2e_arp {
	counter arp_who_has_b {}
	counter arp_b_is_at {}
	chain in {
		type filter hook input priority 0; policy accept;
		iifname "$IF_a" arp operation request arp daddr ip $ADDR_b counter name "arp_who_has_b"
	}
	chain out {
		type filter hook output priority 0; policy accept;
		oifname "$IF_a" arp operation reply arp saddr ip $ADDR_b counter name "arp_b_is_at"
	}
}
NFT
# dobs NAME: the observer counter's packets.
dobs() {
	local t f=inet tb=sl_e2e_door
	case $1 in arp_*) f=arp tb=sl_e2e_arp ;; esac
	t=$(F nft list counter "$f" "$tb" "$1") && grep -oE 'packets [0-9]+' <<<"$t" | cut -d' ' -f2
}
# dmark IN PAST: the two counts before an attempt. dropped IN PAST: since
# the mark, IN grew (the SYNs reached the fleet) and PAST did not (the
# table stopped them: refused, or dropped). moved IN PAST: both grew (the observer sees what
# gets through: its "past" counter is no counter that never counts).
dmark() { DIN0=$(dobs "$1" || true) DPAST0=$(dobs "$2" || true); }
dcounts() {
	DIN=$(dobs "$1" || true) DPAST=$(dobs "$2" || true)
	num "$DIN0" && num "$DPAST0" && num "$DIN" && num "$DPAST" && return 0
	echo "    observer counts not numbers: $1 '$DIN0' -> '$DIN', $2 '$DPAST0' -> '$DPAST'" >&2
	return 1
}
dropped() {
	dcounts "$@" || return 1
	[ "$DIN" -gt "$DIN0" ] && [ "$DPAST" = "$DPAST0" ] && return 0
	echo "    $1 $DIN0 -> $DIN (must grow), $2 $DPAST0 -> $DPAST (must not)" >&2
	return 1
}
moved() {
	dcounts "$@" || return 1
	[ "$DIN" -gt "$DIN0" ] && [ "$DPAST" -gt "$DPAST0" ] && return 0
	echo "    $1 $DIN0 -> $DIN, $2 $DPAST0 -> $DPAST (both must grow)" >&2
	return 1
}
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

# (Unlocked, the same commands get through: below.)
dmark a_in a_past
check "locked: the forward door refuses at once (a reset)" \
	fails_as 7 "$REFUSED" sbx a -- "${RCURL[@]}" -x http://10.88.1.1:3128 http://origin.test/
check "... its SYNs reached the fleet and got no further than the table's refuse chain" dropped a_in a_past
dmark a_in a_past
check "locked: the SOCKS door refuses at once (a reset)" \
	fails_as 7 "$REFUSED" sbx a -- "${RCURL[@]}" --socks5-hostname 10.88.1.1:1080 http://origin.test/
check "... its SYNs reached the fleet and got no further than the table's refuse chain" dropped a_in a_past
dmark a_in a_past
# (The reset comes from the address the guest dialled, not the door it was
# redirected to: the guest's stack would ignore it otherwise.)
check "locked: transparent http is refused at once, by the address dialled" \
	fails_as 7 '^\* connect to 10\.99\.0\.10 port 80 failed: Connection refused' \
	sbx a -- "${RCURL[@]}" --resolve origin.test:80:10.99.0.10 http://origin.test/
check "... its SYNs reached the fleet and got no further than the table's refuse chain" dropped a_in a_past

# --- unlocked -------------------------------------------------------------
ctl '{"op":"unlock","id":"a","policy":"web"}'
check "unlock a with policy web" test "$(jget unlocked) $(jget policy)" = "true web"
ctl '{"op":"unlock","id":"a","policy":"web"}'
check "unlock is idempotent" test "$(jget ok)" = true

dmark a_in a_past
out=$(sbx a --proxy -- "${CURL[@]}" http://origin.test/ 2>&1 || true)
check "proxy variables: http through the forward door ($out)" test "$out" = "hello from origin"
check "(the observer counted its SYNs in, and past the table's input chain)" moved a_in a_past
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
check "transparent https has an access line" logged "door=sni .*client=a .*origin.test"
check "... a tunnel, with the SNI the guest sent, no TLS of ours" \
	logged "door=sni .*client=a .*host=origin.test .* mode=tunnel sni=origin.test alpn_down=- alpn_up=- layer=[0-9a-f]{16} inject=-$"
# Interception, the three ways in (issue 18): the guest trusts sluice's CA
# only, so a page proves the leaf was sluice's; the inner GET's own line
# proves sluice read the request.
# (The host template shows the guest none of $E2E_TMP: the CA goes in by
# argument, to the guest's own /tmp.)
# with_ca FILE: a command prefix that runs curl in the guest trusting FILE only.
with_ca() { CA_CURL=(sh -c 'printf "%s\n" "$0" >/tmp/ca.pem && exec "$@" --cacert /tmp/ca.pem' \
	"$(cat "$1")" "${CURL[@]}"); }
with_ca "$E2E_TMP/data/ca.pem"
ICURL=("${CA_CURL[@]}")
with_ca "$E2E_TMP/tls.crt"
OCURL=("${CA_CURL[@]}")
mark
out=$(sbx a -- "${ICURL[@]}" --noproxy '*' --resolve icpt.origin.test:443:203.0.113.9 https://icpt.origin.test/ 2>&1 || true)
check "intercepted at the SNI door: a guest trusting only sluice's CA gets the page ($out)" \
	test "$out" = "hello over tls"
check "... and the inner request has its line (door=sni, GET, 200)" \
	logged "door=sni .*client=a .*method=GET host=icpt\.origin\.test .*status=200 "
check "... a guest trusting only the origin's certificate refuses sluice's leaf (60)" \
	fails_as 60 'SSL certificate problem' \
	sbx a -- "${OCURL[@]}" --noproxy '*' \
	--resolve icpt.origin.test:443:203.0.113.9 https://icpt.origin.test/
mark
out=$(sbx a -- "${ICURL[@]}" --socks5-hostname 10.88.1.1:1080 https://icpt.origin.test/ 2>&1 || true)
check "intercepted through SOCKS5 ($out)" test "$out" = "hello over tls"
check "... the inner request's line (door=socks, GET, 200)" \
	logged "door=socks .*client=a .*method=GET host=icpt\.origin\.test .*status=200 "
mark
out=$(sbx a --proxy -- "${ICURL[@]}" https://icpt.origin.test/ 2>&1 || true)
check "intercepted through CONNECT on the lane's forward door ($out)" test "$out" = "hello over tls"
check "... the inner request's line (door=forward, GET, 200)" \
	logged "door=forward .*client=a .*method=GET host=icpt\.origin\.test .*status=200 "
out=$(sbx a --proxy -- env)
check "the proxy variables are in the guest's environment" \
	bash -c "grep -qx 'HTTP_PROXY=http://10.88.1.1:3128' <<<\"\$0\" && grep -qx 'all_proxy=socks5h://10.88.1.1:1080' <<<\"\$0\"" "$out"

# A denied name at every door.
out=$(sbx a --proxy -- "${CURL[@]}" -o /dev/null -w '%{http_code}' http://blocked.origin.test/ 2>&1 || true)
check "denied: forward door 403 ($out)" test "$out" = 403
check "denied: CONNECT refused with 403" \
	fails_as 56 'CONNECT tunnel failed, response 403' sbx a --proxy -- "${CURL[@]}" -k https://blocked.origin.test/
check "denied: SOCKS refused (REP 2, not allowed by ruleset)" \
	fails_as 97 "Can't complete SOCKS5 connection to blocked\.origin\.test\. \(2\)" \
	sbx a -- "${CURL[@]}" --socks5-hostname 10.88.1.1:1080 http://blocked.origin.test/
out=$(sbx a -- "${CURL[@]}" --noproxy '*' -o /dev/null -w '%{http_code}' \
	--resolve blocked.origin.test:80:10.99.0.10 http://blocked.origin.test/ 2>&1 || true)
check "denied: transparent http 403 ($out)" test "$out" = 403
mark
# The SNI door refuses by closing, mid-handshake (35, not 28: it was reached).
check "denied: transparent https refused (closed in the handshake)" \
	fails_as 35 'SSL_connect: SSL_ERROR_SYSCALL' \
	sbx a -- "${CURL[@]}" --noproxy '*' -k --resolve blocked.origin.test:443:10.99.0.10 https://blocked.origin.test/
check "denied: transparent https has a deny line" logged "door=sni .*blocked.origin.test.*deny"
check "... naming the SNI, no mode (no tunnel began)" \
	logged "door=sni .*decision=deny .* mode=- sni=blocked.origin.test "
check "not allowed on 443: other.test refused at the SNI door (closed in the handshake)" \
	fails_as 35 'SSL_connect: SSL_ERROR_SYSCALL' \
	sbx a -- "${CURL[@]}" --noproxy '*' -k --resolve other.test:443:10.99.0.10 https://other.test/
check "... with a deny line" logged "door=sni .*other\.test.*deny"
mark
check "a ClientHello without SNI is refused (connected, then closed in the handshake)" \
	fails_as 3 '^connected, then closed$' sbx a -- "$PY" -c '
import socket, ssl, sys
c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
s = socket.create_connection(("10.99.0.10", 443), timeout=5)
try:
    c.wrap_socket(s).sendall(b"x")
except (ssl.SSLZeroReturnError, ssl.SSLEOFError, ConnectionResetError):
    print("connected, then closed"); sys.exit(3)
print("handshake completed")'
check "... with a log line that says so" logged "tls.*(no-sni|no SNI|tls-no-sni)"

# Nothing else is reachable.
# A server of the test's own on another port of the gateway address (not
# through F: $! must be the server, not a subshell that outlives nothing).
ip netns exec "$FLEET" "$PY" -m http.server --bind 10.88.1.1 8080 >/dev/null 2>&1 &
track $!
check "(the fleet itself reaches 10.88.1.1:8080)" until_ok 10 quiet F "${CURL[@]}" http://10.88.1.1:8080/
dmark a_in a_past
check "not the gateway's other ports (refused at once)" \
	fails_as 7 "$REFUSED" sbx a -- "${RCURL[@]}" --noproxy '*' http://10.88.1.1:8080/
check "... its SYNs reached the fleet and got no further than the table's refuse chain" dropped a_in a_past
dmark a_in a_past
check "not the other lane's door (refused at once)" \
	fails_as 7 "$REFUSED" sbx a -- "${RCURL[@]}" -x http://10.88.2.1:3128 http://origin.test/
check "... its SYNs reached the fleet and got no further than the table's refuse chain" dropped a_in a_past
check "(the daemon's namespace reaches 10.99.0.20:7004)" quiet G "${CURL[@]}" http://10.99.0.20:7004/
dmark a_in a_past
check "not the internet directly, a port with no redirect (refused at once)" \
	fails_as 7 "$REFUSED" sbx a -- "${RCURL[@]}" --noproxy '*' http://10.99.0.20:7004/
check "... its SYNs reached the fleet and went no further" dropped a_in a_past

# Another sandbox: b runs a server; a cannot reach it, and b's own
# network, entered with host tools (a guest with CAP_NET_ADMIN), cannot
# forge a's address.
SBX_EXEC=1 sbx b -- python3 -c 'import http.server as h; h.HTTPServer(("0.0.0.0", 8000), h.SimpleHTTPRequestHandler).serve_forever()' \
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
B() { innet "$BPID" "$@"; }
b_serves() {
	BPID=$(sbx_pid b) && [ -n "$BPID" ] && [ -n "$(B ss -Hltn 'sport = :8000')" ]
}
check "b's server runs (it listens on 8000 in b's network)" until_ok 30 b_serves
check "(b's server answers in b's own network)" quiet B "${CURL[@]}" http://10.88.1.3:8000/
# b is in a's own subnet: a asks for it on its link, and the fleet (no
# proxy ARP) does not answer, so no SYN of a's ever leaves it.
dmark arp_who_has_b arp_b_is_at
A0=$(dobs a_in || true)
check "not another sandbox (connect timeout)" \
	fails_as 28 "$DROPPED" sbx a -- "${CURL[@]}" --noproxy '*' http://10.88.1.3:8000/
A1=$(dobs a_in || true)
check "... a's ARP requests for b's address reached the fleet, unanswered" dropped arp_who_has_b arp_b_is_at
check "... so no SYN of a's got to the fleet (a_in $A0 -> $A1)" same_count "$A0" "$A1"
# The forged address must really be on b's eth0: a curl that cannot bind
# it fails too (exit 45), and proves nothing. And a's counters, which
# count a packet only once the anti-spoofing rule let it through as a's,
# must not move while b sends as a (a runs nothing meanwhile).
check "(b's eth0 takes a's address)" B ip addr add 10.88.1.2/32 dev eth0
check "(... and holds it)" bash -c "nsenter --net=/proc/$BPID/ns/net ip -4 -o addr show dev eth0 | grep -q 'inet 10\.88\.1\.2/32 '"
TXA=$(pkts a tx || true)
dmark forged_in forged_past
check "forged source (a's address, a unlocked) reaches no door (connect timeout)" \
	fails_as 28 "$DROPPED" B "${CURL[@]}" --interface 10.88.1.2 -x http://10.88.1.1:3128 http://origin.test/
check "... its SYNs reached the fleet on b's link and got no further than the table's pre chain" \
	dropped forged_in forged_past
TXA1=$(pkts a tx || true)
check "... dropped before it counted as a's (a's tx packets $TXA, now $TXA1)" same_count "$TXA" "$TXA1"
TXB=$(pkts b tx || true)
BP0=$(dobs b_past || true)
check "b, locked, reaches no door from its own address (refused at once)" \
	fails_as 7 "$REFUSED" B "${RCURL[@]}" --interface 10.88.1.3 -x http://10.88.1.1:3128 http://origin.test/
TXB1=$(pkts b tx || true) BP1=$(dobs b_past || true)
check "... though its packets reached the fleet as b's (b's tx packets $TXB, now $TXB1)" \
	eval 'num "$TXB" && num "$TXB1" && [ "$TXB1" -gt "$TXB" ]'
check "... and past the table's pre chain, where the observer's after-pre counter sees them ($BP0 -> $BP1)" \
	eval 'num "$BP0" && num "$BP1" && [ "$BP1" -gt "$BP0" ]'
ctl '{"op":"unlock","id":"b","policy":"web"}'
out=$(B "${CURL[@]}" --interface 10.88.1.3 -x http://10.88.1.1:3128 http://origin.test/ 2>&1 || true)
check "b, unlocked, reaches the door from its own address ($out)" test "$out" = "hello from origin"
TXA=$(pkts a tx || true)
dmark forged_in forged_past
check "... but still not with a's address (connect timeout)" \
	fails_as 28 "$DROPPED" B "${CURL[@]}" --interface 10.88.1.2 -x http://10.88.1.1:3128 http://origin.test/
check "... its SYNs reached the fleet on b's link and got no further than the table's pre chain" \
	dropped forged_in forged_past
TXA1=$(pkts a tx || true)
check "... dropped before it counted as a's (a's tx packets $TXA, now $TXA1)" same_count "$TXA" "$TXA1"
ctl '{"op":"unlock","id":"b","policy":"web","tenant":"narrow"}'
out=$(B "${CURL[@]}" --interface 10.88.1.3 -o /dev/null -w '%{http_code}' -x http://10.88.1.1:3128 http://origin.test/ 2>&1 || true)
check "a tenant's egress list narrows the layer ($out)" test "$out" = 403
check "(b's link is in the fleet while its sandbox runs)" quiet ip -n "$FLEET" link show "$IF_b"
# End b's server (its sandbox then ends and takes its link with it).
for p in $(sbx_pids b); do
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = python3 ] && kill "$p"
done
wait "$BJOB" 2>/dev/null || true
# no_slv: the fleet's links, read first, hold no sandbox link.
no_slv() { local l; l=$(ip -n "$FLEET" -o link) && grep -q ' lo:' <<<"$l" && ! grep -q slv <<<"$l"; }
check "b's sandbox ended and its link went with it" no_slv

# The none lane: loopback only.
out=$("$SBX" --cache "$CACHE" --state "$E2E_TMP/state" --id "sln$$" -t host -- ip -o link 2>&1 || true)
check "the none lane has loopback only" test "$(grep -c . <<<"$out") $(grep -c ' lo:' <<<"$out")" = "1 1"
check "the none lane reaches nothing (no route: refused at once)" \
	fails_as 7 "^curl: \(7\) Failed to connect to 10\.88\.0\.1 port 3128 .*Couldn't connect to server" \
	"$SBX" --cache "$CACHE" --state "$E2E_TMP/state" --id "sln$$" -t host -- "${CURL[@]}" http://10.88.0.1:3128/

# Counters.
ctl '{"op":"get","id":"a"}'
check "a's counters moved ($(jget tx_packets) tx, $(jget rx_bytes) rx bytes)" \
	test "$(jget tx_packets)" -gt 10 -a "$(jget rx_bytes)" -gt 1000

# Lock takes effect, on connections already open too: a tunnel that
# carried one request carries nothing once the sandbox is locked. The
# guest sends its second request when the test has locked it and said so
# (a file the test puts into the guest's /tmp through /proc/PID/root).
cat > "$E2E_TMP/tunnel.py" <<'PY'
import os, socket, sys, time
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
for _ in range(1200):           # a safety net, not a timing
    if os.path.exists("/tmp/locked"):
        break
    time.sleep(0.05)
else:
    print("second=never-told")
    sys.exit()
try:
    s.sendall(req)
    print("second=" + answer())
except OSError as e:
    print("second=" + type(e).__name__)
PY
SBX_EXEC=1 sbx a -- python3 -c "$(cat "$E2E_TMP/tunnel.py")" >"$E2E_TMP/tunnel.out" 2>&1 &
TJOB=$!
track $TJOB
wait_for "$E2E_TMP/tunnel.out" first= 30 || true
ctl '{"op":"lock","id":"a"}'
check "lock a" test "$(jget unlocked)" = false
tell_locked() { local p; p=$(sbx_pid a) && [ -n "$p" ] && touch "/proc/$p/root/tmp/locked"; }
check "(a's guest is told it is locked)" tell_locked
wait "$TJOB" || true
check "a tunnel open before the lock carries nothing after it ($(tr '\n' ' ' <"$E2E_TMP/tunnel.out"))" \
	bash -c "grep -qx first=ok '$E2E_TMP/tunnel.out' && grep -Eqx 'second=(timeout|TimeoutError)' '$E2E_TMP/tunnel.out'"
dmark a_in a_past
check "locked again: the forward door refuses at once (a reset)" \
	fails_as 7 "$REFUSED" sbx a --proxy -- "${RCURL[@]}" http://origin.test/
check "... its SYNs reached the fleet and got no further than the table's refuse chain" dropped a_in a_past
check "(the observer tables removed)" eval 'F nft delete table inet sl_e2e_door && F nft delete table arp sl_e2e_arp'
ctl '{"op":"lock","id":"a"}'
check "lock is idempotent" test "$(jget ok)" = true

# --- what the fleet refuses (TCP, UDP, ICMP) and drops (IPv6) ----------------
# u's network is entered with host tools (a guest as privileged there as a
# VM's root) to send what a guest could. Each kind is shown to leave the
# guest (the send succeeds) and to reach the fleet (u's tx counter, counted
# after the anti-spoofing rule; for IPv6 the link's own counters and an nft
# counter of the test's) before the check that it went no further.
check "attach u (egress)" attach u egress
ctl '{"op":"unlock","id":"u","policy":"web"}'
check "unlock u with policy web" test "$(jget unlocked)" = true
SBX_EXEC=1 sbx u -- sleep 120 >/dev/null 2>&1 &
UJOB=$!
track $UJOB
UPID=
U() { innet "$UPID" "$@"; }
u_up() {
	UPID=$(sbx_pid u) && [ -n "$UPID" ] &&
		U ip -4 -o addr show dev eth0 | grep -q "inet ${ADDR_u//./\\.}/24 "
}
check "u's sandbox runs, its address on eth0" until_ok 30 u_up
out=$(U "${CURL[@]}" -x http://10.88.1.1:3128 http://origin.test/ 2>&1 || true)
check "u's network reaches its door over TCP ($out)" test "$out" = "hello from origin"

# Refused at once: TCP to an address and port no door serves gets a reset,
# UDP an ICMP "administratively prohibited" (which a connected socket's
# recv() reports as EHOSTUNREACH). probe.py tries COUNT times, each with
# 20 s to spare, and tells what each try ended with: ECONNREFUSED (a
# reset), EHOSTUNREACH (the ICMP error), TimeoutError (a silent drop),
# and how long all took (shown, not judged).
cat >"$E2E_TMP/probe.py" <<'PY'
import errno, socket, sys, time
kind, host, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
got = {}
t0 = time.monotonic()
for _ in range(count):
    if kind == "tcp":
        s = socket.socket()
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(20)
    try:
        s.connect((host, port))
        if kind == "udp":
            s.send(b"from-guest")
            s.recv(64)
        r = "answered"
    except OSError as e:
        r = errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__
    s.close()
    got[r] = got.get(r, 0) + 1
print(" ".join("%s=%d" % kv for kv in sorted(got.items())), "in %.0f ms" % ((time.monotonic() - t0) * 1000))
PY
R0=$(pkts u refused || true)
mark
out=$(U "$PY" "$E2E_TMP/probe.py" tcp 10.99.0.20 5432 1 2>&1 || true)
check "u's TCP to 10.99.0.20:5432, which no door serves, is refused at once ($out)" \
	eval '[[ $out == "ECONNREFUSED=1 in "* ]]'
check "... and the log says so, naming the sandbox and what it tried" \
	logged "fleet: sandbox u tried tcp 10\.99\.0\.20:5432 \(refused\)$"
out=$(U "$PY" "$E2E_TMP/probe.py" tcp 10.99.0.20 5432 30 2>&1 || true)
check "30 tries more: each refused at once ($out)" eval '[[ $out == "ECONNREFUSED=30 in "* ]]'
out=$(U "$PY" "$E2E_TMP/probe.py" udp 10.99.0.20 53 1 2>&1 || true)
check "u's UDP to 10.99.0.20:53 gets an ICMP error back ($out)" eval '[[ $out == "EHOSTUNREACH=1 in "* ]]'
check "... all 32 counted in u's refused counter (from $R0)" \
	until_ok 10 eval 'num "$R0" && pkts_at_least u refused $((R0 + 32))'
# One line per sandbox per 5 s: the other 31 are owed to the window's end
# (checked below, once the UDP, ICMP and IPv6 checks have taken their time).
check "... and logged once so far ($(since | grep 'fleet: sandbox u tried' | sed 's/.*fleet: /fleet: /'))" \
	test "$(since | grep -c 'fleet: sandbox u tried')" = 1

# UDP: to a port of its gateway no door serves (53 is the DNS door's,
# which backend.sh checks). A listener there hears the fleet itself,
# before and after u's datagrams, and never u.
cat >"$E2E_TMP/udp.py" <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 5354))
print("ready", flush=True)
while True:
    d, a = s.recvfrom(2048)
    print("%s from %s" % (d.decode(errors="replace"), a[0]), flush=True)
PY
# udp.send ADDR WHAT COUNT: sends WHAT to ADDR:5354 COUNT times; prints
# the bytes sent.
cat >"$E2E_TMP/udp.send" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
print(sum(s.sendto(sys.argv[2].encode(), (sys.argv[1], 5354)) for _ in range(int(sys.argv[3]))))
PY
ip netns exec "$FLEET" "$PY" "$E2E_TMP/udp.py" >"$E2E_TMP/udp.out" 2>&1 &
UDPL=$!
track $UDPL
check "(a UDP listener on port 5354 in the fleet)" wait_for "$E2E_TMP/udp.out" '^ready$' 10
F "$PY" "$E2E_TMP/udp.send" 10.88.1.1 fleet-before 1 >/dev/null
check "(it hears the fleet itself)" wait_for "$E2E_TMP/udp.out" '^fleet-before from ' 10
T0=$(pkts u tx)
out=$(U "$PY" "$E2E_TMP/udp.send" 10.88.1.1 from-guest 5 2>&1 || true)
check "u sends 5 UDP datagrams to 10.88.1.1:5354 ($out bytes)" test "$out" = 50
check "... they reach the fleet (u's tx packets from $T0)" until_ok 10 pkts_at_least u tx $((T0 + 5))
F "$PY" "$E2E_TMP/udp.send" 10.88.1.1 fleet-after 1 >/dev/null
check "(the listener hears the fleet after them)" wait_for "$E2E_TMP/udp.out" '^fleet-after from ' 10
check "... and nothing of u's: the fleet refused them" bash -c "! grep -q from-guest '$E2E_TMP/udp.out'"
kill "$UDPL"

# ICMP: echo requests to its gateway. The fleet's own stack counts every
# echo request that gets to it (Icmp InEchos): one, its own, not u's.
cat >"$E2E_TMP/echo.py" <<'PY'
import socket, struct, sys
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
n = 0
for seq in range(int(sys.argv[2])):
    h = struct.pack("!BBHHH", 8, 0, 0, 0x5e5e, seq) + b"sluice"
    n += r.sendto(h[:2] + struct.pack("!H", csum(h)) + h[4:], (sys.argv[1], 0)) > 0
print(n)
PY
in_echos() {
	F awk '/^Icmp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 } else print $c["InEchos"] }' /proc/net/snmp
}
E0=$(in_echos)
T0=$(pkts u tx)
out=$(U "$PY" "$E2E_TMP/echo.py" 10.88.1.1 3 2>&1 || true)
check "u sends 3 ICMP echo requests to 10.88.1.1 ($out)" test "$out" = 3
check "... they reach the fleet (u's tx packets from $T0)" until_ok 10 pkts_at_least u tx $((T0 + 3))
out=$(F "$PY" "$E2E_TMP/echo.py" 10.88.1.1 1 2>&1 || true)
check "(the fleet's own echo request to 10.88.1.1 is counted: InEchos from $E0)" \
	until_ok 10 eval '[ "$(in_echos)" -ge $((E0 + 1)) ]'
check "... and none of u's: the fleet refused them (InEchos $E0 + 1 = $(in_echos))" \
	test "$(in_echos)" = $((E0 + 1))


# IPv6: u's eth0 speaks it (a link-local address), and what it sends to
# all nodes of its link (UDP and ICMPv6 echo) dies at the fleet's end of
# the link, where IPv6 is off: the link's counters show every packet that
# came in discarded. Then, should the link's IPv6 ever be on (the test's
# doing), the table drops it: an nft counter of the test's before the
# table's pre chain sees it, one after sees none (and sees u's IPv4).
cat >"$E2E_TMP/v6.py" <<'PY'
import socket, struct
n = 0
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
for _ in range(5):
    n += u.sendto(b"from-guest", ("ff02::1%eth0", 53)) > 0
r = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
for seq in range(3):
    n += r.sendto(struct.pack("!BBHHH", 128, 0, 0, 0x5e5e, seq) + b"sluice", ("ff02::1%eth0", 0)) > 0
print(n)
PY
u_ll() { U ip -6 -o addr show dev eth0 scope link | grep -v tentative | grep -q 'inet6 fe80::'; }
check "u's eth0 has its IPv6 link-local address" until_ok 30 u_ll
check "IPv6 is off at the fleet's end of u's link" \
	test "$(F cat "/proc/sys/net/ipv6/conf/$IF_u/disable_ipv6")" = 1
v6ctr() { F awk -v k="$1" '$1 == k { print $2 }' "/proc/net/dev_snmp6/$IF_u"; }
# Both counters from one read of the file: read one after the other, a
# packet of the guest's own (a router solicitation, an MLD report) arriving
# between the two reads skews the pair.
v6pair() { F awk '$1 == "Ip6InReceives" { r = $2 } $1 == "Ip6InDiscards" { d = $2 } END { print r, d }' \
	"/proc/net/dev_snmp6/$IF_u"; }
read -r IN0 DI0 < <(v6pair)
out=$(U "$PY" "$E2E_TMP/v6.py" 2>&1 || true)
check "u sends 8 IPv6 packets to all nodes of its link ($out)" test "$out" = 8
check "... they reach the fleet's end of the link (Ip6InReceives from $IN0)" \
	until_ok 10 eval '[ "$(v6ctr Ip6InReceives)" -ge $((IN0 + 8)) ]'
read -r IN1 DI1 < <(v6pair)
check "... and every one that came in was discarded (in $IN0 -> $IN1, discarded $DI0 -> $DI1)" \
	test $((IN1 - IN0)) = $((DI1 - DI0))
F nft -f - <<NFT
table inet sl_e2e_obs {
	counter v6_before {}
	counter v6_after {}
	counter v4_after {}
	chain before {
		type filter hook prerouting priority -350; policy accept;
		iifname "$IF_u" meta nfproto ipv6 counter name "v6_before"
	}
	chain after {
		type filter hook prerouting priority -250; policy accept;
		iifname "$IF_u" meta nfproto ipv6 counter name "v6_after"
		iifname "$IF_u" meta nfproto ipv4 counter name "v4_after"
	}
}
NFT
obs() { F nft list counter inet sl_e2e_obs "$1" | grep -o 'packets [0-9]*' | cut -d' ' -f2; }
check "(IPv6 turned on at the fleet's end of u's link)" \
	F sh -c "echo 0 >/proc/sys/net/ipv6/conf/$IF_u/disable_ipv6"
out=$(U "$PY" "$E2E_TMP/v6.py" 2>&1 || true)
check "u sends its 8 IPv6 packets again ($out)" test "$out" = 8
out=$(U "$PY" "$E2E_TMP/udp.send" 10.88.1.1 from-guest 1 2>&1 || true)
check "(and one IPv4 datagram: $out bytes)" test "$out" = 10
check "... the IPv6 ones reach the prerouting hook (before the table: $(obs v6_before))" \
	until_ok 10 eval '[ "$(obs v6_before)" -ge 8 ]'
check "(the IPv4 one is seen after the table's pre chain: $(obs v4_after))" \
	until_ok 10 eval '[ "$(obs v4_after)" -ge 1 ]'
check "... but no IPv6 is: the table dropped it ($(obs v6_after) after)" test "$(obs v6_after)" = 0
# The window u's first refusal opened (5 s) ends with one line for the
# rest: the latest sample, and how many more the counter saw (31 or more:
# the probes above, and the UDP, ICMP and IPv4 datagrams since).
SUMMARY='fleet: sandbox u tried [a-z]+ [0-9.:]+.* \(refused; ([0-9]+) more since [0-9]{2}:[0-9]{2}:[0-9]{2}Z\)$'
u_lines() { since | grep 'fleet: sandbox u tried' | sed 's/.*fleet: /fleet: /'; }
check "the refusals after u's first are summed into one line at the window's end" \
	until_ok 10 eval 'since | grep -Eq "$SUMMARY"'
N=$(since | grep -E "$SUMMARY" | head -n1 | sed -E "s/.*refused; ([0-9]+) more.*/\1/")
check "... the second line for u, saying 31 or more more ($(u_lines | sed -n 2p))" \
	eval 'num "$N" && [ "$N" -ge 31 ] && u_lines | sed -n 2p | grep -Eq "$SUMMARY"'
F sh -c "echo 1 >/proc/sys/net/ipv6/conf/$IF_u/disable_ipv6"
F nft delete table inet sl_e2e_obs
kill "$UJOB"
wait "$UJOB" 2>/dev/null || true
check "u's sandbox ended and its link went with it" until_ok 10 eval '! ip -n "$FLEET" link show "$IF_u" >/dev/null 2>&1'
ctl '{"op":"detach","id":"u"}'
check "detach u" test "$(jget ok)" = true

# --- the lane doors' own refusals ----------------------------------------------
# The table lets no stranger and no locked sandbox reach a door; the doors
# refuse them too. The fleet's own stack reaches every door (loopback is
# let in), so the test speaks from there with k's address on lo: k
# attached and locked (403 sandbox-locked), then unlocked (the same
# requests get through: the refusal was the lock's), then detached (403
# not-a-sandbox); and as o, an unlocked sandbox of the other lane.
DH=$E2E_TMP/door.hdr DB=$E2E_TMP/door.body
# door SRC forward|socks|tls [curl args...]: a request for origin.test
# through one of the egress lane's doors, from SRC, made in the fleet.
door() {
	local src=$1 d=$2
	shift 2
	local -a c=("${CURL[@]}" --interface "$src" -D "$DH" -o "$DB" "$@")
	: >"$DH"
	rm -f "$DB"
	case $d in
	forward) c+=(-x http://10.88.1.1:3128 http://origin.test/) ;;
	socks) c+=(--socks5-hostname 10.88.1.1:1080 http://origin.test/) ;;
	tls) c+=(-k --connect-to origin.test:443:10.88.1.1:3129 https://origin.test/) ;;
	esac
	ip netns exec "$FLEET" "${c[@]}"
}
# door_ok SRC DOOR WANT: the body is WANT.
door_ok() {
	door "$1" "$2" 2>&1 && [ "$(cat "$DB")" = "$3" ] && return 0
	echo "    body: $(head -c 200 "$DB" 2>/dev/null)" >&2
	return 1
}
# fwd_refused SRC REASON: 403, Sluice-Reason REASON, a body that says it.
fwd_refused() {
	local st
	st=$(door "$1" forward -w '%{http_code}' 2>&1) || true
	[ "$st" = 403 ] && grep -Eiq "^Sluice-Reason: $2"$'\r?$' "$DH" && grep -q "^sluice: $2: " "$DB" && return 0
	echo "    got $st, $(grep -i '^Sluice-Reason' "$DH" | tr -d '\r'), body: $(head -c 200 "$DB" 2>/dev/null)" >&2
	return 1
}
check "attach k (egress)" attach k egress
KRE=${ADDR_k//./\\.}
check "(the fleet's loopback takes k's address)" F ip addr add "$ADDR_k/32" dev lo
mark
check "locked k at the forward door: 403, Sluice-Reason: sandbox-locked" fwd_refused "$ADDR_k" sandbox-locked
check "... its access line: client k, reason sandbox-locked" \
	logged "access door=forward client=k src=$KRE:[0-9]+ .* decision=deny reason=sandbox-locked upstream=- status=403 "
check "locked k at the SOCKS door: no method accepted (0xFF)" \
	fails_as 97 'No authentication method was acceptable' door "$ADDR_k" socks
check "... and a log line says sandbox-locked" logged "socks $KRE:[0-9]+: refused: sandbox-locked k$"
check "locked k at the SNI door: closed" fails_as 35 'SSL_connect: SSL_ERROR_SYSCALL' door "$ADDR_k" tls
check "... and a log line says sandbox-locked" \
	logged "sni door: refusing $KRE:[0-9]+, sandbox k on lane egress: sandbox-locked$"
ctl '{"op":"unlock","id":"k","policy":"web"}'
check "unlock k" test "$(jget unlocked)" = true
check "unlocked k: the forward door lets the same request through" door_ok "$ADDR_k" forward "hello from origin"
check "unlocked k: the SOCKS door too" door_ok "$ADDR_k" socks "hello from origin"
check "unlocked k: the SNI door too" door_ok "$ADDR_k" tls "hello over tls"
ctl '{"op":"detach","id":"k"}'
check "detach k" test "$(jget ok)" = true
mark
check "k's address, detached, at the forward door: 403, Sluice-Reason: not-a-sandbox" \
	fwd_refused "$ADDR_k" not-a-sandbox
check "... its access line: no client, reason not-a-sandbox" \
	logged "access door=forward client=- src=$KRE:[0-9]+ .* decision=deny reason=not-a-sandbox upstream=- status=403 "
check "... at the SOCKS door: no method accepted (0xFF)" \
	fails_as 97 'No authentication method was acceptable' door "$ADDR_k" socks
check "... and a log line says not-a-sandbox" logged "socks $KRE:[0-9]+: refused: not-a-sandbox$"
check "... at the SNI door: closed" fails_as 35 'SSL_connect: SSL_ERROR_SYSCALL' door "$ADDR_k" tls
check "... and a log line says not-a-sandbox" \
	logged "sni door: refusing $KRE:[0-9]+ on lane egress: not-a-sandbox$"
F ip addr del "$ADDR_k/32" dev lo
ctl '{"op":"unlock","id":"o","policy":"web"}'
check "unlock o (lane other)" test "$(jget unlocked)" = true
check "(the fleet's loopback takes o's address)" F ip addr add "$ADDR_o/32" dev lo
out=$(ip netns exec "$FLEET" "${CURL[@]}" --interface "$ADDR_o" -x http://10.88.2.1:3128 http://origin.test/ 2>&1 || true)
check "(o reaches its own lane's door: $out)" test "$out" = "hello from origin"
mark
check "o at the egress lane's forward door: 403, Sluice-Reason: not-a-sandbox" fwd_refused "$ADDR_o" not-a-sandbox
check "... its access line says not-a-sandbox" \
	logged "access door=forward client=- src=${ADDR_o//./\\.}:[0-9]+ .* reason=not-a-sandbox upstream=- status=403 "
F ip addr del "$ADDR_o/32" dev lo
ctl '{"op":"lock","id":"o"}'

# --- SIGKILL and restart: exactly one ruleset -----------------------------
# a's sandbox keeps running across the restart: the new daemon must not
# give its address (and so its link name and identity) to anyone else.
SBX_EXEC=1 sbx a -- sleep 30 >/dev/null 2>&1 &
SJOB=$!
track $SJOB
check "(a's sandbox runs: its link is in the fleet)" until_ok 30 quiet ip -n "$FLEET" link show "$IF_a"
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
check "no sandbox link is left" no_slv

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
check "... and no counter object" \
	eval 't=$(F nft list counters table inet sluice) && ! grep -qE "counter (tx|rx|refused)-" <<<"$t"'
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
