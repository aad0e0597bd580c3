#!/bin/bash
# The interactive exec end to end (docs/api.md, "Interactive exec"): the
# real sluiced in a network namespace of its own with a warm pool of `ns`
# sandboxes (busybox template), GET /v1/sandboxes/{id}/exec/stream and
# `sluice exec -i/-t/--detach`, `sluice shell`.
#
# Checks: binary stdin (a NUL) and 100 MiB through stdin with its sha256;
# a terminal driven by python3's pty (the size, a resize, ^C to a sleep
# with the shell living on, `exit 7` as the CLI's status); python3-
# websockets as the client (stdin, stdout and stderr as messages, the
# exit, the close); a dropped client kills its command, a --detach one
# outlives it; signals and timeouts as exit statuses with their line on
# stderr; refusals: no Upgrade (426), a bad version (426), another
# tenant's sandbox (404), an unmasked frame (close 1002).
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

SL_BUILD=${SL_BUILD:?SL_BUILD must name the build tree}
CLI=$SL_BUILD/cli/sluice
HERE=$(dirname "$0")/exec_stream
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY
unset SLUICE_API SLUICE_TOKEN

"$PY" -c 'import websockets' 2>/dev/null || { skip "python3-websockets is not installed"; finish; }

gw=''
netns_new gw xsd
FLEET="sl-xsf-$$"
netns_owned "$FLEET"
PORT=8080
SOCK=$E2E_TMP/api.sock
LOG=$E2E_TMP/sluiced.log
: >"$LOG"
export SL_E2E_OPTOK="op-$RANDOM$RANDOM-$$"
ACME="acme-$RANDOM$RANDOM"
OTHER="other-$RANDOM$RANDOM"
API="unix:$SOCK"
T() { nsenter --net="/run/netns/$gw" "$@"; }

cat > "$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $E2E_TMP/data
  fleet_netns: $FLEET
  fleet_teardown: true
  control_socket: off
  log: { level: info, format: text }
api: { listen: 127.0.0.1:$PORT, socket: $SOCK, operator_token: "\${env:SL_E2E_OPTOK}" }
gateway:
  workers: 1
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
lanes:
  - name: egress
    subnet: 10.89.1.0/24
    doors: { forward: 3128, socks: 1080 }
tenants:
  - { name: acme, keys: [$ACME] }
  - { name: other, keys: [$OTHER] }
policies:
  - { name: wide, allow: ["example.com"] }
pools:
  - name: warm
    template: busybox
    lane: egress
    policy: wide
    warm: 1
    warm_max: 2
    ttl: { default_seconds: 600, max_seconds: 3600 }
certs: { ca_cert: $E2E_TMP/ca.pem, ca_key: $E2E_TMP/ca.key }
YAML

dump_log() { echo "--- the daemon's log (last 60 lines):" >&2; tail -n 60 "$LOG" >&2; }
# nsenter itself (not a function in a subshell): $! is the daemon
nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>>"$LOG" &
PID=$!
track "$PID"
if ! wait_for "$LOG" "sluiced [0-9.]+ started" 10 || ! for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done; then
	fail "the daemon starts"; dump_log; finish
fi
pass "the daemon starts"

# acme's sandbox, over TCP in the daemon's namespace; the CLI talks to
# the unix socket (the operator) unless told otherwise.
TCP="http://127.0.0.1:$PORT"
ID=$(SLUICE_TOKEN=$ACME T "$CLI" --api "$TCP" claim --pool warm -q) || true
check "acme claims a sandbox ($ID)" test -n "$ID"
[ -n "$ID" ] || { dump_log; finish; }
X() { "$CLI" --api "$API" "$@"; }

# --- bytes in, bytes out ---------------------------------------------------
OUT=$(printf 'a\0b' | X exec -i "$ID" -- od -c) || true
check "printf 'a\\0b' | exec -i -- od -c shows the NUL ($OUT)" eval '[[ $OUT == *"a  \\0   b"* ]]'
OUT=$(printf 'no input' | X exec "$ID" -- sh -c 'cat; echo done') || true
check "without -i the buffered exec stays (stdin not read: $OUT)" test "$OUT" = "done"

head -c 100M /dev/urandom >"$E2E_TMP/big"
WANT=$(sha256sum <"$E2E_TMP/big" | cut -d' ' -f1)
T0=$EPOCHREALTIME
GOT=$(X exec -i "$ID" -- sha256sum <"$E2E_TMP/big" | cut -d' ' -f1) || true
T1=$EPOCHREALTIME
rm -f "$E2E_TMP/big"
# the time is printed for people, never checked
check "100 MiB through stdin: the guest's sha256 matches ($GOT, $(awk "BEGIN { printf \"%.1f\", $T1 - $T0 }") s)" \
	test "$GOT" = "$WANT"

# --- exit statuses -----------------------------------------------------------
set +e
X exec -i "$ID" -- sh -c 'exit 5' </dev/null; RC=$?
X exec -i "$ID" -- sh -c 'kill -TERM $$' </dev/null 2>"$E2E_TMP/sig.err"; RCS=$?
X exec -i --timeout 1 "$ID" -- sleep 30 </dev/null 2>"$E2E_TMP/to.err"; RCT=$?
set -e
check "exit 5 becomes the CLI's status ($RC)" test "$RC" = 5
check "killed by SIGTERM: 143, and stderr says so ($RCS: $(cat "$E2E_TMP/sig.err"))" \
	eval '[ "$RCS" = 143 ] && grep -q "killed by signal 15 (SIGTERM)" "$E2E_TMP/sig.err"'
check "a timeout: 124, and stderr says so ($RCT: $(cat "$E2E_TMP/to.err"))" \
	eval '[ "$RCT" = 124 ] && grep -q "timed out after 1 s" "$E2E_TMP/to.err"'

# ^C (SIGINT to the CLI, no terminal) reaches the command. One operation
# at a time per sandbox: while the stream runs, the guest is watched from
# the host (an ns sandbox's processes are the host's too), by a command
# line of its own.
guest_pid() { pgrep -f "^sleep $1\$" | head -1 || true; }
running_cli() { # PATTERN: the pid of our sluice client running it
	pgrep -f "$CLI --api $API exec -i $ID -- sh -c $1" | head -1 || true
}
mkfifo "$E2E_TMP/in"   # opened read-write: input that never ends
(X exec -i "$ID" -- sh -c 'exec sleep 104' 0<>"$E2E_TMP/in" >/dev/null 2>"$E2E_TMP/int.err") &
CPID=$!
track "$CPID"
for _ in $(seq 100); do [ -n "$(guest_pid 104)" ] && break; sleep 0.1; done
check "a command under exec -i runs ($(guest_pid 104))" test -n "$(guest_pid 104)"
CLIPID=$(running_cli "exec sleep 104")
[ -n "$CLIPID" ] && kill -INT "$CLIPID"
for _ in $(seq 100); do kill -0 "$CLIPID" 2>/dev/null || break; sleep 0.1; done
RCI=''
wait "$CPID" || RCI=$?
check "SIGINT to exec -i: the command dies of SIGINT, the CLI exits 130 ($RCI: $(cat "$E2E_TMP/int.err"))" \
	eval '[ "$RCI" = 130 ] && grep -q "killed by signal 2 (SIGINT)" "$E2E_TMP/int.err" && [ -z "$(guest_pid 104)" ]'

# --- a terminal ------------------------------------------------------------
if "$PY" "$HERE/pty_session.py" "$CLI" "$API" "$ID"; then
	pass "a pty session: size, resize, ^C, exit status"
else
	fail "a pty session: size, resize, ^C, exit status"
fi

# --- a dropped client, --detach ---------------------------------------------
(X exec -i "$ID" -- sh -c 'exec sleep 103' 0<>"$E2E_TMP/in" >/dev/null 2>&1) &
CPID=$!
track "$CPID"
for _ in $(seq 100); do [ -n "$(guest_pid 103)" ] && break; sleep 0.1; done
FG=$(guest_pid 103)
check "a foreground command runs ($FG)" test -n "$FG"
CLIPID=$(running_cli "exec sleep 103")
[ -n "$CLIPID" ] && kill -KILL "$CLIPID"
GONE=no
if [ -n "$CLIPID" ]; then
	for _ in $(seq 100); do [ -z "$(guest_pid 103)" ] && { GONE=yes; break; }; sleep 0.1; done
fi
check "the client dropped (SIGKILL): its command is killed" test "$GONE" = yes
wait "$CPID" 2>/dev/null || true

DPID=$(X exec --detach "$ID" -- sh -c 'echo $$ >/tmp/det.pid; exec sleep 100') || true
check "exec --detach prints the pid ($DPID)" eval '[[ $DPID =~ ^[0-9]+$ ]]'
sleep 0.5
check "the detached command outlives its client" X exec "$ID" -- kill -0 "$DPID"
check "... and is the one that wrote its pidfile" test "$(X exec "$ID" -- cat /tmp/det.pid)" = "$DPID"
X exec "$ID" -- kill "$DPID" >/dev/null 2>&1 || true

# --- python3-websockets -------------------------------------------------------
WSURL="ws://127.0.0.1:$PORT/v1/sandboxes/$ID/exec/stream"
if T "$PY" "$HERE/ws_client.py" run "$WSURL" "$ACME"; then
	pass "python3-websockets: an exec stream"
else
	fail "python3-websockets: an exec stream"
fi

# --- refusals -------------------------------------------------------------------
hs() { # TOKEN CURL-ARGS...: the status of a handshake (body, head in files)
	local auth=()
	[ -n "$1" ] && auth=(-H "Authorization: Bearer $1")
	T curl -sS -m 10 -o "$E2E_TMP/hs.body" -D "$E2E_TMP/hs.hdr" -w '%{http_code}' \
		"${auth[@]}" "${@:2}" "$TCP/v1/sandboxes/$ID/exec/stream" || true
}
WSH=(-H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==')
ST=$(hs "$ACME")
check "no Upgrade header: 426 upgrade-required ($ST)" \
	eval '[ "$ST" = 426 ] && grep -q upgrade-required "$E2E_TMP/hs.body" && grep -qi "^upgrade: websocket" "$E2E_TMP/hs.hdr"'
ST=$(hs "$ACME" "${WSH[@]}" -H 'Sec-WebSocket-Version: 8')
check "Sec-WebSocket-Version 8: 426 websocket-version, Sec-WebSocket-Version: 13 ($ST)" \
	eval '[ "$ST" = 426 ] && grep -q websocket-version "$E2E_TMP/hs.body" && grep -qi "^sec-websocket-version: 13" "$E2E_TMP/hs.hdr"'
ST=$(hs "$ACME" "${WSH[@]::4}" -H 'Sec-WebSocket-Key: short' -H 'Sec-WebSocket-Version: 13')
check "a bad Sec-WebSocket-Key: 400 ($ST)" test "$ST" = 400
ST=$(hs "$OTHER" "${WSH[@]}" -H 'Sec-WebSocket-Version: 13')
check "another tenant's sandbox: 404 ($ST)" test "$ST" = 404
ST=$(hs "" "${WSH[@]}" -H 'Sec-WebSocket-Version: 13')
check "no token on TCP: 401 ($ST)" test "$ST" = 401
if T "$PY" "$HERE/ws_client.py" unmasked "$WSURL" "$ACME"; then
	pass "an unmasked client frame: close 1002"
else
	fail "an unmasked client frame: close 1002"
fi
# after all that, the sandbox still serves a buffered exec (nothing held)
check "the sandbox still serves a buffered exec" test "$(X exec "$ID" -- echo fine)" = fine

kill "$PID" 2>/dev/null || true
wait "$PID" 2>/dev/null || true
finish
