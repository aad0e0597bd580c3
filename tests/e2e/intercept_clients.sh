#!/bin/bash
# Real clients through interception, and bad input refused (issue 18). As
# in intercept.sh: a real sluiced in one private network namespace, a real
# TLS origin (nginx, under a test CA given as certs.upstream_ca) and
# dnsmasq in another.
#
# Every guest trusts sluice's CA the way docs/gateway.md tells it to: a
# bundle of the system roots and sluice's CA (data_dir/ca.pem) in
# SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, GIT_SSL_CAINFO and
# CURL_CA_BUNDLE, and NODE_EXTRA_CA_CERTS the CA alone. There is no
# internet, so the origin's test CA stands in for the system roots: it is
# in the bundle, and (through --use-openssl-ca and SSL_CERT_FILE) it is
# node's own root store.
#
# Checks, through the forward door's CONNECT (clients PROXY below, so
# that the SOCKS5 and transparent doors can run the same list when they
# intercept):
#   curl, python3 urllib, requests, pip download from a simple index,
#   node's https.request through a CONNECT tunnel, npm view and npm pack
#   from a registry, git clone over https (dumb HTTP): each against an
#   intercepted host (every inner request in the access log: GET, the
#   host, 200) and against plain.test, which the policy allows but does
#   not intercept (tunnelled: the same bundle verifies the origin's own
#   certificate); node without NODE_EXTRA_CA_CERTS and requests without
#   the bundle fail;
# bad input, each refused with the daemon alive and no request reaching
# the origin: a ClientHello in five TCP writes (it must succeed), a hello
# offering only TLS 1.0, clear-text HTTP after the 200, a hello whose
# extensions run past its end; origins with an expired certificate and
# with an incomplete chain (a leaf from an intermediate, served without
# it; the same leaf with the intermediate is the control): 502
# upstream-cert-invalid inside sluice's TLS. (Wrong-name and self-signed
# origins are intercept.sh's.)
#
# curl and requests also run through socks5h://127.0.0.1:1080: the SOCKS5
# door intercepts the same hosts.
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
ip -n "$gw" link add vgi type veth peer name vin netns "$inet"
ip -n "$gw" addr add 10.99.0.1/24 dev vgi
ip -n "$gw" link set vgi up
for a in 10 12 13 14 53; do ip -n "$inet" addr add "10.99.0.$a/24" dev vin; done
ip -n "$inet" link set vin up

# --- a test CA, the origins' certificates ------------------------------------------
. "$(dirname "$0")/pki_lib.sh"
pki_ca
# csr NAME; sign NAME ISSUER EXTRA-EXT [x509 args]
csr() {
	ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
		-keyout "$PKI/$1.key" -out "$PKI/$1.csr"
}
sign() {
	local n=$1 issuer=$2 ext=$3
	shift 3
	printf '%s\n' "$ext" >"$PKI/$n.ext"
	ossl x509 -req -in "$PKI/$n.csr" -CA "$PKI/$issuer.pem" -CAkey "$PKI/$issuer.key" \
		-CAcreateserial -extfile "$PKI/$n.ext" -out "$PKI/$n.pem" "$@"
}
LEAF_EXT='basicConstraints=CA:FALSE
extendedKeyUsage=serverAuth'
csr origin
sign origin ca "subjectAltName=DNS:origin.test,DNS:pypi.test,DNS:registry.test,DNS:git.test,DNS:plain.test
$LEAF_EXT" -days 2
csr inter
sign inter ca 'basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign' -days 2
csr chain
sign chain inter "subjectAltName=DNS:chain.test,DNS:fullchain.test
$LEAF_EXT" -days 2
cat "$PKI/chain.pem" "$PKI/inter.pem" >"$PKI/fullchain.pem"
# Expired: valid for a day that ended yesterday (openssl ca can set dates,
# x509 -req cannot).
csr expired
mkdir -p "$PKI/ca-db"
: >"$PKI/ca-db/index.txt"
echo 1000 >"$PKI/ca-db/serial"
cat >"$PKI/ca.cnf" <<CNF
[ca]
default_ca = d
[d]
database = $PKI/ca-db/index.txt
new_certs_dir = $PKI/ca-db
serial = $PKI/ca-db/serial
default_md = sha256
policy = p
unique_subject = no
[p]
commonName = supplied
CNF
printf 'subjectAltName=DNS:expired.test\n%s\n' "$LEAF_EXT" >"$PKI/expired.ext"
ossl ca -batch -notext -config "$PKI/ca.cnf" -cert "$PKI/ca.pem" -keyfile "$PKI/ca.key" \
	-in "$PKI/expired.csr" -out "$PKI/expired.pem" -extfile "$PKI/expired.ext" \
	-startdate "$(date -u -d '-2 days' +%Y%m%d%H%M%SZ)" -enddate "$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)"
for c in origin chain expired; do
	[ -s "$PKI/$c.pem" ] || { fail "test certificate $c made"; cat "$PKI/openssl.log" >&2; finish; }
done

# --- what the origin serves ----------------------------------------------------------------
WWW=$E2E_TMP/www
mkdir -p "$WWW/simple/tinypkg" "$WWW/packages" "$WWW/tarballs" "$WWW/plainreg" \
	"$E2E_TMP/nginx-tmp" "$E2E_TMP/home"
echo "hello over tls" >"$WWW/index.html"
# A wheel by hand (zipfile; RECORD's hashes as pip wants them) and a
# PEP 503 simple index for it.
"$PY" - "$WWW/packages/tinypkg-0.1-py3-none-any.whl" <<'PYEOF'
import base64, hashlib, sys, zipfile
files = {
    "tinypkg/__init__.py": b"VALUE = 42\n",
    "tinypkg-0.1.dist-info/METADATA":
        b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\nSummary: e2e\n",
    "tinypkg-0.1.dist-info/WHEEL":
        b"Wheel-Version: 1.0\nGenerator: e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
rec = []
for n, b in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
    rec.append(f"{n},sha256={h},{len(b)}")
rec.append("tinypkg-0.1.dist-info/RECORD,,")
files["tinypkg-0.1.dist-info/RECORD"] = ("\n".join(rec) + "\n").encode()
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, b in files.items():
        z.writestr(n, b)
PYEOF
WHL=tinypkg-0.1-py3-none-any.whl
printf '<!DOCTYPE html>\n<html><body><a href="/packages/%s#sha256=%s">%s</a></body></html>\n' \
	"$WHL" "$(sha256sum "$WWW/packages/$WHL" | cut -d' ' -f1)" "$WHL" >"$WWW/simple/tinypkg/index.html"
# An npm package: its tarball and a packument per registry host (the
# tarball's URL names the host).
mkdir -p "$E2E_TMP/npmsrc/package"
printf '{"name":"tinynpm","version":"0.1.0","main":"index.js"}\n' >"$E2E_TMP/npmsrc/package/package.json"
echo 'module.exports = 42;' >"$E2E_TMP/npmsrc/package/index.js"
TGZ=$WWW/tarballs/tinynpm-0.1.0.tgz
tar -czf "$TGZ" -C "$E2E_TMP/npmsrc" package
for h in registry.test:tinynpm plain.test:plainreg/tinynpm; do
	printf '{"name":"tinynpm","dist-tags":{"latest":"0.1.0"},"versions":{"0.1.0":{"name":"tinynpm","version":"0.1.0","main":"index.js","dist":{"tarball":"https://%s/tarballs/tinynpm-0.1.0.tgz","shasum":"%s","integrity":"sha512-%s"}}}}\n' \
		"${h%%:*}" "$(sha1sum "$TGZ" | cut -d' ' -f1)" "$(openssl dgst -sha512 -binary "$TGZ" | base64 -w0)" \
		>"$WWW/${h#*:}"
done
# A bare git repository served as static files (git's dumb HTTP).
git -c init.defaultBranch=main init -q "$E2E_TMP/gitsrc"
echo "cloned through sluice" >"$E2E_TMP/gitsrc/README"
git -C "$E2E_TMP/gitsrc" add README
git -C "$E2E_TMP/gitsrc" -c user.name=e2e -c user.email=e2e@test commit -qm one
git clone -q --bare "$E2E_TMP/gitsrc" "$WWW/repo.git"
git -C "$WWW/repo.git" update-server-info

NGLOG=$E2E_TMP/nginx-access.log
cat >"$E2E_TMP/nginx.conf" <<NGINX
user root;
worker_processes 1;
pid $E2E_TMP/nginx.pid;
error_log $E2E_TMP/nginx-error.log;
events { worker_connections 256; }
http {
	log_format t '\$connection \$connection_requests \$ssl_server_name "\$request" \$status host=\$host via="\$http_via"';
	access_log $NGLOG t;
	client_body_temp_path $E2E_TMP/nginx-tmp/body;
	proxy_temp_path $E2E_TMP/nginx-tmp/proxy;
	fastcgi_temp_path $E2E_TMP/nginx-tmp/fastcgi;
	uwsgi_temp_path $E2E_TMP/nginx-tmp/uwsgi;
	scgi_temp_path $E2E_TMP/nginx-tmp/scgi;
	types { text/html html; }
	default_type application/octet-stream;
	keepalive_timeout 30s;
	server {
		listen 10.99.0.10:443 ssl;
		ssl_certificate $PKI/origin.pem;
		ssl_certificate_key $PKI/origin.key;
		root $WWW;
		location ~ ^/(plainreg/)?tinynpm\$ { default_type application/json; }
	}
	server {
		listen 10.99.0.12:443 ssl;
		ssl_certificate $PKI/expired.pem;
		ssl_certificate_key $PKI/expired.key;
		root $WWW;
	}
	server {
		listen 10.99.0.13:443 ssl;
		ssl_certificate $PKI/chain.pem;
		ssl_certificate_key $PKI/chain.key;
		root $WWW;
	}
	server {
		listen 10.99.0.14:443 ssl;
		ssl_certificate $PKI/fullchain.pem;
		ssl_certificate_key $PKI/chain.key;
		root $WWW;
	}
}
NGINX
ip netns exec "$inet" nginx -e "$E2E_TMP/nginx-error.log" -c "$E2E_TMP/nginx.conf" -g 'daemon off;' &
track $!
ip netns exec "$inet" dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-daemon --user=root \
	--listen-address=10.99.0.53 --bind-interfaces --local=/test/ \
	--host-record=origin.test,10.99.0.10 --host-record=pypi.test,10.99.0.10 \
	--host-record=registry.test,10.99.0.10 --host-record=git.test,10.99.0.10 \
	--host-record=plain.test,10.99.0.10 --host-record=expired.test,10.99.0.12 \
	--host-record=chain.test,10.99.0.13 --host-record=fullchain.test,10.99.0.14 \
	2>"$E2E_TMP/dnsmasq.log" &
track $!

# --- sluiced ---------------------------------------------------------------------------
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
    allow: ["origin.test:443", "pypi.test:443", "registry.test:443", "git.test:443",
            "plain.test:443", "expired.test:443", "chain.test:443", "fullchain.test:443"]
    intercept: ["origin.test", "pypi.test", "registry.test", "git.test",
                "expired.test", "chain.test", "fullchain.test"]
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
for _ in $(seq 100); do [ -n "$(ip netns exec "$inet" ss -Hltn 'sport = :443')" ] && break; sleep 0.05; done
SLCA=$E2E_TMP/data/ca.pem
check "sluice made its CA in daemon.data_dir" test -s "$SLCA"

# The guest's trust: ROOTS stands in for the system roots (the system's
# own, which reach nothing here, and the origin's CA); BUNDLE is them and
# sluice's CA.
ROOTS=$E2E_TMP/roots.pem
BUNDLE=$E2E_TMP/bundle.pem
{ cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null || true; cat "$PKI/ca.pem"; } >"$ROOTS"
cat "$ROOTS" "$SLCA" >"$BUNDLE"
CENV=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$E2E_TMP/home" LANG=C.UTF-8
	SSL_CERT_FILE="$BUNDLE" REQUESTS_CA_BUNDLE="$BUNDLE" PIP_CERT="$BUNDLE"
	GIT_SSL_CAINFO="$BUNDLE" CURL_CA_BUNDLE="$BUNDLE" NODE_EXTRA_CA_CERTS="$SLCA"
	GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
	PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
	PIP_NO_INPUT=1 PIP_TIMEOUT=10 PIP_RETRIES=0
	npm_config_cache="$E2E_TMP/npm-cache" npm_config_userconfig="$E2E_TMP/home/.npmrc"
	npm_config_globalconfig="$E2E_TMP/npmrc-global"
	npm_config_update_notifier=false npm_config_audit=false npm_config_fund=false
	npm_config_fetch_retries=0 npm_config_fetch_timeout=10000)
# Node's own roots cannot be edited: --use-openssl-ca makes ROOTS them, so
# that NODE_EXTRA_CA_CERTS (sluice's CA alone) is shown to add to them.
NODEENV=(NODE_OPTIONS=--use-openssl-ca SSL_CERT_FILE="$ROOTS")
# guest PROXY CMD...: CMD in the gateway's namespace with only the guest's
# environment and the proxy variables; output in $OUT.
guest() {
	local px=$1
	shift
	OUT=$(G env -i "${CENV[@]}" https_proxy="$px" HTTPS_PROXY="$px" http_proxy="$px" \
		"$@" 2>&1) || { echo "--- $*: $OUT" >&2; return 1; }
}

# inner HOST: the access line of an intercepted request (GET HOST 200) on
# door $DOOR since the mark.
inner() { logged "access door=$DOOR .*method=GET host=$1 port=443 decision=allow reason=none .*status=200"; }

PYGET='import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().strip())'
PYREQ='import sys, requests
r = requests.get(sys.argv[1], timeout=10)
print(r.status_code, r.text.strip())'

# clients PROXY [NAME...]: each client (all, or the NAMEs) through PROXY
# to an intercepted host and to plain.test; every intercepted request is
# in the access log, none for plain.test.
clients() {
	local px=$1 via n0 c h d
	shift
	local which=("$@")
	[ ${#which[@]} -gt 0 ] || which=(curl urllib requests pip node npm git)
	case $px in
	http://*) DOOR=forward ;;
	socks5h://*) DOOR=socks ;;
	*) DOOR=${px%%:*} ;;
	esac
	via="($DOOR)"
	n0=$(wc -l <"$LOG")
	for c in "${which[@]}"; do
		case $c in
		curl)
			mark
			check "$via curl: intercepted origin.test, the bundle in CURL_CA_BUNDLE" \
				eval 'guest "$px" curl -sS --max-time 10 -x "$px" https://origin.test/ &&
					[ "$OUT" = "hello over tls" ]'
			check "$via ... its request in the access log" inner origin.test
			check "$via curl: plain.test, tunnelled, verified by the same bundle" \
				eval 'guest "$px" curl -sS --max-time 10 -x "$px" https://plain.test/ &&
					[ "$OUT" = "hello over tls" ]'
			;;
		urllib)
			mark
			check "$via python3 urllib: origin.test with SSL_CERT_FILE the bundle" \
				eval 'guest "$px" python3 -c "$PYGET" https://origin.test/ && [ "$OUT" = "hello over tls" ]'
			check "$via ... its request in the access log" inner origin.test
			check "$via python3 urllib: plain.test" \
				eval 'guest "$px" python3 -c "$PYGET" https://plain.test/ && [ "$OUT" = "hello over tls" ]'
			;;
		requests)
			mark
			check "$via requests: origin.test with REQUESTS_CA_BUNDLE" \
				eval 'guest "$px" python3 -c "$PYREQ" https://origin.test/ && [ "$OUT" = "200 hello over tls" ]'
			check "$via ... its request in the access log" inner origin.test
			check "$via requests: plain.test" \
				eval 'guest "$px" python3 -c "$PYREQ" https://plain.test/ && [ "$OUT" = "200 hello over tls" ]'
			;;
		pip)
			for h in pypi.test plain.test; do
				d=$E2E_TMP/pip-$DOOR-$h
				mkdir -p "$d"
				mark
				check "$via pip download tinypkg from https://$h/simple/ (PIP_CERT)" \
					eval 'guest "$px" python3 -m pip download --no-deps -d "$d" \
						--index-url "https://$h/simple/" tinypkg &&
						cmp -s "$d/$WHL" "$WWW/packages/$WHL"'
				if [ "$h" = pypi.test ]; then
					check "$via ... its requests in the access log" inner pypi.test
				fi
			done
			;;
		node)
			mark
			check "$via node https.request in a CONNECT tunnel: origin.test (NODE_EXTRA_CA_CERTS)" \
				eval 'guest "$px" "${NODEENV[@]}" node "$HERE/intercept_clients/get.js" "$px" \
					https://origin.test/ && [ "$OUT" = "status=200 body=hello over tls" ]'
			check "$via ... its request in the access log" inner origin.test
			check "$via node: plain.test, verified by node's own roots" \
				eval 'guest "$px" "${NODEENV[@]}" node "$HERE/intercept_clients/get.js" "$px" \
					https://plain.test/ && [ "$OUT" = "status=200 body=hello over tls" ]'
			;;
		npm)
			mark
			check "$via npm view tinynpm from https://registry.test/" \
				eval 'guest "$px" "${NODEENV[@]}" npm view tinynpm version \
					--registry https://registry.test/ && [ "$OUT" = 0.1.0 ]'
			check "$via ... its request in the access log" inner registry.test
			d=$E2E_TMP/npm-$DOOR
			mkdir -p "$d"
			check "$via npm pack tinynpm: the tarball, its integrity checked" \
				eval 'guest "$px" "${NODEENV[@]}" npm pack tinynpm --pack-destination "$d" \
					--registry https://registry.test/ && cmp -s "$d/tinynpm-0.1.0.tgz" "$TGZ"'
			check "$via npm view from https://plain.test/plainreg/" \
				eval 'guest "$px" "${NODEENV[@]}" npm view tinynpm version \
					--registry https://plain.test/plainreg/ && [ "$OUT" = 0.1.0 ]'
			;;
		git)
			for h in git.test plain.test; do
				d=$E2E_TMP/clone-$DOOR-$h
				mark
				check "$via git clone https://$h/repo.git (GIT_SSL_CAINFO)" \
					eval 'guest "$px" git clone -q "https://$h/repo.git" "$d" &&
						[ "$(cat "$d/README")" = "cloned through sluice" ]'
				if [ "$h" = git.test ]; then
					check "$via ... its requests in the access log" inner git.test
				fi
			done
			;;
		esac
	done
	MARK=$n0
	check "$via plain.test was never intercepted (no inner request logged for it)" \
		eval '! since | grep -q "access door=$DOOR .*method=GET host=plain.test "'
}

clients http://127.0.0.1:3128

# A guest that lacks the trust fails: proves each client verifies.
check "node without NODE_EXTRA_CA_CERTS refuses the intercepted origin.test" \
	eval '! guest http://127.0.0.1:3128 "${NODEENV[@]}" NODE_EXTRA_CA_CERTS= node \
		"$HERE/intercept_clients/get.js" http://127.0.0.1:3128 https://origin.test/ 2>/dev/null'
check "requests with REQUESTS_CA_BUNDLE the roots alone refuses it" \
	eval '! guest http://127.0.0.1:3128 REQUESTS_CA_BUNDLE="$ROOTS" python3 -c "$PYREQ" \
		https://origin.test/ 2>/dev/null'

clients socks5h://127.0.0.1:1080 curl requests

# --- bad input inside the CONNECT --------------------------------------------------------
# hello MODE HOST [ARGS]: tests/e2e/intercept_clients/hello.py; output in $OUT.
hello() { OUT=$(G "$PY" "$HERE/intercept_clients/hello.py" "$@" 2>&1) || true; }
# no_request_since N: the origin logged no request after its line N.
no_request_since() { [ "$(wc -l <"$NGLOG")" = "$1" ] || { tail -n +$(($1 + 1)) "$NGLOG" >&2; false; }; }

DOOR=forward
mark
hello split "$SLCA" origin.test "/?m=split"
check "a ClientHello in five TCP writes (header split too) is answered: 200 ($OUT)" \
	eval '[[ $OUT == pieces=5\ * && $OUT == *"status=HTTP/1.1 200 OK" ]]'
check "... its request in the access log and at the origin" \
	eval 'inner origin.test && grep -q "m=split" "$NGLOG"'

# Each of these gets the 200 (sluice is connected to the origin by then),
# then must be refused before a byte of it reaches the origin.
n0=$(wc -l <"$NGLOG")
mark
hello tls10 origin.test
check "a hello offering only TLS 1.0: refused, no ServerHello ($OUT)" \
	eval '[[ ( $OUT == end=eof* || $OUT == end=rst* ) && $OUT != *handshake* ]]'
check "... logged as the guest's TLS failing" logged "door=forward .*host=origin.test .*reason=client-tls-failed"
check "... the daemon is alive" kill -0 "$PID"
mark
hello plain origin.test
check "clear-text HTTP after the 200: closed, nothing answered ($OUT)" \
	eval '[[ $OUT == "end=eof rx=none" || $OUT == "end=rst rx=none" ]]'
check "... logged as not TLS" logged "door=forward .*host=origin.test .*reason=tls-not-tls"
check "... the daemon is alive" kill -0 "$PID"
mark
hello malformed origin.test
check "a hello whose extensions run past its end: closed ($OUT)" \
	eval '[[ ( $OUT == end=eof* || $OUT == end=rst* ) && $OUT != *handshake* ]]'
check "... logged as tls-malformed" logged "door=forward .*host=origin.test .*reason=tls-malformed"
check "... the daemon is alive" kill -0 "$PID"
check "none of the three reached the origin (no request in its log)" no_request_since "$n0"

# --- origins whose certificate fails -------------------------------------------------------
# refused HOST TAG: curl trusting sluice's CA; 502 upstream-cert-invalid
# must come inside sluice's TLS (curl verified the leaf to read it).
refused() {
	OUT=$(G curl -sS --max-time 10 -x http://127.0.0.1:3128 --cacert "$SLCA" -D - -o /dev/null \
		"https://$1/?m=$2" 2>&1 || true)
	[[ $OUT == *"HTTP/1.1 502"* && $OUT == *"Sluice-Reason: upstream-cert-invalid"* ]] ||
		{ echo "--- $1: $OUT" >&2; false; }
}
mark
check "an origin with an expired certificate: 502 upstream-cert-invalid inside sluice's TLS" \
	refused expired.test expired
check "... the log line says why" logged "expired.test:443: upstream-cert-invalid: .*expired"
mark
check "an incomplete chain (leaf from an intermediate, sent without it): 502 upstream-cert-invalid" \
	refused chain.test chain
check "... the log line says why" logged "chain.test:443: upstream-cert-invalid: "
check "no request reached either origin" eval '! grep -Eq "m=(expired|chain)" "$NGLOG"'
mark
check "control: the same leaf with its intermediate is verified (200)" \
	eval '[ "$(G curl -sS --max-time 10 -x http://127.0.0.1:3128 --cacert "$SLCA" \
		"https://fullchain.test/?m=full")" = "hello over tls" ]'
check "... inner request logged" inner fullchain.test

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
