#!/usr/bin/env python3
"""docs/config.md against the code: every key the loader accepts is
documented, and every documented key is accepted.

usage: config_keys.py CONF_KEYS_DUMP docs/config.md

The accepted keys come from the loader itself: conf_keys_dump (beside this
file) loads YAML documents and prints the path and accepted keys of every
mapping cs_expect_map() checked. Starting from an empty document, this
script gives each key it learns, one at a time, a mapping ({}) and then a
list of one mapping ([{}]); a key whose value the loader then checks as a
mapping is a section ("daemon.log", "pools[].limits") or a list of entries
("pools[]"), any other is a leaf. Documents are JSON, which is YAML.

The documented keys are the first cells of docs/config.md's tables whose
header starts "| key | type | default": each backquoted name there (a cell
may name several: `match.user`, `match.password`), prefixed by the
section's heading ("## daemon", "### gateway.clients[]",
"### policies[].credentials[]"). A documented section or list key
(`clients`, `idmap`) counts as documented; its keys are checked one by one.

Exits 1 naming each key documented but not accepted and each accepted but
not documented."""
import json
import re
import subprocess
import sys

SEP = "#%%DOC\n"


def norm(path):
    """'pools[0].limits' -> 'pools[].limits'; the root -> ''."""
    if path == "the configuration":
        return ""
    return re.sub(r"\[\d+\]", "[]", path)


def join(base, key):
    return key if not base else base + "." + key


def probe(dump, docs):
    """Runs the dump over docs (python values); returns, per doc, a dict
    normalized path -> accepted keys."""
    text = SEP.join(json.dumps(d) + "\n" for d in docs)
    out = subprocess.run([dump], input=text, capture_output=True, text=True,
                         check=True).stdout
    res = []
    for line in out.splitlines():
        if line.startswith("DOC "):
            res.append({})
            continue
        path, _, keys = line.partition("\t")
        res[-1][norm(path)] = keys.split()
    return res


def set_at(doc, steps, value):
    """Returns a deep copy of doc with value at steps (a list of keys, '[]'
    for 'the first entry of a list')."""
    doc = json.loads(json.dumps(doc))
    cur = doc
    for i, s in enumerate(steps[:-1]):
        nxt = steps[i + 1]
        if s == "[]":
            cur = cur[0]
            continue
        if nxt == "[]":
            cur = cur.setdefault(s, [{}])
        else:
            cur = cur.setdefault(s, {})
    last = steps[-1]
    cur[last] = value
    return doc


def split_steps(path):
    """'pools[].limits' -> ['pools', '[]', 'limits']."""
    steps = []
    for part in path.split("."):
        if part.endswith("[]"):
            steps += [part[:-2], "[]"]
        else:
            steps.append(part)
    return steps


def code_keys(dump):
    """Returns (leaves, containers): sets of normalized key paths."""
    maps = probe(dump, [{}])[0]
    if "" not in maps:
        sys.exit("conf_keys_dump: the loader checked no root mapping")
    # skeleton: a document that reaches each known mapping path
    skel = {"": {}}
    leaves, containers = set(), set()
    todo = [("", k) for k in maps[""]]
    seen = set()
    while todo:
        # one round: try {} for every pending key, each in its own document
        docs, keys = [], []
        for base, k in todo:
            p = join(base, k)
            if p in seen:
                continue
            seen.add(p)
            steps = split_steps(p)
            docs.append(set_at(skel[base], steps, {}))
            docs.append(set_at(skel[base], steps[:-1] + [steps[-1]], [{}]))
            keys.append((base, k, p))
        res = probe(dump, docs)
        todo = []
        for i, (base, k, p) in enumerate(keys):
            as_map, as_list = res[2 * i], res[2 * i + 1]
            steps = split_steps(p)
            if p in as_map:
                containers.add(p)
                skel[p] = set_at(skel[base], steps, {})
                todo += [(p, c) for c in as_map[p]]
            elif p + "[]" in as_list:
                containers.add(p)
                q = p + "[]"
                skel[q] = set_at(skel[base], steps, [{}])
                todo += [(q, c) for c in as_list[q]]
            else:
                leaves.add(p)
    return leaves, containers


def doc_keys(md):
    """Returns {normalized path: line number} of the keys docs/config.md
    documents."""
    out = {}
    section = None
    in_table = False
    for no, line in enumerate(open(md, encoding="utf-8"), 1):
        m = re.match(r"^(#{2,3}) (\S+)\s*$", line)
        if m:
            name = m.group(2)
            section = name if re.fullmatch(r"[a-z_]+(\[\])?(\.[a-z_]+(\[\])?)*",
                                           name) else None
            in_table = False
            continue
        if re.match(r"^\| key \| type \| default", line):
            in_table = section is not None
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        if not in_table or line.startswith("| ---"):
            continue
        first = line.split("|")[1]
        for key in re.findall(r"`([a-z_][a-z_.]*)`", first):
            out[join(section, key)] = no
    return out


def compare(md, leaves, containers, documented, headings):
    """Returns one message per difference."""
    msgs = []
    accepted = leaves | containers
    for p, no in sorted(documented.items(), key=lambda kv: kv[1]):
        if p not in accepted:
            msgs.append(f"{md}:{no}: documented but not accepted by the loader: {p}")
    for p in sorted(leaves):
        if p not in documented:
            msgs.append(f"{md}: accepted by the loader but not documented: {p}")
    # a section or list is documented by a row, a heading ("## lanes[]")
    # or rows of its keys ("log.level")
    for p in sorted(containers):
        if p in documented or p in headings:
            continue
        if any(d.startswith(p + ".") or d.startswith(p + "[].") for d in documented):
            continue
        msgs.append(f"{md}: accepted by the loader but not documented: {p} "
                    "(a section or list: a row, a heading or rows of its keys)")
    return msgs


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    dump, md = sys.argv[1], sys.argv[2]
    leaves, containers = code_keys(dump)
    documented = doc_keys(md)
    headings = set()
    for line in open(md, encoding="utf-8"):
        m = re.match(r"^#{2,3} ([a-z_][a-z_.\[\]]*)\s*$", line)
        if m:
            headings.add(m.group(1).removesuffix("[]"))
    # The check must be able to fail: a key taken out of the documentation
    # and one made up are both named.
    if not leaves or not documented:
        sys.exit("no keys found: the dump or the table format changed")
    gone = sorted(leaves)[0]
    fake = dict(documented)
    fake.pop(gone, None)
    fake["daemon.no_such_key"] = 0
    probe_msgs = compare(md, leaves, containers, fake, headings)
    if not any(m.endswith(": " + gone) for m in probe_msgs) or \
       not any(m.endswith(": daemon.no_such_key") for m in probe_msgs):
        sys.exit("self-check failed: a missing or a made-up key went unnoticed")
    msgs = compare(md, leaves, containers, documented, headings)
    for m in msgs:
        print(m)
    if msgs:
        print(f"{len(msgs)} difference(s) between {md} and the loader "
              f"({len(leaves)} keys, {len(containers)} sections and lists)")
        return 1
    print(f"ok: {len(leaves)} keys, {len(containers)} sections and lists "
          f"documented as the loader accepts them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
