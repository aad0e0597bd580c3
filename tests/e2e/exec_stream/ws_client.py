#!/usr/bin/env python3
"""ws_client.py MODE URL TOKEN: the exec stream from python3-websockets
(a client the project did not write), and raw refusals.
  run:      cat of stdin bytes, stderr, exit 3: every message checked
  unmasked: the handshake by hand, then an unmasked frame: close 1002
Prints "ok ..."/"FAIL ..." lines; exits 1 on a failure."""
import asyncio
import base64
import json
import os
import socket
import struct
import sys
import urllib.parse

mode, url, token = sys.argv[1:4]
fails = 0


def step(ok, what, got=""):
    global fails
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else " (got %r)" % (got,)))
    sys.stdout.flush()
    if not ok:
        fails += 1


async def run():
    import websockets

    hdrs = {"Authorization": "Bearer " + token}
    # the header argument's name changed in websockets 14
    major = int(websockets.__version__.split(".")[0])
    kw = {"additional_headers" if major >= 14 else "extra_headers": hdrs}
    conn = websockets.connect(url, subprotocols=["sluice.exec.v1"], **kw)
    async with conn as ws:
        step(ws.subprotocol == "sluice.exec.v1", "the subprotocol offered is chosen", ws.subprotocol)
        await ws.send(json.dumps({"type": "exec", "argv": ["sh", "-c", "cat; echo err >&2; exit 3"]}))
        await ws.send(b"hel\x00lo")
        await ws.send(json.dumps({"type": "eof"}))
        out, err, msgs = b"", b"", []
        while True:
            try:
                m = await asyncio.wait_for(ws.recv(), 20)
            except websockets.exceptions.ConnectionClosedOK:
                break
            if isinstance(m, bytes):
                if m[0] == 1:
                    out += m[1:]
                elif m[0] == 2:
                    err += m[1:]
            else:
                msgs.append(json.loads(m))
        types = [m["type"] for m in msgs]
        step(types == ["started", "exit"], "started, then exit", types)
        step(msgs and isinstance(msgs[0].get("pid"), int), "started has a pid", msgs[:1])
        step(out == b"hel\x00lo", "stdout: the stdin bytes back (NUL too)", out)
        step(err == b"err\n", "stderr on stream 2", err)
        step(msgs[-1:] == [{"type": "exit", "code": 3, "signal": None, "timed_out": False}],
             "exit: code 3", msgs[-1:])
        step(ws.close_code == 1000, "a normal close (1000)", ws.close_code)


def unmasked():
    u = urllib.parse.urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n"
               % (u.path, u.hostname, u.port, key, token)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(4096)
        if not d:
            break
        head += d
    step(head.startswith(b"HTTP/1.1 101"), "the handshake by hand: 101", head[:40])
    rest = head.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in head else b""
    msg = json.dumps({"type": "exec", "argv": ["sleep", "5"]}).encode()
    s.sendall(bytes([0x81, len(msg)]) + msg)  # unmasked: refused
    data = rest
    while True:
        try:
            d = s.recv(4096)
        except socket.timeout:
            break
        if not d:
            break
        data += d
    # the server's close frame: 0x88, length, code
    i = data.find(b"\x88")
    code = struct.unpack(">H", data[i + 2:i + 4])[0] if i >= 0 and len(data) >= i + 4 else None
    step(code == 1002, "an unmasked frame: close 1002 (protocol error)", data[:60])


if mode == "run":
    asyncio.run(run())
else:
    unmasked()
sys.exit(1 if fails else 0)
