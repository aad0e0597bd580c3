#!/usr/bin/env python3
"""A TLS WebSocket origin for intercept_ws.sh: answers the RFC 6455
handshake itself and echoes frames.

server.py CERT KEY ADDR PORT LOG

Every request head is logged ("req PATH upgrade=V connection=V via=V");
on a WebSocket connection every frame ("frame op=N len=L") and its end
("closed clean": our close_notify went out and the peer's came back, or
"closed unclean: why").

  GET /ws... with Upgrade: websocket and a key: 101, then echo. A query
      greet=N sends a binary frame of N bytes (bytes i % 251) in the same
      write as the 101 head.
  GET /rogue101: a 101 to anything (Upgrade: foo), then closes.
  anything else: 200 "upgrade=V", Connection: close.
"""
import base64
import hashlib
import socket
import ssl
import struct
import sys
import threading
import urllib.parse

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC525B5"
cert, key, addr, port, logpath = sys.argv[1:6]
lock = threading.Lock()


def log(msg):
    with lock, open(logpath, "a") as f:
        f.write(msg + "\n")


def read_exact(s, n):
    b = bytearray()
    while len(b) < n:
        chunk = s.recv(min(n - len(b), 65536))
        if not chunk:
            raise EOFError("eof after %d of %d bytes" % (len(b), n))
        b += chunk
    return bytes(b)


def frame(op, payload):
    n = len(payload)
    if n < 126:
        h = struct.pack("!BB", 0x80 | op, n)
    elif n < 65536:
        h = struct.pack("!BBH", 0x80 | op, 126, n)
    else:
        h = struct.pack("!BBQ", 0x80 | op, 127, n)
    return h + payload


def read_frame(s):
    b0, b1 = read_exact(s, 2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", read_exact(s, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", read_exact(s, 8))[0]
    if not b1 & 0x80:
        raise ValueError("an unmasked client frame")
    mask = read_exact(s, 4)
    data = bytearray(read_exact(s, n))
    for i in range(n):
        data[i] ^= mask[i & 3]
    return b0 & 0x0F, bytes(data)


def serve(s):
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            return
        head += c
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    h = {}
    for line in lines[1:]:
        if line:
            k, v = line.split(":", 1)
            h[k.strip().lower()] = v.strip()
    up = h.get("upgrade", "-")
    log("req %s %s upgrade=%s connection=%s via=%s" % (method, target, up, h.get("connection", "-"),
                                                      h.get("via", "-")))
    path, _, query = target.partition("?")
    q = urllib.parse.parse_qs(query)
    if path == "/rogue101":
        s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\n")
        return
    if not (path == "/ws" and up.lower() == "websocket" and "sec-websocket-key" in h):
        body = ("upgrade=%s\n" % up).encode()
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n" % len(body) + body)
        return
    accept = base64.b64encode(hashlib.sha1(h["sec-websocket-key"].encode() + GUID).digest())
    out = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    if "greet" in q:
        n = int(q["greet"][0])
        out += frame(2, bytes(i % 251 for i in range(n)))
    s.sendall(out)
    while True:
        op, data = read_frame(s)
        log("frame op=%d len=%d" % (op, len(data)))
        if op in (1, 2):
            s.sendall(frame(op, data))
        elif op == 9:
            s.sendall(frame(10, data))
        elif op == 8:
            s.sendall(frame(8, data))
            try:
                s.unwrap()
                log("closed clean")
            except (OSError, ssl.SSLError) as e:
                log("closed unclean: %s: %s" % (type(e).__name__, e))
            return


def conn(raw):
    try:
        with raw:
            raw.settimeout(20)
            s = ctx.wrap_socket(raw, server_side=True)
            try:
                serve(s)
            finally:
                s.close()
    except Exception as e:  # one connection's end, logged
        log("error %s: %s" % (type(e).__name__, e))


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((addr, int(port)))
ls.listen(64)
log("listening")
while True:
    c, _ = ls.accept()
    threading.Thread(target=conn, args=(c,), daemon=True).start()
