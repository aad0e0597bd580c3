#!/bin/bash
# One list of exec, file and network cases, run against a pool of the
# backend named by $1 (ns, vm or rpc): the same checks for namespaces, for
# QEMU microVMs (TCG where KVM cannot boot a guest) and for podman
# containers made by sluice-supervisor-podman through the rpc backend
# (issue 22; its podman storage is private, under $E2E_TMP/sup, and
# removed on every exit path). For rpc the supervisor is also killed:
# sluiced must start it again and re-adopt the claims.
#
# The real sluiced runs in the gw namespace of net.sh with one pool of the
# backend (host template, one lane with a forward door); an operator on
# the API's unix socket claims, runs commands, moves files and fetches
# from net.sh's origin through the door. The guest trusts sluice's CA
# (issue 18): with only what it was given (the proxy variables, the CA
# variables, /etc/sluice/ca.pem, which is certs.ca_cert byte for byte),
# curl, python3's urllib and openssl s_client reach an intercepted host
# (icpt.origin.test, a python TLS origin started here) through CONNECT on
# the door, the leaf is sluice's and the inner GET has its access line;
# curl trusting only the host's system bundle refuses that leaf (60).
# With no proxy variable (issue 21), names resolve through the lane's DNS
# door and curl, node, python and ssh (to an sshd started here on
# ssh.test:22) reach them through the name door.
# Credentials (issue 19): a placeholder token used by curl and git, and
# SigV4 with placeholder keys: an S3 GET (UNSIGNED-PAYLOAD), and requests
# of the other services, with no X-Amz-Content-SHA256 (a form POST, a
# chunked JSON POST, a bodyless GET), each verified at the origin by
# botocore with the real keys; a body past 1 MiB is refused 413 and never
# reaches the origin.
# Then the daemon is stopped and started again: the claimed sandbox must
# be re-adopted and keep its files, and the warm ones must come back.
# Everything ends with the test. The credentials' values (the git token,
# the S3 secret) are canaries (lib.sh): the suite's scan after the run
# (e2e_zz_canary, which also follows this test run alone) finds none, in
# any spelling, in the daemon's log, its data directory (journal, state
# file, the sandboxes' records), the API's answers (every exec's output:
# everything the guest printed, its whole environment included) or
# anything else kept; the files the origin reads them from are in
# $E2E_SECRET.
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
. "$(dirname "$0")/lib.sh"
BACKEND=${1:?usage: backend.sh ns|vm|rpc}
. "$(dirname "$0")/net.sh"

SOCK=$E2E_TMP/api.sock
LOG=$E2E_TMP/sluiced.log
: >"$LOG"
# shellcheck source=tests/e2e/api_lib.sh
. "$(dirname "$0")/api_lib.sh"
# On any exit (ctest's SIGTERM included, through lib.sh's trap, after the
# daemon is ended): the sandboxes the daemon's log says it started; for
# rpc, every container and image of the supervisor's private podman
# storage, its mounts, the storage itself (before $E2E_TMP is kept).
SUP=${SL_SUPERVISOR_PODMAN:-$SL_BUILD/gateway/sluice-supervisor-podman}
SUPDIR=$E2E_TMP/sup
PODMAN=(podman --root "$SUPDIR/storage" --runroot "$SUPDIR/run" --tmpdir "$SUPDIR/tmp"
	--cgroup-manager cgroupfs --events-backend file)
podman_store_cleanup() {
	[ -d "$SUPDIR" ] || return 0
	timeout 60 "${PODMAN[@]}" rm -af -t 0 >/dev/null 2>&1 || true
	timeout 60 "${PODMAN[@]}" rmi -af >/dev/null 2>&1 || true
	findmnt -rn -o TARGET | grep "^$SUPDIR/" | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$SUPDIR"
}
# rpc: sluiced makes each sandbox's namespace (/run/netns/sl-rpc-ID) and
# keeps it while the sandbox outlives it; the ids are the containers'
# labels and the data_dir's sandbox directories.
rpc_netns_cleanup() {
	local id
	for id in $(timeout 60 "${PODMAN[@]}" ps -a --format '{{index .Labels "sluice.id"}}' 2>/dev/null) \
		$(ls "$E2E_TMP/data/sandboxes" 2>/dev/null); do
		[[ $id =~ ^[A-Za-z0-9_.-]+$ ]] && [ -e "/run/netns/sl-rpc-$id" ] &&
			ip netns del "sl-rpc-$id" 2>/dev/null
	done
	return 0
}
e2e_cleanup_extra() {
	end_left_sandboxes "$LOG"
	if [ "$BACKEND" = rpc ]; then
		rpc_netns_cleanup
		podman_store_cleanup
	fi
}
# A start that failed says why: the daemon's log. (api.sh has its own.)
declare -F dump_log >/dev/null ||
	dump_log() { echo "--- the daemon's log (last 80 lines):" >&2; tail -n 80 "$LOG" >&2; }

if [ "$BACKEND" = vm ] && [ ! -f "$SL_BUILD/vm/vmlinux" ]; then
	fail "the guest images are built ($SL_BUILD/vm/vmlinux): ./build.sh build makes them"
	finish
fi
POOL_EXTRA=
if [ "$BACKEND" = rpc ]; then
	if ! command -v podman >/dev/null || ! [ -x "$SUP" ]; then
		fail "podman is installed and $SUP built (./build.sh deps, build)"
		finish
	fi
	POOL_EXTRA="supervisor: { command: [$SUP, --state-dir, $SUPDIR] }"
	# A sandbox's cgroups are podman's (libpod-CONTAINER_ID), not named
	# by its id: found through the container sluice-ID of the private
	# storage, whose id is remembered (it is gone after the stop).
	cg_dirs() {
		local f=$E2E_TMP/cid-$1 cid
		[ -s "$f" ] || "${PODMAN[@]}" inspect --format '{{.Id}}' "sluice-$1" >"$f" 2>/dev/null || true
		cid=$(cat "$f" 2>/dev/null)
		[ -n "$cid" ] || return 0
		find /sys/fs/cgroup -maxdepth 8 -type d -name "libpod-$cid" 2>/dev/null
	}
fi

# --- an HTTPS origin for the intercepting door -------------------------------
# 10.99.0.10:443 in inet (nginx has 80 and 81), icpt.origin.test in net.sh's
# dnsmasq; its self-signed certificate is the daemon's certs.upstream_ca.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=icpt.origin.test -addext subjectAltName=DNS:icpt.origin.test \
	-keyout "$E2E_TMP/tls.key" -out "$E2E_TMP/tls.crt" 2>/dev/null
# Credentials (issue 19): a placeholder for icpt.origin.test. The origin
# knows the real token (a file in $E2E_SECRET only it and the daemon's
# environment see)
# and says "token ok" or "token bad", never the value; /repo.git/ is a git
# repository over the dumb HTTP protocol behind Basic auth
# (x-access-token:TOKEN), as GitHub's is.
GHTOKEN="ghp-canary-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SL_E2E_GHTOKEN=$GHTOKEN
printf '%s' "$GHTOKEN" >"$E2E_SECRET/ghtoken"
git init -q --bare "$E2E_TMP/repo.git"
git init -q "$E2E_TMP/work" && echo "private repo" >"$E2E_TMP/work/README" &&
	git -C "$E2E_TMP/work" add README &&
	git -C "$E2E_TMP/work" -c user.name=t -c user.email=t@t commit -qm one &&
	git -C "$E2E_TMP/work" push -q "$E2E_TMP/repo.git" HEAD:refs/heads/main &&
	git -C "$E2E_TMP/repo.git" symbolic-ref HEAD refs/heads/main &&
	git -C "$E2E_TMP/repo.git" update-server-info
AWS_AKID=AKIAE2EREALKEY000001
AWS_SECRET="e2e-aws-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export SL_E2E_AWS_SECRET=$AWS_SECRET
printf '%s' "$AWS_SECRET" >"$E2E_SECRET/awssecret"
# A tenant's own credential, brought with a claim (never in the daemon's
# configuration or environment): the origin's /tenant says whether the one
# X-Tenant-Key it got is it.
TKEY="tenant-canary-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s' "$TKEY" >"$E2E_SECRET/tkey"
canary git-token="$GHTOKEN" s3-secret="$AWS_SECRET" tenant-key="$TKEY"
cat > "$E2E_TMP/tls.py" <<'PY'
import base64, http.server, os, socketserver, ssl, sys
TOKEN = open(sys.argv[3]).read()
REPO = sys.argv[4]
AWS = ("AKIAE2EREALKEY000001", open(sys.argv[5]).read())
TKEY = open(sys.argv[6]).read()
def sigv4_ok(h, method, path):
    # botocore, an implementation independent of sluice's, signs what
    # arrived with the real keys; the signature must be the one sent.
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    a = h.get("Authorization", "")
    if not a.startswith("AWS4-HMAC-SHA256 Credential=" + AWS[0] + "/"):
        return False
    parts = dict(p.strip().split("=", 1) for p in a[len("AWS4-HMAC-SHA256 "):].split(","))
    scope = parts["Credential"].split("/")
    req = AWSRequest(method=method, url="https://icpt.origin.test" + path)
    for k in parts["SignedHeaders"].split(";"):
        req.headers[k] = h.get(k)
    req.context["timestamp"] = h.get("X-Amz-Date")
    auth = S3SigV4Auth(Credentials(AWS[0], AWS[1]), scope[3], scope[2])
    cr = auth.canonical_request(req)
    sig = auth.signature(auth.string_to_sign(req, cr), req)
    if sig != parts["Signature"]:
        sys.stderr.write("tls origin: sigv4 mismatch: %r over %r\n" % (a, cr))
    return sig == parts["Signature"]
def sigv4_body_ok(h, method, path, body):
    # A client that sends no X-Amz-Content-SHA256 (every service but S3)
    # signs SHA-256 of the body: botocore's SigV4Auth hashes the body that
    # arrived, however it was framed.
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    a = h.get("Authorization", "")
    if "X-Amz-Content-SHA256" in h or not a.startswith("AWS4-HMAC-SHA256 Credential=" + AWS[0] + "/"):
        return False
    parts = dict(p.strip().split("=", 1) for p in a[len("AWS4-HMAC-SHA256 "):].split(","))
    scope = parts["Credential"].split("/")
    req = AWSRequest(method=method, url="https://icpt.origin.test" + path, data=body)
    for k in parts["SignedHeaders"].split(";"):
        req.headers[k] = h.get(k)
    req.context["timestamp"] = h.get("X-Amz-Date")
    auth = SigV4Auth(Credentials(AWS[0], AWS[1]), scope[3], scope[2])
    cr = auth.canonical_request(req)
    sig = auth.signature(auth.string_to_sign(req, cr), req)
    if sig != parts["Signature"]:
        sys.stderr.write("tls origin: sigv4 mismatch: %r over %r\n" % (a, cr))
    return sig == parts["Signature"]
class H(http.server.BaseHTTPRequestHandler):
    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            b = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    return b
                b += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))
    def sts(self):
        b = self.body()
        try:
            ok = sigv4_body_ok(self.headers, self.command, self.path, b)
        except Exception as e:
            sys.stderr.write("tls origin: sigv4 check failed: %r\n" % e)
            ok = False
        sys.stderr.write("tls origin: sts %s %s framing=%s body=%d %s\n" % (
            self.command, self.path, "chunked" if "Transfer-Encoding" in self.headers else "length",
            len(b), "ok" if ok else "bad"))
        return self.reply(200, b"sigv4 ok\n" if ok else b"sigv4 bad\n")
    def do_POST(self):
        if self.path.startswith("/sts/"):
            return self.sts()
        return self.reply(404, b"")
    def reply(self, code, b, extra=()):
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def authorized(self):
        want = "Basic " + base64.b64encode(("x-access-token:" + TOKEN).encode()).decode()
        got = self.headers.get_all("Authorization") or []
        return got == [want]
    def do_GET(self):
        if self.path.startswith("/sts/"):
            return self.sts()
        if self.path.startswith("/s3/"):
            try:
                ok = sigv4_ok(self.headers, "GET", self.path)
            except Exception as e:
                sys.stderr.write("tls origin: sigv4 check failed: %r\n" % e)
                ok = False
            return self.reply(200, b"sigv4 ok\n" if ok else b"sigv4 bad\n")
        if self.path.startswith("/tenant"):
            got = self.headers.get_all("X-Tenant-Key") or []
            return self.reply(200, b"tenant none\n" if not got else
                              b"tenant ok\n" if got == [TKEY] else b"tenant bad\n")
        if self.path.startswith("/whoami"):
            return self.reply(200, b"token ok\n" if self.authorized() else b"token bad\n")
        if self.path.startswith("/repo.git/"):
            if not self.authorized():
                return self.reply(401, b"", [("WWW-Authenticate", 'Basic realm="git"')])
            p = os.path.normpath(os.path.join(REPO, self.path[10:].split("?")[0]))
            if not p.startswith(REPO) or not os.path.isfile(p):
                return self.reply(404, b"")
            return self.reply(200, open(p, "rb").read())
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
# Not through I: $! must be the server itself, for lib.sh's trap.
ip netns exec "$inet" "$PY" "$E2E_TMP/tls.py" "$E2E_TMP/tls.crt" "$E2E_TMP/tls.key" \
	"$E2E_SECRET/ghtoken" "$E2E_TMP/repo.git" "$E2E_SECRET/awssecret" "$E2E_SECRET/tkey" \
	>"$E2E_TMP/tls.log" 2>&1 &
track $!
wait_for "$E2E_TMP/tls.log" ready || { fail "the TLS origin starts"; finish; }

# --- an sshd for the name door's byte tunnel (issue 21) -----------------------
# 10.99.0.10:22 and :2222 in inet (ssh.test in net.sh's dnsmasq), its own
# host key and one authorized key, both made here; root's commands run in
# inet. The policy allows ssh.test:22 only: 2222 is the refused port,
# served too so that a reset there is the door's, not a missing listener's.
mkdir -p "$E2E_TMP/ssh"
ssh-keygen -q -t ed25519 -N '' -C e2e-host -f "$E2E_TMP/ssh/host_key"
ssh-keygen -q -t ed25519 -N '' -C e2e-guest -f "$E2E_TMP/ssh/id_guest"
cp "$E2E_TMP/ssh/id_guest.pub" "$E2E_TMP/ssh/authorized_keys"
cat >"$E2E_TMP/ssh/sshd_config" <<SSHD
ListenAddress 10.99.0.10:22
ListenAddress 10.99.0.10:2222
HostKey $E2E_TMP/ssh/host_key
AuthorizedKeysFile $E2E_TMP/ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
UseDNS no
SSHD
# Privilege separation's empty directory (as the host's sshd service makes it).
[ -d /run/sshd ] || install -d -m 0755 /run/sshd
ip netns exec "$inet" /usr/sbin/sshd -D -e -f "$E2E_TMP/ssh/sshd_config" 2>"$E2E_TMP/sshd.log" &
track $!
wait_for "$E2E_TMP/sshd.log" "Server listening on 10\.99\.0\.10 port 2222" ||
	{ fail "the test sshd starts"; finish; }
# host_ssh PORT: the guest's key from inet itself, without sluice.
host_ssh() {
	I ssh -i "$E2E_TMP/ssh/id_guest" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o BatchMode=yes -o ConnectTimeout=10 -p "$1" root@10.99.0.10 echo ssh-ok 2>>"$E2E_TMP/ssh/host.err"
}

cat > "$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  fleet_teardown: false
  control_socket: off
  log: { level: info, format: text }
api: { listen: off, socket: $SOCK }
gateway:
  workers: 2
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [10.99.0.53], timeout_ms: 500, attempts: 1 }
  limits: { connect_timeout_ms: 1000 }
  access_log: stderr
lanes:
  - name: egress
    subnet: 10.88.1.0/24
    doors: { forward: 3128 }
policies:
  - name: web
    allow: ["origin.test", "icpt.origin.test", "origin.test:8081", "ssh.test:22"]
    intercept: ["icpt.origin.test"]
    allow_private: [10.99.0.0/24]
    credentials:
      - { name: gh-git, kind: placeholder, host: icpt.origin.test, env: GITHUB_TOKEN, value: "\${env:SL_E2E_GHTOKEN}" }
      - { name: s3, kind: sigv4, host: icpt.origin.test, access_key_id: $AWS_AKID, secret: "\${env:SL_E2E_AWS_SECRET}" }
pools:
  - name: p
    backend: $BACKEND
    $POOL_EXTRA
    template: host
    lane: egress
    policy: web
    warm: 1
    warm_max: 2
    limits: { memory_mb: 256, cpus: 1 }
    ttl: { default_seconds: 600, max_seconds: 3600 }
certs: { ca_cert: $E2E_TMP/ca.pem, ca_key: $E2E_TMP/ca.key, upstream_ca: $E2E_TMP/tls.crt }
YAML

PID=
# Waits for this start's own "started" line (an earlier run's is in the
# log too, and a killed one leaves its socket behind).
start_daemon() {
	mark
	nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>>"$LOG" &
	PID=$!
	track "$PID"
	for _ in $(seq 600); do
		since | grep -Eq "sluiced [0-9.]+ started" && [ -S "$SOCK" ] && return 0
		kill -0 "$PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# host_uids ID: the host uids a sandbox's processes run as (found by its
# cgroup), one per line.
host_uids() {
	local p
	for p in $(cg_pids "$1"); do awk '$1 == "Uid:" { print $2 }' "/proc/$p/status" 2>/dev/null; done | sort -u
}
# x ID JSON: POST /v1/sandboxes/ID/exec.
x() { op POST "/v1/sandboxes/$1/exec" "${JS[@]}" "$2"; }
out_is() { is 'd["stdout"]' "$1"; }

if ! start_daemon; then
	fail "the daemon starts with a $BACKEND pool"
	dump_log
	finish
fi
pass "the daemon starts with a $BACKEND pool"
# A vm pool's first sandbox boots the template and snapshots it: minutes
# are allowed under TCG on a loaded machine.
check "the pool fills (warm 1)" wait_warm p 1 240
check "GET /v1/info names the pool's backend" eval '[ "$(info_pool p backend)" = "$BACKEND" ]'

# --- claims -------------------------------------------------------------------
claim unix "" '{"pool":"p","env":{"FOO":"bar"}}'
A=$ID A_ADDR=$ADDR
check "a warm claim: 201, tier warm" eval 'status 201 && is "d[\"tier\"]" warm'
# The second claim brings its tenant's own credential (issue 19).
TCRED='{"name":"tk","host":"icpt.origin.test","header":"X-Tenant-Key","value":"'$TKEY'"}'
claim unix "" '{"pool":"p","credentials":['"$TCRED"']}'
B2=$ID B2_ADDR=$ADDR
check "a second claim, with a tenant credential: 201" status 201
# tcred FIELD: the claim answer's tenant credential tk's field.
tcred() { j '[c for c in d["credentials"] if c["name"] == "tk"][0]["'"$1"'"]'; }
check "... the answer lists it (source tenant, held, a fingerprint), never its value" \
	eval '[ "$(tcred source)" = tenant ] && [ "$(tcred state)" = held ] && [[ $(tcred fingerprint) == fp1:* ]] && [[ $B != *"$TKEY"* ]]'
TFP=$(tcred fingerprint)

# --- exec -----------------------------------------------------------------------
x "$A" '{"argv":["sh","-c","echo out; echo err >&2; exit 3"]}'
check "exec: stdout, stderr and the exit code" \
	eval 'status 200 && out_is out && is "d[\"stderr\"]" err && is "d[\"exit_code\"]" 3'
x "$A" '{"argv":["sh","-c","echo $FOO $BAR $http_proxy"],"env":{"BAR":"baz"}}'
check "exec: the claim's env, the exec's env and the proxy variables" \
	out_is "bar baz http://10.88.1.1:3128"
x "$A" '{"argv":["sh","-c","pwd; cat"],"cwd":"/tmp","stdin":"fed in"}'
check "exec: cwd and stdin" is 'd["stdout"] == "/tmp\nfed in"' true
x "$A" '{"argv":["sleep","30"],"timeout_seconds":1}'
check "exec: a timeout ends the command" eval 'status 200 && is "d[\"timed_out\"]" true'
x "$A" '{"argv":["sh","-c","kill -9 $$"]}'
check "exec: killed by a signal -> signal 9" is 'd["signal"]' 9
x "$A" '{"argv":["hostname"]}'
check "the hostname is the sandbox's id" out_is "$A"
x "$A" '{"argv":["sh","-c","umask"]}'
check "a command's umask is 0022, as on any host" eval 'status 200 && out_is 0022'
x "$A" '{"argv":["uname","-r"]}'
if [ "$BACKEND" = vm ]; then
	check "it is a microVM: its kernel is the guest image's ($(cat "$SL_BUILD/vm/release"))" \
		out_is "$(cat "$SL_BUILD/vm/release")"
	check "its processes (found by its cgroup) are one QEMU" \
		eval '[ "$(for p in $(cg_pids "$A"); do cat /proc/$p/comm; done | sort -u)" = qemu-system-x86 ]'
	QPID=$(cg_pids "$A" | head -1)
	check "QEMU runs in the fleet's network namespace" \
		test "$(ip netns identify "$QPID")" = "$FLEET"
	check "QEMU runs without capabilities, with no_new_privs and a seccomp filter" \
		eval 'grep -q "^CapEff:[[:space:]]*0*$" /proc/$QPID/status && grep -q "^CapBnd:[[:space:]]*0*$" /proc/$QPID/status &&
		      grep -q "^NoNewPrivs:[[:space:]]*1" /proc/$QPID/status && grep -q "^Seccomp:[[:space:]]*2" /proc/$QPID/status'
	check "its environment is bare" eval '[ "$(tr "\0" "\n" </proc/$QPID/environ)" = "PATH=/usr/bin:/bin" ]'
	x "$A" '{"argv":["sh","-c","awk \"/MemTotal/ { print int(\\$2 / 1024) }\" /proc/meminfo"]}'
	check "the guest has the pool's memory (256 MiB, less what the kernel keeps: $(j 'd["stdout"]' | tr -d '\n') MiB)" \
		eval 'm=$(j "d[\"stdout\"]"); [ "$m" -gt 200 ] && [ "$m" -le 256 ]'
elif [ "$BACKEND" = rpc ]; then
	check "it shares the host's kernel" out_is "$(uname -r)"
	check "it is the podman container sluice-$A of the supervisor's own storage, running" \
		eval '[ "$("${PODMAN[@]}" inspect --format "{{.State.Running}} {{index .Config.Labels \"sluice.id\"}}" "sluice-$A")" = "true $A" ]'
	RPID=$("${PODMAN[@]}" inspect --format '{{.State.Pid}}' "sluice-$A" 2>/dev/null || echo 0)
	check "its first process ($RPID) is the agent, in that container's cgroup and a pid namespace of its own" \
		eval '[ "$(cat /proc/$RPID/comm)" = sluice-agent ] && cg_pids "$A" | grep -qx "$RPID" &&
			[ "$(readlink /proc/$RPID/ns/pid)" != "$(readlink /proc/$$/ns/pid)" ]'
	check "it runs in the namespace sluiced made for it (sl-rpc-$A)" \
		test "$(ip netns identify "$RPID" 2>/dev/null)" = "sl-rpc-$A"
else
	check "it shares the host's kernel" out_is "$(uname -r)"
	# Guest root is an unprivileged host uid of the sandbox's own range.
	x "$A" '{"argv":["sh","-c","id -u; echo made > /made-by-guest"]}'
	check "userns: the guest is root inside (id -u 0)" eval 'status 200 && out_is 0'
	A_UID=$(host_uids "$A")
	B_UID=$(host_uids "$B2")
	check "userns: its processes (found by its cgroup) run as one host uid, not 0 ($A_UID)" \
		eval '[[ $A_UID =~ ^[0-9]+$ ]] && [ "$A_UID" -ge 65536 ]'
	check "userns: the registry holds that range for its state directory" \
		eval '[ "$(readlink "/run/sluice/idmap/$A_UID")" = "$E2E_TMP/data/sandboxes/$A" ]'
	AF=$E2E_TMP/data/sandboxes/$A/upper/made-by-guest
	check "userns: a file it made is in its writable layer on the host, owned by that uid ($(stat -c %u:%g "$AF" 2>&1))" \
		eval '[ "$(cat "$AF")" = made ] && [ "$(stat -c %u:%g "$AF")" = "$A_UID:$A_UID" ]'
	check "userns: the other claim runs as a range of its own ($B_UID)" \
		eval '[[ $B_UID =~ ^[0-9]+$ ]] && [ "$B_UID" -ge 65536 ] && [ "$B_UID" != "$A_UID" ]'
	x "$A" '{"argv":["cat","/proc/mounts"]}'
	check "userns: the guest's /proc/mounts is read (its root overlay) and names no host path" \
		eval 'status 200 && [[ $(j "d[\"stdout\"]") == *"sluice / overlay "* ]] &&
			[[ $(j "d[\"stdout\"]") != *"$E2E_TMP"* && $(j "d[\"stdout\"]") != *"/work/"* ]]'
	x "$A" '{"argv":["sh","-c","ls /etc/ssl/certs | grep -c . >/dev/null && echo certs; ls -d /etc/ssl/private"]}'
	check "host template: the host's certificates are there, /etc/ssl/private is not (exit $(j 'd["exit_code"]'))" \
		eval '[ -d /etc/ssl/private ] && out_is certs && is "d[\"exit_code\"]" 2 &&
			[[ $(j "d[\"stderr\"]") == *"No such file or directory"* ]]'
fi
x "$A" '{"argv":["sh","-c","echo $(( $(date +%s) / 60 ))"]}'
check "the guest's clock is the host's (to the minute)" \
	eval 'g=$(j "d[\"stdout\"].strip()"); h=$(( $(date +%s) / 60 )); [ "$g" -ge $((h - 1)) ] && [ "$g" -le $((h + 1)) ]'
x "$A" '{"argv":["sh","-c","head -c 32 /dev/urandom | od -An -tx1 | tr -d \" \\n\""]}'
SA=$ST RA=$(j 'd["stdout"]')
x "$B2" '{"argv":["sh","-c","head -c 32 /dev/urandom | od -An -tx1 | tr -d \" \\n\""]}'
SB=$ST RB=$(j 'd["stdout"]')
check "two sandboxes draw different random bytes (status $SA, $SB: ${RA:0:16}... ${RB:0:16}...)" \
	eval '[ "$SA" = 200 ] && [ "$SB" = 200 ] && [[ $RA =~ ^[0-9a-f]{64}$ ]] && [[ $RB =~ ^[0-9a-f]{64}$ ]] && [ "$RA" != "$RB" ]'
x "$A" '{"argv":["sh","-c","echo x > /usr/sluice-test"]}'
WST=$ST WRC=$(j 'd["exit_code"]')
check "a write to /usr in one sandbox runs (status $WST, exit $WRC)" \
	eval '[ "$WST" = 200 ] && [[ $WRC =~ ^[0-9]+$ ]]'
if [ "$WRC" = 0 ]; then
	x "$A" '{"argv":["test","-e","/usr/sluice-test"]}'
	check "... it wrote: /usr/sluice-test is there in that sandbox" eval 'status 200 && is "d[\"exit_code\"]" 0'
fi
check "the template is read-only or private: a write to /usr stays in this sandbox" \
	eval 'x "$B2" "{\"argv\":[\"test\",\"!\",\"-e\",\"/usr/sluice-test\"]}"; status 200 && is "d[\"exit_code\"]" 0'

# Guest root killing the agent (the command's parent): a VM's PID 1 starts
# it again; a namespace's PID 1 cannot be killed from inside. Either way
# the sandbox keeps serving.
x "$A" '{"argv":["sh","-c","kill -9 $PPID; sleep 1"],"timeout_seconds":5}'
x "$A" '{"argv":["echo","still here"]}'
check "after its agent is killed from inside, the sandbox still runs commands" \
	eval 'status 200 && out_is "still here"'
x "$A" '{"argv":["sh","-c","echo $http_proxy"]}'
check "... with the proxy variables it was configured with" out_is "http://10.88.1.1:3128"

# The pool's memory limit is the sandbox cgroup's (a VM's adds QEMU's own
# overhead to the guest's 256 MiB).
memlim() {
	local d
	for d in $(cg_dirs "$A"); do
		[ -f "$d/memory.limit_in_bytes" ] && { echo $(($(cat "$d/memory.limit_in_bytes") / 1048576)); return; }
		[ -f "$d/memory.max" ] && { echo $(($(cat "$d/memory.max") / 1048576)); return; }
	done
	echo none
}
# and its CPU quota one CPU (limits.cpus: 1): quota = period. The cgroup
# must be found: "none" = "none" is no evidence.
cpulim() {
	local d
	for d in $(cg_dirs "$A"); do
		[ -f "$d/cpu.cfs_quota_us" ] &&
			{ echo "$(cat "$d/cpu.cfs_quota_us") $(cat "$d/cpu.cfs_period_us")"; return; }
		[ -f "$d/cpu.max" ] && { cat "$d/cpu.max"; return; }
	done
	echo none
}
CL=$(cpulim)
check "its cgroup's CPU quota is one CPU ($CL)" \
	eval '[[ $CL =~ ^[1-9][0-9]*\ [1-9][0-9]*$ ]] && [ "${CL% *}" = "${CL#* }" ]'
ML=$(memlim)
if [ "$BACKEND" = vm ]; then
	check "its cgroup has a memory limit above the guest's 256 MiB ($ML MiB)" eval '[ "$ML" -gt 256 ] 2>/dev/null'
else
	check "its cgroup's memory limit is the pool's 256 MiB ($ML MiB)" test "$ML" = 256
fi

# --- files ----------------------------------------------------------------------
head -c 3M /dev/urandom >"$E2E_TMP/three"
SUM3=$(sha256sum <"$E2E_TMP/three" | cut -d' ' -f1)
op PUT "/v1/sandboxes/$A/files?path=/tmp/three&mode=0640" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$E2E_TMP/three"
check "files: PUT 3 MiB -> 201" eval 'status 201 && is "d[\"bytes\"]" 3145728'
op GET "/v1/sandboxes/$A/files?path=/tmp/three"
check "files: GET it back, same sha256" \
	eval 'status 200 && [ "$(sha256sum <"$BODY" | cut -d" " -f1)" = "$SUM3" ]'
x "$A" '{"argv":["sh","-c","stat -c \"%s %a\" /tmp/three; sha256sum /tmp/three | cut -d\" \" -f1"]}'
check "files: the guest sees its size, mode and contents" out_is "3145728 640
$SUM3"
op GET "/v1/sandboxes/$A/files?path=/tmp"
check "files: a directory lists" \
	is '[e["size"] for e in d["entries"] if e["name"] == "three"]' "[3145728]"
op GET "/v1/sandboxes/$A/files?path=/tmp/nothing-here"
check "files: a missing path -> 404" status 404
op GET "/v1/sandboxes/$B2/files?path=/tmp/three"
check "files: another sandbox does not have it" status 404

# --- network ----------------------------------------------------------------------
x "$A" '{"argv":["curl","-sS","-m","20","http://origin.test/"],"timeout_seconds":30}'
check "network: curl through the forward door reaches the origin" out_is "hello from origin"
x "$A" '{"argv":["curl","-sS","-m","20","-o","/dev/null","-w","%{http_code}","http://other.test/"],"timeout_seconds":30}'
check "network: a name outside the policy -> 403 from the door" out_is 403
x "$A" '{"argv":["curl","-sS","-v","--connect-timeout","5","-m","10","--noproxy","*","http://10.99.0.10/"],"timeout_seconds":30}'
check "network: a direct connection around the door fails: refused at once, a reset (7)" \
	eval 'status 200 && is "d[\"exit_code\"]" 7 && is "d[\"stdout\"]" "" &&
		j "d[\"stderr\"]" | grep -E "^\* connect to 10\.99\.0\.10 port 80 failed: Connection refused" >/dev/null'
x "$A" '{"argv":["sh","-c","ip -4 -o addr show | grep -v \" lo \" | grep -o \"inet [0-9./]*\""]}'
has_addr() { [[ $(j 'd["stdout"]') == *"inet $1/"* ]] || { echo "    got: $B" >&2; return 1; }; }
check "network: the sandbox has its own address ($A_ADDR)" has_addr "$A_ADDR"

# --- the guest trusts sluice's CA (issue 18) ----------------------------------------
# An intercepted host through CONNECT on the lane's forward door, with only
# what the guest was given: the proxy variables, /etc/sluice/ and the CA
# variables in every command's environment. No --cacert, no -k.
# xsh ID SCRIPT: exec sh -c SCRIPT (60 s: TCG is slow).
xsh() { x "$1" "$("$PY" -c 'import json,sys
print(json.dumps({"argv": ["sh", "-c", sys.argv[1]], "timeout_seconds": 60}))' "$2")"; }
# out_to FILE: the last exec's stdout, byte for byte.
out_to() { "$PY" -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["stdout"])' "$BODY" >"$1"; }
# inner_line: the intercepted GET's own access line, since the mark.
inner_line() {
	logged "access door=forward client=$A .*method=GET host=icpt\.origin\.test port=443 .*status=200 .* mode=intercept sni=icpt\.origin\.test "
}
x "$A" '{"argv":["cat","/etc/sluice/ca.pem"]}'
out_to "$E2E_TMP/guest-ca.pem"
check "trust: the guest's /etc/sluice/ca.pem is the daemon's CA (certs.ca_cert), byte for byte" \
	eval 'status 200 && is "d[\"exit_code\"]" 0 && cmp "$E2E_TMP/guest-ca.pem" "$E2E_TMP/ca.pem"'
mark
x "$A" '{"argv":["curl","-sS","-m","30","https://icpt.origin.test/"],"timeout_seconds":60}'
check "trust: curl https://icpt.origin.test/ through CONNECT, trusting what the guest has" \
	eval 'out_is "hello over tls" && is "d[\"exit_code\"]" 0'
check "... intercepted: the inner GET has its access line (200, mode=intercept)" inner_line
mark
x "$A" '{"argv":["python3","-c","import urllib.request as u; print(u.urlopen(\"https://icpt.origin.test/\", timeout=30).read().decode(), end=\"\")"],"timeout_seconds":60}'
check "trust: python3 urllib.request.urlopen of it too" \
	eval 'out_is "hello over tls" && is "d[\"exit_code\"]" 0'
check "... intercepted: its inner GET's line" inner_line
# openssl verifies against its default store, which SSL_CERT_FILE names;
# it prints the verdict, the leaf's issuer and the leaf.
xsh "$A" 'p=${https_proxy#*://}; p=${p%/}
openssl s_client -proxy "$p" -connect icpt.origin.test:443 -servername icpt.origin.test \
	-verify_hostname icpt.origin.test -verify_return_error </dev/null >/tmp/sc.txt 2>/dev/null
echo "rc=$?"; grep -o "Verify return code: .*" /tmp/sc.txt
openssl x509 -in /tmp/sc.txt -noout -issuer; openssl x509 -in /tmp/sc.txt'
out_to "$E2E_TMP/sclient.txt"
CA_SUBJ=$(openssl x509 -in "$E2E_TMP/ca.pem" -noout -subject)
check "trust: openssl s_client in the guest verifies the leaf (rc=0, 0 (ok)) and its issuer is sluice's CA (${CA_SUBJ#subject=})" \
	eval 'grep -qx "rc=0" "$E2E_TMP/sclient.txt" && grep -qx "Verify return code: 0 (ok)" "$E2E_TMP/sclient.txt" &&
		grep -qxF "issuer=${CA_SUBJ#subject=}" "$E2E_TMP/sclient.txt" || { sed "s/^/    /" "$E2E_TMP/sclient.txt" >&2; false; }'
check "... the leaf the guest saw verifies on the host against sluice's CA, not the origin's certificate" \
	eval 'quiet openssl verify -CAfile "$E2E_TMP/ca.pem" "$E2E_TMP/sclient.txt" &&
		! quiet openssl verify -CAfile "$E2E_TMP/tls.crt" "$E2E_TMP/sclient.txt"'
# The negative control: the host's plain system bundle, which lacks the CA,
# copied into the guest (a vm guest's own /etc/ssl/certs bundle has the CA
# appended; an ns guest's is the host's).
SYSROOTS=/etc/ssl/certs/ca-certificates.crt
op PUT "/v1/sandboxes/$A/files?path=/tmp/sysroots.pem" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$SYSROOTS"
check "files: the host's system bundle into the guest (201), a bundle without sluice's CA" \
	eval 'status 201 && ! grep -qF "$(sed -n 2p "$E2E_TMP/ca.pem")" "$SYSROOTS"'
xsh "$A" 'SSL_CERT_FILE=/tmp/sysroots.pem CURL_CA_BUNDLE=/tmp/sysroots.pem curl -sS -m 30 https://icpt.origin.test/'
check "trust: ... curl trusting that bundle only refuses sluice's leaf (60)" \
	eval 'is "d[\"exit_code\"]" 60 && [[ $(j "d[\"stderr\"]") == *"SSL certificate problem"* ]]'

# --- credentials: a placeholder (issue 19) ---------------------------------------
x "$A" '{"argv":["sh","-c","echo \"$GITHUB_TOKEN\""]}'
SENT=$(j 'd["stdout"].strip()')
check "credentials: the guest's GITHUB_TOKEN is a sentinel, not the token ($SENT)" \
	eval '[[ $SENT == sluice-ph-* && $SENT != *"$GHTOKEN"* ]]'
# Everything the guest holds in its environment and the kernel's command
# line, printed: the canary scan looks for the values in this answer too.
xsh "$A" 'env; tr "\0" "\n" </proc/1/environ; cat /proc/cmdline'
check "credentials: the guest printed its environment (GITHUB_TOKEN=$SENT, AWS_SECRET_ACCESS_KEY=...), its PID 1's and its kernel command line" \
	eval 'status 200 && is "d[\"exit_code\"]" 0 &&
		[[ $(j "d[\"stdout\"]") == *"GITHUB_TOKEN=$SENT"* && $(j "d[\"stdout\"]") == *AWS_SECRET_ACCESS_KEY=* ]]'
xsh "$A" 'curl -sS -m 30 "https://x-access-token:$GITHUB_TOKEN@icpt.origin.test/whoami"'
check "credentials: curl with the sentinel in the URL's userinfo: the origin saw the real token (Basic)" \
	out_is "token ok"
mark
xsh "$A" 'rm -rf /tmp/r && git clone -q "https://x-access-token:$GITHUB_TOKEN@icpt.origin.test/repo.git" /tmp/r && cat /tmp/r/README'
check "credentials: git clone https://x-access-token:\$GITHUB_TOKEN@... of a private repository" \
	eval 'out_is "private repo" || { j "d[\"stderr\"]" >&2; false; }'
check "... its requests' lines say inject=gh-git" logged "host=icpt\.origin\.test .*status=200 .* inject=gh-git$"
mark
xsh "$A" 'curl -sS -o /dev/null -w "%{http_code}" -m 30 -H "X-Token: $GITHUB_TOKEN" http://origin.test/'
check "credentials: the sentinel toward another host (origin.test, cleartext): 403, never forwarded" \
	out_is 403
check "... a credential-violation line naming the sandbox" \
	logged "credential-violation: $A .*origin\.test:80"
xsh "$A" 'curl -sS -o /dev/null -w "%{http_code}" -m 30 -H "Authorization: Bearer sluice-ph-00000000000000000000000000000000" https://icpt.origin.test/whoami'
check "credentials: a sentinel that is not the claim's own (another claim's): 403" out_is 403

# A tenant's credential: on its own claim's requests, no other's.
xsh "$B2" 'curl -sS -m 30 https://icpt.origin.test/tenant'
check "credentials: the claim's tenant credential reaches the origin (X-Tenant-Key, the real value)" \
	out_is "tenant ok"
xsh "$A" 'curl -sS -m 30 https://icpt.origin.test/tenant'
check "... and not another claim's requests (proven to reach the origin: 'tenant none')" \
	out_is "tenant none"
for bad in '{"name":"t2","host":"icpt.origin.test","header":"Host","value":"x"}' \
	'{"name":"t3","host":"icpt.origin.test","header":"X-K","value":"'"$TKEY"'\r\nX-Evil: 1"}' \
	'{"name":"gh-git","host":"icpt.origin.test","header":"X-K","value":"'"$TKEY"'"}'; do
	claim unix "" '{"pool":"p","credentials":['"$bad"']}'
	check "credentials: a claim whose credential is refused ($(j 'd["error"]["message"]' | cut -c1-70)...): 400, the value not echoed" \
		eval 'status 400 && [[ $B != *"$TKEY"* ]]'
done

# SigV4: the guest signs an S3 GET with the placeholder keys it was given
# (a small signer of its own: no SDK in every template); the origin checks
# the signature with botocore and the real keys.
cat >"$E2E_TMP/s3get.py" <<'PY'
import datetime, hashlib, hmac, os, urllib.request
ak, sk = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
host, path, region = "icpt.origin.test", "/s3/bucket/key.txt", "us-east-1"
t = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
hd = {"host": host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "x-amz-date": t}
sh = ";".join(sorted(hd))
cr = "\n".join(["GET", path, "", "".join(k + ":" + hd[k] + "\n" for k in sorted(hd)), sh, "UNSIGNED-PAYLOAD"])
scope = "%s/%s/s3/aws4_request" % (t[:8], region)
sts = "\n".join(["AWS4-HMAC-SHA256", t, scope, hashlib.sha256(cr.encode()).hexdigest()])
k = ("AWS4" + sk).encode()
for m in (t[:8], region, "s3", "aws4_request"):
    k = hmac.new(k, m.encode(), hashlib.sha256).digest()
sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
r = urllib.request.Request("https://" + host + path, headers={
    "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD", "X-Amz-Date": t,
    "Authorization": "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (ak, scope, sh, sig)})
print(urllib.request.urlopen(r, timeout=30).read().decode(), end="")
PY
op PUT "/v1/sandboxes/$A/files?path=/tmp/s3get.py" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$E2E_TMP/s3get.py"
x "$A" '{"argv":["sh","-c","echo \"$AWS_ACCESS_KEY_ID\""]}'
check "credentials: the guest's AWS_ACCESS_KEY_ID is a placeholder ($(j 'd["stdout"].strip()'))" \
	eval '[[ $(j "d[\"stdout\"].strip()") == SLUICE* ]]'
mark
xsh "$A" 'python3 /tmp/s3get.py'
check "credentials: an S3 GET the guest signed with placeholder keys: the origin verified sluice's signature (botocore, the real keys)" \
	eval 'out_is "sigv4 ok" || { j "d[\"stderr\"]" >&2; grep sigv4 "$E2E_TMP/tls.log" >&2; false; }'
check "... its line says inject=s3" logged "host=icpt\.origin\.test .*status=200 .* inject=s3$" ||
	sed 's/^/    /' "$E2E_TMP/tls.log" | tail -5 >&2

# SigV4 for every service but S3 (STS, DynamoDB, ...): the client sends no
# X-Amz-Content-SHA256 and signs SHA-256 of its body, so sluice holds the
# body (up to 1 MiB) before it dials, hashes it and signs again. The
# guest's signer is its own (no SDK in every template); the origin checks
# with botocore's SigV4Auth over the body it read. Each request goes
# through CONNECT on the door with http.client, so that the framing
# (Content-Length, signed; chunked) and Expect are the script's.
cat >"$E2E_TMP/sts.py" <<'PY'
import datetime, hashlib, hmac, http.client, os, ssl, sys, urllib.parse
ak, sk = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
host, region, service = "icpt.origin.test", "us-east-1", "sts"
mode = sys.argv[1]
form = b"Action=GetCallerIdentity&Version=2011-06-15"
query = ""
if mode == "post":      # a form body, Content-Length signed
    method, body, hd = "POST", form, {"content-type": "application/x-www-form-urlencoded",
                                      "content-length": str(len(form))}
elif mode == "chunked":  # a JSON body sent chunked (nothing signs the framing)
    body = b'{"TableName": "t", "Pad": "' + b"x" * 3000 + b'"}'
    method, hd = "POST", {"content-type": "application/x-amz-json-1.0",
                          "x-amz-target": "DynamoDB_20120810.DescribeTable"}
elif mode == "get":      # no body: signed at once
    method, body, hd, query = "GET", b"", {}, "Action=GetCallerIdentity&Version=2011-06-15"
elif mode == "big":      # a Content-Length past the bound, the body held back
    body = b"a" * (1024 * 1024 + 1)
    method, hd = "POST", {"content-type": "application/octet-stream",
                          "content-length": str(len(body))}
elif mode == "bigchunked":  # chunked, past the bound
    body = b"b" * (1024 * 1024 + 200 * 1024)
    method, hd = "POST", {"content-type": "application/octet-stream"}
t = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
hd.update({"host": host, "x-amz-date": t})
sh = ";".join(sorted(hd))
cr = "\n".join([method, "/sts/", query, "".join(k + ":" + hd[k] + "\n" for k in sorted(hd)), sh,
                hashlib.sha256(body).hexdigest()])
scope = "%s/%s/%s/aws4_request" % (t[:8], region, service)
sts = "\n".join(["AWS4-HMAC-SHA256", t, scope, hashlib.sha256(cr.encode()).hexdigest()])
k = ("AWS4" + sk).encode()
for m in (t[:8], region, service, "aws4_request"):
    k = hmac.new(k, m.encode(), hashlib.sha256).digest()
sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
hd["authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
    ak, scope, sh, sig)
px = urllib.parse.urlsplit(os.environ.get("https_proxy") or os.environ["HTTPS_PROXY"])
c = http.client.HTTPSConnection(px.hostname, px.port, context=ssl.create_default_context(), timeout=60)
c.set_tunnel(host, 443)
c.putrequest(method, "/sts/" + ("?" + query if query else ""), skip_host=True, skip_accept_encoding=True)
for n, v in hd.items():
    c.putheader(n, v)
chunked = mode in ("chunked", "bigchunked")
if chunked:
    c.putheader("Transfer-Encoding", "chunked")
if mode == "big":
    c.putheader("Expect", "100-continue")
c.endheaders()
if chunked:
    for i in range(0, len(body), 65536):
        p = body[i:i + 65536]
        c.send(b"%x\r\n" % len(p) + p + b"\r\n")
    c.send(b"0\r\n\r\n")
elif mode != "big":
    c.send(body)
r = c.getresponse()
print(r.status, r.getheader("Sluice-Reason") or "-", r.read().decode().strip())
PY
op PUT "/v1/sandboxes/$A/files?path=/tmp/sts.py" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$E2E_TMP/sts.py"
sts_seen() { grep -c "tls origin: sts " "$E2E_TMP/tls.log" || true; }
sts() { # MODE CHECK-TEXT: the guest's request, the origin's verdict
	mark
	xsh "$A" "python3 /tmp/sts.py $1"
	check "$2" eval 'out_is "200 - sigv4 ok" || { j "d[\"stdout\"]" >&2; j "d[\"stderr\"]" >&2; grep "sts\|sigv4" "$E2E_TMP/tls.log" | tail -3 >&2; false; }'
}
N0=$(sts_seen)
sts post "credentials: an STS POST (a form body, Content-Length signed, no X-Amz-Content-SHA256) the guest signed with placeholder keys: the origin verified sluice's signature over the body (botocore SigV4Auth, the real keys)"
check "... its line says inject=s3, and the body was relayed" \
	logged "method=POST host=icpt\.origin\.test .*status=200 bytes_in=[0-9]+ .* inject=s3$"
sts chunked "credentials: a DynamoDB-style JSON POST sent chunked: held, hashed de-chunked, signed; the origin verified it"
check "... and the origin read it chunked, as the guest framed it" \
	grep -q "tls origin: sts POST /sts/ framing=chunked body=3029 ok" "$E2E_TMP/tls.log"
sts get "credentials: a GET with no body (signed at once, the hash of nothing): the origin verified it"
N1=$(sts_seen)
check "the origin saw those three requests ($N0 -> $N1): the requests below could reach it" \
	test "$N1" -eq $((N0 + 3))
mark
xsh "$A" 'python3 /tmp/sts.py big'
check "credentials: a SigV4 POST whose Content-Length is past 1 MiB (Expect: 100-continue, no body sent): 413 sigv4-body-too-large ($(j 'd["stdout"]' | head -c 200))" \
	eval '[[ $(j "d[\"stdout\"]") == "413 sigv4-body-too-large "* ]]'
check "... its line: status=413 reason=sigv4-body-too-large, nothing injected" \
	logged "method=POST host=icpt\.origin\.test .*decision=deny reason=sigv4-body-too-large upstream=- status=413 .* inject=-$"
mark
xsh "$A" 'python3 /tmp/sts.py bigchunked'
check "credentials: a chunked SigV4 POST of 1.2 MiB: read up to the bound, then 413 sigv4-body-too-large ($(j 'd["stdout"]' | head -c 200))" \
	eval '[[ $(j "d[\"stdout\"]") == "413 sigv4-body-too-large "* ]]'
check "... its line counts the body read up to the bound (bytes_in over 1 MiB)" \
	logged "method=POST host=icpt\.origin\.test .*reason=sigv4-body-too-large upstream=- status=413 bytes_in=1[0-9]{6} .* inject=-$"
check "... and the origin saw neither of them (still $N1 requests)" test "$(sts_seen)" -eq "$N1"

# --- guest DNS (issue 21) ------------------------------------------------------
# The lane's DNS door answers from the claim's layer and never asks
# upstream: net.sh's dnsmasq logs every query it gets (--log-queries).
cat >"$E2E_TMP/dnsq.py" <<'PY'
import random, socket, struct, sys
name, qtype = sys.argv[1], {"A": 1, "AAAA": 28, "TXT": 16}[sys.argv[2]]
q = struct.pack(">HHHHHH", random.getrandbits(16), 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
q += struct.pack(">HH", qtype, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, (sys.argv[3], 53))
r = s.recv(2048)
print("rcode=%d answers=%d" % (r[3] & 15, struct.unpack(">H", r[6:8])[0]))
PY
op PUT "/v1/sandboxes/$A/files?path=/tmp/dnsq.py" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$E2E_TMP/dnsq.py"
GWA=10.88.1.1   # the egress lane's gateway (10.88.1.0/24)
x "$A" '{"argv":["cat","/etc/resolv.conf"]}'
check "dns: the guest's resolv.conf names its lane's DNS door ($GWA)" \
	eval '[[ $(j "d[\"stdout\"]") == *"nameserver $GWA"* ]]'
check "dns: (the stub upstream logs queries: it saw the gateway's own for icpt.origin.test)" \
	grep -q 'query\[A\] icpt\.origin\.test from' "$E2E_TMP/dnsmasq.log"
mark
QBEFORE=$(wc -l <"$E2E_TMP/dnsmasq.log")
# resolve NAME: the libc resolver's answer (getent where the guest has it;
# the vm guest's userland has python3 but no getent).
resolve() { xsh "$1" "python3 -c 'import socket,sys
try: print(socket.gethostbyname(sys.argv[1]))
except socket.gaierror as e: print(\"not found\")' $2"; }
resolve "$A" icpt.origin.test
SYN=$(j 'd["stdout"].strip()')
check "dns: the libc resolver (gethostbyname) gets an allowed name an address of the synthetic range ($SYN)" \
	eval '[[ $SYN =~ ^198\.1[89]\.[0-9]+\.[0-9]+$ ]]'
xsh "$A" 'python3 -c "import socket; print(socket.getaddrinfo(\"icpt.origin.test\", 443, socket.AF_INET)[0][4][0])"'
check "dns: python3 getaddrinfo gets the same address" out_is "$SYN"
check "... an access line: door=dns method=A host=icpt.origin.test decision=allow, the address given" \
	logged "access door=dns client=$A .*method=A host=icpt\.origin\.test port=0 decision=allow reason=none upstream=$SYN status=0 "
resolve "$A" evil.test
check "dns: a name the layer refuses: not found" out_is "not found"
check "... NXDOMAIN, its access line says why" \
	logged "access door=dns client=$A .*host=evil\.test port=0 decision=deny reason=not-allowed upstream=- status=3 "
LONG=$(head -c 30 /dev/urandom | od -An -tx1 | tr -d ' \n')
xsh "$A" "python3 /tmp/dnsq.py $LONG.icpt.origin.test A $GWA; python3 /tmp/dnsq.py icpt.origin.test TXT $GWA; python3 /tmp/dnsq.py icpt.origin.test AAAA $GWA"
check "dns: a long random label under an allowed name: NXDOMAIN; TXT: REFUSED; AAAA: no data" \
	eval '[ "$(j "d[\"stdout\"]")" = "$(printf "rcode=3 answers=0\nrcode=5 answers=0\nrcode=0 answers=0")" ]'
check "... and not one of those queries reached the stub upstream" \
	eval '! tail -n "+$((QBEFORE + 1))" "$E2E_TMP/dnsmasq.log" | grep -E "query\[.*(evil\.test|$LONG|TXT|AAAA)" >&2'

# --- name-routed egress (issue 21) ------------------------------------------------
# Without any proxy variable: the name resolves to a synthetic address,
# which the lane sends to its name door.
NOPROXY='unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy;'
mark
xsh "$A" "$NOPROXY curl -sS -m 30 http://origin.test/"
check "names: curl http://origin.test/ with no proxy variable (DNS, then port 80 by name)" \
	out_is "hello from origin"
xsh "$A" "$NOPROXY curl -sS -m 30 https://icpt.origin.test/"
check "names: curl https://icpt.origin.test/ with no proxy variable (443 by name, intercepted)" \
	out_is "hello over tls"
if [ "$BACKEND" = ns ]; then     # (the vm guest's userland has no node)
	xsh "$A" "$NOPROXY node -e 'fetch(\"http://origin.test/\").then(r => r.text()).then(t => process.stdout.write(t))'"
	check "names: node fetch() with no proxy variable" \
		eval 'out_is "hello from origin" || { j "d[\"stderr\"]" >&2; false; }'
fi
cat >"$E2E_TMP/tcpget.py" <<'PY'
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
    s.sendall(b"GET / HTTP/1.0\r\nHost: origin.test\r\n\r\n")
    data = s.recv(4096)
    print("got " + data.split(b"\r\n")[0].decode() if data else "closed")
except ConnectionResetError:
    print("reset")
except OSError as e:
    print("error %s" % e)
PY
op PUT "/v1/sandboxes/$A/files?path=/tmp/tcpget.py" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$E2E_TMP/tcpget.py"
xsh "$A" 'python3 /tmp/tcpget.py origin.test 8081'
check "names: TCP to an allowed name:port (origin.test:8081, neither 80 nor 443) is relayed" \
	out_is "got HTTP/1.1 200 OK"
check "... its access line: door=names host=origin.test port=8081 allowed, mode=tunnel" \
	logged "access door=names client=$A .*method=TCP host=origin\.test port=8081 decision=allow "
xsh "$A" 'python3 /tmp/tcpget.py origin.test 8082'
check "names: a port the layer does not allow (origin.test:8082): reset at once" out_is "reset"
check "... its access line says not-allowed" \
	logged "access door=names client=$A .*host=origin\.test port=8082 decision=deny reason=not-allowed "
xsh "$A" 'python3 /tmp/tcpget.py 198.19.255.254 8081'
check "names: a synthetic address that stands for no name: reset" out_is "reset"
check "... unknown-name-address" \
	logged "access door=names client=$A .*host=198\.19\.255\.254 port=8081 decision=deny reason=unknown-name-address "
# Another claim's table is its own: A's address for origin.test means
# nothing to B2 unless B2 asked for the name too.
resolve "$A" origin.test
ASYN=$(j 'd["stdout"].strip()')
op PUT "/v1/sandboxes/$B2/files?path=/tmp/tcpget.py" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$E2E_TMP/tcpget.py"
xsh "$B2" "python3 /tmp/tcpget.py $ASYN 8081"
check "names: another claim connecting to A's synthetic address for origin.test ($ASYN): reset" \
	eval '[[ $ASYN == 198.1* ]] && out_is reset'
# ssh to an allowed name:22 from a guest with no proxy variable: DNS, then
# the name door's byte tunnel to the test sshd. The key and the sshd are
# shown to work without sluice first, on both ports.
check "names: (the test sshd takes the guest's key on 22 and on 2222, from inet itself)" \
	eval '[ "$(host_ssh 22)" = ssh-ok ] && [ "$(host_ssh 2222)" = ssh-ok ] || { cat "$E2E_TMP/ssh/host.err" >&2; false; }'
op PUT "/v1/sandboxes/$A/files?path=/tmp/id_guest&mode=0600" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$E2E_TMP/ssh/id_guest"
check "files: the ssh key into the guest, mode 0600 (201)" status 201
SSHO='-i /tmp/id_guest -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=20'
mark
xsh "$A" "$NOPROXY ssh $SSHO -p 22 root@ssh.test echo ssh-ok"
check "names: ssh -p 22 root@ssh.test with no proxy variable (an allowed name:22, a byte tunnel)" \
	eval 'out_is ssh-ok || { j "d[\"stderr\"]" >&2; false; }'
check "... its access line: door=names host=ssh.test port=22 decision=allow" \
	logged "access door=names client=$A .*method=TCP host=ssh\.test port=22 decision=allow "
mark
xsh "$A" "$NOPROXY ssh $SSHO -p 2222 root@ssh.test echo ssh-ok; echo rc=\$?"
check "names: ssh to the same name on a port the layer does not allow (2222): reset, ssh fails (255)" \
	eval '[ "$(j "d[\"stdout\"]")" = rc=255 ] && [[ $(j "d[\"stderr\"]") == *"reset"* ]] || { echo "    ${B:0:400}" >&2; false; }'
check "... its access line says not-allowed" \
	logged "access door=names client=$A .*method=TCP host=ssh\.test port=2222 decision=deny reason=not-allowed "

# --- rpc: the supervisor dies; sluiced starts it again and re-adopts -----------
if [ "$BACKEND" = rpc ]; then
	# sluiced's child; its comm is cut to 15 characters.
	SUPPID=$(pgrep -P "$PID" -x sluice-supervis | head -1)
	check "sluiced started the supervisor (pid ${SUPPID:-none})" test -n "$SUPPID"
	mark
	[ -z "$SUPPID" ] || kill -KILL "$SUPPID"
	# The agents are reached directly: a claim runs commands without its
	# supervisor. sluiced notices the death at its next call to it (here:
	# the pool refilling after a claim), starts another (with back-off)
	# and re-adopts every sandbox its pools hold.
	claim unix "" '{"pool":"p"}'
	D=$ID
	check "a claim while the supervisor is dead: 201 (a warm one)" status 201
	NEWSUP=
	for _ in $(seq 300); do
		# (the killed one may linger as a zombie until sluiced reaps it)
		NEWSUP=$(pgrep -P "$PID" -x sluice-supervis | grep -vx "$SUPPID" | head -1 || true)
		[ -n "$NEWSUP" ] && break
		sleep 0.1
	done
	check "after the supervisor was killed (SIGKILL), sluiced started another (pid ${NEWSUP:-none})" \
		test -n "$NEWSUP"
	check "... which re-adopted the sandboxes (sandbox.adopt answered)" logged "sandbox\.adopt id [0-9]+: ok"
	readopted() {
		x "$A" '{"argv":["sha256sum","/tmp/three"]}'
		is 'd["stdout"].split()[0]' "$SUM3"
	}
	check "the claim runs commands, its files are there" readopted
	x "$A" '{"argv":["curl","-sS","-m","20","http://origin.test/"],"timeout_seconds":30}'
	check "... and its network still works" out_is "hello from origin"
	op GET "/v1/sandboxes/$A"
	check "... still claimed" eval 'status 200 && is "d[\"state\"]" claimed'
	check "the pool is warm again" wait_warm p 1 120
	op DELETE "/v1/sandboxes/$D"
	check "the claim made meanwhile is released" is 'd["result"]' released
fi

# --- restarts: sandboxes outlive the daemon and are adopted again ---------------
# A clean stop (SIGTERM leaves them running), then a crash (SIGKILL).
for sig in TERM KILL; do
	kill "-$sig" "$PID"
	wait "$PID" 2>/dev/null || true
	if ! start_daemon; then
		fail "the daemon starts again after SIG$sig"
		dump_log
		finish
	fi
	check "after SIG$sig the claim is adopted again" \
		eval 'op GET "/v1/sandboxes/$A"; status 200 && is "d[\"state\"]" claimed'
	x "$A" '{"argv":["sha256sum","/tmp/three"]}'
	check "its files are still there" eval 'is "d[\"stdout\"].split()[0]" "$SUM3"'
	x "$A" '{"argv":["curl","-sS","-m","20","http://origin.test/"],"timeout_seconds":30}'
	check "its network still works" out_is "hello from origin"
	x "$A" '{"argv":["sh","-c","echo $(( $(date +%s) / 60 ))"]}'
	check "its clock is still the host's" \
		eval 'g=$(j "d[\"stdout\"].strip()"); h=$(( $(date +%s) / 60 )); [ "$g" -ge $((h - 1)) ] && [ "$g" -le $((h + 1)) ]'
	check "the pool is warm again" wait_warm p 1 120
	xsh "$A" 'curl -sS -m 30 "https://x-access-token:$GITHUB_TOKEN@icpt.origin.test/whoami"'
	check "after SIG$sig the claim's sentinel still stands for the token" out_is "token ok"
	if [ "$BACKEND" = ns ]; then
		check "after SIG$sig the claim runs as its host range still, held for it ($(host_uids "$A" | tr '\n' ' '))" \
			eval '[ "$(host_uids "$A")" = "$A_UID" ] &&
				[ "$(readlink "/run/sluice/idmap/$A_UID")" = "$E2E_TMP/data/sandboxes/$A" ]'
	fi
	# A tenant's value was in memory only: gone, and said so.
	op GET "/v1/sandboxes/$B2"
	check "after SIG$sig the tenant credential is reported lost (same fingerprint)" \
		eval 'status 200 && [ "$(tcred state)" = lost ] && [ "$(tcred fingerprint)" = "$TFP" ]'
	xsh "$B2" 'curl -sS -D - -o /dev/null -m 30 https://icpt.origin.test/tenant'
	check "... a request that needs it: 503 credential-lost, not sent without it" \
		eval '[[ $(j "d[\"stdout\"]") == *" 503 "* && $(j "d[\"stdout\"]") == *"Sluice-Reason: credential-lost"* ]]'
	op PUT "/v1/sandboxes/$B2/credentials" "${JS[@]}" '{"credentials":['"$TCRED"']}'
	check "... PUT /v1/sandboxes/{id}/credentials supplies it again: 200, held, the same fingerprint" \
		eval 'status 200 && [ "$(tcred state)" = held ] && [ "$(tcred fingerprint)" = "$TFP" ] && [[ $B != *"$TKEY"* ]]'
	xsh "$B2" 'curl -sS -m 30 https://icpt.origin.test/tenant'
	check "... and the origin gets it again" out_is "tenant ok"
done
op PUT "/v1/sandboxes/$B2/credentials" "${JS[@]}" '{"credentials":[]}'
check "PUT credentials [] takes the tenant's credential away: 200, none listed" \
	eval 'status 200 && [ "$(j "len([c for c in d[\"credentials\"] if c[\"source\"] == \"tenant\"])")" = 0 ]'
xsh "$B2" 'curl -sS -m 30 https://icpt.origin.test/tenant'
check "... and its requests go without it" out_is "tenant none"
claim unix "" '{"pool":"p"}'
C=$ID C_ADDR=$ADDR
check "a claim after the restart: 201" status 201
x "$C" '{"argv":["hostname"]}'
check "it runs commands" out_is "$C"
if [ "$BACKEND" = ns ]; then
	C_UID=$(host_uids "$C")
	check "userns: it runs as a range of its own, not the adopted claims' ($C_UID; $A_UID, $B_UID)" \
		eval '[[ $C_UID =~ ^[0-9]+$ ]] && [ "$C_UID" != "$A_UID" ] && [ "$C_UID" != "$B_UID" ]'
fi

# --- release ------------------------------------------------------------------------
# Each one's cgroups and link are shown there first: their absence after
# is evidence only then.
for id in "$A" "$B2" "$C"; do
	case $id in
	"$A") addr=$A_ADDR ;;
	"$B2") addr=$B2_ADDR ;;
	*) addr=$C_ADDR ;;
	esac
	ifn=$(ifname_of "$addr") || ifn=
	check "$id's cgroups are found" test -n "$(cg_dirs "$id")"
	check "its link (${ifn:-bad address '$addr'}) is in the fleet" \
		eval '[ -n "$ifn" ] && ip -n "$FLEET" link show dev "$ifn" >/dev/null'
	op DELETE "/v1/sandboxes/$id"
	check "release $id" is 'd["result"]' released
	if [ "$id" = "$B2" ]; then
		op GET "/v1/sandboxes/$id"
		check "... its tombstone keeps no layer and no credential (the tenant's ended with the claim)" \
			eval 'is "d[\"state\"]" released && is "\"credentials\" in d or \"layer\" in d" false'
	fi
	check "its cgroups are gone" test -z "$(cg_dirs "$id")"
	check "its link is gone, from the fleet's namespace that is still there" \
		eval '[ -n "$ifn" ] && ! ip -n "$FLEET" link show dev "$ifn" >/dev/null 2>&1 && [ -e "/run/netns/$FLEET" ]'
done
# Nothing leaks: the canaries declared above are looked for after the run.
finish
