# shellcheck shell=bash disable=SC2034 # sourced: sets variables for the tests
# api_lib.sh: talking to the daemon's REST API from a test. Source it after
# lib.sh with SOCK (the API's unix socket), PY and, for "tcp" requests, gw
# (the daemon's network namespace) and PORT set.
# req VIA TOKEN METHOD PATH [curl args...]: one request, over "tcp" (in the
# daemon's namespace) or "unix"; TOKEN empty sends none. Sets ST (the
# status), B (the body); the headers are in $HDR, the body in $BODY: new
# files under $E2E_TMP/answers/ for each answer (lib.sh's keep_path), so
# that the canary scan reads every one (bg's and info_pool's too).
HDR='' BODY=''
ST='' B=''
req() {
	local k
	keep_path k "$1 $3 $4"
	HDR=$k.hdr BODY=$k.body
	req_cmd "$@"
	: >"$HDR"
	ST=$("${RQ[@]}" 2>"$E2E_TMP/curl.err") || true
	if grep -qi '^content-type: application/octet-stream' "$HDR" 2>/dev/null; then
		B=    # bytes: read them from $BODY
	else
		B=$(cat "$BODY" 2>/dev/null || true)
	fi
}
# req_cmd VIA TOKEN METHOD PATH [curl args...]: the command req runs, in
# RQ (the body to $BODY, the headers to $HDR, the status on stdout).
RQ=()
req_cmd() {
	local via=$1 tok=$2 m=$3 p=$4
	shift 4
	RQ=(curl -sS -m 60 -o "$BODY" -D "$HDR" -w '%{http_code}' -X "$m")
	[ -n "$tok" ] && RQ+=(-H "Authorization: Bearer $tok")
	if [ "$via" = tcp ]; then
		RQ=(nsenter --net="/run/netns/$gw" "${RQ[@]}" "$@" "http://127.0.0.1:$PORT$p")
	else
		RQ+=(--unix-socket "$SOCK" "$@" "http://sluice$p")
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
# Fails (prints nothing) unless the address is a dotted IPv4 address.
ifname_of() {
	local re='^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$'
	if ! [[ $1 =~ $re ]] || ((10#${BASH_REMATCH[1]} > 255 || 10#${BASH_REMATCH[2]} > 255 ||
		10#${BASH_REMATCH[3]} > 255 || 10#${BASH_REMATCH[4]} > 255)); then
		echo "    not an IPv4 address: '$1'" >&2
		return 1
	fi
	printf 'slv%02x%02x%02x%02x' "$((10#${BASH_REMATCH[1]}))" "$((10#${BASH_REMATCH[2]}))" \
		"$((10#${BASH_REMATCH[3]}))" "$((10#${BASH_REMATCH[4]}))"
}
# link_gone ADDR: the fleet's namespace exists and the address's link is
# not in it (a bad address or a missing namespace is no evidence: fails).
link_gone() {
	local n
	n=$(ifname_of "$1") || return 1
	[ -e "/run/netns/$FLEET" ] || { echo "    no namespace /run/netns/$FLEET" >&2; return 1; }
	! ip -n "$FLEET" link show dev "$n" >/dev/null 2>&1
}
# link_there ADDR: the address's link is in the fleet's namespace.
link_there() {
	local n
	n=$(ifname_of "$1") || return 1
	ip -n "$FLEET" link show dev "$n" >/dev/null 2>&1 && return 0
	echo "    no link $n in $FLEET" >&2
	return 1
}
# The number of slv links in the fleet; fails if they cannot be listed.
slv_links() {
	local o
	o=$(ip -n "$FLEET" -o link show) || return 1
	grep -c ': slv' <<<"$o" || true
}

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
	keep_text "unix GET /v1/info" "$b"
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

# refused STATUS CODE: the answer is an error with this status, this code
# in the JSON body and exactly this code in the Sluice-Reason header.
refused() {
	status "$1" || return 1
	is 'd["error"]["code"]' "$2" || return 1
	grep -Eiq "^Sluice-Reason: $2"$'\r?$' "$HDR" && return 0
	echo "    Sluice-Reason: $(grep -i '^Sluice-Reason:' "$HDR" | tr -d '\r' || echo none) (wanted $2)" >&2
	return 1
}

# The command lines of the processes in a sandbox's cgroup (pid, then the
# arguments joined by spaces), found from the host.
cg_cmds() {
	local p
	for p in $(cg_pids "$1"); do
		printf '%s %s\n' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | sed 's/ $//')"
	done
}
# cg_has ID REGEX: a process of the sandbox runs a command matching REGEX.
cg_has() { cg_cmds "$1" | cut -d' ' -f2- | grep -Eq -- "$2"; }
# wait_cg ID REGEX [SECONDS] / wait_cg_not ID REGEX [SECONDS]: until one
# does, or none does (5 s by default).
wait_cg() {
	local i
	for ((i = 0; i < ${3:-5} * 20; i++)); do cg_has "$1" "$2" && return 0; sleep 0.05; done
	echo "    no /$2/ in $1 after ${3:-5} s: $(cg_cmds "$1" | tr '\n' ';')" >&2
	return 1
}
wait_cg_not() {
	local i
	for ((i = 0; i < ${3:-5} * 20; i++)); do cg_has "$1" "$2" || return 0; sleep 0.05; done
	echo "    still /$2/ in $1 after ${3:-5} s: $(cg_cmds "$1" | tr '\n' ';')" >&2
	return 1
}
# init_pid ID: the host's pid of the sandbox's PID 1 (its agent).
init_pid() {
	local p
	for p in $(cg_pids "$1"); do
		awk '/^NSpid:/ { exit !($NF == 1 && NF > 2) }' "/proc/$p/status" 2>/dev/null &&
			{ echo "$p"; return 0; }
	done
	return 1
}

# bg NAME VIA TOKEN METHOD PATH [curl args...]: req in the background;
# BG_PID (tracked) is curl's own pid, so that killing it is the client
# leaving. bg_done NAME [SECONDS] waits for it and sets ST, B, $HDR and
# $BODY from its answer (ST empty if it did not end).
bg() {
	local n=$1 k
	shift
	keep_path k "bg $n: $1 $3 $4"
	printf -v "BGK_$n" %s "$k"
	local HDR=$k.hdr BODY=$k.body
	: >"$HDR"
	req_cmd "$@"
	"${RQ[@]}" >"$E2E_TMP/bg.$n.st" 2>"$E2E_TMP/bg.$n.err" &
	BG_PID=$!
	track "$BG_PID"
	printf -v "BG_$n" %s "$BG_PID"
}
bg_done() {
	local n=$1 pid i k
	pid=$(eval "echo \$BG_$n")
	for ((i = 0; i < ${2:-60} * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	ST='' B=''
	if kill -0 "$pid" 2>/dev/null; then
		echo "    request $n has not ended after ${2:-60} s" >&2
		return 1
	fi
	wait "$pid" 2>/dev/null || true
	ST=$(cat "$E2E_TMP/bg.$n.st" 2>/dev/null || true)
	k=BGK_$n
	HDR=${!k}.hdr BODY=${!k}.body
	B=$(cat "$BODY" 2>/dev/null || true)
}
