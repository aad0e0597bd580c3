#!/usr/bin/env python3
"""A raw WebSocket client for intercept_ws.sh, through sluice: a CONNECT
on the forward door (http) or a SOCKS5 CONNECT naming the host (socks),
then TLS trusting CA only, then one request.

client.py http|socks CA HOST MODE [ARG]

MODE ws [GREET]: the RFC 6455 handshake on /ws (with ?greet=GREET: the
    origin sends a GREET-byte binary frame with its 101), a masked text
    frame "hello", a masked 200 KiB binary frame, each echo compared byte
    for byte, then a close frame (1000): the echoed close, then the
    origin's close_notify (EOF), then ours. One line per step.
MODE plain PATH UPGRADE: GET PATH with "Upgrade: UPGRADE" and
    "Connection: Upgrade"; prints the status line, Sluice-Reason if any,
    and the body.
"""
import base64
import hashlib
import os
import socket
import ssl
import struct
import sys

proxy, ca, host, mode = sys.argv[1:5]
args = sys.argv[5:]
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC525B5"


def read_exact(s, n):
    b = bytearray()
    while len(b) < n:
        chunk = s.recv(min(n - len(b), 65536))
        if not chunk:
            raise EOFError("eof after %d of %d bytes" % (len(b), n))
        b += chunk
    return bytes(b)


def connect():
    s = socket.create_connection(("127.0.0.1", 3128 if proxy == "http" else 1080), timeout=15)
    if proxy == "http":
        s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(), host.encode()))
        head = b""
        while b"\r\n\r\n" not in head:
            c = s.recv(1)
            if not c:
                raise EOFError("no answer to CONNECT")
            head += c
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError("CONNECT: " + head.split(b"\r\n")[0].decode())
    else:
        s.sendall(b"\x05\x01\x00")
        if read_exact(s, 2) != b"\x05\x00":
            raise RuntimeError("SOCKS5: no method")
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() + struct.pack("!H", 443))
        r = read_exact(s, 4)
        if r[1] != 0:
            raise RuntimeError("SOCKS5: reply %d" % r[1])
        read_exact(s, {1: 4, 4: 16}.get(r[3], 0) + 2 if r[3] != 3 else read_exact(s, 1)[0] + 2)
    ctx = ssl.create_default_context(cafile=ca)
    return ctx.wrap_socket(s, server_hostname=host)


def read_head(s):
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            raise EOFError("eof in the response head: %r" % head)
        head += c
    lines = head.decode("latin-1").split("\r\n")
    h = {}
    for line in lines[1:]:
        if line:
            k, v = line.split(":", 1)
            h[k.strip().lower()] = v.strip()
    return lines[0], h


def send_frame(s, op, payload, code=None):
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        h = struct.pack("!BB", 0x80 | op, 0x80 | n)
    elif n < 65536:
        h = struct.pack("!BBH", 0x80 | op, 0x80 | 126, n)
    else:
        h = struct.pack("!BBQ", 0x80 | op, 0x80 | 127, n)
    m = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
    s.sendall(h + mask + m)


def read_frame(s):
    b0, b1 = read_exact(s, 2)
    if b1 & 0x80:
        raise ValueError("a masked server frame")
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", read_exact(s, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", read_exact(s, 8))[0]
    return b0, read_exact(s, n)


def ws(greet):
    s = connect()
    key = base64.b64encode(os.urandom(16))
    path = "/ws" + ("?greet=%d" % greet if greet else "")
    s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
              % (path.encode(), host.encode(), key))
    status, h = read_head(s)
    print(status)
    want = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
    print("accept", "ok" if h.get("sec-websocket-accept") == want else "bad",
          "upgrade=%s" % h.get("upgrade"), "via=%s" % h.get("via"))
    if greet:
        b0, data = read_frame(s)
        ok = b0 == 0x82 and data == bytes(i % 251 for i in range(greet))
        print("greeting", "ok" if ok else "bad", len(data))
    send_frame(s, 1, b"hello")
    b0, data = read_frame(s)
    print("text", "ok" if (b0, data) == (0x81, b"hello") else "bad %r %r" % (b0, data[:40]))
    big = os.urandom(200 * 1024)
    send_frame(s, 2, big)
    b0, data = read_frame(s)
    print("binary", "ok" if (b0, data) == (0x82, big) else "bad %r %d" % (b0, len(data)), len(data))
    send_frame(s, 8, struct.pack("!H", 1000) + b"bye")
    b0, data = read_frame(s)
    print("close", "ok" if b0 == 0x88 and data == struct.pack("!H", 1000) + b"bye" else "bad %r" % data)
    try:
        rest = s.recv(100)
        print("eof", "ok" if rest == b"" else "bad %r" % rest)
    except (OSError, ssl.SSLError) as e:
        print("eof bad", type(e).__name__, e)
    try:
        s.unwrap().close()
        print("unwrap ok")
    except (OSError, ssl.SSLError) as e:
        print("unwrap bad", type(e).__name__, e)


def plain(path, upgrade):
    s = connect()
    s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: %s\r\nConnection: Upgrade, HTTP2-Settings\r\n"
              b"HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"
              % (path.encode(), host.encode(), upgrade.encode()))
    status, h = read_head(s)
    print(status)
    if "sluice-reason" in h:
        print("Sluice-Reason:", h["sluice-reason"])
    if "upgrade" in h:
        print("Upgrade:", h["upgrade"])
    n = int(h.get("content-length", "0"))
    print(read_exact(s, n).decode().strip())


try:
    if mode == "ws":
        ws(int(args[0]) if args and args[0] else 0)
    else:
        plain(*args)
except Exception as e:
    print("error", type(e).__name__, e)
