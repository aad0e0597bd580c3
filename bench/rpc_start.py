#!/usr/bin/env python3
"""rpc_start.py: start latency of the rpc backend's podman supervisor
(bench/sandbox.sh runs it; see bench/README.md).

    rpc_start.py SUPERVISOR AGENT_DIR TREE WORK N

Starts SUPERVISOR (sluice-supervisor-podman) as sluiced does (a socketpair
end as $SLUICE_RPC_FD) with its state under WORK, prepares the busybox
TREE as an environment (timed: the first import), then N times in a row:
sandbox.start of the agent (AGENT_DIR mounted at /.sluice, a run directory
at /run/sluice, as sluiced sends it; no network) until the agent's socket
accepts a connection (agent-ready), then sandbox.stop. Prints one line:

    rpc ensure_ms E start: mean M ms, max X ms, median D ms, p99 P ms; \
        reply: median R ms; stop: median S ms
"""
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "rpc"))
import conformance  # noqa: E402  (its Peer and start_supervisor)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def main():
    sup, agent_dir, tree, work, n = sys.argv[1:6]
    n = int(n)
    log = open(os.path.join(work, "supervisor.log"), "ab")
    proc, peer = conformance.start_supervisor(
        [sup, "--state-dir", os.path.join(work, "state")], log)
    caps, err = peer.call("capabilities", {"protocol": 1})
    if not caps or not caps.get("available"):
        print("rpc: the supervisor is not available: %r %r" % (caps, err))
        return 1
    t0 = time.monotonic()
    res, err = peer.call("environment.ensure", {"kind": "busybox", "root": tree,
                                                "key": "be0c" + "%08x" % os.getpid()},
                         deadline_ms=300000, secs=330)
    ensure_ms = (time.monotonic() - t0) * 1000
    if not res:
        print("rpc: environment.ensure failed: %r" % err)
        return 1
    ref = res["ref"]
    starts, replies, stops = [], [], []
    for i in range(n):
        sid = "slbr%d-%d" % (os.getpid(), i)
        run = os.path.join(work, "run", sid)
        os.makedirs(run, mode=0o700)
        sock = os.path.join(run, "agent.sock")
        spec = {"id": sid, "ref": ref, "isolation": "standard",
                "limits": {"memory_mb": 256, "cpus_milli": 1000, "pids": 128},
                "mounts": [{"source": agent_dir, "target": "/.sluice", "read_only": True},
                           {"source": run, "target": "/run/sluice", "read_only": False}],
                "env": ["PATH=/bin"], "cwd": "/", "hostname": sid,
                "command": ["/.sluice/sluice-agent", "--listen", "/run/sluice/agent.sock"],
                "network": None}
        t0 = time.monotonic()
        st, err = peer.call("sandbox.start", spec)
        t1 = time.monotonic()
        if not st:
            print("rpc: sandbox.start failed: %r" % err)
            return 1
        ready = False
        while time.monotonic() - t0 < 30:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock)
                s.close()
                ready = True
                break
            except OSError:
                time.sleep(0.001)
        t2 = time.monotonic()
        if not ready:
            print("rpc: the agent never listened in %s" % sid)
            peer.call("sandbox.stop", {"handle": st["handle"], "grace_ms": 0})
            return 1
        peer.call("sandbox.stop", {"handle": st["handle"], "grace_ms": 0})
        t3 = time.monotonic()
        starts.append((t2 - t0) * 1000)
        replies.append((t1 - t0) * 1000)
        stops.append((t3 - t2) * 1000)
    peer.call("environment.release", {"ref": ref})
    print("rpc ensure_ms %.0f start: mean %.1f ms, max %.1f ms, median %.1f ms, p99 %.1f ms; "
          "reply: median %.1f ms; stop: median %.1f ms" % (
              ensure_ms, statistics.mean(starts), max(starts), statistics.median(starts),
              pct(starts, 99), statistics.median(replies), statistics.median(stops)))
    proc.kill()
    proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
