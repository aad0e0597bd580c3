#!/usr/bin/env python3
"""fake_supervisor.py: a minimal supervisor of the rpc protocol v1
(docs/backend-rpc.md) that needs no engine: a sandbox is the given
sluice-agent run as PID 1 of new mount, pid, UTS and IPC namespaces, in
the network namespace sluiced names, chrooted into an overlay of the
template's tree. For tests of sluiced's rpc backend (tests/e2e/rpc.sh)
without podman.

  fake_supervisor.py [--state DIR] [--socket PATH] [--unavailable WHY]
                     [--log FILE]

With SLUICE_RPC_FD set it serves that fd (sluiced started it); with
--socket it listens there. Its sandboxes outlive it: their records are in
--state (default /run/sluice-fake-supervisor) and a restarted supervisor
adopts them. --unavailable makes capabilities say available: false with
that reason.
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

FRAME_MAX = 4 << 20

SCRIPT = r'''
set -e
M=$1 L=$2 U=$3 W=$4 A=$5 R=$6 H=$7
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=$L,upperdir=$U,workdir=$W" "$M"
mkdir -p "$M/.sluice" "$M/run/sluice" "$M/proc" "$M/dev" "$M/tmp"
mount --bind "$A" "$M/.sluice"
mount -o remount,bind,ro "$M/.sluice"
mount --bind "$R" "$M/run/sluice"
mount -t proc proc "$M/proc"
mount --rbind /dev "$M/dev"
hostname "$H"
shift 7
cd "$M"
exec chroot "$M" env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin "$@"
'''


class Err(Exception):
    def __init__(self, code, msg, reason=None):
        super().__init__(msg)
        self.code, self.msg, self.reason = code, msg, reason


def log(msg):
    if ARGS.log:
        with open(ARGS.log, "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {msg}\n")


def alive(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"sluice-agent" in f.read()
    except OSError:
        return False


class Sup:
    def __init__(self, state):
        self.state = state
        os.makedirs(state, exist_ok=True)
        self.mu = threading.Lock()

    def rec_path(self, handle):
        return os.path.join(self.state, handle + ".json")

    def load(self, handle):
        if "/" in handle or not handle.startswith("fake-"):
            raise Err(-32002, f"no sandbox {handle}")
        try:
            with open(self.rec_path(handle)) as f:
                return json.load(f)
        except OSError:
            raise Err(-32002, f"no sandbox {handle}")

    def records(self):
        out = []
        for n in sorted(os.listdir(self.state)):
            if n.endswith(".json"):
                try:
                    with open(os.path.join(self.state, n)) as f:
                        out.append(json.load(f))
                except (OSError, ValueError):
                    pass
        return out

    # ---- methods ----
    def capabilities(self, p):
        if p.get("protocol") != 1:
            raise Err(-32602, "protocol 1 only")
        r = {"protocol": 1, "engine": "fake (namespaces, tests only)",
             "available": ARGS.unavailable is None, "isolation": ["standard"],
             "park": True, "limits": {"memory": False, "cpus": False, "pids": False}}
        if ARGS.unavailable is not None:
            r["reason"] = ARGS.unavailable
        return r

    def capacity(self, p):
        return {"running": sum(1 for r in self.records() if alive(r["pid"])), "max": None}

    def environment_ensure(self, p):
        root = p.get("root")
        if p.get("kind") not in ("busybox", "host", "dir") or not root or not os.path.isdir(root):
            raise Err(-32602, f"environment.ensure: no tree at {root}")
        return {"ref": "fake-env:" + p["key"] + ":" + root}

    def environment_release(self, p):
        return {}

    def sandbox_start(self, p):
        ref = p.get("ref", "")
        if not ref.startswith("fake-env:"):
            raise Err(-32002, f"no environment {ref}")
        if p.get("isolation") != "standard":
            raise Err(-32003, "isolation enhanced: no runtime configured", "runtime-missing")
        root = ref.split(":", 2)[2]
        sid = p["id"]
        handle = "fake-" + sid
        d = os.path.join(self.state, handle)
        for sub in ("upper", "work", "merged"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        mounts = {m["target"]: m["source"] for m in p.get("mounts", [])}
        netns = (p.get("network") or {}).get("netns")
        argv = []
        if netns:
            argv += ["nsenter", "--net=" + netns]
        argv += ["unshare", "--mount", "--pid", "--fork", "--uts", "--ipc",
                 "sh", "-c", SCRIPT, "sh", os.path.join(d, "merged"), root,
                 os.path.join(d, "upper"), os.path.join(d, "work"),
                 mounts["/.sluice"], mounts["/run/sluice"], p.get("hostname", sid)]
        argv += p["command"]
        outer = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True,
                                 close_fds=True)
        threading.Thread(target=outer.wait, daemon=True).start()
        pid = 0
        for _ in range(200):
            try:
                with open(f"/proc/{outer.pid}/task/{outer.pid}/children") as f:
                    kids = f.read().split()
                if kids and alive(int(kids[0])):
                    pid = int(kids[0])
                    break
            except OSError:
                pass
            if outer.poll() is not None:
                break
            time.sleep(0.025)
        if not pid:
            raise Err(-32000, f"sandbox {sid} did not start")
        rec = {"id": sid, "handle": handle, "pid": pid, "outer": outer.pid, "dir": d}
        with open(self.rec_path(handle) + ".tmp", "w") as f:
            json.dump(rec, f)
        os.rename(self.rec_path(handle) + ".tmp", self.rec_path(handle))
        log(f"started {sid} pid {pid}")
        return {"handle": handle, "pid": pid}

    def sandbox_stop(self, p):
        try:
            rec = self.load(p["handle"])
        except Err:
            return {}
        pid = rec["pid"]
        if alive(pid):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
            end = time.time() + p.get("grace_ms", 0) / 1000.0
            while alive(pid) and time.time() < end:
                time.sleep(0.02)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
            for _ in range(250):
                if not alive(pid):
                    break
                time.sleep(0.02)
        subprocess.run(["rm", "-rf", rec["dir"]], check=False)
        os.unlink(self.rec_path(rec["handle"]))
        log(f"stopped {rec['id']}")
        return {}

    def sandbox_adopt(self, p):
        rec = self.load(p["handle"])
        if rec["id"] != p.get("id") or not alive(rec["pid"]):
            raise Err(-32002, f"sandbox {p.get('id')} is gone")
        return {"handle": rec["handle"], "running": True, "pid": rec["pid"]}

    def sandbox_list(self, p):
        return {"sandboxes": [{"id": r["id"], "handle": r["handle"], "running": alive(r["pid"])}
                              for r in self.records()]}

    def _signal(self, p, sig):
        rec = self.load(p["handle"])
        # the whole pid namespace: every process whose pid namespace is the agent's
        ns = os.readlink(f"/proc/{rec['pid']}/ns/pid")
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    if os.readlink(f"/proc/{d}/ns/pid") == ns:
                        os.kill(int(d), sig)
                except OSError:
                    pass
        return {}

    def sandbox_pause(self, p):
        return self._signal(p, signal.SIGSTOP)

    def sandbox_resume(self, p):
        return self._signal(p, signal.SIGCONT)

    def sandbox_exec(self, p):
        rec = self.load(p["handle"])
        r = subprocess.run(["nsenter", "-t", str(rec["pid"]), "-a"] + p["argv"],
                           capture_output=True, timeout=p.get("timeout_ms", 30000) / 1000.0)
        return {"code": r.returncode if r.returncode >= 0 else None,
                "signal": -r.returncode if r.returncode < 0 else None,
                "stdout": base64.b64encode(r.stdout[:1 << 20]).decode(),
                "stderr": base64.b64encode(r.stderr[:1 << 20]).decode()}

    def file_read(self, p):
        rec = self.load(p["handle"])
        with open(f"/proc/{rec['pid']}/root{p['path']}", "rb") as f:
            data = f.read(p.get("max", 1 << 20))
        return {"data": base64.b64encode(data).decode(), "size": len(data)}

    def file_write(self, p):
        rec = self.load(p["handle"])
        data = base64.b64decode(p.get("data", ""))
        path = f"/proc/{rec['pid']}/root{p['path']}"
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, p.get("mode", 0o644))
        return {"size": len(data)}

    def tree_copy(self, p):
        rec = self.load(p["handle"])
        g = f"/proc/{rec['pid']}/root{p['path']}"
        src, dst = (p["host_path"], g) if p["direction"] == "in" else (g, p["host_path"])
        subprocess.run(["cp", "-a", src, dst], check=True)
        return {}


def serve(conn, sup):
    wmu = threading.Lock()

    def reply(cid, obj):
        body = json.dumps(obj).encode()
        with wmu:
            conn.sendall(struct.pack(">II", len(body), cid) + body)

    def handle(cid, body):
        try:
            req = json.loads(body)
            m = req["method"]
            fn = getattr(sup, m.replace(".", "_"), None)
            if fn is None or m.startswith("_"):
                raise Err(-32601, f"unknown method {m}")
            res = fn(req.get("params") or {})
            reply(cid, {"jsonrpc": "2.0", "id": cid, "result": res})
        except Err as e:
            err = {"code": e.code, "message": e.msg}
            if e.reason:
                err["data"] = {"reason": e.reason}
            reply(cid, {"jsonrpc": "2.0", "id": cid, "error": err})
        except Exception as e:  # noqa: BLE001 -- one line back, never a traceback
            reply(cid, {"jsonrpc": "2.0", "id": cid,
                        "error": {"code": -32000, "message": f"{type(e).__name__}: {e}"}})

    buf = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buf += chunk
        while len(buf) >= 8:
            n, cid = struct.unpack(">II", buf[:8])
            if n == 0 or n > FRAME_MAX:
                return
            if len(buf) < 8 + n:
                break
            body, buf = buf[8:8 + n], buf[8 + n:]
            threading.Thread(target=handle, args=(cid, body), daemon=True).start()


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", default="/run/sluice-fake-supervisor")
    ap.add_argument("--socket")
    ap.add_argument("--unavailable")
    ap.add_argument("--log")
    ARGS = ap.parse_args()
    sup = Sup(ARGS.state)
    fd = os.environ.get("SLUICE_RPC_FD")
    if fd and not ARGS.socket:
        log(f"serving fd {fd} (pid {os.getpid()})")
        serve(socket.socket(fileno=int(fd)), sup)
        log("the host went away: exiting")
        return
    if not ARGS.socket:
        sys.exit("fake_supervisor: give --socket PATH or run with SLUICE_RPC_FD")
    try:
        os.unlink(ARGS.socket)
    except OSError:
        pass
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(ARGS.socket)
    ls.listen(4)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, sup), daemon=True).start()


ARGS = None
if __name__ == "__main__":
    main()
