#!/bin/bash
# The rpc protocol's conformance suite (conformance.py) against the real
# sluice-supervisor-podman and real podman (root). Everything podman keeps
# is in the supervisor's own state directory under $E2E_TMP (its --root,
# --runroot, --tmpdir): the machine's default podman store is never
# touched. The supervisor's enhanced runtime is configured but missing
# (-32003 is checked). A namespace of our own with a veth whose address
# the sandbox must see. On every exit path: the containers and images of
# that store are removed, its mounts undone, the directory deleted.
. "$(dirname "$0")/../e2e/lib.sh"
SUP=${SL_SUPERVISOR_PODMAN:-$(dirname "$SLUICED")/sluice-supervisor-podman}
STATE=$E2E_TMP/sup
P=(podman --root "$STATE/storage" --runroot "$STATE/run" --tmpdir "$STATE/tmp"
	--cgroup-manager cgroupfs --events-backend file)

if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
	fail "podman and runc are installed (./build.sh deps installs them)"
	finish
fi
[ -x "$SUP" ] || { fail "$SUP is built"; finish; }

# podman_store_cleanup: every container and image of the private store,
# its overlay mounts, the directory itself.
podman_store_cleanup() {
	[ -d "$STATE" ] || return 0
	timeout 60 "${P[@]}" rm -af -t 0 >/dev/null 2>&1 || true
	timeout 60 "${P[@]}" rmi -af >/dev/null 2>&1 || true
	findmnt -rn -o TARGET | grep "^$STATE/" | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$STATE"
}
e2e_cleanup_extra() { podman_store_cleanup; }

netns_new NS rpcconf
ip link add "rc$$a" type veth peer name "rc$$b"
ip link set "rc$$a" netns "$NS"
ip link set "rc$$b" netns "$NS"
ip -n "$NS" addr add 10.77.0.2/24 dev "rc$$a"
ip -n "$NS" link set "rc$$a" up
ip -n "$NS" link set "rc$$b" up

# A busybox root tree: what environment.ensure imports.
TREE=$E2E_TMP/tree
mkdir -p "$TREE/bin" "$TREE/tmp" "$TREE/proc" "$TREE/sys" "$TREE/dev" "$TREE/etc"
cp /bin/busybox "$TREE/bin/busybox"
for a in sh cat ip ls mkdir sleep printf hostname pwd echo mv; do ln -s busybox "$TREE/bin/$a"; done
echo "root:x:0:0:root:/root:/bin/sh" >"$TREE/etc/passwd"
mkdir -p "$E2E_TMP/mnt" "$E2E_TMP/copy" "$E2E_TMP/copy2"

python3 "$(dirname "$0")/conformance.py" --root "$TREE" --key "$(printf %s "$E2E_TMP" | sha256sum | cut -c1-16)" \
	--netns "$NS" --addr 10.77.0.2/24 --mount-dir "$E2E_TMP/mnt" --copy-dir "$E2E_TMP/copy" \
	--restart --log "$E2E_TMP/supervisor.log" -- \
	"$SUP" --state-dir "$STATE" --enhanced-runtime /nonexistent/runsc --env-timeout-s 120 ||
	{ fail "conformance.py (above)"; echo "--- the supervisor's log:"; tail -n 60 "$E2E_TMP/supervisor.log"; }
# The same suite against a supervisor that runs on its own (--socket),
# with the same storage: a second connection of the same instance is
# served too.
"$SUP" --socket "$E2E_TMP/sup.sock" --state-dir "$STATE" --enhanced-runtime /nonexistent/runsc \
	--env-timeout-s 120 2>>"$E2E_TMP/supervisor-socket.log" &
SPID=$!
track "$SPID"
for _ in $(seq 100); do [ -S "$E2E_TMP/sup.sock" ] && break; sleep 0.05; done
check "--socket: the socket is there, mode 0600 ($(stat -c %a "$E2E_TMP/sup.sock" 2>&1))" \
	test "$(stat -c %a "$E2E_TMP/sup.sock" 2>/dev/null)" = 600
python3 "$(dirname "$0")/conformance.py" --socket "$E2E_TMP/sup.sock" --root "$TREE" \
	--key "$(printf %s "$E2E_TMP" | sha256sum | cut -c1-16)" --netns "$NS" --addr 10.77.0.2/24 \
	--mount-dir "$E2E_TMP/mnt" --copy-dir "$E2E_TMP/copy2" ||
	{ fail "conformance.py --socket (above)"; tail -n 60 "$E2E_TMP/supervisor-socket.log"; }
check "--socket: the supervisor still serves after a connection was dropped" \
	python3 -c '
import socket, struct, json, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
b = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "capacity", "params": {}}).encode()
s.sendall(struct.pack(">II", len(b), 1) + b)
h = s.recv(8); n = struct.unpack(">I", h[:4])[0]; d = b""
while len(d) < n: d += s.recv(n - len(d))
sys.exit(0 if "result" in json.loads(d) else 1)' "$E2E_TMP/sup.sock"
kill "$SPID"
# Its containers are gone (each was stopped); the store is ours alone.
left=$("${P[@]}" ps -aq 2>/dev/null | wc -l)
check "no container left in the supervisor's store ($left)" [ "$left" = 0 ]
finish
