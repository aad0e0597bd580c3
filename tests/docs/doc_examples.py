#!/usr/bin/env python3
"""The examples of README.md and docs/*.md, run as written (issue 23).

An example is marked by an HTML comment on the line right before its
fence (invisible when the page is rendered); tests/e2e/README.md, "Examples
in the documentation", is the reference:

    <!-- doc-test: run -->                 a shell block, run with bash
    <!-- doc-test: run
    expect: REGEX                          a line of its output (stdout and
    expect: REGEX                          stderr) matches each, in any order
    status: N                              its exit status (default 0)
    -->
    <!-- doc-test: config -->              a whole configuration file:
                                           sluiced --check must accept it
    <!-- doc-test: config PATH -->         a YAML fragment, put at PATH
                                           (pools, policies[0].credentials)
                                           of conf/sluice.yaml, then checked
    (config takes expect: and status: too: a file that must be refused,
    its messages with the file named sluice.yaml)

usage:
  doc_examples.py list FILE|DIR...
  doc_examples.py run --cwd DIR --subst FROM=TO... FILE|DIR...
  doc_examples.py config --sluiced BIN --base conf/sluice.yaml FILE|DIR...

(a DIR stands for its *.md files)

`run` runs each file's blocks in order with `bash -e -o pipefail`, in DIR;
the variables a block assigns reach the file's later blocks. Only the
--subst texts are replaced. `config`: every `${env:NAME}` gets a value in
sluiced's environment and every `${file:PATH}` is pointed at a file
holding one; nothing else changes. Exits 1 naming each example (FILE:LINE)
that failed."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARK = re.compile(r"^<!--\s*doc-test:\s*(\w+)\s*([^\n]*?)\s*(-->)?\s*$")


def blocks(path):
    """Yields dicts: file, line (of the fence), kind, arg, expect, status,
    text."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if not m:
            i += 1
            continue
        b = {"file": path, "kind": m.group(1), "arg": m.group(2).strip(),
             "expect": [], "status": 0}
        i += 1
        if not m.group(3):
            # options, one a line, until -->
            while i < len(lines) and lines[i].strip() != "-->":
                k, _, v = lines[i].partition(":")
                k, v = k.strip(), v.strip()
                if k == "expect":
                    b["expect"].append(v)
                elif k == "status":
                    b["status"] = int(v)
                elif k:
                    sys.exit(f"{path}:{i + 1}: unknown doc-test option '{k}'")
                i += 1
            i += 1
        if i >= len(lines) or not lines[i].startswith("```"):
            sys.exit(f"{path}:{i + 1}: a doc-test mark must be right before a fence")
        b["line"] = i + 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        b["text"] = "\n".join(body) + "\n"
        yield b
        i += 1


ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=")


def run_blocks(files, cwd, subst):
    bad = 0
    for f in files:
        state = tempfile.NamedTemporaryFile("w", delete=False, suffix=".state",
                                            dir=cwd)
        state.close()
        for b in blocks(f):
            if b["kind"] != "run":
                continue
            text = b["text"]
            for a, z in subst:
                text = text.replace(a, z)
            names = sorted({m.group(1) for l in text.split("\n")
                            if (m := ASSIGN.match(l))})
            save = (f"declare -p {' '.join(names)} >>{state.name} 2>/dev/null || true\n"
                    if names else "")
            script = f". {state.name}\n{text}{save}"
            where = f"{b['file']}:{b['line']}"
            try:
                p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script],
                                   cwd=cwd, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=120)
                out, rc = p.stdout, p.returncode
            except subprocess.TimeoutExpired as e:
                out, rc = (e.stdout or b"").decode(errors="replace"), "timeout"
            problems = []
            if rc != b["status"]:
                problems.append(f"exit status {rc}, not {b['status']}")
            for e in b["expect"]:
                if not re.search(e, out, re.M):
                    problems.append(f"no line matches /{e}/")
            if problems:
                bad += 1
                print(f"FAIL {where}: " + "; ".join(problems))
                print("  | " + text.rstrip("\n").replace("\n", "\n  | "))
                print("  output:\n    " + out.rstrip("\n").replace("\n", "\n    "))
            else:
                print(f"ok   {where}: ran, status {rc}"
                      + (f", {len(b['expect'])} lines matched" if b["expect"] else ""))
        os.unlink(state.name)
    return bad


def put_at(base, path, frag):
    """Puts frag at path ("pools", "policies[0].credentials") of base: a
    list is appended to the list there, anything else replaces it. A
    fragment that is a mapping of the path's last key alone is unwrapped."""
    steps = []
    for part in path.split("."):
        m = re.fullmatch(r"([a-z_]+)((?:\[\d+\])*)", part)
        if not m:
            sys.exit(f"bad config path '{path}'")
        steps.append(m.group(1))
        steps += [int(x) for x in re.findall(r"\[(\d+)\]", m.group(2))]
    if isinstance(frag, dict) and list(frag) == [steps[-1]]:
        frag = frag[steps[-1]]
    cur = base
    for s in steps[:-1]:
        cur = cur[s]
    last = steps[-1]
    if isinstance(cur.get(last) if isinstance(cur, dict) else None, list) and \
       isinstance(frag, list):
        cur[last] = cur[last] + frag
    else:
        cur[last] = frag


def check_configs(files, sluiced, base_path):
    import yaml  # python3-yaml: only this subcommand needs it
    bad = 0
    tmp = tempfile.mkdtemp(prefix="doc-config-")
    for f in files:
        for b in blocks(f):
            if b["kind"] != "config":
                continue
            where = f"{b['file']}:{b['line']}"
            text = b["text"]
            if b["arg"]:
                base = yaml.safe_load(open(base_path, encoding="utf-8"))
                put_at(base, b["arg"], yaml.safe_load(text))
                text = yaml.safe_dump(base, default_flow_style=False, sort_keys=False)
            env = dict(os.environ)
            for name in re.findall(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}", text):
                env[name] = "doc-test-value-" + name.lower()

            def to_file(m):
                p = os.path.join(tmp, "file-%d" % (abs(hash(m.group(1))) % 10**8))
                with open(p, "w") as fh:
                    fh.write("doc-test-file-value\n")
                return "${file:" + p + "}"
            text = re.sub(r"\$\{file:([^}]*)\}", to_file, text)
            conf = os.path.join(tmp, "sluice.yaml")
            with open(conf, "w", encoding="utf-8") as fh:
                fh.write(text)
            p = subprocess.run([sluiced, "--check", conf], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            # the messages as a reader's file would give them
            out = p.stdout.replace(conf, "sluice.yaml")
            problems = [f"no line matches /{e}/" for e in b["expect"]
                        if not re.search(e, out, re.M)]
            if p.returncode != b["status"]:
                problems.insert(0, f"exits {p.returncode}, not {b['status']}")
            if problems:
                bad += 1
                print(f"FAIL {where}: sluiced --check " + "; ".join(problems))
                print("    " + out.rstrip("\n").replace("\n", "\n    "))
            elif b["status"]:
                print(f"ok   {where}: sluiced --check refuses it as shown")
            else:
                print(f"ok   {where}: sluiced --check accepts it"
                      + (f" (at {b['arg']} of {base_path})" if b["arg"] else ""))
    shutil.rmtree(tmp, ignore_errors=True)
    return bad


def expand(paths):
    """Files as given; a directory: its *.md, sorted."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".md"))
        else:
            out.append(p)
    return out


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "list":
        for f in expand(args):
            for b in blocks(f):
                print(f"{b['file']}:{b['line']}: {b['kind']} {b['arg']} "
                      f"expect={b['expect']} status={b['status']}")
        return 0
    opts, files = {"subst": []}, []
    it = iter(args)
    for a in it:
        if a in ("--cwd", "--sluiced", "--base"):
            opts[a[2:]] = next(it)
        elif a == "--subst":
            k, _, v = next(it).partition("=")
            opts["subst"].append((k, v))
        else:
            files.append(a)
    files = expand(files)
    if cmd == "run":
        bad = run_blocks(files, opts["cwd"], opts["subst"])
    elif cmd == "config":
        bad = check_configs(files, opts["sluiced"], opts["base"])
    else:
        sys.exit(__doc__)
    if bad:
        print(f"{bad} example(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
