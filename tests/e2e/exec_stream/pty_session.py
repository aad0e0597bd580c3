#!/usr/bin/env python3
"""pty_session.py CLI API ID: drives `sluice shell ID` on a pty of its
own, as a person at a terminal would: the size it starts with, a
resize (stty size answers the new one), ^C to a running sleep (it ends,
the shell lives), and `exit 7`, which must become the CLI's status.
Prints one line per step ("ok ..." / "FAIL ..."), exits 1 on a failure."""
import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time

cli, api, sid = sys.argv[1:4]
fails = 0


def step(ok, what, got=b""):
    global fails
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else " (got %r)" % got[-300:]))
    sys.stdout.flush()
    if not ok:
        fails += 1


pid, fd = pty.fork()
if pid == 0:
    os.execv(cli, [cli, "--api", api, "shell", sid])

fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
buf = b""


def expect(want, secs=15):
    """Reads until want shows after the mark; returns it found."""
    global buf
    end = time.time() + secs
    while want not in buf and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                d = os.read(fd, 65536)
            except OSError:
                break
            if not d:
                break
            buf += d
    return want in buf


def send(s):
    global buf
    buf = b""
    os.write(fd, s)


time.sleep(0.5)
send(b"echo READY$((40+2))\r")
step(expect(b"READY42"), "the shell answers")
send(b"stty size; echo D$((1+1))\r")
step(expect(b"D2") and b"24 80" in buf, "stty size: 24 80 at the start", buf)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0, 0))
time.sleep(0.5)  # SIGWINCH reaches the CLI, the resize the guest
send(b"stty size; echo E$((2+1))\r")
step(expect(b"E3") and b"50 132" in buf, "stty size after a resize: 50 132", buf)
send(b"sleep 100; echo SLEPT$((0+9))\r")
time.sleep(1.0)
t0 = time.time()
send(b"\x03")
expect(b"SLEPT9", 2)
send(b"echo ALIVE$((3+4))\r")
step(expect(b"ALIVE7") and time.time() - t0 < 60, "^C ended the sleep; the shell lives", buf)
send(b"exit 7\r")
status = None
end = time.time() + 15
while time.time() < end:
    try:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            os.read(fd, 65536)
    except OSError:
        pass
    p, st = os.waitpid(pid, os.WNOHANG)
    if p == pid:
        status = os.waitstatus_to_exitcode(st)
        break
step(status == 7, "exit 7 in the shell: the CLI exits 7", str(status).encode())
sys.exit(1 if fails else 0)
