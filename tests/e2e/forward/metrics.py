#!/usr/bin/env python3
"""A strict reader of the Prometheus text format (0.0.4) for the e2e tests.

  metrics.py scrape SOCKET FILE  GET /metrics from the API's unix SOCKET
                                 into FILE; the answer must be 200 with
                                 Content-Type: text/plain; version=0.0.4
                                 and a Content-Length the body has
  metrics.py check FILE          parse FILE; print "ok N families, M samples"
  metrics.py get FILE SERIES...  parse FILE, then print each SERIES' value,
                                 one a line; SERIES is name or name{k="v",...}
                                 (labels in any order); a series that is not
                                 there is an error

Strict: every line ends with "\\n", and is one of
  # HELP name text      (at most once per family, before its samples)
  # TYPE name type      (once per family, before its samples; type counter,
                         gauge, histogram, summary or untyped)
  name value
  name{label="value",...} value
with no other comment, no blank line, no timestamp and single spaces. A
sample's family must have been declared with TYPE (a histogram's
name_bucket, name_sum and name_count belong to name; so do a summary's),
and a family's samples are not interleaved with another's. Label names
are unique in a sample, values use only the escapes \\\\, \\" and \\n, and a
series appears once. Values are floats (digits, optional fraction and
exponent, or +Inf, -Inf, NaN). Counters are not negative; a histogram's
buckets are cumulative, end with le="+Inf", and that bucket equals _count.
Anything else is an error: exit status 1 and the line named on stderr.
"""
import math
import re
import socket
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
VALUE = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]Inf|NaN"
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
HELP_RE = re.compile(r"# HELP (%s) ((?:[^\\\n]|\\[\\n])*)" % NAME)
TYPE_RE = re.compile(r"# TYPE (%s) (%s)" % (NAME, "|".join(TYPES)))
SAMPLE_RE = re.compile(r"(%s)(?:\{(.*)\})? (%s)" % (NAME, VALUE))
PAIR_RE = re.compile(r'(%s)="((?:[^"\\\n]|\\[\\"n])*)"' % LABEL)


class Bad(Exception):
    pass


def parse_labels(text):
    """'a="1",b="2"' -> (("a", "1"), ("b", "2")), sorted; strict."""
    labels = {}
    pos = 0
    while pos < len(text):
        m = PAIR_RE.match(text, pos)
        if not m:
            raise Bad("bad label at %r" % text[pos:])
        k = m.group(1)
        if k in labels:
            raise Bad("label %s twice" % k)
        labels[k] = re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), m.group(2))
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise Bad("labels not separated by a comma at %r" % text[pos:])
            pos += 1
            if pos == len(text):
                raise Bad("a trailing comma in the labels")
    return tuple(sorted(labels.items()))


def family_of(name, types):
    """The declared family a sample name belongs to, or None."""
    if name in types:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            if types.get(base) == "histogram" or (types.get(base) == "summary" and suffix != "_bucket"):
                return base
    return None


def parse(text):
    """Returns {(name, labels): float} and the families' types; raises Bad."""
    if not text:
        raise Bad("empty")
    if not text.endswith("\n"):
        raise Bad("the last line has no newline")
    types, helps, samples = {}, set(), {}
    done = set()          # families whose samples have ended
    current = None        # the family of the last sample
    for no, line in enumerate(text[:-1].split("\n"), 1):
        try:
            if line.startswith("#"):
                m = HELP_RE.fullmatch(line)
                if m:
                    name = m.group(1)
                    if name in helps:
                        raise Bad("a second HELP for %s" % name)
                    if name in done or name == current:
                        raise Bad("HELP for %s after its samples" % name)
                    helps.add(name)
                    continue
                m = TYPE_RE.fullmatch(line)
                if m:
                    name = m.group(1)
                    if name in types:
                        raise Bad("a second TYPE for %s" % name)
                    if name in done or name == current:
                        raise Bad("TYPE for %s after its samples" % name)
                    types[name] = m.group(2)
                    continue
                raise Bad("not a well-formed HELP or TYPE line")
            m = SAMPLE_RE.fullmatch(line)
            if not m:
                raise Bad("not a sample line 'name{labels} value'")
            name, labels = m.group(1), parse_labels(m.group(2) or "")
            fam = family_of(name, types)
            if fam is None:
                raise Bad("%s has no TYPE" % name)
            if fam != current:
                if fam in done:
                    raise Bad("the samples of %s are not together" % fam)
                if current is not None:
                    done.add(current)
                current = fam
            key = (name, labels)
            if key in samples:
                raise Bad("the series %s%s twice" % (name, dict(labels)))
            v = float(m.group(3).replace("Inf", "inf").replace("NaN", "nan"))
            if types[fam] == "counter" and not v >= 0:
                raise Bad("a counter is %s" % m.group(3))
            if types[fam] == "histogram" and name.endswith("_bucket") and "le" not in dict(labels):
                raise Bad("a bucket without le")
            samples[key] = v
        except Bad as e:
            raise Bad("line %d: %s: %r" % (no, e, line))
    check_histograms(types, samples)
    return samples, types


def check_histograms(types, samples):
    for fam, t in types.items():
        if t != "histogram":
            continue
        series = {}
        for (name, labels), v in samples.items():
            if name == fam + "_bucket":
                rest = tuple(kv for kv in labels if kv[0] != "le")
                le = float(dict(labels)["le"].replace("Inf", "inf"))
                series.setdefault(rest, []).append((le, v))
        for rest, buckets in series.items():
            buckets.sort()
            where = "%s%s" % (fam, dict(rest))
            if buckets[-1][0] != math.inf:
                raise Bad("%s: no le=\"+Inf\" bucket" % where)
            for (_, a), (_, b) in zip(buckets, buckets[1:]):
                if b < a:
                    raise Bad("%s: the buckets are not cumulative" % where)
            count = samples.get((fam + "_count", rest))
            if count is None or (fam + "_sum", rest) not in samples:
                raise Bad("%s: no _count or _sum" % where)
            if count != buckets[-1][1]:
                raise Bad("%s: _count %g is not the +Inf bucket %g" % (where, count, buckets[-1][1]))


def scrape(path, out):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: sluice\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    head, sep, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if not sep or not lines[0].startswith("HTTP/1.1 200 "):
        raise Bad("GET /metrics answered %r" % lines[0])
    if hdrs.get("content-type") != "text/plain; version=0.0.4":
        raise Bad("Content-Type %r" % hdrs.get("content-type"))
    if hdrs.get("content-length") != str(len(body)):
        raise Bad("Content-Length %r, the body has %d bytes" % (hdrs.get("content-length"), len(body)))
    with open(out, "wb") as f:
        f.write(body)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "scrape":
        try:
            scrape(sys.argv[2], sys.argv[3])
        except (Bad, OSError) as e:
            print("metrics.py: %s: %s" % (sys.argv[2], e), file=sys.stderr)
            return 1
        return 0
    if len(sys.argv) < 3 or sys.argv[1] not in ("check", "get"):
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[2], "rb") as f:
        raw = f.read()
    try:
        samples, types = parse(raw.decode("utf-8"))
    except (Bad, UnicodeDecodeError) as e:
        print("metrics.py: %s: %s" % (sys.argv[2], e), file=sys.stderr)
        return 1
    if sys.argv[1] == "check":
        print("ok %d families, %d samples" % (len(types), len(samples)))
        return 0
    for want in sys.argv[3:]:
        m = re.fullmatch(r"(%s)(?:\{(.*)\})?" % NAME, want)
        try:
            key = (m.group(1), parse_labels(m.group(2) or "")) if m else None
        except Bad:
            key = None
        if key not in samples:
            print("metrics.py: no series %s" % want, file=sys.stderr)
            return 1
        v = samples[key]
        print(int(v) if v.is_integer() else repr(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
