#!/usr/bin/env python3
"""bench/claims.py: the API side of bench/claims.sh.

  latency SOCK N      N warm claims, one at a time over one keep-alive
                      connection: before each, wait until the pool has a
                      warm sandbox; time the POST only; release after.
  rate SOCK SECS K    K clients, each claiming and releasing in a loop on
                      its own connection for SECS seconds.

Times are taken around the request in this client, so they include the
client's own overhead (python's http.client: tens of microseconds)."""
import http.client
import json
import socket
import statistics
import sys
import threading
import time


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def call(c, method, path, body=None):
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
    r = c.getresponse()
    data = r.read()
    return r.status, (json.loads(data) if data else None)


def warm_count(c):
    st, info = call(c, "GET", "/v1/info")
    return next(p["warm"] for p in info["pools"] if p["name"] == "bench")


def latency(sock, n):
    c = UnixHTTP(sock)
    times, tiers = [], {}
    for _ in range(n):
        deadline = time.monotonic() + 10
        while warm_count(c) < 1 and time.monotonic() < deadline:
            time.sleep(0.002)
        t0 = time.perf_counter()
        st, r = call(c, "POST", "/v1/claims", {"pool": "bench", "ttl_seconds": 60})
        t1 = time.perf_counter()
        if st != 201:
            sys.exit(f"claim failed: {st} {r}")
        times.append((t1 - t0) * 1000)
        tiers[r["tier"]] = tiers.get(r["tier"], 0) + 1
        st, _ = call(c, "DELETE", "/v1/sandboxes/" + r["id"])
        if st != 200:
            sys.exit(f"release failed: {st}")
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(f"warm claim latency over {n} claims: median {statistics.median(times):.3f} ms, "
          f"p99 {p99:.3f} ms, max {times[-1]:.3f} ms (tiers: {tiers})")
    print(f"RESULT latency_median_ms={statistics.median(times):.3f} latency_p99_ms={p99:.3f}")


def rate(sock, secs, k):
    counts = [0] * k
    tiers = [dict() for _ in range(k)]
    lat = [[] for _ in range(k)]
    stop = time.monotonic() + secs
    errors = []

    def client(i):
        c = UnixHTTP(sock)
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            st, r = call(c, "POST", "/v1/claims", {"pool": "bench", "ttl_seconds": 60})
            t1 = time.perf_counter()
            if st != 201:
                errors.append((st, r))
                return
            lat[i].append((t1 - t0) * 1000)
            counts[i] += 1
            tiers[i][r["tier"]] = tiers[i].get(r["tier"], 0) + 1
            call(c, "DELETE", "/v1/sandboxes/" + r["id"])

    th = [threading.Thread(target=client, args=(i,)) for i in range(k)]
    t0 = time.monotonic()
    for t in th:
        t.start()
    for t in th:
        t.join()
    el = time.monotonic() - t0
    if errors:
        sys.exit(f"claims failed: {errors[:3]}")
    total = sum(counts)
    tier = {}
    for d in tiers:
        for kk, v in d.items():
            tier[kk] = tier.get(kk, 0) + v
    al = sorted(x for l in lat for x in l)
    print(f"{k} clients, claim+release loops for {el:.1f} s: {total} claims, "
          f"{total / el:.1f} claims/s (tiers: {tier}); claim median "
          f"{statistics.median(al):.2f} ms, p99 {al[min(len(al) - 1, int(len(al) * 0.99))]:.2f} ms")
    print(f"RESULT claims_per_s={total / el:.1f}")


if __name__ == "__main__":
    if sys.argv[1] == "latency":
        latency(sys.argv[2], int(sys.argv[3]))
    else:
        rate(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
