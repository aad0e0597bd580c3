#!/bin/bash
# The documentation, run as written (issue 23): the README's "first claim"
# and every example of README.md and docs/*.md marked
# <!-- doc-test: run ... --> (tests/e2e/README.md, "Examples in the
# documentation"), against sluiced started the way the README starts it:
# on conf/sluice.yaml (./build.sh run), changed only where a test must
# differ from a host's daemon (below), in a network namespace of its own.
#
#   gw (sluiced, the reader's shell)  ── inet: "example.com" (93.184.216.34,
#      10.99.0.1                          HTTP and HTTPS, python), dnsmasq
#                                          (10.99.0.53)
#
# What differs from the README's machine, all declared in
# tests/e2e/README.md:
#   - conf/sluice.yaml with daemon.data_dir, fleet_netns, control_socket,
#     api.socket under $E2E_TMP, fleet_teardown true, and gateway.dns on the
#     test's dnsmasq; nothing else;
#   - example.com is the test's origin; its certificate is signed by the
#     CA sluiced created at its first start, so that guests trust it (as
#     they trust the real one through their system roots), and so does the
#     host's curl (CURL_CA_BUNDLE);
#   - the examples run in a directory whose build/ is this build, with
#     SLUICE_API naming the test's socket, and the texts
#     /run/sluice/api.sock, /run/sluice/control.sock, "netns exec sluice "
#     and "ip -n sluice " replaced by the test's.
# Also checked here: the CA is created at the first start (docs/config.md,
# certs), its key 0600.
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY
: "${SL_BUILD:?SL_BUILD must name the build tree (ctest sets it)}"

gw='' inet=''
netns_new gw docs
netns_new inet docsi
FLEET="sl-docf-$$"
netns_owned "$FLEET"
LOG=$E2E_TMP/sluiced.log
: >"$LOG"
DATA=$E2E_TMP/data
SOCK=$E2E_TMP/api.sock
CTL=$E2E_TMP/control.sock
e2e_cleanup_extra() { end_left_sandboxes "$LOG"; }
# Run in a namespace; never to start a server with & (then $! would be a
# subshell's, and the trap would end the subshell, not the server).
G() { nsenter --net="/run/netns/$gw" "$@"; }

# --- the network: gw <-> inet ----------------------------------------------
ip -n "$gw" link add vdg type veth peer name vdi netns "$inet"
ip -n "$gw" addr add 10.99.0.1/24 dev vdg
ip -n "$gw" link set vdg up
ip -n "$gw" route add 93.184.216.34/32 via 10.99.0.10
for a in 10.99.0.10/24 10.99.0.53/24 93.184.216.34/32; do
	ip -n "$inet" addr add "$a" dev vdi
done
ip -n "$inet" link set vdi up
nsenter --net="/run/netns/$inet" dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-daemon --user=root \
	--listen-address=10.99.0.53 --bind-interfaces --log-queries \
	--address=/example.com/93.184.216.34 --address=/github.com/93.184.216.34 \
	2>"$E2E_TMP/dnsmasq.log" &
track $!

# --- the configuration: the README's, with the declared changes ------------
CONF=$E2E_TMP/sluice.yaml
sed -e "s|^  data_dir: /var/lib/sluice$|  data_dir: $DATA|" \
	-e "s|^  fleet_netns: sluice |  fleet_netns: $FLEET |" \
	-e "s|^  fleet_teardown: false |  fleet_teardown: true |" \
	-e "s|^  control_socket: /run/sluice/control.sock |  control_socket: $CTL |" \
	-e "s|^  socket: /run/sluice/api.sock$|  socket: $SOCK|" \
	-e "s|dns: { servers: \[system\],|dns: { servers: [10.99.0.53],|" \
	"$SL_SRC/conf/sluice.yaml" >"$CONF"
changed=$(diff "$SL_SRC/conf/sluice.yaml" "$CONF" | grep -c '^>' || true)
check "conf/sluice.yaml with exactly the 6 declared changes ($changed lines)" \
	eval '[ "$changed" = 6 ]'
check "... which sluiced --check accepts" "$SLUICED" --check "$CONF"

# --- sluiced, as ./build.sh run starts it -----------------------------------
nsenter --net="/run/netns/$gw" "$SLUICED" --config "$CONF" 2>>"$LOG" &
track $!
info_warm() {
	curl -sS -m 5 --unix-socket "$SOCK" http://localhost/v1/info 2>/dev/null |
		"$PY" -c 'import json,sys; print([p["warm"] for p in json.load(sys.stdin)["pools"] if p["name"] == "default"][0])' 2>/dev/null
}
for _ in $(seq 600); do
	[ "$(info_warm)" = 2 ] && break
	sleep 0.1
done
if ! check "the default pool is warm (2) within 60 s" eval '[ "$(info_warm)" = 2 ]'; then
	tail -n 40 "$LOG" >&2
	finish
fi

# The CA: created at the first start (docs/config.md, certs).
check "the CA was created at the first start: $DATA/ca.pem, $DATA/ca.key" \
	eval '[ -s "$DATA/ca.pem" ] && [ -s "$DATA/ca.key" ]'
check "... its key mode 0600" eval '[ "$(stat -c %a "$DATA/ca.key")" = 600 ]'

# example.com, signed by that CA.
mkdir -p "$E2E_TMP/origin"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=example.com \
	-keyout "$E2E_TMP/origin/key.pem" -out "$E2E_TMP/origin/csr.pem" 2>/dev/null
printf 'subjectAltName=DNS:example.com\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
	>"$E2E_TMP/origin/ext"
openssl x509 -req -in "$E2E_TMP/origin/csr.pem" -CA "$DATA/ca.pem" -CAkey "$DATA/ca.key" \
	-CAcreateserial -CAserial "$E2E_TMP/origin/serial" -days 2 \
	-extfile "$E2E_TMP/origin/ext" -out "$E2E_TMP/origin/cert.pem" 2>/dev/null
nsenter --net="/run/netns/$inet" "$PY" "$HERE/docs/origin.py" 93.184.216.34 "$E2E_TMP/origin/cert.pem" \
	"$E2E_TMP/origin/key.pem" "$E2E_TMP/origin/ready" 2>"$E2E_TMP/origin.log" &
track $!
wait_for "$E2E_TMP/origin/ready" ready || { fail "the origin starts"; finish; }
wait_for "$E2E_TMP/dnsmasq.log" "started, version" || { fail "dnsmasq starts"; finish; }
check "setup: example.com answers from the daemon's namespace (by address)" \
	G curl -sS -m 5 -o /dev/null --resolve example.com:443:93.184.216.34 \
	--cacert "$DATA/ca.pem" https://example.com/

# --- the examples ----------------------------------------------------------
READER=$E2E_TMP/reader
mkdir -p "$READER"
ln -s "$SL_BUILD" "$READER/build"
cd "$SL_SRC"
listed=$("$PY" "$SL_SRC/tests/docs/doc_examples.py" list README.md docs | grep -c ': run ' || true)
check "the documentation marks runnable examples ($listed)" eval '[ "$listed" -ge 5 ]'
out=$E2E_TMP/examples.out
if G env SLUICE_API="unix:$SOCK" CURL_CA_BUNDLE="$DATA/ca.pem" "$PY" "$SL_SRC/tests/docs/doc_examples.py" run \
	--cwd "$READER" \
	--subst "/run/sluice/api.sock=$SOCK" \
	--subst "/run/sluice/control.sock=$CTL" \
	--subst "netns exec sluice =netns exec $FLEET " \
	--subst "ip -n sluice =ip -n $FLEET " \
	README.md docs >"$out" 2>&1; then
	pass "every runnable example ran as the documentation says ($(grep -c '^ok ' "$out") blocks)"
else
	fail "runnable examples: $(grep -c '^FAIL' "$out") failed"
fi
sed 's/^/    /' "$out"
ran=$(grep -c '^ok \|^FAIL' "$out" || true)
check "... all $listed of them ran ($ran)" eval '[ "$ran" = "$listed" ]'
finish
