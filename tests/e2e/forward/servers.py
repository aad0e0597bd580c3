#!/usr/bin/env python3
"""Test servers for tests/e2e/forward.sh, run inside the test's "inet"
namespace: python3 servers.py ADDR READY_FILE

  ADDR:7001  half-close: reads until EOF, answers "<byte count>\n", closes
  ADDR:7002  reset: reads the request head, then resets (SO_LINGER 0)
  ADDR:7003  WebSocket echo: handshake by hand, echoes every data frame
  ADDR:7004  head echo: answers 200 with the request head it received as body
  ADDR:7005  SSH banner: sends an SSH identification line, reads the
             client's, writes "banner: <client's line>" to stderr, closes
  ADDR:7006  garbage: reads the request head, answers bytes that are no
             HTTP response, closes
  ADDR:7007  silent: reads the request head; ?answer=1 answers 200, else it
             says nothing and logs "silent m=M: closed by the peer" when the
             other side ends the connection
  ADDR:7008  big head: answers 200 with ?size=N bytes of header fields, or
             (?size=endless) header fields without end, until the peer goes
  ADDR:7009  interim: answers ?n=N "100 Continue" heads, then 200 ("endless":
             100s until the peer goes)
  ADDR:7010  partial: answers 200 with Content-Length: 1000; ?whole=1 sends
             the 1000 bytes, else 10 of them and then nothing (logs when the
             peer ends it)
  ADDR:7011  spoof: answers 200 with Sluice-Reason: denied and Sluice-Extra,
             body "spoof-check"
  ADDR:7012  sink: reads a request body (Content-Length or chunked, kept as
             is), answers 200 "whole N" when it is complete; logs
             "sink m=M: head", then "sink m=M: whole N" or "sink m=M: cut
             after N" (the peer ended it first)
  ADDR:5353  DNS (UDP) for slow.test: answers a query for fail.slow.test
             with SERVFAIL, never answers any other

Standard library only. Every socket has a timeout, so that nothing here
waits forever; the test ends the process by pid.
"""
import base64
import hashlib
import socket
import struct
import sys
import threading

TIMEOUT = 20


def listener(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)
    return s


def serve(sock, handler):
    def loop():
        while True:
            c, _ = sock.accept()
            c.settimeout(TIMEOUT)
            threading.Thread(target=wrap, args=(handler, c), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def wrap(handler, c):
    try:
        handler(c)
    except (OSError, ValueError):
        pass
    finally:
        try:
            c.close()
        except OSError:
            pass


def read_head(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(4096)
        if not d:
            raise ValueError("EOF before the end of the head")
        buf += d
        if len(buf) > 1 << 20:
            raise ValueError("head too large")
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head, rest


def half_close(c):
    n = 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        n += len(d)
    c.sendall(b"%d\n" % n)


def reset(c):
    read_head(c)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def recv_exact(c, n, buf=b""):
    while len(buf) < n:
        d = c.recv(n - len(buf))
        if not d:
            raise ValueError("EOF")
        buf += d
    return buf


def ws_echo(c):
    head, rest = read_head(c)
    key = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"sec-websocket-key":
            key = value.strip()
    if key is None:
        c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    buf = rest
    while True:
        buf = recv_exact(c, 2, buf)
        b0, b1 = buf[0], buf[1]
        buf = buf[2:]
        n = b1 & 0x7f
        if n == 126:
            buf = recv_exact(c, 2, buf)
            n = struct.unpack(">H", buf[:2])[0]
            buf = buf[2:]
        elif n == 127:
            buf = recv_exact(c, 8, buf)
            n = struct.unpack(">Q", buf[:8])[0]
            buf = buf[8:]
        mask = b""
        if b1 & 0x80:
            buf = recv_exact(c, 4, buf)
            mask, buf = buf[:4], buf[4:]
        buf = recv_exact(c, n, buf)
        payload, buf = buf[:n], buf[n:]
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        op = b0 & 0x0f
        if op == 8:  # close: answer it and end
            c.sendall(bytes([0x88, len(payload)]) + payload)
            return
        # Server frames are not masked.
        if n < 126:
            hdr = bytes([b0, n])
        elif n < 65536:
            hdr = bytes([b0, 126]) + struct.pack(">H", n)
        else:
            hdr = bytes([b0, 127]) + struct.pack(">Q", n)
        c.sendall(hdr + payload)


def head_echo(c):
    head, _ = read_head(c)
    log("echo: %s" % head.split(b"\r\n", 1)[0].decode("ascii", "replace"))
    body = head + b"\r\n"
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)


def banner(c):
    c.sendall(b"SSH-2.0-sluice_e2e_banner\r\n")
    buf = b""
    while b"\n" not in buf and len(buf) < 512:
        d = c.recv(512)
        if not d:
            break
        buf += d
    line = buf.split(b"\n", 1)[0].rstrip(b"\r")
    sys.stderr.write("banner: %s\n" % line.decode("ascii", "replace"))
    sys.stderr.flush()


def garbage(c):
    read_head(c)
    c.sendall(b"NOT-HTTP \x00\x01\x02 this is no status line\r\n\r\n")


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def query(head):
    """The request's query parameters (first value of each)."""
    target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("ascii", "replace")
    q = {}
    if "?" in target:
        for kv in target.split("?", 1)[1].split("&"):
            k, _, v = kv.partition("=")
            q.setdefault(k, v)
    return q


def until_peer_ends(c):
    """Reads (and drops) until the peer closes; True if it did."""
    try:
        while c.recv(65536):
            pass
        return True
    except OSError:
        return True


def silent(c):
    head, _ = read_head(c)
    q = query(head)
    if q.get("answer"):
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nanswer")
        return
    c.settimeout(None)
    until_peer_ends(c)
    log("silent m=%s: closed by the peer" % q.get("m", "-"))


def big_head(c):
    head, _ = read_head(c)
    size = query(head).get("size", "100")
    c.sendall(b"HTTP/1.1 200 OK\r\n")
    sent, n = 0, 0
    while size == "endless" or sent < int(size):
        line = b"X-Fill-%d: %s\r\n" % (n, b"f" * 64)
        c.sendall(line)
        sent += len(line)
        n += 1
    c.sendall(b"Content-Length: 2\r\nConnection: close\r\n\r\nok")


def interim(c):
    head, _ = read_head(c)
    n = query(head).get("n", "1")
    i = 0
    while n == "endless" or i < int(n):
        c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        i += 1
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nanswer\n")


def partial(c):
    head, _ = read_head(c)
    q = query(head)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n")
    if q.get("whole"):
        c.sendall(b"p" * 1000)
        return
    c.sendall(b"p" * 10)
    c.settimeout(None)
    until_peer_ends(c)
    log("partial m=%s: closed by the peer" % q.get("m", "-"))


def spoof(c):
    read_head(c)
    c.sendall(b"HTTP/1.1 200 OK\r\nSluice-Reason: denied\r\nSluice-Extra: x\r\n"
              b"X-Spoof-Test: kept\r\nContent-Length: 11\r\nConnection: close\r\n\r\n"
              b"spoof-check")


def sink(c):
    head, got = read_head(c)
    m = query(head).get("m", "-")
    log("sink m=%s: head" % m)
    hdrs = head.lower()
    chunked = b"transfer-encoding: chunked" in hdrs
    length = None
    for line in hdrs.split(b"\r\n")[1:]:
        if line.startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    c.settimeout(None)
    while True:
        if chunked and got.endswith(b"0\r\n\r\n"):
            break
        if length is not None and len(got) >= length:
            break
        try:
            d = c.recv(65536)
        except OSError:
            d = b""
        if not d:
            log("sink m=%s: cut after %d" % (m, len(got)))
            return
        got += d
    log("sink m=%s: whole %d" % (m, len(got)))
    body = b"whole %d\n" % len(got)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
              + body)


def qname(q):
    """The question's name of a DNS query, lower case, or None."""
    labels, i = [], 12
    while i < len(q):
        n = q[i]
        if n == 0:
            return ".".join(labels).lower()
        if n & 0xc0:
            return None
        labels.append(q[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    return None


def dns(addr):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((addr, 5353))

    def loop():
        while True:
            q, peer = u.recvfrom(4096)
            if len(q) < 12 or qname(q) != "fail.slow.test":
                continue  # slow.test and the rest: never answered
            # The query's id and question, QR, its RD, RA, RCODE 2
            # (SERVFAIL), no records (an OPT record in the query is dropped).
            end = q.index(b"\0", 12) + 5
            flags = 0x8082 | (q[2] & 0x01) << 8
            u.sendto(q[:2] + struct.pack(">HHHHH", flags, 1, 0, 0, 0) + q[12:end], peer)
    threading.Thread(target=loop, daemon=True).start()


def main():
    addr, ready = sys.argv[1], sys.argv[2]
    serve(listener(addr, 7001), half_close)
    serve(listener(addr, 7002), reset)
    serve(listener(addr, 7003), ws_echo)
    serve(listener(addr, 7004), head_echo)
    serve(listener(addr, 7005), banner)
    serve(listener(addr, 7006), garbage)
    serve(listener(addr, 7007), silent)
    serve(listener(addr, 7008), big_head)
    serve(listener(addr, 7009), interim)
    serve(listener(addr, 7010), partial)
    serve(listener(addr, 7011), spoof)
    serve(listener(addr, 7012), sink)
    dns(addr)
    with open(ready, "w") as f:
        f.write("ready\n")
    threading.Event().wait()


if __name__ == "__main__":
    main()
