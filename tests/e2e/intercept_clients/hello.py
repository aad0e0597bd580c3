#!/usr/bin/env python3
"""Raw guests for tests/e2e/intercept_clients.sh: what a real client
library will not send. Each opens a CONNECT to HOST:443 on the forward
door at 127.0.0.1:3128 and, once the 200 is read, does one thing:

  hello.py split CAFILE HOST PATH
      a full TLS handshake (Python's ssl over memory BIOs) whose
      ClientHello is written in five TCP writes, 50 ms apart, the first
      two splitting the record header; then GET PATH. Prints
      "pieces=N hello=LEN status=STATUS-LINE" or "error=..."
  hello.py tls10 HOST
      a ClientHello offering TLS 1.0 only (client_version 3.1, no
      supported_versions extension, TLS 1.0 suites), built by hand
  hello.py malformed HOST
      a ClientHello whose extensions length runs past its end (the
      record and handshake lengths agree with the bytes sent)
  hello.py plain HOST
      an HTTP request in clear text instead of a handshake
      The last three print "end=eof|rst|timeout rx=TYPE..." after
      reading what comes back until the connection ends (5 s): rx is
      "none", or per record "alert:LEVEL:DESC", "handshake" or
      "other:HEX".
"""
import os
import socket
import ssl
import struct
import sys
import time

PROXY = ("127.0.0.1", 3128)


def connect(host):
    s = socket.create_connection(PROXY, timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            print("error=connect-closed")
            sys.exit(1)
        head += b
    status = head.split(b"\r\n")[0].decode()
    if " 200 " not in status + " ":
        print(f"error=connect {status}")
        sys.exit(1)
    return s


def client_hello(sni, corrupt=False):
    name = sni.encode()
    sn = struct.pack("!BH", 0, len(name)) + name
    sn = struct.pack("!H", len(sn)) + sn
    ext = struct.pack("!HH", 0, len(sn)) + sn
    groups = struct.pack("!HH", 2, 23)                # secp256r1
    ext += struct.pack("!HH", 10, len(groups)) + groups
    ext += struct.pack("!HH", 11, 2) + b"\x01\x00"     # ec_point_formats
    # TLS 1.0 suites: ECDHE-ECDSA-AES128-SHA, ECDHE-RSA-AES128-SHA,
    # AES128-SHA
    cs = b"".join(struct.pack("!H", c) for c in (0xC009, 0xC013, 0x002F))
    body = struct.pack("!H", 0x0301) + os.urandom(32) + b"\x00"
    body += struct.pack("!H", len(cs)) + cs + b"\x01\x00"
    body += struct.pack("!H", len(ext) + (40 if corrupt else 0)) + ext
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs


def drain(s):
    """Reads until the peer ends the connection; returns (end, bytes)."""
    s.settimeout(5)
    rx = b""
    end = "eof"
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            rx += b
    except socket.timeout:
        end = "timeout"
    except ConnectionResetError:
        end = "rst"
    return end, rx


def records(rx):
    out = []
    while len(rx) >= 5:
        typ, ln = rx[0], struct.unpack("!H", rx[3:5])[0]
        frag = rx[5:5 + ln]
        if typ == 0x15 and len(frag) >= 2:
            out.append(f"alert:{frag[0]}:{frag[1]}")
        elif typ == 0x16:
            out.append("handshake")
        else:
            out.append("other:" + rx[:8].hex())
            break
        rx = rx[5 + ln:]
    if rx and not out:
        out.append("other:" + rx[:8].hex())
    return ",".join(out) or "none"


def split(ca, host, path):
    s = connect(host)
    ctx = ssl.create_default_context(cafile=ca)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(inc, out, server_hostname=host)
    first = True
    pieces = 0
    hello = 0
    while True:
        try:
            t.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        data = out.read()
        if data and first:
            first = False
            hello = len(data)
            cuts = [0, 2, 4, 40, min(200, len(data) - 1), len(data)]
            for a, b in zip(cuts, cuts[1:]):
                s.sendall(data[a:b])
                pieces += 1
                time.sleep(0.05)
        elif data:
            s.sendall(data)
        if done:
            break
        b = s.recv(65536)
        if not b:
            print("error=closed-in-handshake")
            return
        inc.write(b)
    t.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    s.sendall(out.read())
    resp = b""
    while True:
        try:
            chunk = t.read(65536)
            if not chunk:
                break
            resp += chunk
            continue
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
        b = s.recv(65536)
        if not b:
            break
        inc.write(b)
    line = resp.split(b"\r\n")[0].decode()
    print(f"pieces={pieces} hello={hello} status={line}")


def main():
    mode = sys.argv[1]
    if mode == "split":
        split(*sys.argv[2:5])
        return
    host = sys.argv[2]
    s = connect(host)
    if mode == "tls10":
        s.sendall(client_hello(host))
    elif mode == "malformed":
        s.sendall(client_hello(host, corrupt=True))
    elif mode == "plain":
        s.sendall(f"GET /?m=plain HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    else:
        sys.exit("unknown mode " + mode)
    end, rx = drain(s)
    print(f"end={end} rx={records(rx)}")


if __name__ == "__main__":
    main()
