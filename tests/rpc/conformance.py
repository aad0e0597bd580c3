#!/usr/bin/env python3
"""conformance.py: the rpc backend's protocol (docs/backend-rpc.md) checked
against ANY supervisor, speaking the framing directly.

    conformance.py --root TREE --netns NAME --addr CIDR [--mount-dir DIR]
                   [--restart] -- COMMAND [ARG...]

COMMAND is the supervisor; it is started with one end of a socketpair as
an inherited fd named by SLUICE_RPC_FD (as sluiced starts it). With --socket PATH the
supervisor is already listening there instead (--restart is not possible
then). TREE is a root filesystem tree with a static busybox (/bin/sh,
/bin/cat, /bin/ip ...). NAME is a network namespace whose interface has
CIDR; a sandbox placed in it must see that address. The supervisor must
have been configured with an enhanced runtime that is NOT installed (the
start must fail -32003, never run on the standard one).

Checks: capabilities' shape; unknown method -32601; invalid params -32602;
an invalid JSON frame -32700 for that id and the connection still works; a
header/body id mismatch -32600; an oversized request fails its own id
only; an expired deadline -32004; concurrent calls answered by id (an exec
that waits for a file is in flight while capabilities and the file.write
that releases it are answered); environment.ensure idempotent; start, exec
(the netns's address seen from inside, env, cwd, hostname, a read-only
mount), file.write/read, tree.copy, list, adopt, stop, stop again, adopt of
a stopped one -32002; enhanced with its runtime missing -32003; with
--restart, a supervisor killed (SIGKILL) and started again lists and adopts
the sandbox the first one started. Last, a frame out of step (length 0):
the supervisor drops the connection.

Prints "ok ..." / "FAIL ..." lines; exits 1 if anything failed.
"""
import argparse
import base64
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

MAX = 4 << 20
PASSES = 0
FAILS = 0


def ok(what):
    global PASSES
    PASSES += 1
    print("ok   " + what, flush=True)


def bad(what, why=""):
    global FAILS
    FAILS += 1
    print("FAIL " + what + (": " + str(why) if why else ""), flush=True)


def check(what, cond, why=""):
    (ok if cond else lambda w: bad(w, why))(what)
    return cond


class Peer:
    """One connection: a reader thread routes replies by the header's id."""

    def __init__(self, sock):
        self.s = sock
        self.lock = threading.Lock()
        self.cv = threading.Condition()
        self.replies = {}
        self.order = []
        self.closed = False
        self.next = 1000
        threading.Thread(target=self._read, daemon=True).start()

    def _recvn(self, n):
        b = b""
        while len(b) < n:
            k = self.s.recv(n - len(b))
            if not k:
                raise EOFError
            b += k
        return b

    def _read(self):
        try:
            while True:
                n, hid = struct.unpack(">II", self._recvn(8))
                body = self._recvn(n)
                try:
                    msg = json.loads(body)
                except ValueError:
                    msg = {"_invalid": body[:200]}
                with self.cv:
                    self.replies[hid] = (msg, hid)
                    self.order.append(hid)
                    self.cv.notify_all()
        except (EOFError, OSError):
            with self.cv:
                self.closed = True
                self.cv.notify_all()

    def send_raw(self, hid, payload):
        with self.lock:
            self.s.sendall(struct.pack(">II", len(payload), hid) + payload)

    def newid(self):
        with self.lock:
            self.next += 1
            return self.next

    def send(self, method, params=None, deadline_ms=120000, hid=None):
        hid = hid or self.newid()
        p = dict(params or {})
        if deadline_ms is not None:
            p["deadline_ms"] = deadline_ms
        self.send_raw(hid, json.dumps({"jsonrpc": "2.0", "id": hid, "method": method,
                                       "params": p}).encode())
        return hid

    def wait(self, hid, secs=180):
        end = time.time() + secs
        with self.cv:
            while hid not in self.replies:
                if self.closed or time.time() > end:
                    return None
                self.cv.wait(0.2)
            return self.replies.pop(hid)[0]

    def call(self, method, params=None, deadline_ms=120000, secs=180):
        """(result, error) of one call; error is a dict or None."""
        r = self.wait(self.send(method, params, deadline_ms), secs)
        if r is None:
            return None, {"code": None, "message": "no reply"}
        return r.get("result"), r.get("error")

    def wait_closed(self, secs=10):
        end = time.time() + secs
        with self.cv:
            while not self.closed and time.time() < end:
                self.cv.wait(0.2)
            return self.closed


def code_of(err):
    return err.get("code") if isinstance(err, dict) else None


def expect_error(what, res_err, code):
    res, err = res_err
    return check(what, res is None and code_of(err) == code,
                 "got result %r error %r" % (res, err))


def start_supervisor(cmd, log):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = dict(os.environ, SLUICE_RPC_FD=str(b.fileno()))
    proc = subprocess.Popen(cmd, env=env, pass_fds=(b.fileno(),), stdout=log, stderr=log,
                            close_fds=True)
    b.close()
    return proc, Peer(a)


def b64(s):
    return base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()


def unb64(s):
    return base64.b64decode(s or "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--key", default="c0f0e0d0")
    ap.add_argument("--netns", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--mount-dir", required=True)
    ap.add_argument("--copy-dir", required=True)
    ap.add_argument("--socket")
    ap.add_argument("--restart", action="store_true")
    ap.add_argument("--log", default="/dev/stderr")
    ap.add_argument("cmd", nargs="*")
    a = ap.parse_args()
    log = open(a.log, "ab")
    proc = None
    if a.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(a.socket)
        peer = Peer(s)
    else:
        proc, peer = start_supervisor(a.cmd, log)

    # ---- capabilities ---------------------------------------------------
    caps, err = peer.call("capabilities", {"protocol": 1})
    shape = (isinstance(caps, dict) and caps.get("protocol") == 1 and
             isinstance(caps.get("engine"), str) and isinstance(caps.get("available"), bool) and
             isinstance(caps.get("isolation"), list) and "standard" in caps["isolation"] and
             isinstance(caps.get("park"), bool) and isinstance(caps.get("limits"), dict) and
             all(isinstance(caps["limits"].get(k), bool) for k in ("memory", "cpus", "pids")))
    check("capabilities: protocol 1, engine, available, isolation, park, limits", shape,
          "%r %r" % (caps, err))
    if not (caps or {}).get("available"):
        bad("capabilities: the engine is available here", (caps or {}).get("reason"))
        return finish(proc)
    check("capabilities: enhanced not offered while its runtime is missing",
          "enhanced" not in caps["isolation"], caps["isolation"])
    res, err = peer.call("capacity", {})
    check("capacity: running and max", isinstance(res, dict) and
          isinstance(res.get("running"), int) and "max" in res, "%r %r" % (res, err))

    # ---- refusals ------------------------------------------------------
    expect_error("an unknown method: -32601", peer.call("sandbox.teleport", {}), -32601)
    expect_error("environment.ensure with a bad kind: -32602",
                 peer.call("environment.ensure", {"kind": "nope", "root": a.root, "key": a.key}),
                 -32602)
    expect_error("sandbox.start without an id: -32602",
                 peer.call("sandbox.start", {"ref": "x", "command": ["/bin/sh"]}), -32602)
    expect_error("sandbox.exec with a handle it never gave: -32602",
                 peer.call("sandbox.exec", {"handle": "--privileged", "argv": ["true"]}), -32602)
    peer.send_raw(77, b'{"jsonrpc":"2.0","id":77,"method":')
    r = peer.wait(77, 30)
    check("an invalid JSON frame: -32700 for its id", r is not None and
          code_of(r.get("error")) == -32700, r)
    peer.send_raw(78, json.dumps({"jsonrpc": "2.0", "id": 79, "method": "capabilities",
                                  "params": {}}).encode())
    r = peer.wait(78, 30)
    check("a header/body id mismatch: -32600 for the header's id", r is not None and
          code_of(r.get("error")) == -32600, r)
    peer.send_raw(80, b"[" + b" " * MAX + b"]")
    r = peer.wait(80, 60)
    check("an oversized request fails its own id only", r is not None and
          code_of(r.get("error")) is not None, r)
    expect_error("an expired deadline: -32004", peer.call("capacity", {}, deadline_ms=0), -32004)
    res, err = peer.call("capabilities", {"protocol": 1})
    check("the connection still works after each of them", isinstance(res, dict), err)

    # ---- templates -----------------------------------------------------
    e1 = peer.call("environment.ensure", {"kind": "busybox", "root": a.root, "key": a.key},
                   deadline_ms=300000, secs=330)
    e2 = peer.call("environment.ensure", {"kind": "busybox", "root": a.root, "key": a.key},
                   deadline_ms=300000, secs=330)
    ref = (e1[0] or {}).get("ref")
    check("environment.ensure gives a ref", isinstance(ref, str) and ref, e1)
    check("environment.ensure is idempotent (same key, same ref)",
          ref and (e2[0] or {}).get("ref") == ref, e2)
    if not ref:
        return finish(proc)

    # ---- a sandbox -----------------------------------------------------
    sid = "conf-%d" % os.getpid()
    with open(os.path.join(a.mount_dir, "hello"), "w") as f:
        f.write("from the host\n")
    spec = {"id": sid, "ref": ref, "isolation": "standard",
            "limits": {"memory_mb": 256, "cpus_milli": 500, "pids": 128},
            # a source as sluiced may name it: with ".." (the supervisor
            # resolves it)
            "mounts": [{"source": os.path.join(a.mount_dir, "..", os.path.basename(a.mount_dir)),
                        "target": "/mnt/host", "read_only": True}],
            "env": ["CONF_VAR=value with spaces", "PATH=/bin:/usr/bin"], "cwd": "/tmp",
            "hostname": "conf-host",
            "command": ["/bin/sh", "-c", "mkdir -p /tmp; exec sleep 100000"],
            "network": {"netns": "/run/netns/" + a.netns}}
    expect_error("start: isolation enhanced with its runtime missing: -32003",
                 peer.call("sandbox.start", dict(spec, id=sid + "-enh", isolation="enhanced")),
                 -32003)
    res, err = peer.call("sandbox.list", {})
    check("the refused enhanced start left no sandbox", isinstance(res, dict) and
          not any(s.get("id") == sid + "-enh" for s in res.get("sandboxes", [])), "%r %r" % (res, err))
    st, err = peer.call("sandbox.start", spec)
    h = (st or {}).get("handle")
    if not check("sandbox.start gives a handle and a pid", isinstance(h, str) and
                 isinstance(st.get("pid"), int) and st["pid"] > 0, "%r %r" % (st, err)):
        return finish(proc)
    pid = st["pid"]
    try:
        lifecycle(a, peer, sid, h, pid)
        if a.restart and proc:
            proc = restart(a, proc, log, sid, h)
            peer = proc.peer
        st, err = peer.call("sandbox.stop", {"handle": h, "grace_ms": 1000})
        check("sandbox.stop", st == {}, err)
        st, err = peer.call("sandbox.stop", {"handle": h, "grace_ms": 1000})
        check("sandbox.stop again (idempotent)", st == {}, err)
        expect_error("sandbox.adopt of a stopped sandbox: -32002",
                     peer.call("sandbox.adopt", {"id": sid, "handle": h}), -32002)
        res, err = peer.call("sandbox.list", {})
        check("sandbox.list no longer has it", isinstance(res, dict) and
              not any(s.get("id") == sid for s in res["sandboxes"]), res)
    finally:
        peer.call("sandbox.stop", {"handle": h, "grace_ms": 0})

    # ---- last: out of step ---------------------------------------------
    peer.s.sendall(struct.pack(">II", 0, 5))
    check("a frame of length 0 (out of step): the supervisor drops the connection",
          peer.wait_closed(10))
    return finish(proc)


def lifecycle(a, peer, sid, h, pid):
    def ex(argv, secs=60):
        r, e = peer.call("sandbox.exec", {"handle": h, "argv": argv, "timeout_ms": secs * 1000})
        if not r:
            return None, "", str(e)
        return r.get("code"), unb64(r.get("stdout")).decode(errors="replace"), \
            unb64(r.get("stderr")).decode(errors="replace")

    ip = a.addr.split("/")[0]
    code, out, err = ex(["/bin/ip", "-4", "addr"])
    check("the sandbox is in the given netns (its address %s seen from inside)" % ip,
          code == 0 and ("inet " + ip + "/") in out, "%r %r %r" % (code, out, err))
    code, out, _ = ex(["/bin/sh", "-c", "printf %s \"$CONF_VAR\""])
    check("env reaches the sandbox", code == 0 and out == "value with spaces", out)
    code, out, _ = ex(["/bin/sh", "-c", "pwd; hostname"])
    check("cwd and hostname", code == 0 and out.split() == ["/tmp", "conf-host"], out)
    code, out, _ = ex(["/bin/cat", "/mnt/host/hello"])
    check("a mount of a host directory", code == 0 and out == "from the host\n", out)
    code, _, _ = ex(["/bin/sh", "-c", "echo x > /mnt/host/nope"])
    check("a read-only mount refuses writes", code not in (0, None), code)
    code, out, err = ex(["/bin/sh", "-c", "echo nameserver 10.0.0.1 > /etc/resolv.tmp && "
                         "mv /etc/resolv.tmp /etc/resolv.conf && echo 127.0.0.1 x > /etc/h.tmp && "
                         "mv /etc/h.tmp /etc/hosts && cat /etc/resolv.conf"])
    check("/etc/resolv.conf and /etc/hosts are the sandbox's own (replaced by rename)",
          code == 0 and out == "nameserver 10.0.0.1\n", "%r %r %r" % (code, out, err))
    code, _, _ = ex(["/bin/sh", "-c", "exit 7"])
    check("exec: the command's exit code", code == 7, code)

    # concurrency: an exec waits for a file; capabilities and the write that
    # releases it are answered while it is in flight.
    wid = peer.send("sandbox.exec", {"handle": h, "timeout_ms": 60000, "argv": [
        "/bin/sh", "-c", "while [ ! -f /tmp/go ]; do sleep 0.05; done; echo released"]})
    res, err = peer.call("capabilities", {"protocol": 1})
    with peer.cv:
        pending = wid not in peer.replies
    check("capabilities answered while an exec is in flight", isinstance(res, dict) and pending,
          err)
    res, err = peer.call("file.write", {"handle": h, "path": "/tmp/go", "data": b64("go\n"),
                                        "mode": 0o600})
    check("file.write", res == {"size": 3}, "%r %r" % (res, err))
    r = peer.wait(wid, 60)
    check("the exec in flight ends once released, answered by its id",
          r is not None and unb64(r.get("result", {}).get("stdout")) == b"released\n", r)
    res, err = peer.call("file.read", {"handle": h, "path": "/tmp/go", "max": 1024})
    check("file.read", isinstance(res, dict) and unb64(res.get("data")) == b"go\n" and
          res.get("size") == 3, "%r %r" % (res, err))
    expect_error("file.read of a missing file: -32002",
                 peer.call("file.read", {"handle": h, "path": "/tmp/none", "max": 10}), -32002)
    res, err = peer.call("file.write", {"handle": h, "path": "/tmp/../../../escape",
                                        "data": b64("x")})
    code, out, _ = ex(["/bin/cat", "/escape"])
    check("file.write stays inside the sandbox's root", res == {"size": 1} and out == "x" and
          not os.path.exists("/escape"), "%r %r" % (res, err))

    src = os.path.join(a.copy_dir, "in")
    os.makedirs(os.path.join(src, "sub"), exist_ok=True)
    with open(os.path.join(src, "sub", "f"), "w") as f:
        f.write("tree\n")
    res, err = peer.call("tree.copy", {"handle": h, "direction": "in", "host_path": src,
                                       "path": "/tmp/tree"})
    code, out, _ = ex(["/bin/cat", "/tmp/tree/sub/f"])
    check("tree.copy in", res == {} and out == "tree\n", "%r %r %r" % (res, err, out))
    dst = os.path.join(a.copy_dir, "out")
    res, err = peer.call("tree.copy", {"handle": h, "direction": "out", "host_path": dst,
                                       "path": "/tmp/tree"})
    check("tree.copy out", res == {} and os.path.exists(os.path.join(dst, "sub", "f")),
          "%r %r" % (res, err))

    res, err = peer.call("sandbox.list", {})
    mine = [s for s in (res or {}).get("sandboxes", []) if s.get("id") == sid]
    check("sandbox.list has it, running", len(mine) == 1 and mine[0].get("handle") == h and
          mine[0].get("running") is True, res)
    res, err = peer.call("sandbox.adopt", {"id": sid, "handle": h})
    check("sandbox.adopt: running, same pid", isinstance(res, dict) and res.get("running") is True
          and res.get("pid") == pid and res.get("handle") == h, "%r %r" % (res, err))
    expect_error("sandbox.adopt with another id: refused",
                 peer.call("sandbox.adopt", {"id": sid + "x", "handle": h}), -32602)


class Restarted:
    pass


def restart(a, proc, log, sid, h):
    """Kill the supervisor; a new one finds and adopts the sandbox."""
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    p2, peer = start_supervisor(a.cmd, log)
    r = Restarted()
    r.proc, r.peer = p2, peer
    res, err = peer.call("sandbox.list", {})
    mine = [s for s in (res or {}).get("sandboxes", []) if s.get("id") == sid]
    check("after the supervisor was killed, a new one lists the sandbox running",
          len(mine) == 1 and mine[0].get("running") is True, "%r %r" % (res, err))
    res, err = peer.call("sandbox.adopt", {"id": sid, "handle": h})
    check("... and adopts it", isinstance(res, dict) and res.get("running") is True, err)
    res, err = peer.call("sandbox.exec", {"handle": h, "argv": ["/bin/cat", "/tmp/go"],
                                          "timeout_ms": 30000})
    check("... and its files are still there", isinstance(res, dict) and
          unb64(res.get("stdout")) == b"go\n", err)
    r.wait = p2.wait
    r.poll = p2.poll
    r.kill = p2.kill
    return r


def finish(proc):
    if proc is not None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    print("%d passed, %d failed" % (PASSES, FAILS), flush=True)
    return 1 if FAILS or not PASSES else 0


if __name__ == "__main__":
    sys.exit(main())
