#!/usr/bin/env python3
"""SOCKS5 clients for tests/e2e/socks.sh (what curl cannot show: reply
codes, BND, methods, malformed input, split messages).

  client.py socks PHOST PPORT TARGET [options]
      greeting, optional RFC 1929 auth, one request; prints one line of
      key=value: method=XX [auth=XX] [rep=N bnd=ADDR:PORT] end=open|eof|rst|timeout
      (end: what the connection did after the last reply read: after a
      refusal, the door's close is waited for)
    TARGET         host:port, a.b.c.d:port or [v6]:port
    --methods L    the methods offered, hex, comma-separated (default 00)
    --user U --pass P   credentials if the door picks 02
    --atyp N       1, 3 or 4 (default: 1 for an IPv4 literal, 4 for [v6],
                   3 for a name); any other number sends that ATYP with the
                   TARGET's host as a domain-style field
    --cmd N        CMD (default 1, CONNECT)
    --split K      send every message in pieces of K bytes, 20 ms apart
    --get PATH     on success: GET PATH with Connection: close, read to
                   EOF; adds http=STATUS len=N sha256=HEX
    --halfclose N  on success: send N bytes, shut down the write side,
                   expect "N\\n" then EOF; adds halfclose=ok|bad
    --quiet        on success: send nothing, and wait (up to WAIT s) for
                   the door to end the tunnel; adds sport=PORT
    --optimistic   send the greeting, the credentials (with --user), the
                   request and the --get request in one write, before any
                   reply (as optimistic clients do); then read the replies
  client.py raw PHOST PPORT STEP... [--split K|--random] [--then HEX]
      each STEP is hex bytes, sent (in pieces of K bytes 20 ms apart, or
      in random pieces); after each, the reply to it (greeting, then
      RFC 1929 if the door chose 02, then request: the SOCKS5 framing
      says how long it is) is read, or the door's close; after the last,
      the door's close is waited for. Prints recv=HEX end=open|eof|rst|data:HEX.
      --then HEX: the last STEP is incomplete on purpose: nothing may have
      arrived for it; HEX completes it and its reply is read (then=HEX),
      proving the door was still waiting; end=open
  client.py maxconn PHOST FWD_PORT SOCKS_PORT
      with max_connections 2: holds one forward (a CONNECT tunnel the door
      answered) and one SOCKS connection (greeted and answered) and greets
      on a third SOCKS one (probe1=...), closes them, holds two SOCKS ones
      (each greeted until the door serves it: it frees the slots of closed
      connections as it notices them) and asks the forward door
      (probe2=HTTP status), then closes all and greets again until served
      (probe3=...)
  client.py drip PHOST PPORT
      a greeting of 255 methods, one byte every 0.2 s (it would take 51 s,
      more than the door's 30 s for the handshake, and WAIT): prints
      sport=PORT recv=HEX|- end=eof|rst|open
  client.py hold PHOST PPORT N RELEASE
      opens N connections and greets (no auth) on each at once; after
      1.5 s prints served=S pending=P (greetings answered 0500, or not yet:
      still in the door's backlog), then waits for the file RELEASE to
      exist (up to WAIT s), closes the served ones, and closes each pending
      one as soon as it is answered (each close frees the door a
      descriptor): prints later=ANSWERED left=UNANSWERED ms=TIME_TO_ALL
  client.py pipe PHOST PPORT HOST PORT
      a ProxyCommand: CONNECT (no auth) to HOST:PORT, then stdin/stdout

Every socket has a timeout. Exit status 0 unless the usage was wrong.
"""
import hashlib
import ipaddress
import os
import random
import select
import socket
import struct
import sys
import threading
import time

TIMEOUT = 8
WAIT = 45     # --quiet, drip, maxconn: at most this long for the door


def connect(host, port):
    s = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(TIMEOUT)
    return s


def send(s, data, split=0, rnd=False):
    if not split and not rnd:
        s.sendall(data)
        return
    i = 0
    while i < len(data):
        k = random.randint(1, max(1, len(data) - i)) if rnd else split
        s.sendall(data[i:i + k])
        i += k
        time.sleep(0.02)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise EOFError(buf)
        buf += d
    return buf


def ending(s, wait=TIMEOUT):
    """What the connection does next: eof, rst, data:HEX (bytes came), or
    open (nothing within wait: only when the door should have closed)."""
    s.settimeout(wait)
    try:
        d = s.recv(64)
    except socket.timeout:
        return "open"
    except ConnectionResetError:
        return "rst"
    finally:
        s.settimeout(TIMEOUT)
    return "eof" if not d else "data:" + d.hex()


def parse_target(t):
    if t.startswith("["):
        host, _, port = t[1:].partition("]:")
    else:
        host, _, port = t.rpartition(":")
    return host, int(port)


def request(cmd, atyp, host, port):
    if atyp == 1:
        addr = socket.inet_pton(socket.AF_INET, host)
    elif atyp == 4:
        addr = socket.inet_pton(socket.AF_INET6, host)
    else:
        addr = bytes([len(host)]) + host.encode()
    return bytes([5, cmd, 0, atyp]) + addr + struct.pack(">H", port)


def read_reply(s):
    """VER REP RSV ATYP BND.ADDR BND.PORT -> (rep, "addr:port")."""
    head = recv_exact(s, 4)
    if head[3] == 1:
        a = socket.inet_ntop(socket.AF_INET, recv_exact(s, 4))
    elif head[3] == 4:
        a = "[%s]" % socket.inet_ntop(socket.AF_INET6, recv_exact(s, 16))
    else:
        n = recv_exact(s, 1)[0]
        a = recv_exact(s, n).decode("ascii", "replace")
    port = struct.unpack(">H", recv_exact(s, 2))[0]
    if head[0] != 5 or head[2] != 0:
        raise ValueError("bad reply head %s" % head.hex())
    return head[1], "%s:%d" % (a, port)


def opts(args, spec):
    out, rest = {}, []
    i = 0
    while i < len(args):
        if args[i].startswith("--") and args[i][2:] in spec:
            out[args[i][2:]] = args[i + 1]
            i += 2
        else:
            rest.append(args[i])
            i += 1
    return out, rest


def http_get(path, host):
    return b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path.encode(), host.encode())


def cmd_socks(phost, pport, *args):
    quiet = "--quiet" in args
    optimistic = "--optimistic" in args
    args = [a for a in args if a not in ("--quiet", "--optimistic")]
    o, rest = opts(args, {"methods", "user", "pass", "atyp", "cmd", "split", "get", "halfclose"})
    host, port = parse_target(rest[0])
    methods = bytes(int(m, 16) for m in o.get("methods", "00").split(","))
    if "atyp" in o:
        atyp = int(o["atyp"])
    else:
        try:
            atyp = 1 if ipaddress.ip_address(host).version == 4 else 4
        except ValueError:
            atyp = 3
    split = int(o.get("split", "0"))
    out = []
    s = connect(phost, pport)
    try:
        if optimistic:
            u, p = o.get("user", "").encode(), o.get("pass", "").encode()
            ahead = bytes([5, len(methods)]) + methods
            if "user" in o:
                ahead += bytes([1, len(u)]) + u + bytes([len(p)]) + p
            ahead += request(int(o.get("cmd", "1")), atyp, host, port)
            if "get" in o:
                ahead += http_get(o["get"], host)
            s.sendall(ahead)
        else:
            send(s, bytes([5, len(methods)]) + methods, split)
        ver, m = recv_exact(s, 2)
        out.append("method=%02x" % m)
        if m == 0xff:
            out.append("end=" + ending(s))
            return out
        if m == 2:
            u, p = o.get("user", "").encode(), o.get("pass", "").encode()
            if not optimistic:
                send(s, bytes([1, len(u)]) + u + bytes([len(p)]) + p, split)
            v, st = recv_exact(s, 2)
            out.append("auth=%02x" % st)
            if st != 0:
                out.append("end=" + ending(s))
                return out
        if not optimistic:
            send(s, request(int(o.get("cmd", "1")), atyp, host, port), split)
        rep, bnd = read_reply(s)
        out.append("rep=%d bnd=%s" % (rep, bnd))
        if rep != 0:
            out.append("end=" + ending(s))
            return out
        if "get" in o:
            if not optimistic:
                s.sendall(http_get(o["get"], host))
            data = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                data += d
            head, _, body = data.partition(b"\r\n\r\n")
            status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/") else "-"
            out.append("http=%s len=%d sha256=%s" % (status, len(body), hashlib.sha256(body).hexdigest()))
            out.append("end=eof")
        elif "halfclose" in o:
            n = int(o["halfclose"])
            block = os.urandom(65536)
            sent = 0
            while sent < n:
                k = min(len(block), n - sent)
                s.sendall(block[:k])
                sent += k
            s.shutdown(socket.SHUT_WR)
            reply = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                reply += d
            out.append("halfclose=%s" % ("ok" if reply == b"%d\n" % n else "bad:%r" % reply[:40]))
            out.append("end=eof")
        elif quiet:
            out.append("sport=%d" % s.getsockname()[1])
            out.append("end=" + ending(s, WAIT))
        else:
            out.append("end=open")
    except EOFError as e:
        out.append("short=%s end=eof" % e.args[0].hex())
    except ConnectionResetError:
        out.append("end=rst")
    except socket.timeout:
        out.append("end=timeout")
    finally:
        s.close()
    return out


def reply_len(kind, buf):
    """The length of the door's reply to a `kind` message ("greeting",
    "auth", "request") whose first bytes are buf; None until buf says."""
    if kind != "request":
        return 2
    if len(buf) < 5:
        return None
    return {1: 10, 3: 7 + buf[4], 4: 22}.get(buf[3], 4)


def read_reply_to(s, kind):
    """Reads the reply to a `kind` message, or what comes before the door
    closes. Returns (bytes, end): end is open (a whole reply), eof, rst or
    timeout (no whole reply within TIMEOUT)."""
    buf = b""
    while True:
        n = reply_len(kind, buf)
        if n is not None and len(buf) >= n:
            return buf, "open"
        try:
            d = s.recv(1 if n is None else n - len(buf))
        except ConnectionResetError:
            return buf, "rst"
        except socket.timeout:
            return buf, "timeout"
        if not d:
            return buf, "eof"
        buf += d


def cmd_raw(phost, pport, *args):
    o, steps = opts(list(args), {"split", "then"})
    rnd = "--random" in steps
    steps = [x for x in steps if x != "--random"]
    split = int(o.get("split", "0"))
    s = connect(phost, pport)
    got, end, kind = b"", "open", "greeting"
    for i, st in enumerate(steps):
        try:
            send(s, bytes.fromhex(st), split, rnd)
        except (BrokenPipeError, ConnectionResetError):
            # Closed while we were still sending: what it said before
            # closing may still be queued for us.
            s.setblocking(False)
            try:
                while True:
                    d = s.recv(65536)
                    if not d:
                        break
                    got += d
            except OSError:
                pass
            end = "rst"
            break
        if "then" in o and i == len(steps) - 1:
            break       # cut short on purpose: no reply is due yet
        reply, end = read_reply_to(s, kind)
        got += reply
        if end != "open":
            break
        kind = "auth" if kind == "greeting" and reply == b"\x05\x02" else "request"
    if end == "timeout":
        end = "open"
    elif end == "open" and "then" in o:
        # Nothing may be there for the incomplete message; then the rest
        # of it, and its reply: the door was waiting for it.
        r, _, _ = select.select([s], [], [], 0)
        early = b""
        if r:
            try:
                early = s.recv(65536)
            except ConnectionResetError:
                early = b"rst"
        if early:
            got += early
        else:
            send(s, bytes.fromhex(o["then"]), split, rnd)
            reply, end = read_reply_to(s, kind)
            s.close()
            return ["recv=%s then=%s end=%s" % (got.hex() or "-", reply.hex() or "-", end)]
    elif end == "open":
        end = ending(s)
    s.close()
    return ["recv=%s end=%s" % (got.hex() or "-", end)]


def greet(host, port):
    """Greets (no auth); the method reply's hex, or eof, rst or timeout."""
    s = connect(host, port)
    try:
        s.sendall(b"\x05\x01\x00")
        d = s.recv(16)
        return (d.hex() or "eof"), s
    except (BrokenPipeError, ConnectionResetError):
        return "rst", s
    except socket.timeout:
        return "timeout", s


def greet_served(host, port):
    """Greets until the door serves the greeting (0500), up to WAIT s: it
    frees the slots of closed connections as it notices their close."""
    deadline = time.monotonic() + WAIT
    while True:
        r, s = greet(host, port)
        if r == "0500" or time.monotonic() > deadline:
            return r, s
        s.close()
        time.sleep(0.05)


def cmd_maxconn(phost, fport, sport):
    out = []
    f = connect(phost, fport)
    f.sendall(b"CONNECT slowbox.test:7001 HTTP/1.1\r\nHost: slowbox.test:7001\r\n\r\n")
    d = f.recv(4096)
    if not d.startswith(b"HTTP/1.1 200"):
        return ["hold=forward:%r" % d[:40]]
    r, g = greet(phost, sport)
    if r != "0500":
        return ["hold=socks:%s" % r]
    held = [f, g]
    r, s = greet(phost, sport)
    out.append("probe1=%s" % r)
    s.close()
    for h in held:
        h.close()
    held = []
    for _ in range(2):
        r, g = greet_served(phost, sport)
        held.append(g)
        if r != "0500":
            return out + ["hold=socks:%s" % r]
    s = connect(phost, fport)
    status = "-"
    try:
        s.sendall(b"GET http://origin.test/?m=maxconn-socks HTTP/1.1\r\nHost: origin.test\r\n"
                  b"Connection: close\r\n\r\n")
        d = s.recv(4096)
        status = d.split(b" ", 2)[1].decode() if d.startswith(b"HTTP/") else (d.hex() or "eof")
    except OSError as e:
        status = type(e).__name__
    s.close()
    out.append("probe2=%s" % status)
    for h in held:
        h.close()
    r, s = greet_served(phost, sport)
    out.append("probe3=%s" % r)
    s.close()
    return out


def cmd_drip(phost, pport):
    s = connect(phost, pport)
    sport = s.getsockname()[1]
    s.sendall(b"\x05\xff")
    got, end = b"", "open"
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [], 0.2)
        if r:
            try:
                d = s.recv(512)
            except ConnectionResetError:
                end = "rst"
                break
            if not d:
                end = "eof"
                break
            got += d
            continue
        try:
            s.sendall(b"\x00")
        except (BrokenPipeError, ConnectionResetError):
            end = "rst"
            break
    s.close()
    return ["sport=%d recv=%s end=%s" % (sport, got.hex() or "-", end)]


def cmd_pipe(phost, pport, host, port):
    s = connect(phost, pport)
    s.sendall(b"\x05\x01\x00")
    if recv_exact(s, 2) != b"\x05\x00":
        return ["pipe: no method"]
    s.sendall(request(1, 3, host, int(port)))
    rep, _ = read_reply(s)
    if rep != 0:
        return ["pipe: rep=%d" % rep]
    s.settimeout(None)

    def up():
        while True:
            d = os.read(0, 65536)
            if not d:
                s.shutdown(socket.SHUT_WR)
                return
            s.sendall(d)
    threading.Thread(target=up, daemon=True).start()
    while True:
        d = s.recv(65536)
        if not d:
            return []
        os.write(1, d)


def cmd_hold(phost, pport, n, release):
    socks = []
    for _ in range(int(n)):
        s = socket.create_connection((phost, int(pport)), timeout=TIMEOUT)
        s.sendall(b"\x05\x01\x00")
        socks.append(s)
    served, pending = [], list(socks)
    deadline = time.monotonic() + 1.5
    while pending and time.monotonic() < deadline:
        r, _, _ = select.select(pending, [], [], max(0, deadline - time.monotonic()))
        for s in r:
            pending.remove(s)
            served.append(s)
    print("served=%d pending=%d" % (len(served), len(pending)), flush=True)
    deadline = time.monotonic() + WAIT
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    for s in served:
        s.close()
    t0 = time.monotonic()
    later = 0
    deadline = t0 + WAIT
    while pending and time.monotonic() < deadline:
        r, _, _ = select.select(pending, [], [], 0.5)
        for s in r:
            try:
                d = s.recv(16)
            except OSError:
                d = b""
            later += d == b"\x05\x00"
            pending.remove(s)
            s.close()
    ms = int((time.monotonic() - t0) * 1000)
    for s in pending:
        s.close()
    return ["later=%d left=%d ms=%d" % (later, len(pending), ms)]


def main():
    cmds = {"socks": cmd_socks, "raw": cmd_raw, "maxconn": cmd_maxconn, "pipe": cmd_pipe,
            "drip": cmd_drip, "hold": cmd_hold}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    out = cmds[sys.argv[1]](*sys.argv[2:])
    if out:
        print(" ".join(out), file=sys.stderr if sys.argv[1] == "pipe" else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
