#!/usr/bin/env python3
"""SOCKS5 clients for tests/e2e/socks.sh (what curl cannot show: reply
codes, BND, methods, malformed input, split messages).

  client.py socks PHOST PPORT TARGET [options]
      greeting, optional RFC 1929 auth, one request; prints one line of
      key=value: method=XX [auth=XX] [rep=N bnd=ADDR:PORT] end=open|eof|rst|timeout
      (end: what the connection did after the last reply read)
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
  client.py raw PHOST PPORT STEP... [--split K|--random]
      each STEP is hex bytes, sent (in pieces of K bytes 20 ms apart, or
      in random pieces), then whatever arrives within 0.3 s is read;
      prints recv=HEX end=open|eof|rst
  client.py maxconn PHOST FWD_PORT SOCKS_PORT
      with max_connections 2: holds one forward and one SOCKS connection
      and greets on a third SOCKS one (probe1=...), holds two SOCKS ones
      and asks the forward door (probe2=HTTP status), then releases all
      and greets again (probe3=...)
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


def ending(s, wait=1.0):
    """What the connection does next: eof, rst, open (nothing within wait)."""
    s.settimeout(wait)
    try:
        d = s.recv(1)
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


def cmd_socks(phost, pport, *args):
    o, rest = opts(list(args), {"methods", "user", "pass", "atyp", "cmd", "split", "get", "halfclose"})
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
        send(s, bytes([5, len(methods)]) + methods, split)
        ver, m = recv_exact(s, 2)
        out.append("method=%02x" % m)
        if m == 0xff:
            out.append("end=" + ending(s))
            return out
        if m == 2:
            u, p = o.get("user", "").encode(), o.get("pass", "").encode()
            send(s, bytes([1, len(u)]) + u + bytes([len(p)]) + p, split)
            v, st = recv_exact(s, 2)
            out.append("auth=%02x" % st)
            if st != 0:
                out.append("end=" + ending(s))
                return out
        send(s, request(int(o.get("cmd", "1")), atyp, host, port), split)
        rep, bnd = read_reply(s)
        out.append("rep=%d bnd=%s" % (rep, bnd))
        if rep != 0:
            out.append("end=" + ending(s))
            return out
        if "get" in o:
            s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                      % (o["get"].encode(), host.encode()))
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
        else:
            out.append("end=" + ending(s, 0.3))
    except EOFError as e:
        out.append("short=%s end=eof" % e.args[0].hex())
    except ConnectionResetError:
        out.append("end=rst")
    except socket.timeout:
        out.append("end=timeout")
    finally:
        s.close()
    return out


def cmd_raw(phost, pport, *args):
    o, steps = opts(list(args), {"split"})
    rnd = "--random" in steps
    steps = [x for x in steps if x != "--random"]
    split = int(o.get("split", "0"))
    s = connect(phost, pport)
    got, end = b"", "open"
    for st in steps:
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
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            r, _, _ = select.select([s], [], [], max(0, deadline - time.monotonic()))
            if not r:
                continue
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                end = "rst"
                break
            if not d:
                end = "eof"
                break
            got += d
        if end != "open":
            break
    if end == "open":
        e = ending(s, 1.0)
        end = e if not e.startswith("data:") else "open"
    s.close()
    return ["recv=%s end=%s" % (got.hex() or "-", end)]


def greet(host, port):
    s = connect(host, port)
    try:
        s.sendall(b"\x05\x01\x00")
        s.settimeout(2)
        d = s.recv(16)
        return (d.hex() or "eof"), s
    except ConnectionResetError:
        return "rst", s
    except socket.timeout:
        return "timeout", s


def cmd_maxconn(phost, fport, sport):
    out = []
    held = [connect(phost, fport), connect(phost, sport)]
    time.sleep(0.3)
    r, s = greet(phost, sport)
    out.append("probe1=%s" % r)
    s.close()
    for h in held:
        h.close()
    time.sleep(0.3)
    held = [connect(phost, sport), connect(phost, sport)]
    time.sleep(0.3)
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
    time.sleep(0.3)
    r, s = greet(phost, sport)
    out.append("probe3=%s" % r)
    s.close()
    return out


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


def main():
    cmds = {"socks": cmd_socks, "raw": cmd_raw, "maxconn": cmd_maxconn, "pipe": cmd_pipe}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    out = cmds[sys.argv[1]](*sys.argv[2:])
    if out:
        print(" ".join(out), file=sys.stderr if sys.argv[1] == "pipe" else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
