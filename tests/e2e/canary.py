#!/usr/bin/env python3
"""The e2e suite's canary scan (issue 19: secrets stay secret).

  canary.py reset DIR   empties DIR ($SL_E2E_KEEP): the ctest test
                        e2e_keep_reset, the setup of every e2e test
  canary.py scan DIR    the ctest test e2e_zz_canary, after every e2e test

Each e2e test declares its secrets with lib.sh's `canary NAME=VALUE`
(DIR/canaries/RUN: a line "NAME BASE64(VALUE)" each) and, on every exit,
copies what it leaves to DIR/kept/RUN/ (lib.sh's e2e_keep: logs, data
dirs, the API answers and guest output it received; never its secret/).
The scan looks for every canary of every run, in every spelling below, in
every kept file, and fails naming the file, the line and the spelling
found, never the value. It fails too when there is nothing to look for or
nothing to look in, when a run that declared canaries kept nothing, when a
copy did not finish, and when its own test strings (each spelling planted
in a longer string) are not found: a scan that cannot fail proves nothing.
"""
import base64
import json
import os
import re
import shutil
import sys
import time
import urllib.parse

MIN_LEN = 16  # lib.sh's canary refuses shorter values too


def b64_inside(v, a):
    """The part of base64(x + v + y), with len(x) % 3 == a, that depends on
    v alone: the characters whose six bits all come from v."""
    enc = base64.b64encode(b"\0" * a + v)
    return enc[-(-8 * a // 6):8 * (a + len(v)) // 6]


def spellings(v):
    """[(description, bytes)]: every spelling of v the scan looks for,
    without repeats (a value with nothing to escape is its own JSON)."""
    out = [("the value itself", v)]
    for a in range(3):
        out.append(("its base64 (at offset %d mod 3 of an encoded string)" % a,
                    b64_inside(v, a)))
    q = urllib.parse.quote_from_bytes(v, safe="")
    out.append(("its %-encoding", q.encode()))
    out.append(("its %-encoding (lowercase hex)",
                re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), q).encode()))
    out.append(("its form encoding", urllib.parse.quote_plus(v, safe="").encode()))
    try:
        s = v.decode("utf-8")
    except UnicodeDecodeError:
        s = None
    if s is not None:
        for ascii_only in (True, False):
            e = json.dumps(s, ensure_ascii=ascii_only)[1:-1]
            out.append(("its JSON escaping", e.encode()))
            out.append(("its JSON escaping (\\/)", e.replace("/", "\\/").encode()))
    seen, uniq = set(), []
    for d, n in out:
        if n not in seen:
            seen.add(n)
            uniq.append((d, n))
    return uniq


def found(data, forms):
    """The first spelling of forms in data, as (description, offset)."""
    for d, n in forms:
        i = data.find(n)
        if i >= 0:
            return d, i
    return None


def self_test(name, v, forms):
    """Each spelling planted where the scan must find it; the problems."""
    s = v.decode("utf-8", "replace")
    plants = []
    for pre in (b"", b"u", b"us"):
        for post in (b"", b"x", b"xy"):
            plants.append(("base64, %d bytes before, %d after" % (len(pre), len(post)),
                           b"Authorization: Basic " +
                           base64.b64encode(b"robot:" + pre + v + post) + b"\r\n"))
    plants.append(("%-encoded in a query",
                   b"GET /x?a=1&key=" + urllib.parse.quote_from_bytes(v, safe="").encode() +
                   b" HTTP/1.1"))
    plants.append(("in a JSON string", json.dumps({"stdout": "a\n" + s + "\n"}).encode()))
    plants.append(("as is, in a log line", b"level=info msg=" + v + b" end"))
    return ["the scan does not find canary %s in its own test string (%s)" % (name, what)
            for what, data in plants if not found(data, forms)]


def reset(keep):
    shutil.rmtree(keep, ignore_errors=True)
    for d in ("canaries", "kept", "skipped"):
        os.makedirs(os.path.join(keep, d), mode=0o700)
    print("canary scan: %s emptied for this run" % keep)
    return 0


def scan(keep):
    t0 = time.monotonic()
    problems = []

    # What to look for: (run, name) -> spellings.
    canaries = []
    cdir = os.path.join(keep, "canaries")
    for run in sorted(os.listdir(cdir)) if os.path.isdir(cdir) else []:
        with open(os.path.join(cdir, run)) as f:
            for n, line in enumerate(f, 1):
                try:
                    name, b64 = line.split()
                    v = base64.b64decode(b64, validate=True)
                except ValueError:
                    problems.append("canaries/%s:%d: not a line 'NAME BASE64'" % (run, n))
                    continue
                if len(v) < MIN_LEN:
                    problems.append("canaries/%s: %s is %d bytes, %d at least" %
                                    (run, name, len(v), MIN_LEN))
                    continue
                canaries.append((run, name, spellings(v)))
    for run, name, forms in canaries:
        problems += self_test("%s of %s" % (name, run), forms[0][1], forms)

    # Where to look.
    kdir = os.path.join(keep, "kept")
    runs = sorted(os.listdir(kdir)) if os.path.isdir(kdir) else []
    for r in runs:
        if r.endswith(".partial"):
            problems.append("kept/%s: its copy did not finish (the test or its guard was "
                            "ended while keeping)" % r)
    for run in sorted({c[0] for c in canaries}):
        if run not in runs:
            problems.append("%s declared canaries but kept nothing (kept/%s is missing)" %
                            (run, run))
    files = []
    for r in runs:
        for root, dirs, names in os.walk(os.path.join(kdir, r)):
            dirs.sort()
            for n in sorted(names):
                p = os.path.join(root, n)
                if os.path.isfile(p) and not os.path.islink(p):
                    files.append(p)
    if not canaries:
        problems.append("no canary was declared (lib.sh's canary NAME=VALUE): "
                        "a scan for nothing cannot pass")
    if not files:
        problems.append("nothing was kept in %s: a scan over nothing cannot pass "
                        "(run the e2e tests first: ctest -L e2e)" % kdir)

    # The scan.
    nbytes = 0
    leaks = []
    for p in files:
        with open(p, "rb") as f:
            data = f.read()
        nbytes += len(data)
        for run, name, forms in canaries:
            hit = found(data, forms)
            if hit:
                what, at = hit
                line = data.count(b"\n", 0, at) + 1
                leaks.append("LEAK: %s:%d: canary %s of %s, %s" %
                             (os.path.relpath(p, keep), line, name, run, what))

    skipped = []
    sdir = os.path.join(keep, "skipped")
    for run in sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []:
        with open(os.path.join(sdir, run)) as f:
            for line in f:
                size, _, path = line.rstrip("\n").partition(" ")
                skipped.append("%s/%s (%d MiB)" % (run, path, int(size) >> 20))

    declared = {}
    for run, name, _ in canaries:
        declared.setdefault(run, []).append(name)
    print("canary scan: %d canaries (%s), %d spellings in all; %d files, %.1f MiB, "
          "kept by %d test runs; %.2f s" %
          (len(canaries), "; ".join("%s: %s" % (r, " ".join(n)) for r, n in declared.items()),
           sum(len(c[2]) for c in canaries), len(files), nbytes / 1048576, len(runs),
           time.monotonic() - t0))
    if skipped:
        print("not kept (over 64 MiB, not scanned): " + ", ".join(skipped))
    for x in problems + leaks:
        print(x)
    if problems or leaks:
        print("canary scan FAILED: %d leaks, %d other problems" % (len(leaks), len(problems)))
        return 1
    print("canary scan: no canary in any spelling in anything kept")
    return 0


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("reset", "scan"):
        sys.stderr.write("usage: canary.py reset|scan DIR\n")
        return 2
    return reset(sys.argv[2]) if sys.argv[1] == "reset" else scan(sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
