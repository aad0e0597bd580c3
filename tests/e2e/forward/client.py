#!/usr/bin/env python3
"""Raw clients for tests/e2e/forward.sh (the cases curl cannot express).

  client.py raw HOST PORT          send stdin as is; print the response
  client.py halfclose HOST PORT TARGET N [CHUNK]
                                   CONNECT TARGET, send N bytes, shut down the
                                   write side, expect "N\\n" and then EOF
  client.py ws HOST PORT TARGET    WebSocket upgrade through the forward door,
                                   one masked frame out, the same frame back
  client.py maxconn HOST PORT HOLD hold HOLD connections, each a CONNECT
                                   tunnel to slowbox.test:7001 the door has
                                   answered 200 (so it has surely taken them),
                                   then send a request on one more; print its
                                   response
  client.py quiet HOST PORT TARGET CONNECT TARGET, then send nothing and wait
                                   for the door to end the tunnel
  client.py keepalive HOST PORT URL
                                   GET URL (keep-alive), read the response,
                                   then send nothing and wait for the door to
                                   close the connection
  client.py drip HOST PORT URL     start a request head for URL, then add one
                                   byte of a header every 0.2 s, never ending
                                   the head, until the door closes

  client.py final HOST PORT       send stdin as is; read past 1xx heads to the
                                   final response
  client.py gated HOST PORT FIRST SECOND GATE
                                   send the file FIRST, wait (up to WAIT s) for
                                   the file GATE to exist, send the file SECOND,
                                   then read as final does
  client.py bodydrip HOST PORT URL LENGTH BURST
                                   POST URL with Content-Length: LENGTH: BURST
                                   bytes of body at once, then one byte every
                                   0.1 s until an answer comes; read as final

final, gated and bodydrip print "sport=PORT interim=N complete=yes|no",
then the final response as read (head, blank line, body).
quiet, keepalive and drip print "sport=PORT recv=HEX|- end=eof|rst|open":
the client's port, what arrived after the last expected reply, and how the
connection ended (open: still open after WAIT seconds, a failure).

HOST PORT is the proxy. Every socket has a timeout; exit status 0 means the
exchange went as expected (raw: a complete response was read).
"""
import os
import select
import socket
import struct
import sys
import time

TIMEOUT = 8
WAIT = 40     # quiet, keepalive, drip: at most this long for the door


def connect(host, port):
    s = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    s.settimeout(TIMEOUT)
    return s


def read_response(s, method=b"GET"):
    """Reads one response; returns (head bytes, body bytes, complete)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return buf, b"", False
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        hdrs[k.strip().lower()] = v.strip()
    if status == 101 or (method == b"CONNECT" and 200 <= status < 300) \
            or status in (204, 304) or method == b"HEAD":
        return head, body, True
    if b"content-length" in hdrs:
        n = int(hdrs[b"content-length"])
        while len(body) < n:
            d = s.recv(65536)
            if not d:
                return head, body, False
            body += d
        return head, body[:n], True
    if b"chunked" in hdrs.get(b"transfer-encoding", b"").lower():
        while not body.endswith(b"0\r\n\r\n"):
            d = s.recv(65536)
            if not d:
                return head, body, False
            body += d
        return head, body, True
    while True:
        d = s.recv(65536)
        if not d:
            return head, body, True
        body += d


def cmd_raw(host, port):
    req = sys.stdin.buffer.read()
    method = req.split(b" ", 1)[0]
    s = connect(host, port)
    s.sendall(req)
    try:
        head, body, ok = read_response(s, method)
    except (socket.timeout, ConnectionResetError) as e:
        print("client.py: %s" % e, file=sys.stderr)
        return 1
    sys.stdout.buffer.write(head + b"\r\n\r\n" + body)
    return 0 if ok else 1


def connect_tunnel(host, port, target):
    s = connect(host, port)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
    head, rest, _ = read_response(s, b"CONNECT")
    if not head.startswith(b"HTTP/1.1 200") and not head.startswith(b"HTTP/1.0 200"):
        print("client.py: CONNECT answered %r" % head, file=sys.stderr)
        return None, rest
    return s, rest


def cmd_halfclose(host, port, target, n, chunk="65536"):
    n, chunk = int(n), int(chunk)
    s, rest = connect_tunnel(host, port, target)
    if s is None:
        return 1
    block = os.urandom(chunk)
    sent = 0
    while sent < n:
        k = min(chunk, n - sent)
        s.sendall(block[:k])
        sent += k
    s.shutdown(socket.SHUT_WR)
    reply = rest
    while True:
        d = s.recv(65536)
        if not d:
            break
        reply += d
    if reply != b"%d\n" % n:
        print("client.py: sent %d bytes, the server answered %r" % (n, reply[:100]), file=sys.stderr)
        return 1
    return 0


def cmd_ws(host, port, target):
    s = connect(host, port)
    key = b"dGhlIHNhbXBsZSBub25jZQ=="
    s.sendall(b"GET http://%s/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
              b"Sec-WebSocket-Version: 13\r\n\r\n" % (target.encode(), target.encode(), key))
    head, rest, _ = read_response(s)
    if not head.startswith(b"HTTP/1.1 101"):
        print("client.py: the upgrade was answered %r" % head, file=sys.stderr)
        return 1
    if b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" not in head:
        print("client.py: wrong Sec-WebSocket-Accept in %r" % head, file=sys.stderr)
        return 1
    for payload in (b"hello through sluice", os.urandom(3000)):
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        n = len(payload)
        hdr = bytes([0x82, 0x80 | n]) if n < 126 else bytes([0x82, 0x80 | 126]) + struct.pack(">H", n)
        s.sendall(hdr + mask + masked)
        want = (bytes([0x82, n]) if n < 126 else bytes([0x82, 126]) + struct.pack(">H", n)) + payload
        got = rest
        while len(got) < len(want):
            d = s.recv(65536)
            if not d:
                break
            got += d
        rest = got[len(want):]
        if got[:len(want)] != want:
            print("client.py: frame of %d bytes came back as %r" % (n, got[:40]), file=sys.stderr)
            return 1
    s.sendall(bytes([0x88, 0x80]) + b"\0\0\0\0")
    # The closing handshake: wait for the server's close frame and its
    # EOF before closing, so the tunnel ends in order on both sides.
    got = rest
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    if not got.startswith(bytes([0x88])):
        print("client.py: no close frame back, got %r" % got[:20], file=sys.stderr)
        return 1
    return 0


def cmd_maxconn(host, port, hold):
    held = []
    for _ in range(int(hold)):
        h, _ = connect_tunnel(host, port, "slowbox.test:7001")
        if h is None:
            return 1
        held.append(h)
    s = connect(host, port)
    try:
        s.sendall(b"GET http://origin.test/?marker-maxconn HTTP/1.1\r\nHost: origin.test\r\n"
                  b"Connection: close\r\n\r\n")
    except OSError:
        pass  # it may have answered and closed already
    try:
        head, body, _ = read_response(s)
    except ConnectionResetError as e:
        print("client.py: %s" % e, file=sys.stderr)
        return 1
    sys.stdout.buffer.write(head + b"\r\n\r\n" + body)
    for h in held:
        h.close()
    return 0


def wait_end(s, got=b""):
    """Waits up to WAIT s for the peer to close; returns the line to print."""
    sport = s.getsockname()[1]
    deadline = time.monotonic() + WAIT
    end = "open"
    while time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [], deadline - time.monotonic())
        if not r:
            break
        try:
            d = s.recv(65536)
        except ConnectionResetError:
            end = "rst"
            break
        if not d:
            end = "eof"
            break
        got += d
    s.close()
    return "sport=%d recv=%s end=%s" % (sport, got.hex() or "-", end)


def cmd_quiet(host, port, target):
    s, rest = connect_tunnel(host, port, target)
    if s is None:
        return 1
    print(wait_end(s, rest))
    return 0


def cmd_keepalive(host, port, url):
    s = connect(host, port)
    host_hdr = url.split("/")[2]
    s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (url.encode(), host_hdr.encode()))
    head, _, ok = read_response(s)
    if not ok or not head.startswith(b"HTTP/1.1 200"):
        print("client.py: GET %s answered %r" % (url, head[:80]), file=sys.stderr)
        return 1
    if b"connection: close" in head.lower():
        print("client.py: the door did not keep the connection: %r" % head, file=sys.stderr)
        return 1
    print(wait_end(s))
    return 0


def cmd_drip(host, port, url):
    s = connect(host, port)
    sport = s.getsockname()[1]
    host_hdr = url.split("/")[2]
    s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nX-Drip: " % (url.encode(), host_hdr.encode()))
    got, end = b"", "open"
    deadline = time.monotonic() + WAIT
    while end == "open" and time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [], 0.2)
        if r:
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                end = "rst"
                break
            if not d:
                end = "eof"
                break
            got += d
            continue
        try:
            s.sendall(b"a")
        except (BrokenPipeError, ConnectionResetError):
            end = "rst"
    s.close()
    print("sport=%d recv=%s end=%s" % (sport, got.hex() or "-", end))
    return 0


def recv_some(s):
    try:
        return s.recv(65536)
    except (ConnectionResetError, socket.timeout):
        return b""


def read_final(s, buf=b""):
    """Reads past 1xx heads to the final response and its body: returns
    (interim heads, head, body, complete)."""
    interim = 0
    while True:
        while b"\r\n\r\n" not in buf:
            d = recv_some(s)
            if not d:
                return interim, buf, b"", False
            buf += d
        head, buf = buf.split(b"\r\n\r\n", 1)
        status = int(head.split(b" ")[1])
        if 100 <= status < 200 and status != 101:
            interim += 1
            continue
        break
    hdrs = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        hdrs[k.strip().lower()] = v.strip()
    if b"content-length" in hdrs:
        n = int(hdrs[b"content-length"])
        while len(buf) < n:
            d = recv_some(s)
            if not d:
                return interim, head, buf, False
            buf += d
        return interim, head, buf[:n], True
    while True:
        d = recv_some(s)
        if not d:
            return interim, head, buf, True
        buf += d


def print_final(s, buf=b""):
    sport = s.getsockname()[1]
    interim, head, body, complete = read_final(s, buf)
    sys.stdout.buffer.write(b"sport=%d interim=%d complete=%s\n" %
                            (sport, interim, b"yes" if complete else b"no"))
    sys.stdout.buffer.write(head + b"\r\n\r\n" + body)
    return 0


def cmd_final(host, port):
    req = sys.stdin.buffer.read()
    s = connect(host, port)
    s.sendall(req)
    return print_final(s)


def cmd_gated(host, port, first, second, gate):
    s = connect(host, port)
    with open(first, "rb") as f:
        s.sendall(f.read())
    deadline = time.monotonic() + WAIT
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    with open(second, "rb") as f:
        try:
            s.sendall(f.read())
        except (BrokenPipeError, ConnectionResetError):
            pass
    return print_final(s)


def cmd_bodydrip(host, port, url, length, burst):
    s = connect(host, port)
    host_hdr = url.split("/")[2]
    s.sendall(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n" %
              (url.encode(), host_hdr.encode(), int(length)) + b"b" * int(burst))
    left = int(length) - int(burst)
    deadline = time.monotonic() + WAIT
    while left > 0 and time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [], 0.1)
        if r:
            break       # an answer (or the end) came
        try:
            s.sendall(b"b")
        except (BrokenPipeError, ConnectionResetError):
            break
        left -= 1
    return print_final(s)


def main():
    cmds = {"raw": cmd_raw, "halfclose": cmd_halfclose, "ws": cmd_ws, "maxconn": cmd_maxconn,
            "quiet": cmd_quiet, "keepalive": cmd_keepalive, "drip": cmd_drip,
            "final": cmd_final, "gated": cmd_gated, "bodydrip": cmd_bodydrip}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
