#!/bin/bash
# Files as trees end to end (issue 23): the real sluiced in a network
# namespace of its own, one warm pool of `ns` sandboxes (busybox template:
# no tar in the guest; the agent makes and reads archives itself).
#
# Checks: `sluice cp -r` up and down of a tree with nested directories,
# symbolic links (relative and absolute, kept as links), modes (0755,
# 0600, a 0700 directory), an empty directory, a name with spaces, a
# FIFO skipped; the copy compared with its source (type, mode, link
# target, mtime, size, bytes); cp -r into an existing directory on both
# sides; `sluice ls ID:PATH` of a directory and of a link; `cp` of a
# directory without -r refused both ways; hostile archives PUT through
# the API (a ../ name, an absolute name, a link then a file through it, a
# hard link, a device) refused as bad-tar naming the entry, what came
# before them written and nothing outside; a tree GET of a file is
# not-a-directory, of nothing not-found; and a hostile sandbox (a fake
# API on a unix socket) whose archives carry the same escapes: the
# client refuses them and writes nothing outside its destination.
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

SL_BUILD=${SL_BUILD:?SL_BUILD must name the build tree}
CLI=$SL_BUILD/cli/sluice
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY
unset SLUICE_API SLUICE_TOKEN

gw=''
netns_new gw ftree
FLEET="sl-ftf-$$"
netns_owned "$FLEET"
SOCK=$E2E_TMP/api.sock
LOG=$E2E_TMP/sluiced.log
: >"$LOG"

cat >"$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  fleet_teardown: true
  control_socket: off
  log: { level: info, format: text }
api: { listen: off, socket: $SOCK }
gateway:
  workers: 1
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
lanes:
  - name: egress
    subnet: 10.88.7.0/24
    doors: { forward: 3128, socks: 1080 }
policies:
  - { name: none, allow: ["example.com"] }
pools:
  - name: default
    template: busybox
    lane: egress
    policy: none
    warm: 1
    warm_max: 2
    ttl: { default_seconds: 600, max_seconds: 3600 }
certs: { ca_cert: $E2E_TMP/ca.pem, ca_key: $E2E_TMP/ca.key }
YAML

# shellcheck source=tests/e2e/api_lib.sh
. "$(dirname "$0")/api_lib.sh"
sl() { "$CLI" --api "unix:$SOCK" "$@"; }
dump_log() { echo "--- the daemon's log (last 60 lines):" >&2; tail -n 60 "$LOG" >&2; }

PID=
nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>>"$LOG" &
PID=$!
track "$PID"
started=false
if wait_for "$LOG" "sluiced [0-9.]+ started" 10; then
	for _ in $(seq 100); do [ -S "$SOCK" ] && { started=true; break; }; sleep 0.1; done
fi
if ! $started; then
	fail "the daemon starts"
	dump_log
	finish
fi
pass "the daemon starts"
claim unix "" '{"pool":"default"}'
if ! check "a sandbox is claimed" test -n "$ID"; then dump_log; finish; fi

# --- the source tree ---------------------------------------------------------
SRC=$E2E_TMP/src
mkdir -p "$SRC/a/b/c" "$SRC/empty" "$SRC/private"
printf 'deep\n' >"$SRC/a/b/c/deep.txt"
printf '#!/bin/sh\necho run\n' >"$SRC/run.sh"
chmod 0755 "$SRC/run.sh"
printf 'hush' >"$SRC/secret"
chmod 0600 "$SRC/secret"
printf 'in private' >"$SRC/private/inner"
chmod 0700 "$SRC/private"
printf 'spaced out' >"$SRC/a file with spaces.txt"
head -c 300000 /dev/urandom >"$SRC/a/blob.bin"
ln -s a/b/c/deep.txt "$SRC/link-rel"
ln -s /etc/hostname "$SRC/link-abs"
ln -s ../../run.sh "$SRC/a/b/up"
mkfifo "$SRC/a/fifo"
touch -d @1706933106 "$SRC/secret" "$SRC/a/b" # 2024-02-03 04:05:06 UTC
# listing DIR: one line per entry (the FIFO left out: it is skipped), then
# every regular file's sha256.
listing() {
	(cd "$1" && find . ! -type p -printf '%y %m %l %Ts %P\n' | sort &&
		find . -type f -printf '%s %P\n' | sort && find . -type f -exec sha256sum {} + | sort)
}
listing "$SRC" >"$E2E_TMP/src.list"

# --- cp -r up, then down: the same tree -----------------------------------------
check "cp -r LOCALDIR ID:DIR (DIR missing: made as the copy)" \
	sl cp -r "$SRC" "$ID:/tmp/up"
check "cp -r ID:DIR LOCALDIR (LOCALDIR missing: made as the copy)" \
	sl cp -r "$ID:/tmp/up" "$E2E_TMP/down"
listing "$E2E_TMP/down" >"$E2E_TMP/down.list" 2>&1 || true
check "the round trip gives the source back (types, modes, link targets, mtimes, sizes, bytes)" \
	diff "$E2E_TMP/src.list" "$E2E_TMP/down.list"
check "... links stay links, never followed (link-abs -> /etc/hostname)" \
	test "$(readlink "$E2E_TMP/down/link-abs")" = /etc/hostname
check "... the empty directory is there" test -d "$E2E_TMP/down/empty"
check "... and no FIFO came back" test ! -e "$E2E_TMP/down/a/fifo"

# The guest side, seen by the API and by `ls`.
sl ls "$ID:/tmp/up" >"$E2E_TMP/ls.out" 2>&1 || true
check "ls ID:DIR: a 0755 file" grep -Eq '^-rwxr-xr-x +[0-9]+ .* run\.sh$' "$E2E_TMP/ls.out"
check "ls ID:DIR: a 0600 file with its mtime" \
	grep -Eq '^-rw------- +4 2024-02-03 04:05 secret$' "$E2E_TMP/ls.out"
check "ls ID:DIR: a 0700 directory" grep -Eq '^drwx------ +[0-9]+ .* private$' "$E2E_TMP/ls.out"
check "ls ID:DIR: a relative link and its target" \
	grep -Eq '^lrwxrwxrwx +[0-9]+ .* link-rel -> a/b/c/deep\.txt$' "$E2E_TMP/ls.out"
check "ls ID:DIR: an absolute link and its target" \
	grep -Eq '^lrwxrwxrwx +[0-9]+ .* link-abs -> /etc/hostname$' "$E2E_TMP/ls.out"
check "ls ID:DIR: a name with spaces" grep -q ' a file with spaces\.txt$' "$E2E_TMP/ls.out"
check "ls ID:DIR: no FIFO" eval '! grep -q " fifo$" "$E2E_TMP/ls.out"'
sl ls "$ID:/tmp/up/link-rel" >"$E2E_TMP/ls1.out" 2>&1 || true
check "ls ID:LINK: the link itself, not followed" \
	grep -Eq '^lrwxrwxrwx +[0-9]+ .* /tmp/up/link-rel -> a/b/c/deep\.txt$' "$E2E_TMP/ls1.out"
sl --json ls "$ID:/tmp/up" >"$E2E_TMP/ls.json" 2>&1 || true
check "ls --json ID:DIR: the API's entries" eval \
	'"$PY" -c "import json,sys; e={x[\"name\"]:x for x in json.load(open(sys.argv[1]))[\"entries\"]}; assert e[\"secret\"][\"mode\"]==0o600 and e[\"link-abs\"][\"target\"]==\"/etc/hostname\" and e[\"private\"][\"type\"]==\"dir\"" "$E2E_TMP/ls.json"'
check "the guest's copy of run.sh runs" eval \
	'[ "$(sl exec "$ID" -- /tmp/up/run.sh)" = run ]'

# --- into existing directories -----------------------------------------------------
check "cp -r LOCALDIR ID:EXISTING: the copy is EXISTING/basename" sl cp -r "$SRC" "$ID:/tmp"
req unix "" GET "/v1/sandboxes/$ID/files?path=/tmp/src/a/b/c/deep.txt"
check "... /tmp/src/a/b/c/deep.txt is there" eval 'status 200 && [ "$(cat "$BODY")" = deep ]'
mkdir -p "$E2E_TMP/existing"
check "cp -r ID:DIR EXISTING: the copy is EXISTING/basename" \
	sl cp -r "$ID:/tmp/up" "$E2E_TMP/existing"
check "... with the same tree" eval \
	'listing "$E2E_TMP/existing/up" | diff "$E2E_TMP/src.list" -'

# --- cp of a directory without -r -----------------------------------------------------
rc=0
sl cp "$SRC" "$ID:/tmp/x" 2>"$E2E_TMP/cp1.err" || rc=$?
check "cp LOCALDIR ID:PATH without -r: exit 1, 'is a directory: use cp -r'" \
	eval '[ $rc = 1 ] && grep -q "$SRC is a directory: use cp -r" "$E2E_TMP/cp1.err"'
rc=0
sl cp "$ID:/tmp/up" "$E2E_TMP/x" 2>"$E2E_TMP/cp2.err" || rc=$?
check "cp ID:DIR LOCAL without -r: exit 1, 'is a directory: use cp -r'" \
	eval '[ $rc = 1 ] && grep -q "/tmp/up is a directory: use cp -r" "$E2E_TMP/cp2.err"'
check "... and wrote nothing" test ! -e "$E2E_TMP/x"

# --- the API: errors -------------------------------------------------------------------
req unix "" GET "/v1/sandboxes/$ID/files?path=/tmp/up/secret" -H 'Accept: application/x-tar'
check "a tree GET of a file: 400 not-a-directory" refused 400 not-a-directory
req unix "" GET "/v1/sandboxes/$ID/files?path=/tmp/nothing" -H 'Accept: application/x-tar'
check "a tree GET of nothing: 404 not-found" refused 404 not-found
req unix "" GET "/v1/sandboxes/$ID/files?path=/tmp/up" -H 'Accept: application/x-tar'
check "a tree GET: 200 application/x-tar" eval \
	'status 200 && header "Content-Type: application/x-tar"'
check "... a POSIX archive any tar reads (python's tarfile)" "$PY" -c '
import sys, tarfile
t = tarfile.open(sys.argv[1])
m = {x.name.rstrip("/"): x for x in t.getmembers()}
assert m["link-abs"].issym() and m["link-abs"].linkname == "/etc/hostname", m["link-abs"]
assert m["private"].isdir() and m["private"].mode == 0o700
assert t.extractfile("a/b/c/deep.txt").read() == b"deep\n"' "$BODY"

# Hostile archives: each made by python's tarfile, PUT under /tmp/h.
mkevil() { # NAME: writes $E2E_TMP/NAME.tar
	"$PY" - "$E2E_TMP/$1.tar" "$1" <<'PY'
import io, sys, tarfile
out, kind = sys.argv[1], sys.argv[2]
t = tarfile.open(out, "w", format=tarfile.PAX_FORMAT)
def f(name, data=b"x"):
    i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
def l(name, target, kind=tarfile.SYMTYPE):
    i = tarfile.TarInfo(name); i.type = kind; i.linkname = target; t.addfile(i)
f("before")                                   # written: it comes first
if kind == "dotdot": f("../escaped-dotdot")
if kind == "abs": f("/tmp/escaped-abs")
if kind == "through": l("lnk", "/tmp"); f("lnk/escaped-through")
if kind == "hard": l("hard", "/etc/passwd", tarfile.LNKTYPE)
if kind == "dev":
    i = tarfile.TarInfo("dev"); i.type = tarfile.CHRTYPE; i.devmajor = 1; i.devminor = 3; t.addfile(i)
f("after")                                    # never reached
t.close()
PY
}
E_ENTRY='' E_WHY=''
hostile() { # KIND ENTRY WHY
	E_ENTRY=$2 E_WHY=$3
	mkevil "$1"
	req unix "" PUT "/v1/sandboxes/$ID/files?path=/tmp/h-$1" -H 'Content-Type: application/x-tar' \
		--data-binary "@$E2E_TMP/$1.tar"
	check "a hostile archive ($1): 400 bad-tar naming the entry '$2'" eval \
		'refused 400 bad-tar && is "d[\"error\"][\"entry\"]" "$E_ENTRY" && [[ $(j "d[\"error\"][\"message\"]") == *"$E_WHY"* ]]'
	check "... what came before it was written and counted" eval \
		'is "d[\"error\"][\"extracted\"][\"files\"]" 1'
	req unix "" GET "/v1/sandboxes/$ID/files?path=/tmp/h-$1/before"
	check "... /tmp/h-$1/before exists" status 200
	req unix "" GET "/v1/sandboxes/$ID/files?path=/tmp/h-$1/after&stat=1"
	check "... nothing after it" refused 404 not-found
}
hostile dotdot ../escaped-dotdot "'..'"
hostile abs /tmp/escaped-abs "absolute"
hostile through lnk/escaped-through "symbolic link"
hostile hard hard "hard link"
hostile dev dev "device"
for p in /tmp/escaped-dotdot /tmp/escaped-abs /tmp/escaped-through /escaped-dotdot; do
	req unix "" GET "/v1/sandboxes/$ID/files?path=$p&stat=1"
	check "nothing was written outside: $p does not exist" refused 404 not-found
done
req unix "" PUT "/v1/sandboxes/$ID/files?path=/tmp/up/secret" -H 'Content-Type: application/x-tar' \
	--data-binary "@$E2E_TMP/dev.tar"
check "a tree PUT onto a file: 400 not-a-directory" refused 400 not-a-directory
head -c 700 "$E2E_TMP/dev.tar" >"$E2E_TMP/cut.tar"
req unix "" PUT "/v1/sandboxes/$ID/files?path=/tmp/h-cut" -H 'Content-Type: application/x-tar' \
	--data-binary "@$E2E_TMP/cut.tar"
check "a truncated archive: 400 bad-tar, 'truncated'" eval \
	'refused 400 bad-tar && [[ $(j "d[\"error\"][\"message\"]") == *truncated* ]]'
# A good archive by python's tarfile (GNU format, a long name) goes in.
"$PY" - "$E2E_TMP/gnu.tar" <<'PY'
import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT)
name = "d/" + "n" * 150
i = tarfile.TarInfo(name); i.size = 2; t.addfile(i, io.BytesIO(b"ok"))
t.close()
PY
req unix "" PUT "/v1/sandboxes/$ID/files?path=/tmp/gnu" -H 'Content-Type: application/x-tar' \
	--data-binary "@$E2E_TMP/gnu.tar"
check "a GNU-format archive with a long name: 201, counted" eval \
	'status 201 && is "d[\"files\"]" 1 && is "d[\"path\"]" /tmp/gnu'

# --- a hostile sandbox: the client extracts strictly too ----------------------------------
# A fake API on a unix socket plays a sandbox whose agent was replaced: its
# tree answers carry escapes. `sluice cp -r` must refuse each and write
# nothing outside the destination.
OUT=$E2E_TMP/outside
mkdir -p "$OUT"
FAKE=$E2E_TMP/fake.sock
"$PY" - "$FAKE" "$OUT" <<'PY' 2>>"$E2E_TMP/fake.err" &
import http.server, io, os, socketserver, sys, tarfile
from urllib.parse import urlparse, parse_qs
sock, out = sys.argv[1], sys.argv[2]
def archive(kind):
    b = io.BytesIO(); t = tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT)
    def f(name, data=b"x"):
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
    def l(name, target):
        i = tarfile.TarInfo(name); i.type = tarfile.SYMTYPE; i.linkname = target; t.addfile(i)
    f("before")
    if kind == "dotdot": f("../outside/evil-dotdot")
    if kind == "abs": f(out + "/evil-abs")
    if kind == "through": l("lnk", out); f("lnk/evil-through")
    t.close(); return b.getvalue()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        kind = parse_qs(urlparse(self.path).query)["path"][0].strip("/")
        body = archive(kind)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-tar")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
    def address_string(self): return "fake"
if os.path.exists(sock): os.unlink(sock)
socketserver.UnixStreamServer(sock, H).serve_forever()
PY
track $!
for _ in $(seq 50); do [ -S "$FAKE" ] && break; sleep 0.1; done
for kind in dotdot abs through; do
	rc=0
	"$CLI" --api "unix:$FAKE" cp -r "fake:/$kind" "$E2E_TMP/dl-$kind" 2>"$E2E_TMP/dl-$kind.err" || rc=$?
	check "a hostile sandbox's archive ($kind): cp -r exits 1, 'refused', naming the entry" \
		eval '[ $rc = 1 ] && grep -q "refused: " "$E2E_TMP/dl-$kind.err" && grep -q "evil-$kind" "$E2E_TMP/dl-$kind.err"'
	check "... and says how many entries it wrote before" \
		grep -Eq "[0-9]+ entr(y was|ies were) written to $E2E_TMP/dl-$kind" "$E2E_TMP/dl-$kind.err"
	check "... what came before is there" test -f "$E2E_TMP/dl-$kind/before"
done
check "nothing was written outside the destination ($(ls -A "$OUT" | tr '\n' ' '))" \
	test -z "$(ls -A "$OUT")"

# --- the stop ----------------------------------------------------------------------------
kill -TERM "$PID"
rc=
for _ in $(seq 300); do
	kill -0 "$PID" 2>/dev/null || { wait "$PID" && rc=0 || rc=$?; break; }
	sleep 0.1
done
check "SIGTERM: the daemon exits 0 (rc ${rc:-still running after 30 s})" test "$rc" = 0
[ "$E2E_FAILS" = 0 ] || dump_log
finish
