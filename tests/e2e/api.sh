#!/bin/bash
# The REST API and the `sluice` client end to end: the real sluiced, in a
# network namespace of its own, with two pools of real `ns` sandboxes
# (busybox template) on one lane, three tenants and the operator.
#
# Checks: authentication (TCP and the unix socket, tenants and the
# operator); a web page's requests refused (Sec-Fetch-Site, Origin, Host
# and DNS rebinding); warm and cold claims; exec (buffered, env, timeouts,
# truncation, streamed); files (5 MiB round trip, directories, errors);
# tenants cannot see each other's sandboxes; max_claims; a PUT /v1/pools
# does not touch live claims' layers and refuses a bad set whole; wildcards
# over a public suffix refused in the file and in a tenant's credentials; leases
# expire; TTL edges; release (processes, cgroups, links, ids never reused);
# the CLI; 100 claim/exec/release cycles, 10 at a time, leave only the
# warm sandboxes; a clean stop leaves nothing.
#
# Everything lives under $E2E_TMP, in the daemon's namespace and in the
# fleet namespace the daemon makes (both removed on every exit).
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
netns_new gw apid
FLEET="sl-apif-$$"
netns_owned "$FLEET"   # fleet_teardown removes it on a clean exit; the trap otherwise
PORT=8080
SOCK=$E2E_TMP/api.sock
LOG=$E2E_TMP/sluiced.log
: >"$LOG"
# The operator token and tenant keys reach the daemon through ${env:}
# references (the config file is kept for the canary scan) and are
# declared canaries: no log line, answer or kept file may hold one.
SL_E2E_OPTOK=$(printf 'op-%05d%05d-%d' "$RANDOM" "$RANDOM" "$$")
ACME=$(printf 'acme-%05d%05d-key' "$RANDOM" "$RANDOM")
OTHER=$(printf 'other-%05d%05d-key' "$RANDOM" "$RANDOM")
BULK=$(printf 'bulk-%05d%05d-key' "$RANDOM" "$RANDOM")
export SL_E2E_OPTOK SL_E2E_ACME=$ACME SL_E2E_OTHER=$OTHER SL_E2E_BULK=$BULK
canary API_OPERATOR_TOKEN="$SL_E2E_OPTOK" API_ACME_KEY="$ACME" API_OTHER_KEY="$OTHER" \
	API_BULK_KEY="$BULK"

# Run in the daemon's namespace (never to start a server with &).
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
  - { name: acme, keys: ["\${env:SL_E2E_ACME}"], max_claims: 3, egress: ["origin.test", "example.com"] }
  - { name: other, keys: ["\${env:SL_E2E_OTHER}"] }
  - { name: bulk, keys: ["\${env:SL_E2E_BULK}"] }
policies:
  - { name: wide, allow: ["origin.test", "*.origin.test", "example.com"] }
  - { name: narrow, allow: ["example.com"] }
pools:
  - name: warm
    template: busybox
    lane: egress
    policy: wide
    warm: 2
    warm_max: 4
    ttl: { default_seconds: 600, max_seconds: 3600 }
  - name: cold
    template: busybox
    lane: egress
    policy: wide
    warm: 0
    warm_max: 0
    ttl: { default_seconds: 300, max_seconds: 900 }
certs: { ca_cert: $E2E_TMP/ca.pem, ca_key: $E2E_TMP/ca.key }
YAML

# --- helpers --------------------------------------------------------------
# shellcheck source=tests/e2e/api_lib.sh
. "$(dirname "$0")/api_lib.sh"
# The tenants, over TCP.
acme() { req tcp "$ACME" "$@"; }
other() { req tcp "$OTHER" "$@"; }

# settled: every pool's warm == target and nothing booting (up to 20 s).
settled() {
	local i b
	for ((i = 0; i < 200; i++)); do
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
warm_total() {
	local b
	b=$(curl -sS -m 10 --unix-socket "$SOCK" http://sluice/v1/info) || return 1
	keep_text "unix GET /v1/info" "$b"
	"$PY" -c 'import json,sys; print(sum(p["warm"] for p in json.load(sys.stdin)["pools"]))' <<<"$b"
}
# Our sandboxes' cgroup names: the ones holding a child of the daemon
# (the sandbox's init), or named by an id we were given.
our_cgroups() {
	local d p pp
	while read -r d; do
		for p in $(cat "$d/cgroup.procs" 2>/dev/null); do
			pp=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null || true)
			[ "$pp" = "$PID" ] && { basename "$d"; break; }
		done
	done < <(find /sys/fs/cgroup -maxdepth 8 -type d -name 'sbx-*' 2>/dev/null)
	while read -r id; do
		if [ -n "$id" ] && [ -n "$(cg_dirs "$id")" ]; then echo "$id"; fi
	done <"$SEEN"
	return 0
}
our_cgroup_count() { our_cgroups | sort -u | grep -c . || true; }

dump_log() { echo "--- the daemon's log (last 80 lines):" >&2; tail -n 80 "$LOG" >&2; }

# --- start ------------------------------------------------------------------
# Not `ip netns exec`: it gives the daemon a slave mount namespace, and the
# fleet namespace it binds under /run/netns must be seen from here.
PID=
start_daemon() {
	nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/sluice.yaml" 2>>"$LOG" &
	PID=$!
	track "$PID"
	wait_for "$LOG" "sluiced [0-9.]+ started" 10 || return 1
	for _ in $(seq 100); do [ -S "$SOCK" ] && return 0; sleep 0.1; done
	return 1
}
if ! start_daemon; then
	fail "the daemon starts"
	dump_log
	finish
fi
pass "the daemon starts"
check "the API socket is mode 0600" test "$(stat -c %a "$SOCK")" = 600
check "the fleet namespace exists" test -e "/run/netns/$FLEET"

# --- 1. authentication ------------------------------------------------------
req tcp "" GET /v1/sandboxes
check "TCP without a token: 401, JSON error, WWW-Authenticate: Bearer, Sluice-Reason" \
	eval 'status 401 && is "d[\"error\"][\"code\"]" unauthorized && header "WWW-Authenticate: Bearer" && header "Sluice-Reason: unauthorized"'
req tcp "not-a-token" GET /v1/sandboxes
check "TCP with a token nobody has: 401" eval 'status 401 && is "d[\"error\"][\"code\"]" unauthorized'
acme GET /v1/pools
check "a tenant key on GET /v1/pools: 403 operator-only" eval 'status 403 && is "d[\"error\"][\"code\"]" operator-only'
acme GET /v1/info
check "a tenant key on GET /v1/info: 403 operator-only" eval 'status 403 && is "d[\"error\"][\"code\"]" operator-only'

# --- 1a. browsers: a web page the operator opens cannot use the API -----------
# Each refusal is 403 with its code, before any handler: the same request
# with the API's own origin is answered first (the listener, the token and
# the path are good), and the cross-site claim below made no claim.
sb_count() { op GET /v1/sandboxes; j 'len(d["sandboxes"])'; }
req tcp "$SL_E2E_OPTOK" GET /v1/info -H "Origin: http://127.0.0.1:$PORT" -H "Sec-Fetch-Site: same-origin"
check "browsers: the API's own origin, same-origin: 200" status 200
req tcp "$SL_E2E_OPTOK" GET /v1/info -H "Host: localhost:$PORT" -H "Sec-Fetch-Site: none"
check "browsers: Host localhost:$PORT, a typed navigation (Sec-Fetch-Site: none): 200" status 200
# refused WHAT CODE [curl args]: over TCP with the operator token.
browser_refused() {
	local what=$1 code=$2
	shift 2
	req tcp "$SL_E2E_OPTOK" GET /v1/info "$@"
	check "browsers: $what: 403 $code, JSON, Sluice-Reason" \
		eval 'status 403 && is "d[\"error\"][\"code\"]" '"$code"' && header "Sluice-Reason: '"$code"'"'
}
browser_refused "Sec-Fetch-Site: cross-site" cross-site -H "Sec-Fetch-Site: cross-site"
browser_refused "Sec-Fetch-Site: same-site (another port of localhost)" cross-site -H "Sec-Fetch-Site: same-site"
browser_refused "Origin: http://evil.example" bad-origin -H "Origin: http://evil.example"
browser_refused "Origin: null" bad-origin -H "Origin: null"
browser_refused "Origin: http://localhost:3000" bad-origin -H "Origin: http://localhost:3000"
browser_refused "Host: evil.example:$PORT" bad-host -H "Host: evil.example:$PORT"
check "browsers: the message names the fix" grep -qF "(DNS rebinding); send Host: 127.0.0.1:$PORT or localhost:$PORT" "$BODY"
# DNS rebinding as a browser does it: a name of the page's, resolved to us.
ST=$(T curl -sS -m 10 -o "$BODY" -w '%{http_code}' --resolve "rebind.example:$PORT:127.0.0.1" \
	-H "Authorization: Bearer $SL_E2E_OPTOK" "http://rebind.example:$PORT/v1/info" 2>/dev/null) || true
B=$(cat "$BODY" 2>/dev/null || true)
check "browsers: http://rebind.example:$PORT resolved to 127.0.0.1: 403 bad-host" \
	eval 'status 403 && is "d[\"error\"][\"code\"]" bad-host'
n0=$(sb_count)
req tcp "$ACME" POST /v1/claims -H "Origin: http://evil.example" -H "Sec-Fetch-Site: cross-site" \
	-H 'Content-Type: text/plain' --data-binary '{"pool":"warm"}'
check "browsers: a cross-site form posting a claim: 403, and no claim was made" \
	eval 'status 403 && is "d[\"error\"][\"code\"]" cross-site && [ "$(sb_count)" = "$n0" ]'
op GET /v1/info -H "Origin: http://localhost:$PORT"
check "browsers: the unix socket has no web origin: an Origin there is 403 bad-origin" \
	eval 'status 403 && is "d[\"error\"][\"code\"]" bad-origin'
op GET /v1/info -H "Host: anything.example"
check "browsers: the unix socket takes any Host (no browser reaches it): 200" status 200
if [ -x "$CLI" ]; then
	check "browsers: the CLI over http://localhost:$PORT still works" \
		quiet T env SLUICE_TOKEN="$SL_E2E_OPTOK" "$CLI" --api "http://localhost:$PORT" info
fi
# 3 cross-site (two Sec-Fetch-Site values, the claim), 4 bad-origin (three
# over TCP, one on the socket), 2 bad-host (a Host, the rebound name).
op GET /metrics
check "browsers: /metrics counts the refusals by reason (cross-site 3, bad-origin 4, bad-host 2)" \
	eval 'grep -qx "sluice_api_browser_refusals_total{reason=\"cross-site\"} 3" "$BODY" &&
	      grep -qx "sluice_api_browser_refusals_total{reason=\"bad-origin\"} 4" "$BODY" &&
	      grep -qx "sluice_api_browser_refusals_total{reason=\"bad-host\"} 2" "$BODY"'

# --- 1b. the CA (certs/): made on first start, served to tenants ---------------
check "the CA was created: certificate and key in place" test -s "$E2E_TMP/ca.pem" -a -s "$E2E_TMP/ca.key"
check "the CA key is mode 0600" test "$(stat -c %a "$E2E_TMP/ca.key")" = 600
check "the CA key is not in the daemon's log" eval '! grep -q "PRIVATE KEY" "$LOG"'
req tcp "" GET /v1/ca.pem
check "GET /v1/ca.pem without a token: 401" status 401
acme GET /v1/ca.pem
check "GET /v1/ca.pem as a tenant: 200, application/x-pem-file" \
	eval 'status 200 && header "Content-Type: application/x-pem-file"'
check "... the very certificate in certs.ca_cert" cmp -s "$BODY" "$E2E_TMP/ca.pem"
check "... a CA certificate (CA:TRUE, keyCertSign) on an EC P-256 key" eval \
	'openssl x509 -in "$BODY" -noout -text | grep -q "CA:TRUE" &&
	 openssl x509 -in "$BODY" -noout -text | grep -q "Certificate Sign" &&
	 openssl x509 -in "$BODY" -noout -text | grep -q "prime256v1"'
check "... with no private key in it" eval '! grep -q "PRIVATE" "$BODY"'
CA_FP=$(openssl x509 -in "$E2E_TMP/ca.pem" -noout -fingerprint -sha256)
req tcp "$SL_E2E_OPTOK" GET /v1/pools
check "the operator token over TCP: GET /v1/pools 200" status 200
op GET /v1/info
check "the unix socket without a token is the operator: GET /v1/info 200" \
	eval 'status 200 && is "sorted(p[\"name\"] for p in d[\"pools\"])" "[\"cold\", \"warm\"]"'
req unix "not-a-token" GET /v1/info
check "the unix socket with a token nobody has: 401" status 401
op GET /v1/nothing-here
check "an unknown path: 404 not-found" eval 'status 404 && is "d[\"error\"][\"code\"]" not-found'
op DELETE /v1/info
check "a wrong method: 405 method-not-allowed" eval 'status 405 && is "d[\"error\"][\"code\"]" method-not-allowed'
acme POST /v1/claims -H 'Content-Type: text/plain' --data-binary '{"pool":"warm"}'
check "a claim that is not JSON by its type: 415" status 415
acme POST /v1/claims "${JS[@]}" '{"pool":'
check "a claim body that is not JSON: 400 bad-json" eval 'status 400 && is "d[\"error\"][\"code\"]" bad-json'

# --- 2. a warm claim --------------------------------------------------------
check "pool warm fills to 2" wait_warm warm 2 30
claim tcp "$ACME" '{"pool":"warm","env":{"FOO":"bar"},"labels":{"job":"42"}}'
A1=$ID A1_ADDR=$ADDR A1_BODY=$B
check "acme claims from warm: 201, tier warm, state claimed, tenant acme" \
	eval 'status 201 && is "d[\"tier\"]" warm && is "d[\"state\"]" claimed && is "d[\"tenant\"]" acme && is "d[\"pool\"]" warm'
check "the id looks like sbx-<16 hex> ($A1)" eval '[[ $A1 =~ ^sbx-[0-9a-f]{16}$ ]]'
check "the address is in the lane's subnet ($A1_ADDR)" \
	eval '[[ $A1_ADDR =~ ^10\.88\.1\.([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 2 ] && [ "${BASH_REMATCH[1]}" -le 254 ]'
check "layer.version is 16 hex digits, policy wide, acme's egress" \
	eval '[[ $(j "d[\"layer\"][\"version\"]") =~ ^[0-9a-f]{16}$ ]] && is "d[\"layer\"][\"policy\"]" wide &&
	      is "d[\"layer\"][\"tenant_egress\"]" "[\"origin.test\", \"example.com\"]"'
check "proxy URLs point at the lane's doors" \
	eval 'is "d[\"proxy\"][\"http\"]" http://10.88.1.1:3128 && is "d[\"proxy\"][\"https\"]" http://10.88.1.1:3128 && is "d[\"proxy\"][\"socks\"]" socks5h://10.88.1.1:1080'
check "expires_at and ttl_seconds 600 (the pool's default), labels kept" \
	eval 'is "d[\"ttl_seconds\"]" 600 && [[ $(j "d[\"expires_at\"]") =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$ ]] && is "d[\"labels\"]" "{\"job\": \"42\"}"'
A1_VER=$(B=$A1_BODY j 'd["layer"]["version"]')
check "the sandbox's link is up in the fleet ($(ifname_of "$A1_ADDR"))" \
	quiet ip -n "$FLEET" link show "$(ifname_of "$A1_ADDR")"
check "pool warm refills to 2" wait_warm warm 2 20

# --- 3. a cold claim --------------------------------------------------------
claim tcp "$ACME" '{"pool":"cold","ttl_seconds":120}'
A2=$ID
check "a claim from the empty pool cold: 201, tier cold" eval 'status 201 && is "d[\"tier\"]" cold && is "d[\"ttl_seconds\"]" 120'
check "pool cold stays empty" test "$(info_pool cold warm) $(info_pool cold claimed)" = "0 1"

# --- 4. exec ----------------------------------------------------------------
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["sh","-c","echo out; echo err >&2; exit 3"]}'
check "exec: stdout, stderr and the exit code" \
	eval 'status 200 && is "d[\"stdout\"] == \"out\\n\"" true && is "d[\"stderr\"] == \"err\\n\"" true && is "d[\"exit_code\"]" 3 && is "d[\"timed_out\"]" false && is "d[\"truncated\"]" false'
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["sh","-c","echo $FOO $BAR $http_proxy"],"env":{"BAR":"baz"}}'
check "exec: the claim's env, the exec's env and the proxy variables" \
	is 'd["stdout"] == "bar baz http://10.88.1.1:3128\n"' true
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["sh","-c","pwd; cat"],"cwd":"/tmp","stdin":"fed in"}'
check "exec: cwd and stdin" is 'd["stdout"] == "/tmp\nfed in"' true
# A command that would run for 10 minutes: an answer at all (curl gives
# up after 60 s) is the timeout's doing, and the answer says so.
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["sleep","600"],"timeout_seconds":1}'
check "exec: timeout_seconds 1 with sleep 600 -> 200, timed_out, killed by signal 9" \
	eval 'status 200 && is "d[\"timed_out\"]" true && is "d[\"signal\"]" 9 && is "d[\"exit_code\"]" null'
check "... and no 'sleep 600' is left in the sandbox" wait_cg_not "$A1" '^sleep 600$' 5
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["sh","-c","kill -9 $$"]}'
check "exec: killed by a signal -> exit_code null, signal 9" eval 'is "d[\"exit_code\"]" null && is "d[\"signal\"]" 9'
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["sh","-c","yes aaaaaaa | head -c 3145728; echo done >&2"]}'
n=$(j 'len(d["stdout"])')
check "exec: 3 MiB of output -> truncated, stdout kept at most 1 MiB ($n bytes)" \
	eval 'status 200 && is "d[\"truncated\"]" true && [ "$n" -gt 0 ] 2>/dev/null && [ "$n" -le 1048576 ] && is "d[\"stderr\"] == \"done\\n\"" true && is "d[\"exit_code\"]" 0'
acme POST "/v1/sandboxes/$A1/exec" -H 'Accept: application/x-ndjson' "${JS[@]}" '{"argv":["sh","-c","echo hi; echo oops >&2; exit 2"]}'
cat > "$E2E_TMP/nd.py" <<'PY'
import base64, json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kinds = [e["event"] for e in ev]
out = b"".join(base64.b64decode(e["data"]) for e in ev if e["event"] == "stdout")
err = b"".join(base64.b64decode(e["data"]) for e in ev if e["event"] == "stderr")
ok = (kinds[0] == "started" and kinds[-1] == "exit" and out == b"hi\n" and err == b"oops\n"
      and ev[-1]["exit_code"] == 2 and ev[-1]["timed_out"] is False)
if not ok:
    print("    events: %r" % ev, file=sys.stderr)
sys.exit(0 if ok else 1)
PY
check "exec streamed: application/x-ndjson with started, stdout, stderr, exit lines" \
	eval 'status 200 && header "Content-Type: application/x-ndjson" && "$PY" "$E2E_TMP/nd.py" "$BODY"'
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["true"],"stream":true}'
check "exec streamed by \"stream\": true" eval 'status 200 && header "Content-Type: application/x-ndjson" && grep -q "\"exit\"" "$BODY"'
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"env":{}}'
check "exec without argv: 400 bad-request" eval 'status 400 && is "d[\"error\"][\"code\"]" bad-request'

# --- 5. files ---------------------------------------------------------------
head -c 5M /dev/urandom >"$E2E_TMP/five"
SUM5=$(sha256sum <"$E2E_TMP/five" | cut -d' ' -f1)
acme PUT "/v1/sandboxes/$A1/files?path=/tmp/five&mode=0640" -H 'Content-Type: application/octet-stream' \
	--data-binary "@$E2E_TMP/five"
check "files: PUT 5 MiB -> 201 with its size" eval 'status 201 && is "d[\"bytes\"]" 5242880 && is "d[\"path\"]" /tmp/five'
acme GET "/v1/sandboxes/$A1/files?path=/tmp/five"
check "files: GET it back, same sha256" \
	eval 'status 200 && header "Content-Type: application/octet-stream" && [ "$(sha256sum <"$BODY" | cut -d" " -f1)" = "$SUM5" ]'
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["sh","-c","stat -c \"%s %a\" /tmp/five"]}'
check "files: the guest sees the file with its size and mode" is 'd["stdout"] == "5242880 640\n"' true
acme GET "/v1/sandboxes/$A1/files?path=/tmp"
check "files: GET of a directory lists it" \
	eval 'status 200 && is "d[\"path\"]" /tmp && is "[(e[\"type\"], e[\"size\"]) for e in d[\"entries\"] if e[\"name\"] == \"five\"]" "[[\"file\", 5242880]]"'
acme GET "/v1/sandboxes/$A1/files?path=/tmp/nothing-here"
check "files: GET of a missing path -> 404 not-found" eval 'status 404 && is "d[\"error\"][\"code\"]" not-found'
acme GET "/v1/sandboxes/$A1/files?path=tmp/five"
check "files: GET of a path without a leading / -> 400" eval 'status 400 && is "d[\"error\"][\"code\"]" bad-request'
acme PUT "/v1/sandboxes/$A1/files?path=tmp/x" -H 'Content-Type: application/octet-stream' --data-binary x
check "files: PUT of a path without a leading / -> 400" status 400
acme PUT "/v1/sandboxes/$A1/files?path=/no/such/dir/x" -H 'Content-Type: application/octet-stream' --data-binary x
check "files: PUT under a missing directory -> 404 not-found" refused 404 not-found

# --- 6. tenants are isolated ------------------------------------------------
other GET "/v1/sandboxes/$A1"
check "other: GET of acme's sandbox -> 404" eval 'status 404 && is "d[\"error\"][\"code\"]" not-found'
other DELETE "/v1/sandboxes/$A1"
check "other: DELETE of acme's sandbox -> 404" status 404
other POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["true"]}'
check "other: exec in acme's sandbox -> 404" status 404
other GET "/v1/sandboxes/$A1/files?path=/tmp/five"
check "other: files of acme's sandbox -> 404" status 404
other PUT "/v1/sandboxes/$A1/files?path=/tmp/evil" -H 'Content-Type: application/octet-stream' --data-binary x
check "other: PUT a file into acme's sandbox -> 404" status 404
acme GET "/v1/sandboxes/$A1/files?path=/tmp/evil"
check "... and nothing was written: acme's GET of /tmp/evil -> 404 not-found" refused 404 not-found
other GET /v1/sandboxes
check "other: GET /v1/sandboxes lists nothing of acme's" \
	eval 'status 200 && is "[s[\"id\"] for s in d[\"sandboxes\"] if s[\"tenant\"] != \"other\"]" "[]"'
other GET /v1/sandboxes/sbx-0000000000000000
check "other: a sandbox that does not exist is the same 404" eval 'status 404 && is "d[\"error\"][\"code\"]" not-found'
acme GET "/v1/sandboxes/$A1"
check "acme's sandbox is untouched by other's attempts" eval 'status 200 && is "d[\"state\"]" claimed'
acme GET /v1/sandboxes
check "acme: GET /v1/sandboxes lists its two claims" \
	eval 'status 200 && is "sorted(s[\"id\"] for s in d[\"sandboxes\"])" "$("$PY" -c "import json,sys; print(json.dumps(sorted(sys.argv[1:])))" "$A1" "$A2")"'
op GET /v1/sandboxes
check "the operator sees acme's claims" eval 'is "len([s for s in d[\"sandboxes\"] if s[\"tenant\"] == \"acme\"])" 2'

# --- 7. max_claims ----------------------------------------------------------
claim tcp "$ACME" '{"pool":"warm"}'
A3=$ID
check "acme's 3rd live claim: 201" status 201
claim tcp "$ACME" '{"pool":"warm"}'
check "acme's 4th live claim: 429 too-many-claims" eval 'status 429 && is "d[\"error\"][\"code\"]" too-many-claims'
claim tcp "$OTHER" '{"pool":"cold"}'
O1=$ID
check "other (no max_claims) still claims meanwhile" status 201
acme DELETE "/v1/sandboxes/$A3"
check "acme releases its 3rd" is 'd["result"]' released

# --- 8. PUT /v1/pools while a claim is live ----------------------------------
op GET /v1/pools
POOLS0=$B
check "GET /v1/pools: warm with policy wide" \
	eval 'status 200 && is "[(p[\"name\"], p[\"policy\"], p[\"warm\"], p[\"warm_max\"]) for p in d[\"pools\"]]" "[[\"warm\", \"wide\", 2, 4], [\"cold\", \"wide\", 0, 0]]"'
NEWPOOLS=$("$PY" -c 'import json,sys
d = json.loads(sys.argv[1])
for p in d["pools"]:
    if p["name"] == "warm": p["policy"] = "narrow"
print(json.dumps(d))' "$POOLS0")
op PUT /v1/pools "${JS[@]}" "$NEWPOOLS"
check "PUT /v1/pools switches warm to policy narrow: 200 with the new set" \
	eval 'status 200 && is "[p[\"policy\"] for p in d[\"pools\"] if p[\"name\"] == \"warm\"]" "[\"narrow\"]"'
acme GET "/v1/sandboxes/$A1"
check "the live claim keeps its layer (version $A1_VER, policy wide)" \
	eval 'status 200 && is "d[\"layer\"][\"version\"]" "$A1_VER" && is "d[\"layer\"][\"policy\"]" wide'
claim tcp "$ACME" '{"pool":"warm"}'
A4=$ID
A4_VER=$(j 'd["layer"]["version"]')
check "a new claim gets a new layer ($A4_VER) with policy narrow" \
	eval 'status 201 && is "d[\"layer\"][\"policy\"]" narrow && [ -n "$A4_VER" ] && [ "$A4_VER" != "$A1_VER" ]'
# Their traffic: origin.test is allowed by wide (the gateway then fails
# to resolve it: no DNS here) and refused by narrow (403 before any DNS).
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["sh","-c","wget -q -O /dev/null http://origin.test/ 2>&1; true"],"timeout_seconds":10}'
OLD_OUT=$(j 'd["stdout"]')
acme POST "/v1/sandboxes/$A4/exec" "${JS[@]}" '{"argv":["sh","-c","wget -q -O /dev/null http://origin.test/ 2>&1; true"],"timeout_seconds":10}'
NEW_OUT=$(j 'd["stdout"]')
check "the old claim's traffic still follows wide (not refused: $OLD_OUT)" \
	eval '[[ $OLD_OUT == *"HTTP/1."* && $OLD_OUT != *403* ]]'
check "the new claim's traffic follows narrow (refused: $NEW_OUT)" eval '[[ $NEW_OUT == *403* ]]'
op GET /v1/pools
POOLS1=$B
BADPOOLS=$("$PY" -c 'import json,sys
d = json.loads(sys.argv[1])
d["pools"][0]["warm"] = d["pools"][0]["warm_max"] + 1
d["pools"][1]["policy"] = "nosuch"
print(json.dumps(d))' "$POOLS1")
op PUT /v1/pools "${JS[@]}" "$BADPOOLS"
check "a PUT with two errors: 400 bad-request, details naming pools[0].warm and pools[1].policy" \
	eval 'status 400 && is "d[\"error\"][\"code\"]" bad-request &&
	      is "len(d[\"error\"][\"details\"])" 2 &&
	      is "any(x.startswith(\"pools[0].warm\") for x in d[\"error\"][\"details\"])" true &&
	      is "any(x.startswith(\"pools[1].policy\") and \"nosuch\" in x for x in d[\"error\"][\"details\"])" true'
op GET /v1/pools
check "GET /v1/pools is unchanged after the refused PUT" \
	eval '[ "$("$PY" -c "import json,sys; print(json.loads(sys.argv[1]) == json.loads(sys.argv[2]))" "$B" "$POOLS1")" = True ]'
op PUT /v1/pools "${JS[@]}" '{"pools":[{"name":"warm","lane":"egress","policy":"wide","bogus":1}]}'
check "a PUT with an unknown key: 400 naming pools[0].bogus" \
	eval 'status 400 && is "any(\"pools[0]\" in x and \"bogus\" in x for x in d[\"error\"][\"details\"])" true'
op GET /v1/pools
# shellcheck disable=SC2034 # read by the eval below
POOLS2=$B
check "GET /v1/pools before a tenant's PUT" status 200
acme PUT /v1/pools "${JS[@]}" "$POOLS0"
check "a tenant cannot PUT /v1/pools: 403 operator-only" refused 403 operator-only
op GET /v1/pools
check "... and GET /v1/pools is unchanged after it" \
	eval 'status 200 && [ "$("$PY" -c "import json,sys; print(json.loads(sys.argv[1]) == json.loads(sys.argv[2]))" "$B" "$POOLS2")" = True ]'
acme DELETE "/v1/sandboxes/$A4"
check "acme releases the narrow claim" is 'd["result"]' released

# --- 8b. wildcards that cover a public suffix ------------------------------------
# A pool only names its policy, so a PUT /v1/pools carries no host pattern:
# the policies' patterns are checked where the file is loaded (--check, the
# start, SIGHUP), and the patterns the API takes, a tenant's credentials,
# where it takes them. Each refusal follows the same input with the suffix
# replaced by a registrable domain, accepted.
for pat in '*.example.co.uk' '*.co.uk'; do
	sed -e 's|^  - { name: narrow, allow: \["example.com"\] }$|&\n  - { name: open, allow: ["example.com", "'"$pat"'"] }|' \
		"$E2E_TMP/sluice.yaml" >"$E2E_TMP/psl.yaml"
	rc=0
	out=$("$SLUICED" --check "$E2E_TMP/psl.yaml" 2>&1) || rc=$?
	line=$(grep -n '^  - { name: open, ' "$E2E_TMP/psl.yaml" | cut -d: -f1)
	col=$(grep '^  - { name: open, ' "$E2E_TMP/psl.yaml" | awk -v p="\"$pat\"" '{ print index($0, p) }')
	if [ "$pat" = '*.example.co.uk' ]; then
		check "--check accepts a policy allowing '*.example.co.uk' (line $line, col $col)" \
			eval '[ "$rc" = 0 ] && [ -n "$line" ] && [ "$col" -gt 0 ]'
	else
		want="$E2E_TMP/psl.yaml:$line:$col: policies[2].allow[1]: '*.co.uk' covers the public suffix co.uk: every site under it would match; name the domains meant ('*.example.co.uk')"
		check "--check refuses '*.co.uk' there: exit 2, the one line naming the suffix ($out)" \
			eval '[ "$rc" = 2 ] && [ "$out" = "$want" ]'
	fi
done
PSL_VAL="psl-v-$RANDOM$RANDOM"
pcred() { echo '{"name":"t","host":"'"$1"'","header":"X-Psl","value":"'"$PSL_VAL"'"}'; }
tcred_hosts() { j '[c["host"] for c in d["credentials"] if c["name"] == "t"]'; }
claim tcp "$OTHER" '{"pool":"warm","credentials":['"$(pcred '*.example.com')"']}'
P1=$ID
check "other claims with a credential for '*.example.com': 201, listed with that host" \
	eval 'status 201 && [ "$(tcred_hosts)" = "[\"*.example.com\"]" ]'
claim tcp "$OTHER" '{"pool":"warm","credentials":['"$(pcred '*.github.io')"']}'
want="credentials[0].host: '*.github.io' covers the public suffix github.io: every site under it would match"
check "a claim with a credential for '*.github.io': 400 bad-request naming the suffix, the value not echoed" \
	eval 'status 400 && is "d[\"error\"][\"code\"]" bad-request &&
	      [[ $(j "d[\"error\"][\"message\"]") == "$want"* ]] && [[ $B != *"$PSL_VAL"* ]]'
req tcp "$OTHER" PUT "/v1/sandboxes/$P1/credentials" "${JS[@]}" '{"credentials":['"$(pcred '*.CO.UK.')"']}'
# shellcheck disable=SC2034 # read by the eval below
want="credentials[0].host: '*.CO.UK.' covers the public suffix co.uk: every site under it would match"
check "PUT of its credentials for '*.CO.UK.': 400 naming co.uk" \
	eval 'status 400 && [[ $(j "d[\"error\"][\"message\"]") == "$want"* ]]'
req tcp "$OTHER" GET "/v1/sandboxes/$P1"
check "... and the claim keeps its '*.example.com' credential" \
	eval 'status 200 && [ "$(tcred_hosts)" = "[\"*.example.com\"]" ]'
req tcp "$OTHER" DELETE "/v1/sandboxes/$P1"
check "other releases it" is 'd["result"]' released

# --- 9. lease expiry -----------------------------------------------------------
# Shown reaped, for the reason that its lease ended (the log's line, the
# journal's reap not before expires_ms), then torn down. A reaped claim
# shows its state as soon as its end begins; the teardown follows.
claim tcp "$ACME" '{"pool":"cold","ttl_seconds":1}'
A5=$ID A5_ADDR=$ADDR
check "a claim with ttl_seconds 1" eval 'status 201 && is "d[\"ttl_seconds\"]" 1'
check "its link ($(ifname_of "$A5_ADDR")) and cgroups are there" \
	eval 'link_there "$A5_ADDR" && [ -n "$(cg_dirs "$A5")" ]'
reaped=
for _ in $(seq 300); do
	acme GET "/v1/sandboxes/$A5"
	[ "$(j 'd.get("state")')" = reaped ] && { reaped=1; break; }
	sleep 0.1
done
check "it is shown reaped ($ST ${B:0:100})" test -n "$reaped"
check "... the log says its lease expired" grep -qF "claim $A5: lease expired; reaping" "$LOG"
reap_at=$("$PY" -c 'import json,sys
for l in open(sys.argv[1], "rb"):
    try: e = json.loads(l)
    except ValueError: continue
    if e.get("event") == "reap" and e.get("claim") == sys.argv[2]:
        print("%s %s %s" % (e["ts_ms"] - e["expires_ms"], e["expires_ms"] - e["created_ms"], e.get("reason")))' \
	"$E2E_TMP/data/journal.jsonl" "$A5" 2>&1 || true)
check "... the journal's reap comes at or after the lease's end, 1000 ms after the claim, for no other reason than the lease (ms past the end, lease ms, reason: $reap_at)" \
	eval '[[ $reap_at =~ ^[0-9]+\ 1000\ (None|lease)$ ]]'
acme DELETE "/v1/sandboxes/$A5"
check "DELETE of a reaped claim: already-reaped" eval 'status 200 && is "d[\"result\"]" already-reaped'
for _ in $(seq 200); do
	link_gone "$A5_ADDR" && [ -z "$(cg_dirs "$A5")" ] && break
	sleep 0.05
done
check "... then its link ($(ifname_of "$A5_ADDR")) is gone from the fleet" link_gone "$A5_ADDR"
check "... and its cgroups are gone" test -z "$(cg_dirs "$A5")"

# --- 10. TTL edges ------------------------------------------------------------
# Each claim is released at once (acme holds A1 and A2 meanwhile).
ttl_claim() { # JSON -> ST, B; releases what it got
	claim tcp "$ACME" "$1"
	local b=$B s=$ST
	[ -n "$ID" ] && acme DELETE "/v1/sandboxes/$ID"
	B=$b ST=$s
}
ttl_claim '{"pool":"cold","ttl_seconds":0}'
check "ttl_seconds 0 -> the pool's default (300)" eval 'status 201 && is "d[\"ttl_seconds\"]" 300'
ttl_claim '{"pool":"cold"}'
check "no ttl_seconds -> the pool's default (300)" eval 'status 201 && is "d[\"ttl_seconds\"]" 300'
ttl_claim '{"pool":"cold","ttl_seconds":-5}'
check "ttl_seconds -5 -> 1" eval 'status 201 && is "d[\"ttl_seconds\"]" 1'
ttl_claim '{"pool":"cold","ttl_seconds":9223372036854775807}'
check "ttl_seconds 2^63-1 -> the pool's max (900)" eval 'status 201 && is "d[\"ttl_seconds\"]" 900'
ttl_claim '{"pool":"cold","ttl_seconds":-9223372036854775808}'
check "ttl_seconds -2^63 -> 1" eval 'status 201 && is "d[\"ttl_seconds\"]" 1'
ttl_claim '{"pool":"cold","ttl_seconds":99999999999999999999}'
check "ttl_seconds beyond 64 bits -> 400" status 400
check "... with code bad-json (the JSON parser refuses it), as docs/api.md says" is 'd["error"]["code"]' bad-json
ttl_claim '{"pool":"cold","ttl_seconds":"60"}'
check "ttl_seconds \"60\" (a string) -> 400 naming ttl_seconds" \
	eval 'status 400 && is "d[\"error\"][\"code\"]" bad-request && [[ $(j "d[\"error\"][\"message\"]") == *ttl_seconds* ]]'
ttl_claim '{"pool":"cold","ttl_seconds":1.5}'
check "ttl_seconds 1.5 -> 400" eval 'status 400 && is "d[\"error\"][\"code\"]" bad-request'
ttl_claim '{"pool":"cold","ttl_seconds":1e3}'
check "ttl_seconds 1e3 (a real) -> 400" status 400
ttl_claim '{"pool":"nosuch"}'
check "an unknown pool -> 404 unknown-pool" eval 'status 404 && is "d[\"error\"][\"code\"]" unknown-pool'
ttl_claim '{"ttl_seconds":5}'
check "no pool -> 400" status 400
ttl_claim '{"pool":"cold","env":{"1BAD":"x"}}'
check "a bad env name -> 400" status 400

# --- 11. release ------------------------------------------------------------
A2_ADDR=$(acme GET "/v1/sandboxes/$A2" && j 'd["address"]')
# A process of its own that outlives the exec that started it.
acme POST "/v1/sandboxes/$A2/exec" "${JS[@]}" '{"argv":["sh","-c","sleep 300 </dev/null >/dev/null 2>&1 &"]}'
A2_PIDS=$(cg_pids "$A2")
check "its address ($A2_ADDR) is valid and its link ($(ifname_of "$A2_ADDR")) is in the fleet" \
	eval 'ifname_of "$A2_ADDR" >/dev/null && link_there "$A2_ADDR" && ! link_gone "$A2_ADDR"'
check "the sandbox's processes are found by its cgroup ($(echo $A2_PIDS))" test -n "$A2_PIDS"
acme DELETE "/v1/sandboxes/$A2"
check "DELETE -> released" eval 'status 200 && is "d[\"result\"]" released && is "d[\"id\"]" "$A2"'
acme DELETE "/v1/sandboxes/$A2"
check "DELETE again -> already-released" eval 'status 200 && is "d[\"result\"]" already-released'
acme GET "/v1/sandboxes/$A2"
check "GET shows it released, without counters" \
	eval 'status 200 && is "d[\"state\"]" released && is "\"counters\" in d" false'
acme POST "/v1/sandboxes/$A2/exec" "${JS[@]}" '{"argv":["true"]}'
check "exec in a released sandbox -> 409 sandbox-ended" eval 'status 409 && is "d[\"error\"][\"code\"]" sandbox-ended'
# shellcheck disable=SC2086
check "its processes are gone" pids_gone "$A2" $A2_PIDS
check "its cgroups are gone" test -z "$(cg_dirs "$A2")"
check "its link ($(ifname_of "$A2_ADDR")) is gone" link_gone "$A2_ADDR"
# A connection no door serves (port 9 of its gateway, the proxy variables
# set aside) is refused at once, and counted as the sandbox's.
acme POST "/v1/sandboxes/$A1/exec" "${JS[@]}" '{"argv":["sh","-c","unset http_proxy HTTP_PROXY; wget -q -O /dev/null http://10.88.1.1:9/ 2>&1; true"],"timeout_seconds":30}'
check "a connection no door serves is refused at once (wget: $(j 'd["stdout"].strip()'))" \
	eval 'status 200 && is "\"Connection refused\" in d[\"stdout\"]" true'
acme GET "/v1/sandboxes/$A1"
check "a live claim shows counters, refused packets too" \
	eval 'status 200 && is "sorted(d[\"counters\"])" "[\"refused_packets\", \"rx_bytes\", \"rx_packets\", \"tx_bytes\", \"tx_packets\"]" &&
		is "d[\"counters\"][\"refused_packets\"] >= 1" true'
op GET /metrics
check "/metrics counts the lane's refusals (sluice_fleet_refused_total{lane=\"egress\"})" \
	eval 'status 200 && grep -Eq "^sluice_fleet_refused_total\{lane=\"egress\"\} [1-9][0-9]*$" <<<"$B"'
acme DELETE "/v1/sandboxes/$A1"
check "A1 released" is 'd["result"]' released
other DELETE "/v1/sandboxes/$O1"
check "other releases its claim" is 'd["result"]' released

# --- 12. the CLI ----------------------------------------------------------------
if [ ! -x "$CLI" ]; then
	fail "the CLI is built ($CLI)"
else
	# The CLI's output is kept for the canary scan (lib.sh's kept).
	S() { kept "sluice $1" "$CLI" --api "unix:$SOCK" "$@"; }
	CID=$(S claim -q --pool warm 2>"$E2E_TMP/cli.err") || true
	check "sluice claim -q prints an id ($CID)" eval '[[ $CID =~ ^sbx-[0-9a-f]{16}$ ]]'
	echo "$CID" >>"$SEEN"
	check "sluice ls lists it" eval 'S ls | grep -q -- "$CID"'
	check "sluice --json ls is the API's JSON" \
		eval 'S --json ls | "$PY" -c "import json,sys; sys.exit(0 if \"$CID\" in [s[\"id\"] for s in json.load(sys.stdin)[\"sandboxes\"]] else 1)"'
	check "sluice show ID" eval 'S show "$CID" | grep -q -- "$CID"'
	out=$(S exec "$CID" -- sh -c 'echo out; exit 7' 2>/dev/null) && rc=0 || rc=$?
	check "sluice exec ID -- sh -c 'echo out; exit 7' prints out and exits 7 ($out, $rc)" \
		test "$out $rc" = "out 7"
	out=$(S exec "$CID" -- sh -c 'echo err >&2' 2>&1 >/dev/null) && rc=0 || rc=$?
	check "sluice exec: stderr to stderr ($out, $rc)" test "$out $rc" = "err 0"
	head -c 300K /dev/urandom >"$E2E_TMP/cpin"
	check "sluice cp localfile ID:/tmp/x" S cp "$E2E_TMP/cpin" "$CID:/tmp/x"
	check "sluice cp ID:/tmp/x back" S cp "$CID:/tmp/x" "$E2E_TMP/cpout"
	check "... the round trip keeps every byte" cmp -s "$E2E_TMP/cpin" "$E2E_TMP/cpout"
	out=$(echo piped | S cp - "$CID:/tmp/p" && S cp "$CID:/tmp/p" -) || true
	check "sluice cp with - both ways ($out)" test "$out" = piped
	S cp "$CID:/tmp/nothing-here" "$E2E_TMP/none" 2>"$E2E_TMP/cli.err" && rc=0 || rc=$?
	check "sluice cp of a missing file exits 1 with a message ($(head -c 100 "$E2E_TMP/cli.err"))" \
		eval '[ $rc = 1 ] && [ -s "$E2E_TMP/cli.err" ]'
	check "sluice rm ID" quiet S rm "$CID"
	check "the CLI's claim is released" eval 'op GET "/v1/sandboxes/$CID"; is "d[\"state\"]" released'
	S show sbx-0000000000000000 >/dev/null 2>"$E2E_TMP/cli.err" && rc=0 || rc=$?
	check "sluice show of an unknown id exits 1" eval '[ $rc = 1 ] && [ -s "$E2E_TMP/cli.err" ]'
	check "sluice pools get shows both pools" eval 'S pools get | grep -q warm && S pools get | grep -q cold'
	cat > "$E2E_TMP/bad-pools.yaml" <<'YAML'
pools:
  - { name: warm, template: busybox, lane: egress, policy: nosuch, warm: 5, warm_max: 1 }
YAML
	S pools apply "$E2E_TMP/bad-pools.yaml" >"$E2E_TMP/cli.out" 2>"$E2E_TMP/cli.err" && rc=0 || rc=$?
	check "sluice pools apply with errors shows the pools[...] paths and exits 1 (rc $rc: $(tr '\n' ' ' <"$E2E_TMP/cli.err" | head -c 200))" \
		eval '[ $rc = 1 ] && grep -q "pools\[0\]" "$E2E_TMP/cli.err"'
	cat > "$E2E_TMP/pools.yaml" <<'YAML'
pools:
  - { name: warm, template: busybox, lane: egress, policy: wide, warm: 2, warm_max: 4, ttl: { default_seconds: 600, max_seconds: 3600 } }
  - { name: cold, template: busybox, lane: egress, policy: wide, warm: 0, warm_max: 0, ttl: { default_seconds: 300, max_seconds: 900 } }
YAML
	check "sluice pools apply file.yaml (warm back to wide)" quiet S pools apply "$E2E_TMP/pools.yaml"
	op GET /v1/pools
	check "... and the API shows it" is '[p["policy"] for p in d["pools"]]' '["wide", "wide"]'
	check "sluice info" eval 'S info | grep -q warm'
	S bogus >/dev/null 2>&1 && rc=0 || rc=$?
	check "a bad command: exit 2" test "$rc" = 2
	TC() { kept "sluice $2 (a tenant)" T env SLUICE_TOKEN="$1" "$CLI" --api "http://127.0.0.1:$PORT" "${@:2}"; }
	TID=$(TC "$ACME" claim -q --pool cold 2>"$E2E_TMP/cli.err") || true
	echo "$TID" >>"$SEEN"
	check "SLUICE_TOKEN over TCP: acme claims ($TID)" eval '[[ $TID =~ ^sbx-[0-9a-f]{16}$ ]]'
	check "... and sees it in sluice ls" eval 'TC "$ACME" ls | grep -q -- "$TID"'
	# other's sluice ls works and lists other's own claim, and not acme's.
	OTID=$(TC "$OTHER" claim -q --pool cold 2>"$E2E_TMP/cli.err") || true
	echo "$OTID" >>"$SEEN"
	out=$(TC "$OTHER" ls 2>"$E2E_TMP/cli.err") && rc=0 || rc=$?
	check "... other's sluice ls exits 0 and lists other's own claim ($OTID) but not acme's (rc $rc)" \
		eval '[ $rc = 0 ] && [[ $OTID =~ ^sbx- ]] && [[ $out == *"$OTID"* ]] && [[ $out != *"$TID"* ]]'
	out=$(TC "$OTHER" --json ls 2>"$E2E_TMP/cli.err") && rc=0 || rc=$?
	check "... and its --json ls is exactly [$OTID] (rc $rc)" \
		eval '[ $rc = 0 ] && [ "$(B=$out j "[s[\"id\"] for s in d[\"sandboxes\"]]")" = "[\"$OTID\"]" ]'
	quiet TC "$OTHER" rm "$OTID" || true
	TC "$OTHER" show "$TID" >/dev/null 2>"$E2E_TMP/cli.err" && rc=0 || rc=$?
	check "... other's sluice show of it exits 1 with not-found, as for an id nobody has (rc $rc: $(head -c 200 "$E2E_TMP/cli.err"))" \
		eval '[ $rc = 1 ] && grep -q "not-found: no sandbox $TID" "$E2E_TMP/cli.err"'
	out=$(TC "$ACME" exec "$TID" -- sh -c 'echo $FOO; exit 0' 2>&1) && rc=0 || rc=$?
	check "... acme execs in it" test "$rc" = 0
	TC "$ACME" pools get >/dev/null 2>"$E2E_TMP/cli.err" && rc=0 || rc=$?
	check "... a tenant's sluice pools get exits 1 (operator-only)" \
		eval '[ $rc = 1 ] && grep -qi "operator" "$E2E_TMP/cli.err"'
	kept "sluice ls (no token)" T env -u SLUICE_TOKEN "$CLI" --api "http://127.0.0.1:$PORT" ls >/dev/null 2>"$E2E_TMP/cli.err" && rc=0 || rc=$?
	check "... without SLUICE_TOKEN over TCP: exit 1, unauthorized (rc $rc: $(head -c 200 "$E2E_TMP/cli.err"))" \
		eval '[ $rc = 1 ] && grep -q "unauthorized" "$E2E_TMP/cli.err" &&
		      grep -qF "set \$SLUICE_TOKEN to the operator token" "$E2E_TMP/cli.err"'
	check "... acme's sluice rm" quiet TC "$ACME" rm "$TID"
fi

# --- 13. 100 cycles, 10 at a time ---------------------------------------------
op GET /v1/sandboxes
check "before the cycles: no live claim" is 'len(d["sandboxes"])' 0
cycle() {
	local i=$1 b id
	local -a c=(curl -sS -m 60 --unix-socket "$SOCK" -H "Authorization: Bearer $BULK")
	b=$("${c[@]}" -H 'Content-Type: application/json' -d '{"pool":"warm","ttl_seconds":300}' \
		-w ' %{http_code}' http://sluice/v1/claims 2>&1) || { echo "fail $i: claim: $b"; return 0; }
	keep_text "cycle $i: claim" "$b"
	[[ $b == *' 201' ]] || { echo "fail $i: claim: $b"; return 0; }
	id=$(grep -o '"id": *"sbx-[0-9a-f]*"' <<<"$b" | grep -o 'sbx-[0-9a-f]*')
	echo "id $id"
	b=$("${c[@]}" -H 'Content-Type: application/json' -d "{\"argv\":[\"echo\",\"cycle-$i\"]}" \
		"http://sluice/v1/sandboxes/$id/exec" 2>&1) || { echo "fail $i: exec: $b"; return 0; }
	keep_text "cycle $i: exec" "$b"
	grep -Eq "\"stdout\": ?\"cycle-$i\\\\n\"" <<<"$b" && grep -Eq '"exit_code": ?0[,}]' <<<"$b" ||
		{ echo "fail $i: exec: $b"; return 0; }
	b=$("${c[@]}" -X DELETE "http://sluice/v1/sandboxes/$id" 2>&1) || { echo "fail $i: rm: $b"; return 0; }
	keep_text "cycle $i: rm" "$b"
	grep -Eq '"result": ?"released"' <<<"$b" || { echo "fail $i: rm: $b"; return 0; }
	echo "ok $i"
}
export -f cycle keep_text
export SOCK BULK E2E_ANS
fds0=$(ls "/proc/$PID/fd" | wc -l)
t0=$(date +%s)
seq 100 | xargs -P 10 -I{} bash -c 'cycle {}' >"$E2E_TMP/cycles.out" 2>&1 || true
secs=$(($(date +%s) - t0))
grep '^id ' "$E2E_TMP/cycles.out" | cut -d' ' -f2 >>"$SEEN"
nok=$(grep -c '^ok ' "$E2E_TMP/cycles.out" || true)
check "100 claim/exec/release cycles, 10 at a time, all succeed ($nok in ${secs}s$(grep -m3 '^fail' "$E2E_TMP/cycles.out" | tr '\n' ' ' | head -c 400))" \
	test "$nok" = 100
check "... no id was given twice (over the whole test: $(grep -c . "$SEEN"))" \
	test -z "$(sort "$SEEN" | uniq -d)"
op GET /v1/sandboxes
check "... no live claim is left" is 'len(d["sandboxes"])' 0
check "... GET /v1/info: claimed 0 in every pool" \
	eval 'op GET /v1/info; is "[p[\"claimed\"] for p in d[\"pools\"]]" "[0, 0]"'
check "... the pools settle" settled
nwarm=$(warm_total)
nslv=$(slv_links) || nslv="(ip failed)"
check "... slv links in the fleet == warm sandboxes ($nslv == $nwarm)" \
	eval 'n=$(slv_links) && [[ $nwarm =~ ^[0-9]+$ ]] && [ "$n" = "$nwarm" ]'
check "... no sandbox cgroups beyond the warm ones ($(our_cgroup_count) == $nwarm)" test "$(our_cgroup_count)" = "$nwarm"
check "... the daemon is still running" kill -0 "$PID"
fds1=$(ls "/proc/$PID/fd" | wc -l)
check "... the daemon holds no more fds than before (an ended claim keeps none: $fds0 -> $fds1)" \
	test "$fds1" -le $((fds0 + 2))

# --- 13b. a client that leaves ends its command -------------------------------
claim unix "$BULK" '{"pool":"warm"}'
GID=$ID
# client_leaves N STREAM: an exec of "sleep N" whose client leaves (its
# curl is ended) once the command runs in the sandbox; then the next exec
# counts the "sleep N" that ps (which must run, and list the sandbox's
# PID 1, its agent) shows there. The next command is served (it would
# wait 30 s behind the sleep, then be refused as busy, if the first still
# held the sandbox). (The kill reaches the agent with that next command:
# until then the left command runs on; see claims.sh.)
client_leaves() {
	bg LEFT unix "$BULK" POST "/v1/sandboxes/$GID/exec" "${JS[@]}" "{\"argv\":[\"sleep\",\"$1\"]$2}"
	check "sleep $1 runs in the sandbox (its cgroup)" wait_cg "$GID" "^sleep $1\$" 20
	kill "$BG_PID" 2>/dev/null || true
	wait "$BG_PID" 2>/dev/null || true
	req unix "$BULK" POST "/v1/sandboxes/$GID/exec" -m 40 "${JS[@]}" \
		"{\"argv\":[\"sh\",\"-c\",\"ps -o args >/tmp/ps || exit 97; grep -q '^sluice-agent ' /tmp/ps || exit 98; grep -c '^sleep $1\$' /tmp/ps; exit 0\"]}"
}
client_leaves 37 ',"stream":true'
check "a streamed exec whose client left: the next exec is served" status 200
check "... and the left command was killed (ps ran, listed the agent, and no 'sleep 37')" \
	eval 'is "d[\"exit_code\"]" 0 && is "d[\"stdout\"]" 0'
check "... nor is it in the sandbox's cgroup" eval '! cg_has "$GID" "^sleep 37$"'
client_leaves 38 ''
check "a buffered exec whose client left: the next exec is served" status 200
check "... and the command was killed too (ps ran, listed the agent, and no 'sleep 38')" \
	eval 'is "d[\"exit_code\"]" 0 && is "d[\"stdout\"]" 0'
check "... nor is it in the sandbox's cgroup" eval '! cg_has "$GID" "^sleep 38$"'
req unix "$BULK" DELETE "/v1/sandboxes/$GID"
check "... released" status 200

# --- 14. a clean stop -----------------------------------------------------------
CGS=$(our_cgroups | sort -u)
SPIDS=$(for id in $CGS; do cg_pids "$id"; done)
check "before the stop: the warm sandboxes' processes are found ($(echo $SPIDS | wc -w))" test -n "$SPIDS"
# A command in flight does not hold the stop up.
claim unix "$BULK" '{"pool":"warm"}'
bg INFLIGHT unix "$BULK" POST "/v1/sandboxes/$ID/exec" "${JS[@]}" '{"argv":["sleep","50"],"stream":true}'
check "a command is in flight at the stop (sleep 50 in $ID)" wait_cg "$ID" '^sleep 50$' 20
CGS=$(printf '%s\n%s\n' "$CGS" "$ID" | sort -u)
kill -TERM "$PID"
rc=
for _ in $(seq 300); do
	kill -0 "$PID" 2>/dev/null || { wait "$PID" && rc=0 || rc=$?; break; }
	sleep 0.1
done
check "SIGTERM: the daemon exits 0 (rc ${rc:-still running after 30 s})" test "$rc" = 0
left=
for id in $CGS; do [ -n "$(cg_dirs "$id")" ] && left="$left $id"; done
check "no sandbox cgroup is left ($left)" test -z "$left"
left=
for id in $CGS; do
	# shellcheck disable=SC2086
	pids_gone "$id" $SPIDS 2>/dev/null || left="$left $id"
done
check "no sandbox process is left ($left)" test -z "$left"
check "fleet_teardown: the fleet namespace is removed" test ! -e "/run/netns/$FLEET"
check "the API socket is removed" test ! -e "$SOCK"

# --- the CA's files are kept, and a bad key refuses the start ----------------------
check "after the stop the CA is unchanged (fingerprint)" \
	test "$(openssl x509 -in "$E2E_TMP/ca.pem" -noout -fingerprint -sha256)" = "$CA_FP"
# start_refused NAME: the daemon with $E2E_TMP/refuse.yaml exits non-zero,
# its log naming the key file.
start_refused() {
	local rc=0
	timeout 30 nsenter --net="/run/netns/$gw" "$SLUICED" --config "$E2E_TMP/refuse.yaml" \
		2>"$E2E_TMP/refuse.log" || rc=$?
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "certs: CA key $E2E_TMP/bad/ca.key" "$E2E_TMP/refuse.log"
}
mkdir -p "$E2E_TMP/bad"
cp "$E2E_TMP/ca.pem" "$E2E_TMP/bad/ca.pem"
cp "$E2E_TMP/ca.key" "$E2E_TMP/bad/ca.key"
sed -e "s|^certs: .*|certs: { ca_cert: $E2E_TMP/bad/ca.pem, ca_key: $E2E_TMP/bad/ca.key }|" \
	"$E2E_TMP/sluice.yaml" >"$E2E_TMP/refuse.yaml"
chmod 0640 "$E2E_TMP/bad/ca.key"
check "a group-readable CA key refuses the start, naming the file" start_refused
check "... and says why" grep -q "readable or writable by group or others" "$E2E_TMP/refuse.log"
check "... without a word of the key" eval '! grep -q "PRIVATE KEY" "$E2E_TMP/refuse.log"'
chmod 0600 "$E2E_TMP/bad/ca.key"
mv "$E2E_TMP/bad/ca.key" "$E2E_TMP/bad/real.key"
ln -s "$E2E_TMP/bad/real.key" "$E2E_TMP/bad/ca.key"
check "a CA key that is a symlink refuses the start" start_refused
check "... the real key was not rewritten" cmp -s "$E2E_TMP/bad/real.key" "$E2E_TMP/ca.key"

[ "$E2E_FAILS" = 0 ] || dump_log
finish
