#!/bin/bash
# Durability end to end: the journal, the state file and sandboxes that
# outlive the daemon, with the real sluiced and real `ns` sandboxes.
#
# 1. Crash test: a client makes 200 claims and releases while the daemon
#    is killed (SIGKILL) at random points 20+ times and restarted each
#    time. Afterwards: every acknowledged claim is live with its lease and
#    layer, or ended; every acknowledged release is ended; the sandboxes
#    with live processes are exactly the live claims plus the warm ones,
#    none twice; the nftables sets match them; the journal parses, its
#    seqs increase, and it replays to the same usage totals after a clean
#    restart.
# 2. A read-only data_dir at start: the daemon refuses to start, naming
#    the directory and the reason.
# 3. A data_dir that fills up (ENOSPC) while running: nothing is
#    acknowledged that is not on disk (claims and releases answer 503
#    journal-unavailable and are undone), the failure is logged once, and
#    once there is room again claims and releases are acknowledged again
#    and the journal and the state file catch up by themselves.
#
# Every daemon runs in a network namespace of the test's and in a mount
# namespace of its own whose /run is a private tmpfs (the sandboxes' state
# directories, the fleet namespace's name), held by a `sleep` so that it
# outlives the daemons killed in it: nothing is mounted in the host's
# mount namespace, and no other test's sandboxes are ever swept. The
# daemons keep their sandboxes at a stop (fleet_teardown: false); at the
# end a daemon with fleet_teardown: true is started once in each mount
# namespace and stopped, which ends them all, and end_left_sandboxes ends
# whatever any log names that is still there (through cgroups only).
#
# DUR_SEED=N repeats a run's random kill points and client choices;
# DUR_KEEP=DIR keeps the logs, the client's ledger and the journal there;
# DUR_CRASH_GUARD=S is the crash test's hang guard (default 300 s).
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/holder_lib.sh
. "$(dirname "$0")/holder_lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY

T_START=$(date +%s)
SEED=${DUR_SEED:-$(( ($(date +%s%N) / 1000) % 32768 ))}
RANDOM=$SEED
echo "seed $SEED (DUR_SEED=$SEED repeats it)"
NOPS=${DUR_OPS:-200}
MIN_KILLS=${DUR_KILLS:-20}

gw=''
netns_new gw dur
export SL_E2E_OPTOK="op-$RANDOM$RANDOM-$$"
ACME="acme-$RANDOM$RANDOM"
OTHER="other-$RANDOM$RANDOM"

# The mount namespaces' holders and the daemons' configurations, for the
# final teardown: "HOLDER_PID CONFIG_WITH_TEARDOWN DATA_DIR".
TEARDOWNS=()
TORN_DOWN=
LOGS=()

# mkconf FILE DATA_DIR FLEET SOCKET TEARDOWN CA_PREFIX
mkconf() {
	cat > "$1" <<YAML
daemon:
  data_dir: $2
  fleet_netns: $3
  fleet_teardown: $5
  control_socket: off
  log: { level: info, format: text }
api: { listen: off, socket: $4, operator_token: "\${env:SL_E2E_OPTOK}" }
gateway:
  workers: 2
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
  access_log: stderr
lanes:
  - name: egress
    subnet: 10.88.1.0/24
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
    warm: 2
    warm_max: 4
    ttl: { default_seconds: 900, max_seconds: 3600 }
certs: { ca_cert: $6.pem, ca_key: $6.key }
YAML
}

# stop_daemon PID [SECONDS]: SIGTERM, wait; the exit code in RC.
RC=
stop_daemon() {
	local i
	RC=
	kill -TERM "$1" 2>/dev/null || true
	for ((i = 0; i < ${2:-15} * 10; i++)); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1" && RC=0 || RC=$?
			untrack "$1"
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# The final teardown: in each mount namespace a daemon with
# fleet_teardown: true re-adopts what is left and ends it at its stop;
# then every log's sandboxes are ended through their cgroups; then the
# holders go. Idempotent.
teardown_all() {
	local t h conf data log pid rc=0
	[ -n "$TORN_DOWN" ] && return 0
	TORN_DOWN=1
	for t in "${TEARDOWNS[@]}"; do
		read -r h conf data log <<<"$t"
		kill -0 "$h" 2>/dev/null || continue
		# A filled data_dir would refuse the start.
		nsenter -t "$h" -m rm -f "$data/filler" 2>/dev/null || true
		nsenter -t "$h" -m -n "$SLUICED" --config "$conf" 2>>"$log" &
		pid=$!
		track "$pid"
		if started "$pid" "$log" 40; then
			stop_daemon "$pid" 20 || { kill -9 "$pid" 2>/dev/null; rc=1; }
			[ "$RC" = 0 ] || rc=1
		else
			echo "    teardown daemon in $h did not start; see $log" >&2
			kill -9 "$pid" 2>/dev/null || true
			rc=1
		fi
		wait "$pid" 2>/dev/null || true
		untrack "$pid"
	done
	for log in "${LOGS[@]}"; do end_left_sandboxes "$log"; done
	for h in "${HOLDERS[@]}"; do
		kill "$h" 2>/dev/null || true
		wait "$h" 2>/dev/null || true
	done
	return $rc
}
e2e_cleanup_extra() {
	teardown_all || true
	# DUR_KEEP=DIR keeps the logs, the ledger and the journals.
	if [ -n "${DUR_KEEP:-}" ]; then
		mkdir -p "$DUR_KEEP" && cp -r "$E2E_TMP"/log* "$E2E_TMP"/ledger.jsonl \
			"$E2E_TMP"/client.out "$E2E_TMP"/data/journal.jsonl "$DUR_KEEP"/ 2>/dev/null || true
	fi
}

# Sandboxes whose cgroups hold processes, among those LOG names as
# started (other tests' sandboxes may run beside ours).
cat > "$E2E_TMP/live_cg.py" <<'PY'
import os, re, sys
ids = set()
for f in sys.argv[1:]:
    try:
        ids |= set(re.findall(r"sandbox (sbx-[0-9a-f]+): started", open(f).read()))
    except OSError:
        pass
live = set()
root = "/sys/fs/cgroup"
for d, subs, files in os.walk(root):
    if d[len(root):].count("/") >= 8:
        subs[:] = []
    name = os.path.basename(d)
    if name.startswith("sbx-") and "/sluice/" in d and name in ids:
        try:
            if open(os.path.join(d, "cgroup.procs")).read().split():
                live.add(name)
        except OSError:
            pass
print(" ".join(sorted(live)))
PY
live_cgroups() { "$PY" "$E2E_TMP/live_cg.py" "$@"; }

# A tiny HTTP client over the unix socket, shared by the helpers below.
cat > "$E2E_TMP/uhttp.py" <<'PY'
import http.client, json, socket
class UC(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("sluice", timeout=timeout)
        self.upath = path
    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.upath)
        self.sock = s
def call(sock, method, path, token=None, body=None, timeout=30):
    """(status, parsed JSON body); raises OSError/HTTPException when the
    daemon did not answer."""
    c = UC(sock, timeout)
    try:
        h = {}
        if token:
            h["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        b = r.read()
        return r.status, (json.loads(b) if b else None)
    finally:
        c.close()
PY

# req SOCK METHOD PATH [TOKEN]: JSON body in B, status in ST.
ST='' B=''
req() {
	local out
	out=$(curl -sS -m 30 --unix-socket "$1" -X "$2" ${4:+-H "Authorization: Bearer $4"} \
		-w '\n%{http_code}' "http://sluice$3" 2>/dev/null) || true
	ST=${out##*$'\n'}
	B=${out%$'\n'*}
	keep_text "$2 $3 -> $ST" "$B"
}
# settled SOCK [SECONDS]: every pool's warm == target, nothing booting.
settled() {
	local i
	for ((i = 0; i < ${2:-30} * 10; i++)); do
		req "$1" GET /v1/info
		[ "$ST" = 200 ] && [ "$(j 'all(p["warm"] == p["target"] and p["booting"] == 0 for p in d["pools"])')" = true ] &&
			return 0
		sleep 0.1
	done
	echo "    not settled: $ST $B" >&2
	return 1
}

# ============================================================================
# 1. The crash test
# ============================================================================
FLEET="sl-durf-$$"
netns_owned "$FLEET"   # lives in the holder's /run; removed with it (and here, if ever bound)
SOCK=$E2E_TMP/api.sock
DATA=$E2E_TMP/data
LOG=$E2E_TMP/log1
LEDGER=$E2E_TMP/ledger.jsonl
: >"$LOG"
LOGS+=("$LOG")
mkconf "$E2E_TMP/crash.yaml" "$DATA" "$FLEET" "$SOCK" false "$E2E_TMP/ca1"
mkconf "$E2E_TMP/crash-end.yaml" "$DATA" "$FLEET" "$SOCK" true "$E2E_TMP/ca1"
H1=''
holder_start H1 "$gw" "" || { fail "the mount namespace holder starts"; finish; }
TEARDOWNS+=("$H1 $E2E_TMP/crash-end.yaml $DATA $LOG")
# The fleet namespace as seen from the holder's mount namespace.
FLEETNS=/proc/$H1/root/run/netns/$FLEET

PID=
daemon_in "$H1" "$E2E_TMP/crash.yaml" "$LOG"
PID=$DPID
if ! started "$PID" "$LOG" 30 || ! settled "$SOCK" 30; then
	fail "the daemon starts and fills its pool"
	tail -n 30 "$LOG" >&2
	finish
fi
pass "the daemon starts and fills its pool (warm 2)"

# The client: NOPS acknowledged operations (and more, until the killer has
# made its kills), each claim or release on a fresh connection; a request
# without an answer is retried (a release) or counted unacknowledged (a
# claim, which may or may not have happened). The ledger has one line per
# acknowledged operation, written before the next request. It ends on
# those counts only, not on a clock: the killer's STOP file (a restart
# that failed, the hang guard) is the only other way out.
cat > "$E2E_TMP/client.py" <<'PY'
import json, os, random, sys, time, http.client
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from uhttp import call
sock, ledger, done, seed, nops = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
tenants, stop = json.loads(sys.argv[6]), sys.argv[7]
rnd = random.Random(seed)
out = open(ledger, "a")
def rec(**kw):
    kw["t"] = round(time.time(), 3)
    out.write(json.dumps(kw) + "\n")
    out.flush()
held = []                       # (id, tenant) acknowledged, not released
acked = unacked = refused = retries = 0
t0 = time.time()
while acked < nops or not os.path.exists(done):
    if os.path.exists(stop):
        print("client: stopped by the killer after %.1f s" % (time.time() - t0), file=sys.stderr)
        break
    if not held or (len(held) < 4 and rnd.random() < 0.55):
        name = rnd.choice(sorted(tenants))
        try:
            st, b = call(sock, "POST", "/v1/claims", tenants[name], {"pool": "warm"})
        except (OSError, http.client.HTTPException, ValueError) as e:
            unacked += 1
            rec(op="claim?", tenant=name, error=type(e).__name__)
            time.sleep(0.02)
            continue
        if st != 201:
            refused += 1
            rec(op="claim!", tenant=name, status=st, body=b)
            time.sleep(0.05)
            continue
        acked += 1
        held.append((b["id"], name))
        rec(op="claim", id=b["id"], tenant=name, expires_at=b["expires_at"],
            version=b["layer"]["version"], address=b["address"])
    else:
        sid, name = held.pop(rnd.randrange(len(held)))
        tries = 0
        while True:
            tries += 1
            try:
                st, b = call(sock, "DELETE", "/v1/sandboxes/" + sid, tenants[name])
                break
            except (OSError, http.client.HTTPException, ValueError) as e:
                retries += 1
                if tries == 1:
                    rec(op="release?", id=sid, error=type(e).__name__)
                if os.path.exists(stop):
                    st, b = None, None
                    break
                time.sleep(0.02)
        acked += 1
        rec(op="release", id=sid, tenant=name, status=st,
            result=(b or {}).get("result"), tries=tries)
print("client: %d acknowledged, %d claims unacknowledged, %d refused, %d release retries, %.1f s"
      % (acked, unacked, refused, retries, time.time() - t0))
PY
TENANTS_JSON="{\"acme\": \"$ACME\", \"other\": \"$OTHER\"}"
DONE=$E2E_TMP/killer.done
STOP=$E2E_TMP/client.stop
: >"$LEDGER"
"$PY" "$E2E_TMP/client.py" "$SOCK" "$LEDGER" "$DONE" "$SEED" "$NOPS" "$TENANTS_JSON" "$STOP" \
	>"$E2E_TMP/client.out" 2>&1 &
CLIENT=$!
track "$CLIENT"

# The killer: SIGKILL at a random point 0.05..0.6 s after each start,
# restart at once; at least MIN_KILLS, and on while the client runs. Both
# end on their counts, however long that takes; CRASH_GUARD seconds (well
# below ctest's 600) is only a hang guard: if it fires, the phase is
# reported as timed out, a failure of its own, not as too few operations.
CRASH_GUARD=${DUR_CRASH_GUARD:-300}
kills=0 slow_start=0 max_start_ms=0 timed_out='' restart_failed=''
t_crash0=$(date +%s%N)
while :; do
	sleep "$(printf '0.%02d' $((5 + RANDOM % 56)))"
	kill -9 "$PID" 2>/dev/null || true
	wait "$PID" 2>/dev/null || true
	untrack "$PID"
	kills=$((kills + 1))
	ts=$(date +%s%N)
	daemon_in "$H1" "$E2E_TMP/crash.yaml" "$LOG"
	PID=$DPID
	if ! started "$PID" "$LOG" 60; then
		fail "restart $kills: the daemon starts again"
		tail -n 30 "$LOG" >&2
		restart_failed=1
		break
	fi
	ms=$((($(date +%s%N) - ts) / 1000000))
	[ "$ms" -gt "$max_start_ms" ] && max_start_ms=$ms
	[ "$ms" -gt 3000 ] && slow_start=$((slow_start + 1))
	[ "$kills" -ge "$MIN_KILLS" ] && : >"$DONE"
	if ! kill -0 "$CLIENT" 2>/dev/null; then
		[ "$kills" -ge "$MIN_KILLS" ] && break
	fi
	if [ $((($(date +%s%N) - t_crash0) / 1000000000)) -ge "$CRASH_GUARD" ]; then
		timed_out=1
		break
	fi
done
: >"$DONE"
# On a failed restart or the hang guard the client stops too (at its next
# request: each has a 30 s timeout); then it is ended.
[ -n "$timed_out$restart_failed" ] && : >"$STOP"
for _ in $(seq 400); do kill -0 "$CLIENT" 2>/dev/null || break; sleep 0.1; done
kill -9 "$CLIENT" 2>/dev/null || true
wait "$CLIENT" 2>/dev/null || true
untrack "$CLIENT"
crash_s=$(( ($(date +%s%N) - t_crash0) / 1000000 ))
cat "$E2E_TMP/client.out"
echo "killer: $kills kills in $((crash_s / 1000)).$(printf '%03d' $((crash_s % 1000))) s; slowest restart ${max_start_ms} ms, $slow_start over 3 s"
nack=$(grep -c '"op": "claim"\|"op": "release"' "$LEDGER" || true)
if [ -n "$timed_out" ]; then
	fail "the crash phase timed out: the hang guard (${CRASH_GUARD} s) ended it with $nack of $NOPS acknowledged operations and $kills of $MIN_KILLS kills"
else
	check "the client made $NOPS acknowledged operations ($nack) through $kills kills (>= $MIN_KILLS)" \
		eval '[ "$nack" -ge "$NOPS" ] && [ "$kills" -ge "$MIN_KILLS" ]'
fi
check "the daemon runs after the last restart and settles" eval 'kill -0 "$PID" && settled "$SOCK" 40'
n=$(grep -c 'cannot be restored' "$LOG" || true)
check "every re-adoption succeeded (no 'cannot be restored' in the log: $n$(grep -m2 'cannot be restored' "$LOG" | cut -c1-200 | sed 's/^/; /' | tr '\n' ' '))" \
	test "$n" = 0

# --- a: acknowledged operations --------------------------------------------
cat > "$E2E_TMP/check_a.py" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from uhttp import call
sock, ledger = sys.argv[1], sys.argv[2]
claims, releases, order, ids_twice, cut = {}, {}, [], [], set()
for l in open(ledger):
    e = json.loads(l)
    if e["op"] == "release?":
        cut.add(e["id"])
    if e["op"] == "claim":
        if e["id"] in claims:
            ids_twice.append(e["id"])
        claims[e["id"]] = e
        order.append(e["id"])
    elif e["op"] == "release":
        releases[e["id"]] = e
bad, n = [], {"live": 0, "released": 0, "reaped": 0}
for sid in order:
    c = claims[sid]
    st, d = call(sock, "GET", "/v1/sandboxes/" + sid)
    state = (d or {}).get("state") if st == 200 else None
    if state is None:
        st2, d2 = call(sock, "DELETE", "/v1/sandboxes/" + sid)
        res = (d2 or {}).get("result")
        if st2 == 200 and res in ("already-released", "already-reaped"):
            state = res[len("already-"):]
        else:
            bad.append("%s: GET %s, DELETE %s %s" % (sid, st, st2, d2))
            continue
    r = releases.get(sid)
    if r is not None:
        want = "reaped" if r.get("result") == "already-reaped" else "released"
        if r.get("status") != 200 or r.get("result") not in ("released", "already-released", "already-reaped"):
            bad.append("%s: its release was answered %s %s" % (sid, r.get("status"), r.get("result")))
        elif state != want:
            bad.append("%s: released (%s) but %s now" % (sid, r.get("result"), state))
        elif state == "reaped" and sid not in cut:
            # Nothing ends a sandbox but a release here (leases are
            # long): reaped is for a release that a kill cut short.
            bad.append("%s: reaped, yet no release of it was cut by a kill" % sid)
        else:
            n[state] += 1
        continue
    if state == "claimed":
        if d["expires_at"] != c["expires_at"] or d["layer"]["version"] != c["version"]:
            bad.append("%s: live with expires_at %s layer %s, acknowledged %s %s"
                       % (sid, d["expires_at"], d["layer"]["version"], c["expires_at"], c["version"]))
        else:
            n["live"] += 1
    elif state == "released":
        n[state] += 1
    elif state == "reaped":
        bad.append("%s: reaped, though never released (its sandbox should have been re-adopted)" % sid)
    else:
        bad.append("%s: state %s" % (sid, state))
for sid in ids_twice:
    bad.append("%s: given to two acknowledged claims" % sid)
print("%d acknowledged claims, %d acknowledged releases: %d live, %d released, %d reaped (each with its release cut by a kill)"
      % (len(claims), len(releases), n["live"], n["released"], n["reaped"]))
for b in bad[:10]:
    print("    " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
out=$("$PY" "$E2E_TMP/check_a.py" "$SOCK" "$LEDGER") && rc=0 || rc=$?
check "a: every acknowledged claim is live with its expires_at and layer.version, or ended (reaped only when a kill cut its release); every acknowledged release is released ($out)" \
	test "$rc" = 0
nreaped=$(grep -oE '[0-9]+ reaped' <<<"$out" | cut -d' ' -f1)
nunack=$(grep -c '"op": "claim?"' "$LEDGER" || true)
echo "    ($nunack claims were unacknowledged; $(grep -c '"op": "release?"' "$LEDGER" || true) releases needed a retry)"

# --- b: live sandboxes == live claims + warm ---------------------------------
# The state file catches up with the API first (the next tick writes it).
cat > "$E2E_TMP/check_b.py" <<'PY'
import json, os, subprocess, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from uhttp import call
sock, statef, fleetns, live_ids, outf = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5]
deadline = time.time() + 15
while True:
    st, d = call(sock, "GET", "/v1/sandboxes")
    claims = d["sandboxes"]
    st, info = call(sock, "GET", "/v1/info")
    nwarm = sum(p["warm"] for p in info["pools"])
    try:
        doc = json.load(open(statef))
    except (OSError, ValueError):
        doc = {"sandboxes": []}
    s_claimed = sorted(e["id"] for e in doc["sandboxes"] if e["state"] == "claimed")
    s_warm = [e for e in doc["sandboxes"] if e["state"] == "warm"]
    ok = s_claimed == sorted(c["id"] for c in claims) and len(s_warm) == nwarm
    if ok or time.time() > deadline:
        break
    time.sleep(0.2)
bad = []
if not ok:
    bad.append("the state file did not catch up in 15 s: claimed %s vs API %s, warm %d vs %d"
               % (s_claimed, sorted(c["id"] for c in claims), len(s_warm), nwarm))
cids = [c["id"] for c in claims]
wids = [e["id"] for e in s_warm]
every = cids + wids
if len(set(every)) != len(every):
    bad.append("an id is live twice: %s" % sorted(x for x in every if every.count(x) > 1))
exp, got = set(every), set(live_ids)
if exp != got:
    bad.append("orphaned (alive, unknown): %s; known but not alive: %s"
               % (sorted(got - exp), sorted(exp - got)))
json.dump({"claims": {c["id"]: c["address"] for c in claims},
           "warm": {e["id"]: e["address"] for e in s_warm}}, open(outf, "w"))
print("%d live claims + %d warm == %d sandboxes with live processes" % (len(cids), len(wids), len(got)))
for b in bad:
    print("    " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
LIVE=$(live_cgroups "$LOG")
out=$("$PY" "$E2E_TMP/check_b.py" "$SOCK" "$DATA/state.json" "$FLEETNS" "$LIVE" "$E2E_TMP/live.json") && rc=0 || rc=$?
check "b: no orphan, nothing doubly owned: the sandboxes alive in their cgroups are exactly the live claims and the warm ones ($out)" \
	test "$rc" = 0

# --- d: the nftables sets --------------------------------------------------
cat > "$E2E_TMP/check_d.py" <<'PY'
import json, subprocess, sys
fleetns, livef = sys.argv[1], sys.argv[2]
live = json.load(open(livef))
def elems(name):
    out = subprocess.run(["nsenter", "--net=" + fleetns, "nft", "-j", "list", "set", "inet", "sluice", name],
                         check=True, capture_output=True, text=True).stdout
    res = []
    for o in json.loads(out)["nftables"]:
        for e in o.get("set", {}).get("elem", []):
            if isinstance(e, dict) and "elem" in e:
                e = e["elem"]["val"]
            res.append(e["concat"] if isinstance(e, dict) and "concat" in e else [e])
    return res
def slv(a):
    return "slv" + "".join("%02x" % int(x) for x in a.split("."))
bad = []
doors = elems("doors")
hosts = elems("hosts")
d_addrs = sorted({e[0] for e in doors})
want_d = sorted(set(live["claims"].values()))
if d_addrs != want_d:
    bad.append("doors hold %s, the live claims are at %s" % (d_addrs, want_d))
per = {a: sum(1 for e in doors if e[0] == a) for a in d_addrs}
if len(set(per.values())) > 1:
    bad.append("not every claim has the same doors: %s" % per)
h = sorted((e[1], e[0]) for e in hosts)
want_h = sorted((a, slv(a)) for a in list(live["claims"].values()) + list(live["warm"].values()))
if h != want_h:
    bad.append("hosts hold %s, want %s" % (h, want_h))
print("doors: %d elements for %d claims; hosts: %d" % (len(doors), len(want_d), len(h)))
for b in bad:
    print("    " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
out=$("$PY" "$E2E_TMP/check_d.py" "$FLEETNS" "$E2E_TMP/live.json") && rc=0 || rc=$?
check "d: the nftables doors set holds exactly the live claims' addresses, hosts the claims' and warm ones' ($out)" \
	test "$rc" = 0

# --- c: the journal replays to the same usage ------------------------------
cat > "$E2E_TMP/usage.py" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from uhttp import call
st, d = call(sys.argv[1], "GET", "/v1/usage")
assert st == 200, (st, d)
print(json.dumps({"%s/%s" % (r["tenant"], r["pool"]): [r["claims"], r["claim_seconds"]] for r in d["usage"]},
                 sort_keys=True))
PY
cat > "$E2E_TMP/release_all.py" <<'PY'
import os, sys
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from uhttp import call
st, d = call(sys.argv[1], "GET", "/v1/sandboxes")
bad = 0
for c in d["sandboxes"]:
    st, r = call(sys.argv[1], "DELETE", "/v1/sandboxes/" + c["id"])
    bad += not (st == 200 and r.get("result") == "released")
st, d = call(sys.argv[1], "GET", "/v1/sandboxes")
print(len(d["sandboxes"]))
sys.exit(1 if bad else 0)
PY
left=$("$PY" "$E2E_TMP/release_all.py" "$SOCK") && rc=0 || rc=$?
check "c: every live claim is released (left: $left)" eval '[ "$rc" = 0 ] && [ "$left" = 0 ]'
T1=$("$PY" "$E2E_TMP/usage.py" "$SOCK" 2>&1) || true
stop_daemon "$PID" 15 || true
check "c: SIGTERM: the daemon exits 0 (rc ${RC:-still running})" test "$RC" = 0

# The journal, quiescent now: every line parses, the seqs increase.
# journal.py FILE [LINES]: exit 0 when the unparsable lines are exactly
# LINES (comma-separated line numbers; none by default) and the seqs of
# the others increase; 1 when other lines are unparsable, 2 when a seq
# goes back.
cat > "$E2E_TMP/journal.py" <<'PY'
import json, sys
want = {int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "").split(",") if x}
bad, seqs, n = {}, [], 0
for i, l in enumerate(open(sys.argv[1], "rb").read().split(b"\n")[:-1], 1):
    n += 1
    try:
        e = json.loads(l)
        seqs.append(e["seq"])
    except Exception as x:
        bad[i] = "line %d: %s: %r" % (i, x, l[:80])
gaps = sum(1 for a, b in zip(seqs, seqs[1:]) if b != a + 1)
back = [(a, b) for a, b in zip(seqs, seqs[1:]) if b <= a]
print("%d lines, seq %s..%s, %d unparsable (lines %s), %d gaps, %d not increasing"
      % (n, seqs[0] if seqs else "-", seqs[-1] if seqs else "-", len(bad),
         ",".join(map(str, sorted(bad))) or "none", gaps, len(back)))
for i in sorted(set(bad) - want)[:5]:
    print("    " + bad[i], file=sys.stderr)
for i in sorted(want - set(bad)):
    print("    line %d parses, or is not there" % i, file=sys.stderr)
for a, b in back[:5]:
    print("    seq %d after %d" % (b, a), file=sys.stderr)
sys.exit(2 if back else (1 if set(bad) != want else 0))
PY
# No line was corrupted by this test so far, and a kill's torn last line
# is cut at the next start: every line parses, and no start reported
# garbage.
out=$("$PY" "$E2E_TMP/journal.py" "$DATA/journal.jsonl") && rc=0 || rc=$?
torn=$(grep -cE 'journal: .*torn' "$LOG" || true)
garbage=$(grep -cE 'journal: .*(garbage|DAMAGED)' "$LOG" || true)
echo "    journal: $out; the log reports $torn torn line(s) cut, $garbage garbage report(s)"
check "c: journal.jsonl parses line by line with strictly increasing seq ($out)" test "$rc" = 0
check "c: no start reported unreadable lines ($garbage: $(grep -m1 -E 'journal: .*(garbage|DAMAGED)' "$LOG" | cut -c1-160))" \
	test "$garbage" = 0
check "c: the journal has no gap in its seqs" eval '[[ $out == *" 0 gaps"* ]]'

# Now the test corrupts it, with the daemon stopped: a garbage line in the
# middle (before the state file's journal_seq, which covers it) and a
# torn last line. The next start reports exactly these (their count,
# offsets and length), cuts the torn one, leaves the garbage in place,
# ends no sandbox for it, and nothing else changes.
cat > "$E2E_TMP/corrupt.py" <<'PY'
import sys
path = sys.argv[1]
lines = open(path, "rb").read().split(b"\n")[:-1]
k = len(lines) // 2
garbage = b"not JSON: written by durability.sh into the middle of the journal"
goff = sum(len(l) + 1 for l in lines[:k])
lines.insert(k, garbage)
body = b"".join(l + b"\n" for l in lines)
torn = b'{"event": "claim", "claim": "sbx-00000000000000'
open(path, "wb").write(body + torn)
# the garbage line's number and offset, the torn line's offset and length
print(k + 1, goff, len(body), len(torn))
PY
read -r GLINE GOFF TORN_OFF TORN_LEN < <("$PY" "$E2E_TMP/corrupt.py" "$DATA/journal.jsonl")
mark_c=$(wc -l <"$LOG")

daemon_in "$H1" "$E2E_TMP/crash.yaml" "$LOG"
PID=$DPID
started "$PID" "$LOG" 30 || true
since_c() { tail -n "+$((mark_c + 1))" "$LOG"; }
JP="journal $DATA/journal.jsonl"
check "c: the start after the corruption reports the torn line cut at offset $TORN_OFF ($TORN_LEN bytes)" \
	eval 'since_c | grep -qF "$JP: cut off a torn last line at offset $TORN_OFF ($TORN_LEN bytes)"'
check "c: ... and 1 unreadable line in the middle, at offset $GOFF, left in place" \
	eval 'since_c | grep -qF "$JP: DAMAGED: 1 unreadable lines in the middle of the file, the first at offset $GOFF (left in place"'
n=$(since_c | grep -cE 'journal: .*(torn|garbage|DAMAGED)' || true)
check "c: ... and no other torn or unreadable report ($n lines)" test "$n" = 2
check "c: ... the state file covers the damage: no sandbox is ended for it" \
	eval '! since_c | grep -qE "is damaged|journal-damaged"' 
T2=$("$PY" "$E2E_TMP/usage.py" "$SOCK" 2>&1) || true
cat > "$E2E_TMP/same.py" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
bad = [k for k in sorted(set(a) | set(b))
       if k not in a or k not in b or a[k][0] != b[k][0] or abs(a[k][1] - b[k][1]) > 0.01]
for k in bad:
    print("    %s: %s before, %s after" % (k, a.get(k), b.get(k)), file=sys.stderr)
sys.exit(1 if bad or not a else 0)
PY
check "c: after a clean restart GET /v1/usage gives the same totals (T1 $T1; T2 $T2)" \
	"$PY" "$E2E_TMP/same.py" "$T1" "$T2"
[ "${nreaped:-0}" -gt 0 ] &&
	echo "    ($nreaped acknowledged claims are reaped: each had its release cut by a kill, after the sandbox was stopped and before its release was durable)"
stop_daemon "$PID" 15 || true
out=$("$PY" "$E2E_TMP/journal.py" "$DATA/journal.jsonl" "$GLINE") && rc=0 || rc=$?
check "c: then exactly the line the test wrote ($GLINE) is unparsable; the torn one is gone; no gap ($out)" \
	eval '[ "$rc" = 0 ] && [[ $out == *" 0 gaps"* ]]'
crash_total=$(($(date +%s) - T_START))
echo "    the crash test took $crash_total s"

# ============================================================================
# 2. A read-only data_dir at start
# ============================================================================
RO=$E2E_TMP/ro
mkdir -p "$RO/empty" "$RO/with-journal"
printf '{"event":"note","seq":1,"ts":"2026-01-01T00:00:00.000Z","ts_ms":1767225600000}\n' \
	>"$RO/with-journal/journal.jsonl"
for kind in empty with-journal; do
	LOG2=$E2E_TMP/log2-$kind
	: >"$LOG2"
	LOGS+=("$LOG2")
	mkconf "$E2E_TMP/ro-$kind.yaml" "$RO/$kind" "sl-durr-$$" "$E2E_TMP/api2.sock" false "$E2E_TMP/ca2"
	before=$(ls -A "$RO/$kind" | tr "\n" " ")
	sum=$(cat "$RO/$kind"/* 2>/dev/null | md5sum) || true
	nsenter --net="/run/netns/$gw" unshare -m --propagation private sh -c \
		'mount -t tmpfs sl-e2e-run /run && mount --bind "$1" "$1" &&
		 mount -o remount,bind,ro "$1" && exec "$2" --config "$3"' \
		sh "$RO/$kind" "$SLUICED" "$E2E_TMP/ro-$kind.yaml" 2>>"$LOG2" &
	p=$!
	track "$p"
	rc=
	for _ in $(seq 300); do
		kill -0 "$p" 2>/dev/null || { wait "$p" && rc=0 || rc=$?; break; }
		sleep 0.1
	done
	if [ -z "$rc" ]; then kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; fi
	untrack "$p"
	check "2 ($kind): a read-only data_dir: the daemon exits 1 (rc ${rc:-still running after 30 s})" \
		test "$rc" = 1
	line=$(grep -F "$RO/$kind" "$LOG2" | grep -i -m1 'read-only file system' || true)
	check "2 ($kind): its log names the data_dir and the reason (${line:-$(tail -n 2 "$LOG2" | tr '\n' ' ')})" \
		test -n "$line"
	check "2 ($kind): nothing was written there, no sandbox started" \
		eval '! grep -q ": started, pid" "$LOG2" && [ "$(ls -A "$RO/$kind" | tr "\n" " ")" = "$before" ] &&
		      [ "$(cat "$RO/$kind"/* 2>/dev/null | md5sum)" = "$sum" ]'
done

# ============================================================================
# 3. A data_dir that fills up, then has room again
# ============================================================================
D3=$E2E_TMP/data3
TPL3=$E2E_TMP/tpl3
SBX3=$E2E_TMP/sbx3
LOG3=$E2E_TMP/log3
SOCK3=$E2E_TMP/api3.sock
FLEET3="sl-durs-$$"
netns_owned "$FLEET3"
mkdir -p "$D3" "$TPL3" "$SBX3"
: >"$LOG3"
LOGS+=("$LOG3")
mkconf "$E2E_TMP/full.yaml" "$D3" "$FLEET3" "$SOCK3" false "$E2E_TMP/ca3"
mkconf "$E2E_TMP/full-end.yaml" "$D3" "$FLEET3" "$SOCK3" true "$E2E_TMP/ca3"
# data_dir: a 2 MiB tmpfs of its own; the template cache and the
# sandboxes' records, which the daemon also keeps under data_dir, are
# bound from the test's disk, so that what fills up is the journal's and
# the state file's room only (and a release, which removes a sandbox's
# record, frees none of it).
H3=''
holder_start H3 "$gw" "mount -t tmpfs -o size=2m,mode=0700 sl-e2e-data '$D3' &&
	mkdir '$D3/templates' '$D3/sandboxes' && mount --bind '$TPL3' '$D3/templates' &&
	mount --bind '$SBX3' '$D3/sandboxes' &&" || { fail "the second holder starts"; finish; }
TEARDOWNS+=("$H3 $E2E_TMP/full-end.yaml $D3 $LOG3")
# caught_up.py DIR MTIME "MADE..." "GONE...": the journal in DIR has a
# claim event for each of MADE and a release for each of GONE, and
# state.json, rewritten since (its mtime is not MTIME any more), names
# the live ones (MADE less GONE) and none of GONE.
cat > "$E2E_TMP/caught_up.py" <<'PY'
import json, os, sys
d, since, made, gone = sys.argv[1], float(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
ev = set()
for l in open(os.path.join(d, "journal.jsonl"), "rb"):
    try:
        e = json.loads(l)
        ev.add((e.get("event"), e.get("claim")))
    except ValueError:
        pass
miss = [("claim", i) for i in made if ("claim", i) not in ev] + [("release", i) for i in gone if ("release", i) not in ev]
st = os.stat(os.path.join(d, "state.json"))
ids = {e["id"] for e in json.load(open(os.path.join(d, "state.json")))["sandboxes"]}
live = set(made) - set(gone)
bad = []
if miss:
    bad.append("the journal lacks %s" % miss)
if st.st_mtime == since:
    bad.append("state.json not written since the disk filled")
if not live <= ids or ids & set(gone):
    bad.append("state.json names %s; live %s, released %s" % (sorted(ids), sorted(live), gone))
for b in bad:
    print("    " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
# gaps.py FILE LO HI: every seq the journal lacks lies strictly between LO
# and HI (the dropped commits' seqs are not reused); prints the gaps.
cat > "$E2E_TMP/gaps.py" <<'PY'
import json, sys
lo, hi = int(sys.argv[2]), int(sys.argv[3])
seqs = []
for l in open(sys.argv[1], "rb"):
    try:
        seqs.append(json.loads(l)["seq"])
    except (ValueError, KeyError):
        pass
missing = sorted(set(range(1, max(seqs) + 1)) - set(seqs)) if seqs else []
print("missing seqs %s" % (",".join(map(str, missing)) or "none"))
sys.exit(0 if all(lo < m < hi for m in missing) else 1)
PY
daemon_in "$H3" "$E2E_TMP/full.yaml" "$LOG3"
P3=$DPID
if ! started "$P3" "$LOG3" 30 || ! settled "$SOCK3" 30; then
	fail "3: the daemon starts on a 2 MiB data_dir"
	tail -n 20 "$LOG3" >&2
else
	pass "3: the daemon starts on a 2 MiB data_dir"
	in3() { nsenter -t "$P3" -m "$@"; }
	J3=/proc/$H3/root$D3
	# Each claim carries 8 labels of 250 bytes: its event (over 3 KiB)
	# does not fit in what is left of the journal's last page.
	BIG=$("$PY" -c 'import json; print(json.dumps({"pool": "warm", "labels": {"pad%d" % i: "x" * 250 for i in range(8)}}))')
	HDR3=$E2E_TMP/hdr3
	claim3() { # TOKEN -> ID3 (empty if not 201), ST, B, the headers in $HDR3
		local out
		keep_path HDR3 "POST /v1/claims (headers)"
		: >"$HDR3"
		out=$(curl -sS -m 30 --unix-socket "$SOCK3" -H "Authorization: Bearer $1" \
			-H 'Content-Type: application/json' -d "$BIG" -D "$HDR3" \
			-w '\n%{http_code}' http://sluice/v1/claims 2>/dev/null) || true
		ST=${out##*$'\n'} B=${out%$'\n'*}
		keep_text "POST /v1/claims -> $ST" "$B"
		ID3=''
		[ "$ST" = 201 ] && ID3=$(j 'd["id"]')
		return 0
	}
	release3() { # ID -> ST, B, the headers in $HDR3
		local out
		keep_path HDR3 "DELETE /v1/sandboxes/$1 (headers)"
		: >"$HDR3"
		out=$(curl -sS -m 30 --unix-socket "$SOCK3" -X DELETE -D "$HDR3" \
			-w '\n%{http_code}' "http://sluice/v1/sandboxes/$1" 2>/dev/null) || true
		ST=${out##*$'\n'} B=${out%$'\n'*}
		keep_text "DELETE /v1/sandboxes/$1 -> $ST" "$B"
	}
	# unavailable: 503, code journal-unavailable in the body and the header.
	unavailable() {
		[ "$ST" = 503 ] && [ "$(j 'd["error"]["code"]')" = journal-unavailable ] &&
			grep -Eiq $'^Sluice-Reason: journal-unavailable\r?$' "$HDR3" && return 0
		echo "    $ST ${B:0:300} (Sluice-Reason: $(grep -i '^Sluice-Reason' "$HDR3" | tr -d '\r'))" >&2
		return 1
	}
	ID3=''
	claim3 "$ACME"
	K0=$ID3
	check "3: a claim before the disk fills ($K0)" test "$ST" = 201
	# The pool refills first: the claims below find warm sandboxes (a
	# boot needs no room in data_dir but the journal's).
	settled "$SOCK3" 20 || true
	# (Empty when it cannot be read: the gaps check below then fails.)
	seq_full=$("$PY" -c 'import json,sys
print(max(json.loads(l)["seq"] for l in open(sys.argv[1], "rb")))' "$J3/journal.jsonl" 2>/dev/null) || seq_full=''
	# Every attempt to write the state file creates .state.json.tmp
	# afresh (a failed one removes it): counted from here on, while the
	# disk is full (attempts.py DIR OUT: one line a creation).
	cat > "$E2E_TMP/attempts.py" <<'PY'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
if fd < 0 or libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x100) < 0:   # IN_CREATE
    sys.exit("inotify: %s" % os.strerror(ctypes.get_errno()))
out = open(sys.argv[2], "a")
print("watching", file=out, flush=True)
while True:
    buf = os.read(fd, 65536)
    i = 0
    while i < len(buf):
        _, _, _, n = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode()
        i += 16 + n
        if name == ".state.json.tmp":
            print(name, file=out, flush=True)
PY
	# The state file's lines are counted from before the fill: its first
	# failure may come while dd fills the disk.
	mark_fill=$(wc -l <"$LOG3")
	# Fill it: big blocks, then small ones, until ENOSPC.
	in3 dd if=/dev/zero of="$D3/filler" bs=64k 2>/dev/null || true
	in3 dd if=/dev/zero of="$D3/filler" bs=4k oflag=append conv=notrunc 2>/dev/null || true
	avail=$(in3 df -k --output=avail "$D3" | tail -n 1 | tr -d ' ')
	check "3: the data_dir is full (${avail} KiB free)" test "$avail" = 0
	mark_full=$(wc -l <"$LOG3")
	# The state file as it was when the disk filled (tmpfs keeps ns).
	t_full=$("$PY" -c 'import os,sys; print(repr(os.stat(sys.argv[1]).st_mtime))' "$J3/state.json")
	ATT=$E2E_TMP/attempts3
	: >"$ATT"
	"$PY" "$E2E_TMP/attempts.py" "$J3" "$ATT" 2>"$ATT.err" &
	WATCH3=$!
	track "$WATCH3"
	wait_for "$ATT" '^watching$' 10 || cat "$ATT.err" >&2
	attempts() { grep -c '^\.state\.json\.tmp$' "$ATT" || true; }
	# Nothing is acknowledged that is not on disk: claims and a release
	# answer 503 journal-unavailable and are undone.
	ok=1
	for t in "$OTHER" "$ACME"; do
		claim3 "$t"
		unavailable || ok=0
	done
	check "3: with the disk full, 2 claims answer 503 journal-unavailable (body and Sluice-Reason)" test "$ok" = 1
	release3 "$K0"
	check "3: ... and the release of K0 too" unavailable
	req "$SOCK3" GET /v1/sandboxes
	check "3: ... the refused claims are undone and K0 stays claimed (live: $(j '[s["id"] for s in d["sandboxes"]]'))" \
		test "$(j '[(s["id"], s["state"]) for s in d["sandboxes"]]')" = "[[\"$K0\", \"claimed\"]]"
	# The state file's retrier (0.5 s back-off, doubling) fails, logs it,
	# and tries again: wait for its line and for 3 attempts seen since the
	# disk filled, so that "once, not per attempt" is tested on a run of
	# several attempts.
	wait_for "$LOG3" 'state file: .*retrying' 10 || true
	for _ in $(seq 200); do
		[ "$(attempts)" -ge 3 ] && break
		sleep 0.05
	done
	natt=$(attempts)
	t_now=$("$PY" -c 'import os,sys; print(repr(os.stat(sys.argv[1]).st_mtime))' "$J3/state.json")
	since3() { tail -n "+$((mark_full + 1))" "$LOG3"; }
	# The journal's failures and recoveries, in order (F, W): a failed
	# commit's bytes are cut off, so a small event may fit again while the
	# big claims do not; each run of failures is logged once, when it
	# starts, and its end once.
	fw() {
		since3 | sed -nE 's/.*journal: journal .*: (write|fdatasync|fsync) failed: .*/F/p; s/.*journal: journal .*: written again.*/W/p' |
			tr -d '\n'
	}
	ns=$(tail -n "+$((mark_fill + 1))" "$LOG3" | grep -ciE 'state file.*(no space|retrying)' || true)
	check "3: the log says the journal cannot be written once per run of failures, not per request or attempt ($(fw): F a failure, W written again; $(since3 | grep -E -m1 'journal: journal .*failed' | cut -c1-160))" \
		eval '[[ $(fw) =~ ^F(WF)*W?$ ]]'
	check "3: the state file's retrier tried again and again with the disk full ($natt attempts seen, >= 3, and none replaced state.json: its mtime $t_now, $t_full at the fill)" \
		eval '[ "$natt" -ge 3 ] && [ "$t_now" = "$t_full" ]'
	check "3: the log says the state file cannot be written once for those attempts, not per attempt ($ns line(s), exactly 1: $(since3 | grep -iE -m1 'state file' | cut -c1-200))" \
		test "$ns" = 1
	check "3: the daemon still runs" kill -0 "$P3"
	# Room again: claims and releases are acknowledged again, with no
	# restart, and the journal and the state file catch up by themselves.
	mark_room=$(wc -l <"$LOG3")
	kill "$WATCH3" 2>/dev/null || true
	wait "$WATCH3" 2>/dev/null || true
	untrack "$WATCH3"
	in3 rm -f "$D3/filler"
	claim3 "$OTHER"
	K1=$ID3
	check "3: room again: a claim answers 201 ($K1)" test "$ST" = 201
	release3 "$K0"
	check "3: ... and the release of K0 200 released" eval '[ "$ST" = 200 ] && [ "$(j "d[\"result\"]")" = released ]'
	caught=
	for _ in $(seq 300); do
		"$PY" "$E2E_TMP/caught_up.py" "$J3" "$t_full" "$K0 $K1" "$K0" 2>/dev/null && { caught=1; break; }
		sleep 0.1
	done
	[ -n "$caught" ] || "$PY" "$E2E_TMP/caught_up.py" "$J3" "$t_full" "$K0 $K1" "$K0" || true
	check "3: ... the journal has K1's claim and K0's release, state.json is rewritten naming K1 and not K0" \
		test -n "$caught"
	since_room() { tail -n "+$((mark_room + 1))" "$LOG3"; }
	check "3: then the log says the journal was written again, and the runs of failures alternate with recoveries ($(fw); $(since_room | grep -m1 'written again' | cut -c1-160))" \
		eval 'since_room | grep -qE "journal: journal .*written again" && [[ $(fw) =~ ^F(WF)*W$ ]]'
	# (state.json is renamed into place just before the line is logged.)
	wait_for "$LOG3" 'state file .*: written again' 5 || true
	nsw=$(since_room | grep -ciE 'state file .*written again' || true)
	check "3: then the log says the state file was written again, once ($nsw line(s): $(since3 | grep -iE 'state' | tail -n 1 | cut -c1-160))" \
		test "$nsw" = 1
	check "3: the pool refilled meanwhile" settled "$SOCK3" 10
	out=$("$PY" "$E2E_TMP/journal.py" "$J3/journal.jsonl") && rc=0 || rc=$?
	check "3: the journal parses with strictly increasing seq ($out)" test "$rc" = 0
	seq_room=$("$PY" -c 'import json,sys
for l in open(sys.argv[1], "rb"):
    e = json.loads(l)
    if e.get("event") == "claim" and e.get("claim") == sys.argv[2]: print(e["seq"])' "$J3/journal.jsonl" "$K1" 2>/dev/null) || seq_room=''
	# The bounds must be known, and in order: a missing one would let
	# any gap through.
	if [[ $seq_full =~ ^[0-9]+$ && $seq_room =~ ^[0-9]+$ ]] && [ "$seq_room" -gt "$seq_full" ]; then
		out=$("$PY" "$E2E_TMP/gaps.py" "$J3/journal.jsonl" "$seq_full" "$seq_room") && rc=0 || rc=$?
		check "3: its only gaps are the dropped commits' seqs, after seq $seq_full (the last before the disk filled) and before K1's claim ($seq_room): $out" \
			test "$rc" = 0
	else
		fail "3: its only gaps are the dropped commits' seqs: not checked, the bounds are unknown or out of order (the last seq before the disk filled: '${seq_full}'; K1's claim: '${seq_room//$'\n'/ }')"
	fi
	stop_daemon "$P3" 15 || true
	check "3: SIGTERM: exit 0 (rc ${RC:-still running})" test "$RC" = 0
fi

# ============================================================================
# The end: every sandbox these daemons started is ended.
# ============================================================================
teardown_all && rc=0 || rc=$?
check "the teardown daemons (fleet_teardown: true) start and stop cleanly" test "$rc" = 0
left=$(live_cgroups "${LOGS[@]}")
check "no sandbox of this test is left (${left:-none})" test -z "$left"
echo "total: $(($(date +%s) - T_START)) s"
finish
