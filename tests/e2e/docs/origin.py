#!/usr/bin/env python3
"""The test's example.com for tests/e2e/docs.sh: python3 origin.py ADDR
CERT KEY READY_FILE serves "hello from example.com" over HTTP on ADDR:80
and HTTPS on ADDR:443 (CERT/KEY), and writes "ready" to READY_FILE.
Standard library only; the test ends it by pid."""
import http.server
import ssl
import sys
import threading


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from example.com\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write("origin: " + fmt % args + "\n")


def main():
    addr, cert, key, ready = sys.argv[1:5]
    plain = http.server.ThreadingHTTPServer((addr, 80), Hello)
    tls = http.server.ThreadingHTTPServer((addr, 443), Hello)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    for s in (plain, tls):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    with open(ready, "w") as f:
        f.write("ready\n")
    threading.Event().wait()


if __name__ == "__main__":
    main()
