# connrate.py MODE PROXY|- ORIGIN SECONDS CONCURRENCY: new connections per
# second through a proxy (or straight to ORIGIN when PROXY is -). Each
# connection: connect; the MODE's handshake (http: CONNECT ORIGIN, read 200;
# socks: no-auth greeting, CONNECT to ORIGIN's IPv4 address, read the
# reply); one GET /1k with Connection: close; read to EOF; close.
# Prints "<rate> <errors>". Used by bench/forward.sh and bench/socks.sh.
import asyncio, socket, struct, sys, time


async def handshake(mode, r, w, origin):
    if mode == "http":
        w.write(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (origin, origin))
        head = await r.readuntil(b"\r\n\r\n")
        return head[9:12] == b"200"
    ohost, oport = origin.decode().rsplit(":", 1)
    w.write(b"\x05\x01\x00")
    if await r.readexactly(2) != b"\x05\x00":
        return False
    w.write(b"\x05\x01\x00\x01" + socket.inet_aton(ohost) + struct.pack(">H", int(oport)))
    rep = await r.readexactly(10)
    return rep[1] == 0


async def one(mode, host, port, origin, via_proxy, req):
    r, w = await asyncio.open_connection(host, port)
    try:
        if via_proxy and not await handshake(mode, r, w, origin):
            return False
        w.write(req)
        data = b""
        while True:
            more = await r.read(65536)
            if not more:
                break
            data += more
        return data[9:12] == b"200"
    finally:
        w.close()


async def main():
    mode, proxy, origin = sys.argv[1], sys.argv[2], sys.argv[3].encode()
    secs, conc = float(sys.argv[4]), int(sys.argv[5])
    via_proxy = proxy != "-"
    host, port = (proxy if via_proxy else sys.argv[3]).rsplit(":", 1)
    req = b"GET /1k HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % origin
    done = errors = 0
    end = time.monotonic() + secs

    async def loop():
        nonlocal done, errors
        while time.monotonic() < end:
            try:
                ok = await asyncio.wait_for(one(mode, host, int(port), origin, via_proxy, req), 10)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                ok = False
            if ok:
                done += 1
            else:
                errors += 1
    t0 = time.monotonic()
    await asyncio.gather(*(loop() for _ in range(conc)))
    print("%.0f %d" % (done / (time.monotonic() - t0), errors))


asyncio.run(main())
