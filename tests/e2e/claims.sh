#!/bin/bash
# Claims and commands that are refused, and pool sets that change under
# live claims: the real sluiced in a network namespace of its own, with
# real `ns` sandboxes (busybox) in the fleet namespace it makes.
#
# Checks, each with its status, the error code in the JSON body and the
# Sluice-Reason header, and the event behind it (a log line, a counter,
# the processes in the sandbox's cgroup, the journal):
#   - every claim refusal: 403 pool-not-allowed, 503 no-capacity (the
#     lane's addresses are all taken), 503 boot-failed (a template the
#     sandbox cannot start in), 503 draining (a removed pool with a live
#     claim), then 404 unknown-pool once it drained;
#   - every documented exec failure: 400 (a program that cannot start),
#     409 sandbox-busy (another command held the sandbox for 30 s), 502
#     agent-error (the sandbox's agent killed), 504 timeout (the agent
#     stopped: no answer by timeout_seconds + 10 s);
#   - PUT /v1/pools: a pool whose limits changed replaces its warm
#     sandboxes (new ones, with the new limits), one whose policy changed
#     keeps them, a removed one drains; SIGHUP re-applies the file's pools
#     and live claims keep their layers (the same layer.version);
#   - guests trust the CA, in the busybox, host and a directory template:
#     /etc/sluice/ca.pem is GET /v1/ca.pem, the bundle holds a system root
#     (when the template has one) and the CA, every CA variable is set in
#     a command, a leaf the CA signed verifies against $SSL_CERT_FILE
#     (openssl, in the host template), the system store holds the CA
#     where it is the sandbox's own, and the host's /etc/ssl is unchanged;
#   - GET /v1/usage: a tenant sees its own usage only, whatever it asks;
#     the operator's tenant= and since= filters (epoch and RFC 3339); the
#     claim-seconds are the journal's; 400 on a since that is neither.
#
# The 30 s of the sandbox-busy case run while the others do. Everything
# lives under $E2E_TMP and in namespaces the test makes (removed on every
# exit, with every sandbox the daemon's log names).
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY

gw=''
netns_new gw clm
FLEET="sl-clmf-$$"
netns_owned "$FLEET"
PORT=8080
SOCK=$E2E_TMP/api.sock
LOG=$E2E_TMP/sluiced.log
: >"$LOG"
DATA=$E2E_TMP/data
JOURNAL=$DATA/journal.jsonl
e2e_cleanup_extra() { end_left_sandboxes "$LOG"; }
ACME="acme-$RANDOM$RANDOM"
OTHER="other-$RANDOM$RANDOM"
U1="u1-$RANDOM$RANDOM"
U2="u2-$RANDOM$RANDOM"
# The template of pool "broken": a directory that does not exist.
NOROOT=$E2E_TMP/no-such-root
# The template of pool "trust_dir": a Debian-like root made below (the
# busybox template with a system bundle and an anchor directory).
DIRROOT=$E2E_TMP/dirroot

# pools_yaml KEEP_POLICY REPL_MEMORY WITH_GONE: the pools: list.
pools_yaml() {
	cat <<YAML
pools:
  - { name: p, template: busybox, lane: egress, policy: wide, warm: 2, warm_max: 2 }
  - { name: keep, template: busybox, lane: egress, policy: $1, warm: 1, warm_max: 1 }
  - { name: repl, template: busybox, lane: egress, policy: wide, warm: 1, warm_max: 1, limits: { memory_mb: $2 } }
YAML
	[ "$3" = yes ] &&
		echo "  - { name: gone, template: busybox, lane: egress, policy: wide, warm: 1, warm_max: 1 }"
	cat <<YAML
  - { name: tiny, template: busybox, lane: small, policy: wide, warm: 0, warm_max: 0 }
  - { name: broken, template: $NOROOT, lane: egress, policy: wide, warm: 0, warm_max: 0 }
  - { name: private, template: busybox, lane: egress, policy: wide, warm: 0, warm_max: 0 }
  - { name: trust_host, template: host, lane: egress, policy: wide, warm: 0, warm_max: 0 }
  - { name: trust_dir, template: $DIRROOT, lane: egress, policy: wide, warm: 0, warm_max: 0 }
YAML
}
CTL=$E2E_TMP/control.sock
cat > "$E2E_TMP/sluice.yaml" <<YAML
daemon:
  data_dir: $DATA
  fleet_netns: $FLEET
  fleet_teardown: true
  control_socket: $CTL
  log: { level: info, format: text }
api: { listen: 127.0.0.1:$PORT, socket: $SOCK }
gateway:
  workers: 1
  listen: { forward: off, socks: off }
  clients: []
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
  access_log: stderr
lanes:
  - { name: egress, subnet: 10.89.1.0/24, doors: { forward: 3128 } }
  - { name: small, subnet: 10.89.2.0/29, doors: { forward: 3128 } }
tenants:
  - { name: acme, keys: [$ACME], pools: [p, keep, repl, tiny, broken] }
  - { name: other, keys: [$OTHER] }
  - { name: u1, keys: [$U1] }
  - { name: u2, keys: [$U2] }
policies:
  - { name: wide, allow: ["example.com", "origin.test"] }
  - { name: narrow, allow: ["example.com"] }
$(pools_yaml wide 256 yes)
certs: { ca_cert: $E2E_TMP/ca.pem, ca_key: $E2E_TMP/ca.key }
YAML

# shellcheck source=tests/e2e/api_lib.sh
. "$(dirname "$0")/api_lib.sh"
acme() { req tcp "$ACME" "$@"; }
dump_log() { echo "--- the daemon's log (last 80 lines):" >&2; tail -n 80 "$LOG" >&2; }
# x ID JSON: an exec as the operator.
x() { op POST "/v1/sandboxes/$1/exec" "${JS[@]}" "$2"; }
# ids_of POOL STATE: the ids the journal shows in that state ("warm": a
# boot without a later claim or end; "claimed"), sorted, one line.
ids_of() {
	"$PY" - "$JOURNAL" "$1" "$2" <<'PY'
import json, sys
st = {}
for l in open(sys.argv[1], "rb"):
    try:
        e = json.loads(l)
    except ValueError:
        continue
    i, ev = e.get("claim"), e.get("event")
    if ev == "boot" and e.get("pool") == sys.argv[2]:
        st[i] = "warm"
    elif ev == "claim" and i in st:
        st[i] = "claimed"
    elif ev in ("release", "reap", "drain", "gone") and i in st:
        st[i] = "ended"
print(" ".join(sorted(i for i, s in st.items() if s == sys.argv[3])))
PY
}
# journaled EVENT ID: the journal has that event for that claim.
journaled() {
	"$PY" -c 'import json,sys
n = 0
for l in open(sys.argv[1], "rb"):
    try: e = json.loads(l)
    except ValueError: continue
    n += e.get("event") == sys.argv[2] and e.get("claim") == sys.argv[3]
sys.exit(0 if n else 1)' "$JOURNAL" "$1" "$2"
}
settled() {
	local i b
	for ((i = 0; i < 300; i++)); do
		b=$(curl -sS -m 10 --unix-socket "$SOCK" http://sluice/v1/info 2>/dev/null) || true
		keep_text "unix GET /v1/info" "$b"
		"$PY" -c 'import json,sys
ps = json.loads(sys.argv[1])["pools"]
sys.exit(0 if all(p["warm"] == p["target"] and p["booting"] == 0 for p in ps) else 1)' "$b" 2>/dev/null &&
			return 0
		sleep 0.1
	done
	echo "    not settled: $b" >&2
	return 1
}
# Memory limit of a sandbox's cgroup, in MiB (v2 memory.max, v1
# memory.limit_in_bytes).
memlim() {
	local d v
	for d in $(cg_dirs "$1"); do
		for f in memory.max memory.limit_in_bytes; do
			[ -r "$d/$f" ] && v=$(cat "$d/$f") && [ "$v" != max ] && { echo $((v / 1048576)); return 0; }
		done
	done
	echo none
}

# --- start ------------------------------------------------------------------
PID=
nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>>"$LOG" &
PID=$!
track "$PID"
if ! wait_for "$LOG" "sluiced [0-9.]+ started" 30 || ! settled; then
	fail "the daemon starts and its pools fill"
	dump_log
	finish
fi
pass "the daemon starts and its pools fill"

# --- 1. sandbox-busy: started first, answered 30 s later -----------------------
# A holds S1 with a command that never ends by itself; B asks meanwhile.
claim tcp "$ACME" '{"pool":"p"}'
S1=$ID
check "S1 claimed ($S1)" status 201
bg A unix "" POST "/v1/sandboxes/$S1/exec" -m 200 "${JS[@]}" '{"argv":["sleep","301"],"timeout_seconds":600}'
A_PID=$BG_PID
check "busy: A's command runs in S1 (sleep 301 in its cgroup)" wait_cg "$S1" '^sleep 301$' 20
bg B tcp "$ACME" POST "/v1/sandboxes/$S1/exec" -m 200 "${JS[@]}" '{"argv":["sh","-c","echo B ran >/tmp/b"]}'

# --- 2. claim refusals ----------------------------------------------------------
# pool-not-allowed: acme's pools list leaves out "private", which exists
# and lends (other, without a list, claims from it).
claim tcp "$OTHER" '{"pool":"private"}'
PRIV=$ID
check "other claims from private: 201 (the pool lends)" status 201
claim tcp "$ACME" '{"pool":"private"}'
check "acme claims from private: 403 pool-not-allowed" refused 403 pool-not-allowed
check "... the message names the tenant and the pool ($(j 'd["error"]["message"]'))" \
	eval '[[ $(j "d[\"error\"][\"message\"]") == *acme*private* ]]'
acme GET /v1/sandboxes
check "... and acme holds no claim from it" is '[s["id"] for s in d["sandboxes"] if s["pool"] == "private"]' '[]'
op DELETE "/v1/sandboxes/$PRIV"
check "other's claim from private released" is 'd["result"]' released

# boot-failed: the pool "broken" differs from the others in its template
# only (a directory that does not exist, which the configuration's
# validation does not look for).
op GET /v1/info
BF0=$(j '[p["boot_failures"] for p in d["pools"] if p["name"] == "broken"][0]')
mark
claim tcp "$ACME" '{"pool":"broken"}'
check "a claim from a pool whose template cannot start: 503 boot-failed" refused 503 boot-failed
BMSG=$(j 'd["error"]["message"]')
check "... the message says why the sandbox did not start ($BMSG)" eval '[[ $BMSG == *"$NOROOT"*"not a directory"* ]]'
check "... the log says the boot failed, and why" logged "pool broken: boot failed \\(1 in a row.*$NOROOT"
op GET /v1/info
check "... GET /v1/info counts it: broken's boot_failures $BF0 -> +1" \
	is '[p["boot_failures"] for p in d["pools"] if p["name"] == "broken"][0]' "$((BF0 + 1))"

# no-capacity: lane small (a /29) has 5 addresses for sandboxes; tiny
# boots one per claim.
TINY=() tiny_addrs=()
for i in 1 2 3 4 5; do
	claim tcp "$ACME" '{"pool":"tiny"}'
	[ "$ST" = 201 ] && TINY+=("$ID") && tiny_addrs+=("$ADDR") || echo "    tiny claim $i: $ST ${B:0:200}" >&2
done
check "5 claims from tiny take lane small's 5 addresses (${tiny_addrs[*]})" \
	test "$(printf '%s\n' "${tiny_addrs[@]}" | sort -u | tr '\n' ' ')" = "10.89.2.2 10.89.2.3 10.89.2.4 10.89.2.5 10.89.2.6 "
claim tcp "$ACME" '{"pool":"tiny"}'
check "the 6th: 503 no-capacity" refused 503 no-capacity
check "... the message says the lane has no address left ($(j 'd["error"]["message"]'))" \
	eval '[[ $(j "d[\"error\"][\"message\"]") == *"lane '"'small'"' has no address left"* ]]'
op DELETE "/v1/sandboxes/${TINY[0]}"
check "one of them released" is 'd["result"]' released
claim tcp "$ACME" '{"pool":"tiny"}'
check "... then a claim from tiny gets its address again: 201 (${ADDR:-none})" \
	eval 'status 201 && [ "$ADDR" = "${tiny_addrs[0]}" ]'
TINY[0]=$ID

# --- 3. exec failures -----------------------------------------------------------
claim tcp "$ACME" '{"pool":"p"}'
S2=$ID
x "$S2" '{"argv":["true"]}'
check "S2 ($S2) runs a command: 200, exit 0" eval 'status 200 && is "d[\"exit_code\"]" 0'
x "$S2" '{"argv":["/no/such/program"]}'
check "exec of a program that does not exist: 400 bad-request" refused 400 bad-request
check "... with the agent's message ($(j 'd["error"]["message"]'))" \
	eval '[[ $(j "d[\"error\"][\"message\"]") == *"/no/such/program"* ]]'
x "$S2" '{"argv":["true"],"cwd":"/no/such/dir"}'
check "exec in a cwd that does not exist: 400 bad-cwd (the directory, not the program)" \
	eval 'refused 400 bad-cwd && is "d[\"error\"][\"message\"]" "working directory /no/such/dir: No such file or directory"'

# 504: the agent of S3 is stopped (SIGSTOP from here); a command with
# timeout_seconds 1 has no answer 10 s past it.
claim tcp "$ACME" '{"pool":"p"}'
S3=$ID
x "$S3" '{"argv":["true"]}'
check "S3 ($S3) runs a command: 200" status 200
AG3=$(init_pid "$S3") || AG3=
check "S3's agent is its PID 1 ($AG3: $(tr '\0' ' ' <"/proc/$AG3/cmdline" 2>/dev/null))" \
	eval '[ -n "$AG3" ] && tr "\0" " " <"/proc/$AG3/cmdline" | grep -q "sluice-agent"'
[ -n "$AG3" ] && kill -STOP "$AG3"
stopped() { [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ]; }
check "... stopped" stopped "$AG3"
bg T504 unix "" POST "/v1/sandboxes/$S3/exec" "${JS[@]}" '{"argv":["echo","late"],"timeout_seconds":1}'

# 502: S2's agent is killed while a command runs.
bg K unix "" POST "/v1/sandboxes/$S2/exec" "${JS[@]}" '{"argv":["sleep","302"],"timeout_seconds":600}'
check "a command runs in S2 (sleep 302)" wait_cg "$S2" '^sleep 302$' 20
AG2=$(init_pid "$S2") || AG2=
check "S2's agent is its PID 1 ($AG2)" eval '[ -n "$AG2" ] && tr "\0" " " <"/proc/$AG2/cmdline" | grep -q "sluice-agent"'
[ -n "$AG2" ] && kill -KILL "$AG2"
bg_done K 30
check "the agent killed under a running command: 502 agent-error" refused 502 agent-error
check "... and the sandbox's processes are gone with it" eval '[ -z "$(cg_pids "$S2")" ]'
x "$S2" '{"argv":["true"]}'
check "the next command in S2: 502 agent-error too" refused 502 agent-error

# --- 4. PUT /v1/pools under live claims ----------------------------------------
K_W=$(ids_of keep warm) R_W=$(ids_of repl warm)
check "keep and repl hold one warm sandbox each ($K_W, $R_W)" \
	eval '[[ $K_W =~ ^sbx-[0-9a-f]+$ ]] && [[ $R_W =~ ^sbx-[0-9a-f]+$ ]]'
claim tcp "$OTHER" '{"pool":"gone"}'
G=$ID
check "a claim from gone ($G)" status 201
check "gone refills" wait_warm gone 1 20
G_W=$(ids_of gone warm)
check "gone's warm sandbox runs ($G_W)" eval '[ -n "$G_W" ] && [ -n "$(cg_pids "$G_W")" ]'

# The control socket changes only sandboxes no pool manages: a warm one is
# claimed through the API, a claimed one released there. Each refusal is
# shown to change nothing (get answers, before and after, as it did).
ctl "{\"op\":\"get\",\"id\":\"$K_W\"}"
check "control socket: get shows keep's warm sandbox attached and locked" \
	test "$(jget ok) $(jget linked) $(jget unlocked)" = "true true false"
ctl "{\"op\":\"unlock\",\"id\":\"$K_W\",\"policy\":\"wide\"}"
check "... unlock of it: pool_managed" test "$(jget ok) $(jget error.code)" = "false pool_managed"
check "... the message names the pool and the way ($(jget error.message))" \
	eval '[[ $(jget error.message) == "sandbox $K_W belongs to pool keep (warm): "*"claim it through the API (POST /v1/claims)" ]]'
ctl "{\"op\":\"detach\",\"id\":\"$K_W\"}"
check "... detach of it: pool_managed" test "$(jget error.code)" = pool_managed
ctl "{\"op\":\"get\",\"id\":\"$K_W\"}"
check "... and it is still attached and locked" \
	test "$(jget ok) $(jget linked) $(jget unlocked)" = "true true false"
ctl "{\"op\":\"get\",\"id\":\"$G\"}"
check "control socket: get shows the claim from gone unlocked with wide" \
	test "$(jget ok) $(jget unlocked) $(jget policy)" = "true true wide"
ctl "{\"op\":\"lock\",\"id\":\"$G\"}"
check "... lock of it: pool_managed" test "$(jget ok) $(jget error.code)" = "false pool_managed"
check "... the message says it is claimed and how to release it ($(jget error.message))" \
	eval '[[ $(jget error.message) == "sandbox $G is claimed from pool gone"*"DELETE /v1/sandboxes/$G)" ]]'
ctl "{\"op\":\"unlock\",\"id\":\"$G\",\"policy\":\"narrow\"}"
check "... unlock with another policy: pool_managed" test "$(jget error.code)" = pool_managed
ctl "{\"op\":\"attach\",\"id\":\"$G\",\"lane\":\"small\"}"
check "... attach of its id: pool_managed" test "$(jget error.code)" = pool_managed
ctl "{\"op\":\"get\",\"id\":\"$G\"}"
check "... and it is still unlocked with wide, on lane egress" \
	test "$(jget unlocked) $(jget policy) $(jget lane)" = "true wide egress"
ctl '{"op":"attach","id":"byhand","lane":"egress"}'
check "a sandbox no pool manages is still attached by hand" test "$(jget ok)" = true
ctl '{"op":"unlock","id":"byhand","policy":"narrow"}'
check "... unlocked" test "$(jget ok) $(jget policy)" = "true narrow"
ctl '{"op":"lock","id":"byhand"}'
check "... locked" test "$(jget ok) $(jget unlocked)" = "true false"
ctl '{"op":"detach","id":"byhand"}'
check "... and detached" test "$(jget ok)" = true
# The same set as the file's, but: keep's policy narrow, repl's memory
# 128 MiB, gone removed.
op GET /v1/pools
POOLS1=$("$PY" - "$B" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
out = []
for p in d["pools"]:
    if p["name"] == "gone":
        continue
    if p["name"] == "keep":
        p["policy"] = "narrow"
    if p["name"] == "repl":
        p["limits"]["memory_mb"] = 128
    out.append(p)
print(json.dumps({"pools": out}))
PY
)
mark
op PUT /v1/pools "${JS[@]}" "$POOLS1"
check "PUT /v1/pools (keep: narrow; repl: 128 MiB; gone removed): 200" \
	eval 'status 200 && is "sorted(p[\"name\"] for p in d[\"pools\"])" "[\"broken\", \"keep\", \"p\", \"private\", \"repl\", \"tiny\", \"trust_dir\", \"trust_host\"]"'
check "... its diff: keep changed (policy; its warm one kept), repl changed (limits.memory_mb; its warm one replaced), gone removed (its warm one drained, its claim kept)" \
	is '[(c["name"], c["change"], c.get("keys"), c["warm_drained"], c["claims_kept"]) for c in d["changes"] if c["name"] in ("keep", "repl", "gone")]' \
	'[["keep", "changed", ["policy"], 0, 0], ["repl", "changed", ["limits.memory_mb"], 1, 0], ["gone", "removed", null, 1, 1]]'
check "the log says gone is removed and draining" logged 'pool gone: removed; draining'
check "the log says repl changed and its warm sandboxes are replaced" logged 'pool repl: changed; its warm sandboxes are replaced'
check "... and says nothing of keep changing" eval '! since | grep -q "pool keep: changed"'
op GET /v1/info
check "GET /v1/info: gone is draining, with its live claim" \
	is '[(p["draining"], p["claimed"]) for p in d["pools"] if p["name"] == "gone"]' '[[true, 1]]'
claim tcp "$OTHER" '{"pool":"gone"}'
check "a claim from the removed pool gone: 503 draining" refused 503 draining
check "... the message says it was removed ($(j 'd["error"]["message"]'))" \
	eval '[[ $(j "d[\"error\"][\"message\"]") == *"gone was removed"* ]]'
x "$G" '{"argv":["echo","still here"]}'
check "the live claim in gone still runs commands" is 'd["stdout"] == "still here\n"' true
check "gone's warm sandbox is ended (its processes gone, a drain event)" \
	eval 'wait_cg_not "$G_W" . 10 && journaled drain "$G_W"'
check "repl's old warm sandbox is ended (its processes gone, a drain event)" \
	eval 'wait_cg_not "$R_W" . 10 && journaled drain "$R_W"'
check "repl refills with a new one" wait_warm repl 1 20
R_W2=$(ids_of repl warm)
check "... a new id ($R_W2 != $R_W)" eval '[ -n "$R_W2" ] && [ "$R_W2" != "$R_W" ]'
check "keep's warm sandbox is kept (no drain event, still running)" \
	eval '! journaled drain "$K_W" && [ -n "$(cg_pids "$K_W")" ] && [ "$(ids_of keep warm)" = "$K_W" ]'
claim tcp "$ACME" '{"pool":"repl"}'
RC=$ID
check "a claim from repl takes the new warm sandbox ($RC)" eval 'status 201 && is "d[\"tier\"]" warm && [ "$RC" = "$R_W2" ]'
check "... whose cgroup has the new memory limit (128 MiB: $(memlim "$RC"))" test "$(memlim "$RC")" = 128
claim tcp "$ACME" '{"pool":"keep"}'
KC=$ID KC_VER=$(j 'd["layer"]["version"]')
check "a claim from keep takes the kept warm sandbox, with policy narrow ($KC)" \
	eval 'status 201 && is "d[\"tier\"]" warm && [ "$KC" = "$K_W" ] && is "d[\"layer\"][\"policy\"]" narrow'
mark
op DELETE "/v1/sandboxes/$G"
check "the last claim in gone released" is 'd["result"]' released
check "... then the log says gone is drained" logged 'pool gone: drained'
claim tcp "$OTHER" '{"pool":"gone"}'
check "... and a claim from it: 404 unknown-pool" refused 404 unknown-pool

# --- 5. SIGHUP re-applies the file's pools -------------------------------------
mark
kill -HUP "$PID"
check "SIGHUP: the configuration is reloaded" logged 'configuration reloaded \(reload 1\)'
op GET /v1/pools
check "GET /v1/pools is the file's set again (keep wide, repl 256 MiB, gone back)" \
	is '[(p["name"], p["policy"], p["limits"]["memory_mb"]) for p in d["pools"] if p["name"] in ("keep", "repl", "gone")]' \
	'[["keep", "wide", 256], ["repl", "wide", 256], ["gone", "wide", 256]]'
check "... the log says repl changed again and gone is added" \
	eval 'logged "pool repl: changed; its warm sandboxes are replaced" && logged "pool gone: added"'
op GET "/v1/sandboxes/$KC"
check "the live claim from keep keeps its layer (version $KC_VER, policy narrow)" \
	eval 'status 200 && is "d[\"state\"]" claimed && is "d[\"layer\"][\"version\"]" "$KC_VER" && is "d[\"layer\"][\"policy\"]" narrow'
op GET "/v1/sandboxes/$RC"
check "the live claim from repl is still claimed, with its 128 MiB ($(memlim "$RC"))" \
	eval 'is "d[\"state\"]" claimed && [ "$(memlim "$RC")" = 128 ]'
check "keep refills" wait_warm keep 1 20
claim tcp "$ACME" '{"pool":"keep"}'
check "a new claim from keep: policy wide, another layer version" \
	eval 'status 201 && is "d[\"layer\"][\"policy\"]" wide && [ "$(j "d[\"layer\"][\"version\"]")" != "$KC_VER" ]'
check "gone fills again" wait_warm gone 1 20
claim tcp "$OTHER" '{"pool":"gone"}'
check "a claim from gone: 201" status 201

# --- 6. 504 ----------------------------------------------------------------------
bg_done T504 40
check "a command to a stopped agent: 504 timeout" refused 504 timeout
check "... the message says no answer came ($(j 'd["error"]["message"]'))" \
	eval '[[ $(j "d[\"error\"][\"message\"]") == *"no answer"* ]]'
check "... while the agent was still stopped" stopped "$AG3"
[ -n "$AG3" ] && kill -CONT "$AG3"
x "$S3" '{"argv":["echo","again"]}'
check "the agent continued: S3 runs the next command (${ST}: ${B:0:120})" \
	eval 'status 200 && is "d[\"stdout\"] == \"again\\n\"" true'

# --- 7. sandbox-busy -------------------------------------------------------------
bg_done B 60
check "a second command while A holds S1: 409 sandbox-busy after 30 s" refused 409 sandbox-busy
check "... the message says one at a time, 30 s ($(j 'd["error"]["message"]'))" \
	eval '[[ $(j "d[\"error\"][\"message\"]") == *"30 s"*"one at a time"* ]]'
check "... A's command ran all along (sleep 301 still in S1)" cg_has "$S1" '^sleep 301$'
# A's client leaves: the sandbox is free for the next command, which
# finds A's command killed. (docs/api.md says the command is killed when
# its client goes; today the cancel reaches the agent only with the
# sandbox's next command, and until then the command runs on. A known
# defect, not asserted here.)
kill "$A_PID" 2>/dev/null || true
wait "$A_PID" 2>/dev/null || true
x "$S1" '{"argv":["sh","-c","test -e /tmp/b && echo B ran || echo B did not run"]}'
check "A's client left: S1 serves the next command, and B's never ran" \
	eval 'status 200 && is "d[\"stdout\"] == \"B did not run\\n\"" true'
check "... and A's command is killed" wait_cg_not "$S1" '^sleep 301$' 10

# --- 8. GET /v1/usage --------------------------------------------------------------
# u1: X1 (released), then, in a later second, X2 (released); u2: Y1; the
# operator: OP1. Their claim-seconds are the journal's own timestamps.
ucycle() { # TOKEN VAR: a claim from p, released at once; its id in VAR
	local -n _u_id=$2
	if [ -n "$1" ]; then claim tcp "$1" '{"pool":"p"}'; else claim unix "" '{"pool":"p"}'; fi
	_u_id=$ID
	[ "$ST" = 201 ] || { echo "    usage claim: $ST ${B:0:200}" >&2; return 1; }
	if [ -n "$1" ]; then req tcp "$1" DELETE "/v1/sandboxes/$_u_id"; else op DELETE "/v1/sandboxes/$_u_id"; fi
	[ "$(j 'd["result"]')" = released ]
}
# ev_ms EVENT ID: the ts_ms of that journal event.
ev_ms() {
	"$PY" -c 'import json,sys
for l in open(sys.argv[1], "rb"):
    try: e = json.loads(l)
    except ValueError: continue
    if e.get("event") == sys.argv[2] and e.get("claim") == sys.argv[3]: print(e["ts_ms"]); break' \
		"$JOURNAL" "$1" "$2"
}
X1='' X2='' Y1='' OP1=''
ok=1
ucycle "$U1" X1 || ok=0
# "since" has whole seconds: X2 starts in a second after X1's release.
R1=$(ev_ms release "$X1")
S=$(( ${R1:-0} / 1000 + 1 ))
while [ "$(date +%s)" -lt "$S" ]; do sleep 0.05; done
ucycle "$U1" X2 || ok=0
ucycle "$U2" Y1 || ok=0
ucycle "" OP1 || ok=0
check "usage: u1 claims and releases two, u2 one, the operator one ($X1 $X2 $Y1 $OP1)" test "$ok" = 1
secs() { # ID...: the claim-seconds of these claims, by the journal
	local t=0 id
	for id in "$@"; do t=$((t + $(ev_ms release "$id") - $(ev_ms claim "$id"))); done
	"$PY" -c 'import sys; print(int(sys.argv[1]) / 1000)' "$t"
}
U1S=$(secs "$X1" "$X2") U1S2=$(secs "$X2") U2S=$(secs "$Y1")
# rows: [tenant, pool, claims, claim_seconds rounded to ms] of the answer
# for these tenants.
rows() {
	j "sorted([r[\"tenant\"], r[\"pool\"], r[\"claims\"], round(r[\"claim_seconds\"], 3)] for r in d[\"usage\"] if r[\"tenant\"] in ($1))"
}
op GET /v1/usage
check "the operator's GET /v1/usage: u1 2 claims, $U1S s; u2 1 claim, $U2S s" \
	eval 'status 200 && [ "$(rows "\"u1\", \"u2\"")" = "[[\"u1\", \"p\", 2, $U1S], [\"u2\", \"p\", 1, $U2S]]" ]'
check "... and the operator's own claims as tenant null" \
	is '[r["claims"] >= 1 for r in d["usage"] if r["tenant"] is None and r["pool"] == "p"]' '[true]'
req tcp "$U1" GET /v1/usage
check "u1's GET /v1/usage: its own row only" \
	eval 'status 200 && is "[[r[\"tenant\"], r[\"claims\"]] for r in d[\"usage\"]]" "[[\"u1\", 2]]"'
req tcp "$U1" GET "/v1/usage?tenant=u2"
check "u1 asking for tenant=u2: still its own row only" \
	eval 'status 200 && is "[[r[\"tenant\"], r[\"claims\"]] for r in d[\"usage\"]]" "[[\"u1\", 2]]"'
req tcp "$U2" GET "/v1/usage?tenant="
check "u2 with an empty tenant=: its own row only" \
	eval 'status 200 && is "[[r[\"tenant\"], r[\"claims\"]] for r in d[\"usage\"]]" "[[\"u2\", 1]]"'
op GET "/v1/usage?tenant=u2"
check "the operator's tenant=u2: u2's row only" \
	eval 'status 200 && is "[[r[\"tenant\"], r[\"pool\"], r[\"claims\"]] for r in d[\"usage\"]]" "[[\"u2\", \"p\", 1]]"'
op GET "/v1/usage?tenant=nobody"
check "tenant=nobody: no rows" eval 'status 200 && is "d[\"usage\"]" "[]"'
SINCE_RFC=$(date -u -d "@$S" +%Y-%m-%dT%H:%M:%SZ)
op GET "/v1/usage?tenant=u1&since=$S"
check "tenant=u1&since=$S (after X1's release): X2 only, $U1S2 s; since echoed as $SINCE_RFC" \
	eval 'status 200 && [ "$(rows "\"u1\",")" = "[[\"u1\", \"p\", 1, $U1S2]]" ] && is "d[\"since\"]" "$SINCE_RFC"'
op GET "/v1/usage?tenant=u1&since=$SINCE_RFC"
check "the same since as RFC 3339 ($SINCE_RFC): the same row" \
	eval 'status 200 && [ "$(rows "\"u1\",")" = "[[\"u1\", \"p\", 1, $U1S2]]" ]'
req tcp "$U1" GET "/v1/usage?since=$S"
check "u1's own since=: the same row" \
	eval 'status 200 && [ "$(rows "\"u1\",")" = "[[\"u1\", \"p\", 1, $U1S2]]" ] && is "len(d[\"usage\"])" 1'
for bad in yesterday -1 2026-01-01T00:00:00+02:00 2026-13-01T00:00:00Z 1.5; do
	op GET "/v1/usage?since=$bad"
	check "since=$bad: 400 bad-request naming since" \
		eval 'refused 400 bad-request && [[ $(j "d[\"error\"][\"message\"]") == since:* ]]'
done
req tcp "$U1" GET "/v1/usage?since=yesterday"
check "a tenant's bad since: 400 bad-request too" refused 400 bad-request

# --- 4. guests trust the CA ----------------------------------------------------
# The CA as the API serves it, a leaf it signed (made here with its key),
# and the host's trust files before any host-template sandbox ran.
op GET /v1/ca.pem
cp "$BODY" "$E2E_TMP/served-ca.pem"
check "GET /v1/ca.pem: 200, a certificate" eval 'status 200 && openssl x509 -in "$E2E_TMP/served-ca.pem" -noout'
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=leaf.test \
	-keyout "$E2E_TMP/leaf.key" -out "$E2E_TMP/leaf.csr" 2>/dev/null
openssl x509 -req -in "$E2E_TMP/leaf.csr" -CA "$E2E_TMP/ca.pem" -CAkey "$E2E_TMP/ca.key" \
	-CAcreateserial -days 1 -out "$E2E_TMP/leaf.pem" 2>/dev/null
check "a leaf signed by the CA verifies on the host against it alone (the control)" \
	quiet openssl verify -CAfile "$E2E_TMP/served-ca.pem" "$E2E_TMP/leaf.pem"
HOSTSSL=$(find /etc/ssl /usr/local/share/ca-certificates -type f -print0 2>/dev/null | sort -z |
	xargs -0 sha256sum | sha256sum)
SYSROOTS=/etc/ssl/certs/ca-certificates.crt
# the directory template: busybox's tree plus the host's system bundle
cp -a "$DATA/templates/busybox" "$DIRROOT"
mkdir -p "$DIRROOT/etc/ssl/certs" "$DIRROOT/usr/local/share/ca-certificates"
cp "$SYSROOTS" "$DIRROOT/etc/ssl/certs/ca-certificates.crt"
DIRSUM=$(sha256sum <"$DIRROOT/etc/ssl/certs/ca-certificates.crt")
# gx ID SCRIPT: runs sh -c SCRIPT with the leaf on stdin; stdout in OUT.
gx() {
	local body
	body=$("$PY" -c 'import json,sys
print(json.dumps({"argv": ["sh", "-c", sys.argv[1]], "stdin": open(sys.argv[2]).read()}))' \
		"$2" "$E2E_TMP/leaf.pem")
	x "$1" "$body"
	OUT=$(j 'd.get("stdout", "")')
}
# has_cert FILE BUNDLE: BUNDLE holds FILE's (first) certificate.
has_cert() {
	"$PY" -c 'import sys
pem = open(sys.argv[1]).read().split("-----END CERTIFICATE-----")[0]
sys.exit(0 if pem and pem in open(sys.argv[2]).read() else 1)' "$1" "$2"
}
VARS='SSL_CERT_FILE=/etc/sluice/bundle.pem REQUESTS_CA_BUNDLE=/etc/sluice/bundle.pem
PIP_CERT=/etc/sluice/bundle.pem CURL_CA_BUNDLE=/etc/sluice/bundle.pem
GIT_SSL_CAINFO=/etc/sluice/bundle.pem CARGO_HTTP_CAINFO=/etc/sluice/bundle.pem
AWS_CA_BUNDLE=/etc/sluice/bundle.pem NODE_EXTRA_CA_CERTS=/etc/sluice/ca.pem'
for T in p trust_host trust_dir; do
	claim unix "" "{\"pool\":\"$T\"}"
	TS=$ID
	check "trust: a sandbox of pool $T ($TS)" status 201
	gx "$TS" 'cat /etc/sluice/ca.pem'
	printf '%s\n' "$OUT" >"$E2E_TMP/g-ca.pem"
	check "[$T] /etc/sluice/ca.pem is GET /v1/ca.pem" cmp -s "$E2E_TMP/g-ca.pem" "$E2E_TMP/served-ca.pem"
	gx "$TS" 'stat -c %a /etc/sluice/ca.pem /etc/sluice/bundle.pem'
	check "[$T] ca.pem and bundle.pem are 0644" test "$(echo $OUT)" = "644 644"
	gx "$TS" 'env'
	miss=
	for v in $VARS; do grep -qx -- "$v" <<<"$OUT" || miss="$miss $v"; done
	check "[$T] a command gets every CA variable (missing:${miss:- none})" test -z "$miss"
	gx "$TS" 'cat "$SSL_CERT_FILE"'
	printf '%s\n' "$OUT" >"$E2E_TMP/g-bundle.pem"
	check "[$T] the bundle holds the CA" has_cert "$E2E_TMP/served-ca.pem" "$E2E_TMP/g-bundle.pem"
	gx "$TS" 'cat /etc/ssl/certs/ca-certificates.crt'
	printf '%s\n' "$OUT" >"$E2E_TMP/g-sys.pem"
	case $T in
	p)
		check "[$T] no system roots: the bundle is the CA alone" \
			cmp -s "$E2E_TMP/g-bundle.pem" "$E2E_TMP/served-ca.pem"
		check "[$T] a system bundle is made, holding the CA" \
			cmp -s "$E2E_TMP/g-sys.pem" "$E2E_TMP/served-ca.pem"
		gx "$TS" 'command -v openssl || echo none'
		check "[$T] no openssl in busybox: the bytes were compared instead" test "$OUT" = none
		;;
	trust_host)
		check "[$T] the bundle holds the host's system roots too" has_cert "$SYSROOTS" "$E2E_TMP/g-bundle.pem"
		check "[$T] the system bundle is the host's own, read-only bind: unchanged" \
			cmp -s "$E2E_TMP/g-sys.pem" "$SYSROOTS"
		gx "$TS" 'cat >/tmp/leaf.pem; openssl verify -CAfile "$SSL_CERT_FILE" /tmp/leaf.pem'
		check "[$T] openssl verify -CAfile \$SSL_CERT_FILE of a leaf the CA signed: OK ($OUT)" \
			eval 'is "d[\"exit_code\"]" 0 && [[ $OUT == *": OK" ]]'
		gx "$TS" 'cat >/tmp/leaf.pem; openssl verify -CAfile /etc/ssl/certs/ca-certificates.crt /tmp/leaf.pem'
		check "[$T] ... and fails against the host's bundle alone (the check means something)" \
			eval '! is "d[\"exit_code\"]" 0 2>/dev/null'
		;;
	trust_dir)
		check "[$T] the bundle holds the template's system roots too" has_cert "$SYSROOTS" "$E2E_TMP/g-bundle.pem"
		check "[$T] the guest's system bundle is its roots plus the CA" \
			eval 'has_cert "$SYSROOTS" "$E2E_TMP/g-sys.pem" && has_cert "$E2E_TMP/served-ca.pem" "$E2E_TMP/g-sys.pem"'
		gx "$TS" 'cat /usr/local/share/ca-certificates/sluice.crt'
		printf '%s\n' "$OUT" >"$E2E_TMP/g-anchor.pem"
		check "[$T] /usr/local/share/ca-certificates/sluice.crt is the CA" \
			cmp -s "$E2E_TMP/g-anchor.pem" "$E2E_TMP/served-ca.pem"
		check "[$T] the template's own bundle on disk is unchanged (the overlay took the change)" \
			test "$(sha256sum <"$DIRROOT/etc/ssl/certs/ca-certificates.crt")" = "$DIRSUM"
		;;
	esac
	op DELETE "/v1/sandboxes/$TS"
	check "[$T] released" is 'd["result"]' released
done
check "the host's /etc/ssl and /usr/local/share/ca-certificates are unchanged" \
	test "$(find /etc/ssl /usr/local/share/ca-certificates -type f -print0 2>/dev/null | sort -z |
		xargs -0 sha256sum | sha256sum)" = "$HOSTSSL"

# --- the end: every claim released, a clean stop leaves nothing ------------------
op GET /v1/sandboxes
left_ok=1
for id in $(j '" ".join(s["id"] for s in d["sandboxes"])'); do
	op DELETE "/v1/sandboxes/$id"
	[ "$(j 'd["result"]')" = released ] || { left_ok=0; echo "    release $id: $ST $B" >&2; }
done
check "every live claim is released (the dead S2 and the once-stopped S3 too)" test "$left_ok" = 1
op GET /v1/sandboxes
check "... none is left" is 'len(d["sandboxes"])' 0
kill -TERM "$PID"
rc=
for _ in $(seq 300); do
	kill -0 "$PID" 2>/dev/null || { wait "$PID" && rc=0 || rc=$?; break; }
	sleep 0.1
done
check "SIGTERM: the daemon exits 0 (rc ${rc:-still running after 30 s})" test "$rc" = 0
# The sandboxes the log names as started: not an empty list, which would
# make the check below pass without looking at anything (S1 is among them).
ids=$(grep -oE 'sandbox sbx-[0-9a-f]+: started' "$LOG" | cut -d' ' -f2 | tr -d : | sort -u | tr '\n' ' ') || true
check "the log names this test's sandboxes ($(wc -w <<<"$ids") started, S1 ${S1:-unknown} among them)" \
	eval '[ -n "${S1:-}" ] && [[ " $ids " == *" $S1 "* ]]'
left=
for id in $ids; do
	[ -n "$(cg_pids "$id")" ] && left="$left $id"
done
check "no sandbox of this test has a process left (${left:-none})" test -z "$left"
check "the fleet namespace is removed" test ! -e "/run/netns/$FLEET"

[ "$E2E_FAILS" = 0 ] || dump_log
finish
