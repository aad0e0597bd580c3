# shellcheck shell=bash disable=SC2034 # sourced: sets variables for the tests
# api_lib.sh: talking to the daemon's REST API from a test. Source it after
# lib.sh with SOCK (the API's unix socket), PY and, for "tcp" requests, T
# (runs a command in the daemon's namespace) and PORT set.
# req VIA TOKEN METHOD PATH [curl args...]: one request, over "tcp" (in the
# daemon's namespace) or "unix"; TOKEN empty sends none. Sets ST (the
# status), B (the body); the headers are in $HDR.
HDR=$E2E_TMP/hdr
BODY=$E2E_TMP/body
ST='' B=''
req() {
	local via=$1 tok=$2 m=$3 p=$4
	shift 4
	local -a c=(curl -sS -m 60 -o "$BODY" -D "$HDR" -w '%{http_code}' -X "$m")
	[ -n "$tok" ] && c+=(-H "Authorization: Bearer $tok")
	if [ "$via" = tcp ]; then
		ST=$(T "${c[@]}" "$@" "http://127.0.0.1:$PORT$p" 2>"$E2E_TMP/curl.err") || true
	else
		ST=$("${c[@]}" --unix-socket "$SOCK" "$@" "http://sluice$p" 2>"$E2E_TMP/curl.err") || true
	fi
	if grep -qi '^content-type: application/octet-stream' "$HDR" 2>/dev/null; then
		B=    # bytes: read them from $BODY
	else
		B=$(cat "$BODY" 2>/dev/null || true)
	fi
}
JS=(-H 'Content-Type: application/json' --data-binary)
# The operator, on the unix socket.
op() { req unix "" "$@"; }

# is EXPR VALUE: j EXPR prints VALUE (echoes what it got otherwise).
is() {
	local got
	got=$(j "$1")
	[ "$got" = "$2" ] && return 0
	echo "    $1 = $got (wanted $2); status $ST; body: ${B:0:400}" >&2
	return 1
}
status() { # WANTED
	[ "$ST" = "$1" ] && return 0
	echo "    status $ST (wanted $1); body: ${B:0:400}" >&2
	return 1
}
header() { grep -iq "^$1" "$HDR"; }
quiet() { "$@" >/dev/null 2>&1; }

# The link name of an address in the fleet: slv + the address in hex.
ifname_of() {
	local IFS=.
	# shellcheck disable=SC2086
	set -- $1
	printf 'slv%02x%02x%02x%02x' "$1" "$2" "$3" "$4"
}
link_gone() { ! ip -n "$FLEET" link show "$(ifname_of "$1")" >/dev/null 2>&1; }
slv_links() { ip -n "$FLEET" -o link show 2>/dev/null | grep -c ': slv' || true; }

# A sandbox's cgroup directories (one per v1 hierarchy, or one on v2),
# found by its id only, and the processes in them.
cg_dirs() { find /sys/fs/cgroup -maxdepth 8 -type d -name "$1" 2>/dev/null; }
cg_pids() {
	local d
	for d in $(cg_dirs "$1"); do cat "$d/cgroup.procs" 2>/dev/null || true; done | sort -u
}
# No process of these pids is still in a cgroup named ID.
pids_gone() { # ID PID...
	local id=$1 p
	shift
	for p in "$@"; do
		grep -qs "/$id\$" "/proc/$p/cgroup" && { echo "    $p still in $id" >&2; return 1; }
	done
	return 0
}

# Every claim id this test was ever given.
SEEN=$E2E_TMP/ids
: >"$SEEN"
# claim VIA TOKEN JSON: POST /v1/claims; sets ID and ADDR on a 201.
ID='' ADDR=''
claim() {
	req "$1" "$2" POST /v1/claims "${JS[@]}" "$3"
	ID='' ADDR=''
	if [ "$ST" = 201 ]; then
		ID=$(j 'd["id"]')
		ADDR=$(j 'd["address"]')
		echo "$ID" >>"$SEEN"
	fi
}

# info_pool NAME FIELD: the field of a pool in GET /v1/info.
info_pool() {
	local b
	b=$(curl -sS -m 10 --unix-socket "$SOCK" http://sluice/v1/info 2>/dev/null) || return 1
	"$PY" -c 'import json,sys
for p in json.loads(sys.argv[1])["pools"]:
    if p["name"] == sys.argv[2]: print(p[sys.argv[3]])' "$b" "$1" "$2"
}
# wait_warm NAME N SECONDS
wait_warm() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		[ "$(info_pool "$1" warm 2>/dev/null)" = "$2" ] && return 0
		sleep 0.1
	done
	echo "    pool $1: warm $(info_pool "$1" warm) after $3 s (wanted $2)" >&2
	return 1
}
