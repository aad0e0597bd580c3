#!/usr/bin/env bash
# sandbox.sh: real `ns` sandboxes through sluice-sandbox, from both
# templates: exit codes, limits, what a guest can and cannot see, its user
# namespace (root inside, an unprivileged host uid of its own outside,
# idmapped templates, no host secret or host path in sight), its one
# network link, the agent inside them (timeouts, signals, 10 MiB of
# output, a 50 MiB file written and read back), sandboxes that outlive
# the process that started them and are adopted again (detach, adopt,
# the agent's listen socket refusing guests, stop, ESRCH, sweep), and
# 100 start/stop cycles that leave nothing behind.
# Everything it makes lives under $E2E_TMP and in namespaces it creates.
# shellcheck disable=SC2016 # the checks' single-quoted expressions are eval'd later
. "$(dirname "$0")/lib.sh"

SBX=${SL_BUILD:?SL_BUILD must name the build tree}/sandbox/sluice-sandbox
[ -x "$SBX" ] || { echo "no $SBX: build first" >&2; exit 1; }
CACHE=$E2E_TMP/templates
STATE=$E2E_TMP/state
ID=sle2e$$
# An id space of this test's own, past the daemons' default one, so that
# the checks below that look for processes of guest uids see only ours
# (other tests' sandboxes may run at the same time).
IDBASE=$((1073741824 + 8192 * 65536))
IDRANGES=64
IDEND=$((IDBASE + IDRANGES * 65536))
RUN=("$SBX" --cache "$CACHE" --state "$STATE" --idmap-base "$IDBASE" --idmap-ranges "$IDRANGES" --id "$ID")
run() { "${RUN[@]}" "$@"; }

quiet() { "$@" >/dev/null 2>&1; }
# Mounts in the host's table, but for other tests' `ip netns` mounts
# (tests may run side by side; ours are made before the count).
# Host mounts of ours: under this test's directories or named by its ids
# (a count of every host mount would see other tests' and daemons').
host_mounts() { grep -F -e "$E2E_TMP" -e "$ID" /proc/self/mountinfo | grep -vc ' /run/netns/' || true; }
cg_left() { find /sys/fs/cgroup -maxdepth 8 -type d -name "$ID*" 2>/dev/null | wc -l; }
# until_ok SECONDS COMMAND...: polls COMMAND until it succeeds. The bound
# is a safety net against a hang, not an assertion about time.
until_ok() {
	local i n=$(($1 * 20))
	shift
	for ((i = 0; i < n; i++)); do
		"$@" 2>/dev/null && return 0
		sleep 0.05
	done
	"$@"
}
# says FILE PATTERN: FILE (a command's output) has a line matching PATTERN
# (extended regex); shows the file when not.
says() {
	grep -Eq -- "$2" "$1" && return 0
	echo "    no /$2/ in: $(head -c 400 "$1" | tr '\n' '|')" >&2
	return 1
}
# On any exit (ctest's SIGTERM included, through lib.sh's trap): the
# detached sandboxes of the durability section (--sweep, their own state
# and cgroup parent), then any other sandbox of this test still running,
# found by its cgroups (named $ID or $ID-N; never by process name), as a
# sluice-sandbox ended by SIGKILL leaves its sandbox behind.
e2e_cleanup_extra() {
	local p
	if [ -n "${DRUN+x}" ]; then "${DRUN[@]}" --sweep >/dev/null 2>&1 || true; fi
	find /sys/fs/cgroup -maxdepth 8 -type d \( -name "$ID" -o -name "$ID-[0-9]*" \) \
		-exec cat {}/cgroup.procs \; 2>/dev/null | while read -r p; do kill -9 "$p" 2>/dev/null || true; done
	for _ in $(seq 50); do
		[ -z "$(find /sys/fs/cgroup -maxdepth 8 -type d \( -name "$ID" -o -name "$ID-[0-9]*" \) \
			-exec cat {}/cgroup.procs \; 2>/dev/null | head -1)" ] && break
		sleep 0.1
	done
	find /sys/fs/cgroup -maxdepth 8 -depth -type d \( -name "$ID" -o -name "$ID-[0-9]*" \) \
		-exec rmdir {} \; 2>/dev/null || true
}
procs_left() { grep -l "$ID" /proc/[0-9]*/cgroup 2>/dev/null | wc -l; }

# ---- exec and exit codes, busybox template ---------------------------
out=$(run -- echo hello)
check "busybox: echo" [ "$out" = hello ]
set +e
run -- sh -c 'exit 3'
rc=$?
run -- sh -c 'kill -9 $$'
rc9=$?
set -e
check "busybox: exit status 3 comes back" [ $rc = 3 ]
check "busybox: death by SIGKILL is 137" [ $rc9 = 137 ]
out=$(run -e GREETING=hi -C /work --file /etc/motd=welcome --hostname box1 -- \
	sh -c 'echo $GREETING $(pwd) $(cat /etc/motd) $(hostname)')
check "busybox: env, cwd, files, hostname ($out)" [ "$out" = "hi /work welcome box1" ]

# ---- host template: the host's programs, read-only ------------------
out=$(run -t host -- python3 -c 'print(6*7)')
check "host: python3 runs" [ "$out" = 42 ]
check "host: git runs" quiet run -t host -- git --version
check "host: curl runs" quiet run -t host -- curl --version
# The guest ran (it says so first) and touch failed for the reason
# expected, EROFS, not for any other.
set +e
run -t host -- sh -c 'echo ran; touch /usr/bin/sl-evil' >"$E2E_TMP/out" 2>&1
rc=$?
set -e
check "host: /usr is read-only: EROFS (status $rc)" \
	eval '[ $rc = 1 ] && says "$E2E_TMP/out" "^ran$" &&
		says "$E2E_TMP/out" "sl-evil.*Read-only file system"'
check "host: nothing was written to /usr (by a guest that ran)" \
	eval 'says "$E2E_TMP/out" "^ran$" && [ ! -e /usr/bin/sl-evil ]'

# ---- what the guest sees ---------------------------------------------
sleep 300 &
marker=$!
track $marker
out=$(run -- ps -o pid,args)
check "guest: PID 1 is the agent" grep -Eq '^ *1 .*sluice-agent' <<<"$out"
check "guest: no host process in ps" bash -c "! grep -q 'sleep 300' <<<\"\$1\"" _ "$out"
n=$(run -- sh -c 'ls /proc | grep -c "^[0-9]"')
check "guest: only its own processes in /proc ($n)" [ "$n" -le 4 ]
# Each refusal below is shown to come from a guest that ran (it prints
# "ran" first) and to be the one expected (ENOENT, EPERM), not any failure.
echo secret >"$E2E_TMP/hostfile"
for tpl in busybox host; do
	set +e
	run -t $tpl -- sh -c "echo ran; cat '$E2E_TMP/hostfile'" >"$E2E_TMP/out" 2>&1
	rc=$?
	set -e
	check "guest ($tpl): host files outside its root are invisible: ENOENT (status $rc)" \
		eval '[ $rc = 1 ] && says "$E2E_TMP/out" "^ran$" && ! grep -qx secret "$E2E_TMP/out" &&
			says "$E2E_TMP/out" "$E2E_TMP/hostfile.*No such file or directory"'
done
set +e
run -- sh -c 'echo ran; mount -t tmpfs none /mnt; echo "status $?"; grep -c " /mnt " /proc/self/mountinfo' \
	>"$E2E_TMP/out" 2>&1
set -e
check "guest: cannot mount: EPERM ($(tr '\n' '|' <"$E2E_TMP/out"))" \
	eval 'says "$E2E_TMP/out" "^ran$" && says "$E2E_TMP/out" "^mount: permission denied" &&
		says "$E2E_TMP/out" "^status 1$" && says "$E2E_TMP/out" "^0$"'
set +e
run --hostname box2 -- sh -c 'echo ran; hostname evil; echo "status $?, now $(hostname)"' >"$E2E_TMP/out" 2>&1
set -e
check "guest: cannot change its host name: EPERM ($(tr '\n' '|' <"$E2E_TMP/out"))" \
	eval 'says "$E2E_TMP/out" "^ran$" && says "$E2E_TMP/out" "sethostname: Operation not permitted" &&
		says "$E2E_TMP/out" "^status 1, now box2$"'
caps=$(run -- sh -c 'grep CapBnd /proc/self/status')
check "guest: bounding set reduced ($caps)" [ "$caps" = "CapBnd:	00000000000004fb" ]
out=$(run -- sh -c 'grep NoNewPrivs /proc/self/status; grep Seccomp: /proc/self/status')
check "guest: no_new_privs and seccomp filter" bash -c "grep -q 'NoNewPrivs:.1' <<<\"\$1\" && grep -q 'Seccomp:.2' <<<\"\$1\"" _ "$out"

# ---- the user namespace: guest root is nobody on the host ---------------
# Guest ids 0..65535 map to a host range of the sandbox's own, one of the
# id space's (sandbox/idmap.c; this test's, above): its root is an
# unprivileged host uid.
out=$(run -- sh -c 'id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map')
read -r g_uid g_gid m0 mfirst msize _ <<<"$(tr '\n' ' ' <<<"$out")"
check "userns: the guest is root inside: id -u 0, id -g 0 ($g_uid $g_gid)" \
	eval '[ "$g_uid" = 0 ] && [ "$g_gid" = 0 ]'
check "userns: its uid and gid maps are one range of 65536 from the id space ($m0 $mfirst $msize)" \
	eval '[ "$m0" = 0 ] && [ "$msize" = 65536 ] && [ "$mfirst" -ge $IDBASE ] && [ "$mfirst" -lt $IDEND ] &&
		[ $(((mfirst - IDBASE) % 65536)) = 0 ] && [ "$(echo "$out" | sed -n 4p | tr -s " ")" = " 0 $mfirst 65536" ]'
out=$(run -- sh -c 'stat -c "%u %g" /bin/busybox /etc/passwd /')
check "userns: the busybox template (idmapped) and the root are owned by root inside ($(echo $out))" \
	[ "$(echo $out)" = "0 0 0 0 0 0" ]
out=$(run -t host -- sh -c 'stat -c "%u %g" /usr/bin /etc/ssl/certs')
check "userns: the host template's binds (idmapped) are owned by root inside ($(echo $out))" \
	[ "$(echo $out)" = "0 0 0 0" ]
# Guest root's capabilities are its user namespace's: a host file owned by
# a host uid outside its map is nobody's inside, and DAC_OVERRIDE does
# not open it. The bind is shown to work first: a file it may read.
mkdir -p "$E2E_TMP/pub"
echo public >"$E2E_TMP/pub/pub.txt"
echo private >"$E2E_TMP/pub/other.txt"
chown 3000000:3000000 "$E2E_TMP/pub/other.txt"
chmod 0600 "$E2E_TMP/pub/other.txt"
set +e
run -b "$E2E_TMP/pub:/pub:ro" -- sh -c 'echo ran; cat /pub/pub.txt; stat -c "owner %u:%g" /pub/other.txt;
	cat /pub/other.txt' >"$E2E_TMP/out" 2>&1
rc=$?
set -e
check "userns: guest root cannot read a host file of an unmapped uid: EACCES (status $rc)" \
	eval '[ $rc = 1 ] && says "$E2E_TMP/out" "^ran$" && says "$E2E_TMP/out" "^public$" &&
		says "$E2E_TMP/out" "^owner 65534:65534$" && says "$E2E_TMP/out" "other.txt.*Permission denied" &&
		! grep -qx private "$E2E_TMP/out"'
# The network namespace belongs to the host's user namespace, where the
# guest has no capability: ports below 1024 are open to it by the
# namespace's own sysctl, and nothing else of the network is its to change.
out=$(run -t host -- sh -c 'cat /proc/sys/net/ipv4/ip_unprivileged_port_start
	python3 -c "import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 80)); print(\"bound 80\")"
	ip link set lo mtu 1300 2>&1; echo "status $?"' 2>&1 || true)
check "userns: port 80 can be bound in the guest ($(echo $out | cut -c1-60))" \
	eval 'grep -qx 0 <<<"$out" && grep -qx "bound 80" <<<"$out"'
check "userns: ... but its network is not the guest's to change: EPERM (ip link set)" \
	eval 'grep -qi "operation not permitted" <<<"$out" && grep -qx "status 2" <<<"$out"'

# ---- the host template shows no host secret -------------------------------
# Each refusal is shown against something the guest does see (the host's
# certificates, its programs), and only for what the host has.
for f in /etc/ssl/private /etc/shadow /etc/gshadow /etc/ssh/ssh_host_ed25519_key \
	/etc/ssh/ssh_host_rsa_key /etc/sluice /var/lib/sluice; do
	if [ ! -e "$f" ]; then
		echo "    (the host has no $f: nothing to hide)"
		continue
	fi
	set +e
	run -t host -- sh -c "echo ran; ls /etc/ssl/certs | grep -c . >/dev/null && echo certs; ls -d '$f'" \
		>"$E2E_TMP/out" 2>&1
	rc=$?
	set -e
	check "host template: $f (the host has it) is not there: ENOENT (status $rc)" \
		eval '[ $rc != 0 ] && says "$E2E_TMP/out" "^ran$" && says "$E2E_TMP/out" "^certs$" &&
			says "$E2E_TMP/out" "$f.*No such file or directory"'
done
for d in /root /home; do
	h=$(ls -A "$d" 2>/dev/null | head -3 | tr '\n' ' ')
	out=$(run -t host -- sh -c "echo ran; ls -A '$d'")
	if [ -n "$h" ]; then
		check "host template: $d is an empty directory of its own, not the host's ($h...)" \
			[ "$out" = ran ]
	else
		echo "    (the host's $d is empty: nothing to hide)"
	fi
done
# A bind that would show the daemon's own directories (here: the one
# holding --cache and --state) hides them under an empty read-only tmpfs;
# a bind of something else is shown to work beside it.
set +e
run -t host -b "$E2E_TMP:/host:ro" -b "$E2E_TMP/pub:/pub:ro" -- \
	sh -c 'echo ran; cat /pub/pub.txt; grep -c " /host tmpfs ro," /proc/mounts; ls -A /host | wc -l;
		cat /host/secret' >"$E2E_TMP/out" 2>&1
rc=$?
set -e
check "a bind of the daemon's own directory shows an empty tmpfs (status $rc: $(tr '\n' '|' <"$E2E_TMP/out"))" \
	eval '[ $rc = 1 ] && says "$E2E_TMP/out" "^ran$" && says "$E2E_TMP/out" "^public$" &&
		[ "$(sed -n 3,4p "$E2E_TMP/out" | tr "\n" " ")" = "1 0 " ] &&
		says "$E2E_TMP/out" "/host/secret: No such file or directory"'

# No host path in the guest's mount table: the overlay's layers are named
# relative to the state directory, binds by their guest mount point. Its
# root, /usr and /proc lines are there (the table was read).
for tpl in busybox host; do
	run -t $tpl -- sh -c 'cat /proc/mounts; echo ==; cat /proc/self/mountinfo' >"$E2E_TMP/mounts"
	leaked=$(grep -nF -e "$E2E_TMP" -e "$CACHE" -e "$STATE" -e /work/ -e /var/lib/sluice \
		-e /run/sluice -e "$SL_BUILD" "$E2E_TMP/mounts" | head -3 || true)
	check "guest ($tpl): its mount table is read: the root overlay and /proc are in it" \
		eval 'says "$E2E_TMP/mounts" "^sluice / overlay .*lowerdir=lower,upperdir=upper,workdir=work" &&
			says "$E2E_TMP/mounts" "^proc /proc proc "'
	check "guest ($tpl): /proc/mounts and mountinfo name no host path (${leaked:-none})" \
		[ -z "$leaked" ]
done
check "guest (host): ... the template's binds are there, idmapped" \
	says "$E2E_TMP/mounts" " /usr ext4 ro,.*idmapped|/usr .* ro,.*idmapped"

# ---- network ----------------------------------------------------------
out=$(run -- cat /proc/net/dev)
check "net none: only lo" bash -c "[ \$(grep -c ':' <<<\"\$1\") = 1 ] && grep -q 'lo:' <<<\"\$1\"" _ "$out"
netns_new NS sbx
out=$(run --netns "$NS" --peer sbxe2e0 --addr 10.88.1.7/24 --gw 10.88.1.1 --mtu 1400 -- \
	sh -c 'ip -o link; ip route')
links=$(grep -c '^[0-9]*:' <<<"$out" || true)
check "net link: exactly lo and eth0 ($links links)" [ "$links" = 2 ]
check "net link: mtu 1400 on eth0" grep -q 'eth0.*mtu 1400' <<<"$out"
check "net link: default route via the gateway" grep -q 'default via 10.88.1.1 dev eth0' <<<"$out"
# The peer is ours to wire: give it the gateway address and listen. The
# guest tries until the listener is there (a bounded retry, not a sleep).
"${RUN[@]}" --netns "$NS" --peer sbxe2e0 --addr 10.88.1.7/24 --gw 10.88.1.1 -- \
	sh -c 'for i in $(seq 100); do echo from-guest | nc -w 3 10.88.1.1 7777 2>/dev/null && exit 0; sleep 0.1; done; exit 1' \
	>"$E2E_TMP/nc.out" 2>&1 &
NCJOB=$!
track $NCJOB
check "(the guest's link appears in the peer namespace)" until_ok 30 quiet ip -n "$NS" link show sbxe2e0
ip -n "$NS" addr add 10.88.1.1/24 dev sbxe2e0
got=$(timeout 30 ip netns exec "$NS" busybox nc -l -p 7777 || true)
wait $NCJOB || true
check "net link: TCP from the guest reaches the peer namespace" [ "$got" = from-guest ]
check "net link: the peer is gone after stop" bash -c "! ip -n $NS link show sbxe2e0 2>/dev/null"

# ---- limits -----------------------------------------------------------
set +e
run -m 64 -- sh -c 'echo ran; x=$(head -c 200000000 /dev/zero | tr "\0" a); echo ${#x}' >"$E2E_TMP/mem.out" 2>&1
rc=$?
run -p 64 -- sh -c 'echo ran; for i in $(seq 100); do sleep 5 & done; wait' >"$E2E_TMP/pids.out" 2>&1
rcp=$?
run -- sh -c 'for i in $(seq 100); do sleep 0.2 & done; wait; echo all ran' >"$E2E_TMP/pids0.out" 2>&1
rcp0=$?
set -e
check "memory 64 MiB: a 200 MB allocation is killed, SIGKILL (status $rc)" \
	eval '[ $rc = 137 ] && says "$E2E_TMP/mem.out" "^ran$" &&
		says "$E2E_TMP/mem.out" "command killed by signal 9 " && ! grep -q "^200000000$" "$E2E_TMP/mem.out"'
check "pids 64: 100 processes cannot start, fork fails with EAGAIN (status $rcp)" \
	eval '[ $rcp = 2 ] && says "$E2E_TMP/pids.out" "^ran$" &&
		says "$E2E_TMP/pids.out" "can.t fork: Resource temporarily unavailable"'
check "no pids limit: 100 processes can" eval '[ $rcp0 = 0 ] && says "$E2E_TMP/pids0.out" "^all ran$"'


# ---- the agent in real sandboxes, both templates ------------------------
# Everything goes through sluice-agent as the guest's PID 1: the command,
# its output and the files (the agent's write and read ops, not a bind).
head -c $((50 << 20)) /dev/urandom >"$E2E_TMP/big.in"
big_sum=$(sha256sum <"$E2E_TMP/big.in" | cut -d' ' -f1)
for tpl in busybox host; do
	# A silent command past its timeout is killed, and said to be (how
	# long it took is bench/'s business; only that it was not early is
	# checked here).
	set +e
	run -t $tpl --timeout-ms 300 -- sleep 100 >/dev/null 2>"$E2E_TMP/err"
	rc=$?
	set -e
	took=$(sed -n 's/.*command timed out after \([0-9]*\) ms$/\1/p' "$E2E_TMP/err")
	check "$tpl: sleep 100 with a 300 ms timeout: status 124 ($rc)" [ $rc = 124 ]
	check "$tpl: ... reported as timed out, after ${took:-?} ms, not before 300" \
		eval '[ -n "$took" ] && [ "$took" -ge 300 ]'

	# A death by signal is a signal, not an exit status that looks like one.
	set +e
	run -t $tpl -- sh -c 'kill -TERM $$' 2>"$E2E_TMP/err"
	rc=$?
	run -t $tpl -- sh -c 'kill -SEGV $$' 2>"$E2E_TMP/err2"
	rcs=$?
	run -t $tpl -- sh -c 'exit 143' 2>"$E2E_TMP/err3"
	rce=$?
	set -e
	check "$tpl: SIGTERM: status 143 ($rc), reported as signal 15" \
		bash -c "[ $rc = 143 ] && grep -q 'killed by signal 15 ' '$E2E_TMP/err'"
	check "$tpl: SIGSEGV: status 139 ($rcs), reported as signal 11" \
		bash -c "[ $rcs = 139 ] && grep -q 'killed by signal 11 ' '$E2E_TMP/err2'"
	check "$tpl: exit 143: status 143 ($rce), no signal reported" \
		bash -c "[ $rce = 143 ] && ! grep -q 'signal' '$E2E_TMP/err3'"

	# 10 MiB of output streams out whole: the guest hashes what it
	# sends (on stderr), the host what it got.
	run -t $tpl -- sh -c 'head -c 10485760 /dev/urandom >/tmp/out &&
		sha256sum /tmp/out >&2 && cat /tmp/out' >"$E2E_TMP/out" 2>"$E2E_TMP/err"
	got=$(wc -c <"$E2E_TMP/out")
	sent=$(cut -d' ' -f1 "$E2E_TMP/err")
	check "$tpl: 10 MiB of stdout: $got bytes" [ "$got" = 10485760 ]
	check "$tpl: ... and the same SHA-256 on both sides" \
		[ "$(sha256sum <"$E2E_TMP/out" | cut -d' ' -f1)" = "$sent" ]

	# 50 MiB written into the sandbox's own root and read back.
	rm -f "$E2E_TMP/big.out"
	out=$(run -t $tpl --put "$E2E_TMP/big.in:/big.bin" --get "/big.bin:$E2E_TMP/big.out" \
		-- sha256sum /big.bin)
	check "$tpl: 50 MiB put: the guest sees the same SHA-256" \
		[ "${out%% *}" = "$big_sum" ]
	check "$tpl: 50 MiB get: read back with the same SHA-256" \
		[ "$(sha256sum <"$E2E_TMP/big.out" | cut -d' ' -f1)" = "$big_sum" ]
done
check "nothing was written through to the template or the host" \
	bash -c "! find '$CACHE' -name big.bin | grep -q . && [ ! -e /big.bin ]"
rm -f "$E2E_TMP/big.in" "$E2E_TMP/big.out" "$E2E_TMP/out"

# ---- durability: sandboxes outlive their starter and are adopted -------
# Their own state directory and cgroup parent, so that --sweep can only
# ever see what this section made; the trap sweeps them on any exit
# (e2e_cleanup_extra, above).
DSTATE=$E2E_TMP/dstate
CGP=sluice-e2e-$$
D=${ID}d
DRUN=("$SBX" --cache "$CACHE" --state "$DSTATE" --idmap-base "$IDBASE" --idmap-ranges "$IDRANGES" --cgroup-parent "$CGP")
drun() { "${DRUN[@]}" "$@"; }
# Processes in the sandbox's cgroup (found by its id, never by name).
cg_procs() { grep -lE "/$1\$" /proc/[0-9]*/cgroup 2>/dev/null | wc -l; }
# cg_runs ID COMM: a process named COMM is in the sandbox's cgroup.
cg_runs() {
	local f p
	for f in $(grep -lE "/$1\$" /proc/[0-9]*/cgroup 2>/dev/null); do
		p=${f#/proc/}
		p=${p%/cgroup}
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] && return 0
	done
	return 1
}
# term_pending PID: a SIGTERM waits in the process's pending sets (the
# agent blocks it and reads it from a signalfd: pending until it is read).
term_pending() {
	local k v
	while read -r k v; do
		case $k in
		SigPnd: | ShdPnd:) (((0x$v >> 14) & 1)) && return 0 ;;
		esac
	done <"/proc/$1/status"
	return 1
}
cg_dirs() { find /sys/fs/cgroup -maxdepth 8 -type d -path "*/$CGP/$1" 2>/dev/null | wc -l; }
# present ID: while the sandbox runs, the cgroup directories and the state
# directory the "nothing left" checks below look for are there (so those
# checks are shown to find them when they exist).
present() {
	local n
	n=$(cg_dirs "$1")
	[ "$n" -ge 1 ] && [ -d "$DSTATE/$1" ] && return 0
	echo "    $1: $n cgroup directories under $CGP, state: $(ls -A "$DSTATE" 2>&1 | tr '\n' ' ')" >&2
	return 1
}
jget() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
gone_within() { # gone_within ID SECONDS: no process left in its cgroup
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		[ "$(cg_procs "$1")" = 0 ] && return 0
		sleep 0.05
	done
	return 1
}
set +e
drun --id "${D}1" --detach >"$E2E_TMP/d1.json"
rc=$?
set -e
check "detach: exits 0 and prints the saved sandbox ($rc)" \
	bash -c "[ $rc = 0 ] && grep -q '\"backend\":\"ns\"' '$E2E_TMP/d1.json'"
p1=$(jget "$E2E_TMP/d1.json" pid)
check "detach: the sandbox runs after sluice-sandbox exited (pid $p1)" \
	bash -c "kill -0 $p1 && [ \$(grep -lE '/${D}1\$' /proc/$p1/cgroup | wc -l) = 1 ]"
check "detach: its PID 1 leads its own session (no terminal signal reaches it)" \
	[ "$(ps -o sid= -p "$p1" | tr -d ' ')" = "$p1" ]
check "detach: its cgroup and state directories are there" present "${D}1"
# Its processes run as the first uid of its own host range, never as 0;
# what the guest writes in its layer is that uid's on the host.
idmap_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["idmap"]["first"])' "$1"; }
ids_of() { awk '$1 == "Uid:" || $1 == "Gid:" { printf "%s %s %s %s ", $2, $3, $4, $5 }' "/proc/$1/status"; }
u1=$(idmap_of "$E2E_TMP/d1.json")
check "userns: the record names the sandbox's host range ($u1)" \
	eval '[ "$u1" -ge $IDBASE ] && [ "$u1" -lt $IDEND ] && [ $(((u1 - IDBASE) % 65536)) = 0 ]'
ids1=$(ids_of "$p1")
check "userns: its PID 1, the agent, runs as host uid and gid $u1, not 0 ($ids1)" \
	[ "$ids1" = "$u1 $u1 $u1 $u1 $u1 $u1 $u1 $u1 " ]
check "userns: the registry holds its range for its state directory" \
	[ "$(readlink "/run/sluice/idmap/$u1")" = "$DSTATE/${D}1" ]
out=$(drun --adopt "$E2E_TMP/d1.json" --keep -- sh -c 'echo made >/made-by-guest; mkdir -p /var/guest;
	echo in >/var/guest/f; id -u')
f1=$DSTATE/${D}1/upper/made-by-guest
check "userns: a file the guest (id -u $out) made is in its writable layer on the host" \
	eval '[ "$out" = 0 ] && [ "$(cat "$f1")" = made ]'
owners=$(stat -c %u:%g "$f1" "$DSTATE/${D}1/upper/var" "$DSTATE/${D}1/upper/var/guest" \
	"$DSTATE/${D}1/upper/var/guest/f" "$DSTATE/${D}1/upper" | sort -u | tr '\n' ' ')
check "userns: ... it, the directories it made or copied up and the layer's root are $u1:$u1 on the host ($owners)" \
	[ "$owners" = "$u1:$u1 " ]
drun --adopt "$E2E_TMP/d1.json" --keep -- sh -c 'tail -f /dev/null >/dev/null 2>&1 </dev/null &'
check "(a guest process of its own runs beside the agent)" until_ok 30 cg_runs "${D}1" tail
uids=$(for f in $(grep -lE "/${D}1\$" /proc/[0-9]*/cgroup 2>/dev/null); do
	p=${f#/proc/}
	awk '$1 == "Uid:" { print $2 }' "/proc/${p%/cgroup}/status" 2>/dev/null
done | sort -u | tr '\n' ' ')
check "userns: every process of the sandbox runs as host uid $u1 ($uids)" [ "$uids" = "$u1 " ]
out=$(drun --adopt "$E2E_TMP/d1.json" --keep -- echo hi)
check "adopt: echo hi runs in it ($out)" [ "$out" = hi ]
out=$(drun --adopt "$E2E_TMP/d1.json" --keep -- sh -c 'echo again; ls /run/sluice')
check "adopt again: a second reconnect works ($out)" [ "$out" = "again
agent.sock" ]
check "adopt: the same process all along" [ "$(jget "$E2E_TMP/d1.json" pid)" = "$p1" ] 
# A guest cannot end its own agent: SIGTERM from inside is ignored. The
# signal is sent (kill says so), the agent reads it (it is no longer
# pending), and the agent is still there and serving.
out=$(drun --adopt "$E2E_TMP/d1.json" --keep -- sh -c 'kill -TERM 1 && echo sent' 2>&1 || true)
check "a guest sends SIGTERM to its PID 1 ($out)" [ "$out" = sent ]
check "... the agent has taken it (no SIGTERM pending)" until_ok 30 eval '! term_pending "$p1"'
out=$(drun --adopt "$E2E_TMP/d1.json" --keep -- echo still 2>&1 || true)
check "... and ignored it: the same agent still serves ($out)" \
	eval '[ "$out" = still ] && kill -0 "$p1"'

# The SIGKILL of a process holding an adopted stream ends nothing. (Not
# through drun: $! must be sluice-sandbox itself, not a subshell.)
# Once the command runs, the holder is killed; the agent, seeing its host
# gone, ends the command (so it has handled the loss) and stays. (The
# command would outlive every bound below on its own.)
"${DRUN[@]}" --adopt "$E2E_TMP/d1.json" --keep -- sleep 3600 >/dev/null 2>&1 &
holder=$!
track $holder
check "(the adopted command runs in the sandbox)" until_ok 30 cg_runs "${D}1" sleep
kill -9 $holder
wait $holder 2>/dev/null || true
check "SIGKILL of the adopting process: the agent ends the command it started" \
	until_ok 30 eval '! cg_runs "${D}1" sleep'
check "... and the sandbox still runs" kill -0 "$p1"
out=$(drun --adopt "$E2E_TMP/d1.json" --keep -- echo back)
check "... and is adopted again ($out)" [ "$out" = back ]

# A guest process cannot take the agent, with the host there or away.
cat >"$E2E_TMP/guest.py" <<'PY'
import socket, struct
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(3)
try:
    s.connect("/run/sluice/agent.sock")
    p = b'{"version": 1}'
    s.sendall(struct.pack(">IBI", len(p), 1, 0) + p)
    d = s.recv(100)
    print("closed" if d == b"" else "answered")
except socket.timeout:
    print("timeout")
except OSError as e:
    print("closed" if e.errno in (104, 32) else "error %s" % e)
PY
drun -t host --id "${D}2" --detach >"$E2E_TMP/d2.json"
p2=$(jget "$E2E_TMP/d2.json" pid)
check "(d2 detached: its cgroup and state directories are there)" present "${D}2"
u2=$(idmap_of "$E2E_TMP/d2.json")
check "userns: d2, started while d1 runs (adopted by other processes since), has a range of its own ($u2, not $u1)" \
	eval '[ "$u2" -ge $IDBASE ] && [ "$u2" != "$u1" ] && [ "$(ids_of "$p2")" = "$u2 $u2 $u2 $u2 $u2 $u2 $u2 $u2 " ]'
out=$(drun --adopt "$E2E_TMP/d2.json" --keep --put "$E2E_TMP/guest.py:/guest.py" -- \
	python3 /guest.py)
check "guest connecting to the agent while the host is there: refused ($out)" [ "$out" = closed ]
# The guest waits until the host is away as the agent sees it: its PID 1
# then holds one socket only (its listener; a host adds its connection).
# The host reads the answer through /proc/PID/root, without reconnecting.
cat >"$E2E_TMP/away.py" <<'PY'
import os, time
def sockets():
    n = 0
    for fd in os.listdir("/proc/1/fd"):
        try:
            n += os.readlink("/proc/1/fd/" + fd).startswith("socket:")
        except OSError:
            pass
    return n
for _ in range(1200):           # a safety net, not a timing
    if sockets() == 1:
        break
    time.sleep(0.05)
else:
    print("the host never left (%d sockets)" % sockets())
    raise SystemExit
exec(open("/guest.py").read())
PY
drun --adopt "$E2E_TMP/d2.json" --keep --put "$E2E_TMP/away.py:/away.py" -- \
	sh -c '(python3 /away.py >/tmp/away.tmp 2>&1; mv /tmp/away.tmp /tmp/away.out) >/dev/null 2>&1 </dev/null &'
check "(the guest's attempt while the host is away has ended)" until_ok 60 test -e "/proc/$p2/root/tmp/away.out"
out=$(cat "/proc/$p2/root/tmp/away.out" 2>&1 || true)
check "guest connecting while the host is away: refused ($out)" [ "$out" = closed ]

# A record that does not match the process: ESRCH, and nothing changes.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["start_time"]+=1; print(json.dumps(d))' \
	"$E2E_TMP/d2.json" >"$E2E_TMP/d2-edited.json"
set +e
drun --adopt "$E2E_TMP/d2-edited.json" -- echo no 2>/dev/null
rc=$?
drun --adopt <(echo '{"backend":"ns","version":1}') 2>/dev/null
rcm=$?
set -e
check "adopt with an edited start time: ESRCH, exit 121 ($rc)" [ $rc = 121 ]
check "adopt of a malformed record: exit 122 ($rcm)" [ $rcm = 122 ]
check "... and the sandbox was left running" kill -0 "$p2"

# Adopt and stop removes everything; the record then names nothing.
drun --adopt "$E2E_TMP/d1.json"
check "adopt + stop: no process left in its cgroup" gone_within "${D}1" 5
check "adopt + stop: no cgroup directory left" [ "$(cg_dirs "${D}1")" = 0 ]
check "adopt + stop: no state directory left (the others' still there)" \
	eval '[ -d "$DSTATE/${D}2" ] && [ ! -e "$DSTATE/${D}1" ]'
check "adopt + stop: its host range is free again (d2's still held)" \
	eval '[ ! -e "/run/sluice/idmap/$u1" ] && [ "$(readlink "/run/sluice/idmap/$u2")" = "$DSTATE/${D}2" ]'
set +e
drun --adopt "$E2E_TMP/d1.json" 2>/dev/null
rc=$?
set -e
check "adopting a stopped sandbox: ESRCH, exit 121 ($rc)" [ $rc = 121 ]
check "forget of a stopped sandbox: nothing left to do (0)" drun --forget "$E2E_TMP/d1.json"
set +e
drun --forget "$E2E_TMP/d2.json" 2>/dev/null
rc=$?
set -e
check "forget of a running sandbox: refused, exit 123 ($rc)" [ $rc = 123 ]

# A link: an adopted sandbox's stop deletes its peer too.
drun --id "${D}5" --netns "$NS" --peer sbxe2e5 --addr 10.88.5.7/24 --detach >"$E2E_TMP/d5.json"
check "detach with a link: the peer is up" quiet ip -n "$NS" link show sbxe2e5
check "(d5 detached: its cgroup and state directories are there)" present "${D}5"
out=$(drun --adopt "$E2E_TMP/d5.json" -- ip -o -4 addr show eth0)
check "adopt + stop with a link: the guest kept its address" grep -q 10.88.5.7 <<<"$out"
check "adopt + stop with a link: the peer is gone" bash -c "! ip -n $NS link show sbxe2e5 2>/dev/null"
check "adopt + stop with a link: its cgroup and state directories are gone" \
	eval '[ -d "$DSTATE" ] && [ "$(cg_dirs "${D}5")" = 0 ] && [ ! -e "$DSTATE/${D}5" ]'

# Sweep: of two more detached sandboxes, keep one (and d2): the other ends.
drun --id "${D}3" --detach >"$E2E_TMP/d3.json"
drun --id "${D}4" --detach >"$E2E_TMP/d4.json"
p4=$(jget "$E2E_TMP/d4.json" pid)
check "(d3 and d4 detached: their cgroup and state directories are there)" \
	eval 'present "${D}3" && present "${D}4"'
u3=$(idmap_of "$E2E_TMP/d3.json")
u4=$(idmap_of "$E2E_TMP/d4.json")
check "userns: d2, d3 and d4, alive at once, have three ranges ($u2 $u3 $u4)" \
	eval '[ "$(printf "%s\n" "$u2" "$u3" "$u4" | sort -u | grep -c .)" = 3 ]'
n=$(drun --sweep --keep-id "${D}3" --keep-id "${D}2")
check "sweep --keep-id: ended exactly one ($n)" [ "$n" = 1 ]
check "sweep: the other one's processes are gone" gone_within "${D}4" 5
check "sweep: ... its cgroups and state too" \
	bash -c "[ \$(find /sys/fs/cgroup -maxdepth 8 -type d -path '*/$CGP/${D}4' | wc -l) = 0 ] &&
		 [ -d '$DSTATE/${D}3' ] && [ ! -e '$DSTATE/${D}4' ]"
out=$(drun --adopt "$E2E_TMP/d3.json" --keep -- echo kept)
check "sweep: ... and its host range is free ($u4; the kept ones' still held)" \
	eval '[ ! -e "/run/sluice/idmap/$u4" ] && [ -L "/run/sluice/idmap/$u3" ] && [ -L "/run/sluice/idmap/$u2" ]'
check "sweep: the kept one still runs ($out)" [ "$out" = kept ]
check "sweep: d2 was kept too" kill -0 "$p2"
# The patterns of the "nothing left" checks below, shown to find d2 and
# d3 while they run.
check "(while d2 and d3 run, the checks below see them: processes, state, cgroups)" \
	bash -c "[ \$(grep -lE '/${D}[0-9]\$' /proc/[0-9]*/cgroup 2>/dev/null | wc -l) -ge 2 ] &&
		 [ -d '$DSTATE' ] && [ -n \"\$(ls -A '$DSTATE')\" ] &&
		 [ \$(find /sys/fs/cgroup -maxdepth 8 -type d -path '*/$CGP*' | wc -l) -ge 2 ]"
drun --adopt "$E2E_TMP/d3.json"
drun --adopt "$E2E_TMP/d2.json"
check "durability: nothing left (processes)" \
	bash -c "[ \$(grep -lE '/${D}[0-9]\$' /proc/[0-9]*/cgroup 2>/dev/null | wc -l) = 0 ]"
check "durability: nothing left (host ranges)" \
	bash -c "! find /run/sluice/idmap -maxdepth 1 -type l -lname '$DSTATE/*' | grep -q ."
check "durability: nothing left (state, cgroups)" \
	bash -c "[ -d '$DSTATE' ] && [ -z \"\$(ls -A '$DSTATE')\" ] && [ \$(find /sys/fs/cgroup -maxdepth 8 -type d -path '*/$CGP*' | wc -l) = 0 ]"

# ---- 100 start/stop cycles --------------------------------------------
mounts_before=$(host_mounts)
# First, one sandbox made as the cycles make theirs (same id, same link),
# left running: each "nothing left" check below is shown to see it while
# it is there. (Not through run: $! must be sluice-sandbox itself, whose
# SIGTERM stops its sandbox.) The host's own mount table is the exception:
# a sandbox's mounts are in its own namespace, so nothing of it is ever
# expected there.
"${RUN[@]}" --netns "$NS" --peer sbxe2e0 -- sleep 120 >"$E2E_TMP/ctl.out" 2>&1 &
CTLJOB=$!
track $CTLJOB
# A guest process runs as a host uid of the sandboxes' id space (its
# mount table names no path of ours any more).
guest_procs() {
	cat /proc/[0-9]*/status 2>/dev/null |
		awk -v lo=$IDBASE -v hi=$IDEND '$1 == "Uid:" && $2 >= lo && $2 < hi { n++ } END { print n + 0 }'
}
running_seen() {
	[ "$(procs_left)" -ge 1 ] && [ "$(cg_left)" -ge 1 ] && [ "$(guest_procs)" -ge 1 ] &&
		[ -d "$STATE" ] && [ -n "$(ls -A "$STATE")" ] && [ "$(ip -n "$NS" -o link | wc -l)" = 2 ]
}
check "(a running sandbox is seen: processes, cgroups, guest uids, state, link)" until_ok 30 running_seen
echo "    seen: $(procs_left) processes, $(cg_left) cgroup directories, $(guest_procs) guest processes"
kill $CTLJOB
wait $CTLJOB && rc=0 || rc=$?
# SIGTERM ends the run then and there: the sandbox is stopped, the
# command (sleep 120) killed, not waited for.
check "SIGTERM to sluice-sandbox stops its sandbox: exit 125, \"interrupted\" (rc $rc: $(tail -n 1 "$E2E_TMP/ctl.out"))" \
	eval '[ "$rc" = 125 ] && grep -q "^sluice-sandbox: interrupted$" "$E2E_TMP/ctl.out"'
t0=$(date +%s%N)
lat=$(run --netns "$NS" --peer sbxe2e0 --repeat 100 -- true 2>&1 | tail -n 1)
t1=$(date +%s%N)
echo "100 cycles in $(((t1 - t0) / 1000000)) ms; $lat"
check "100 cycles: all ran" grep -q '^sluice-sandbox: 100 sandbox' <<<"$lat"
check "100 cycles: no process left in our cgroups" [ "$(procs_left)" = 0 ]
check "100 cycles: no cgroup directory left" [ "$(cg_left)" = 0 ]
check "100 cycles: no mount left" [ "$(host_mounts)" = "$mounts_before" ]
check "100 cycles: no overlay of ours in the host's mount table" \
	bash -c "! grep -q '$STATE' /proc/self/mountinfo"
check "100 cycles: no state left" eval '[ -d "$STATE" ] && [ -z "$(ls -A "$STATE")" ]'
check "100 cycles: no link left in the peer namespace" \
	[ "$(ip -n "$NS" -o link | wc -l)" = 1 ]
# A surviving guest process, even out of its cgroup, would still run as a
# uid of the id space; and every range is free again.
check "100 cycles: no guest process left" [ "$(guest_procs)" = 0 ]
check "100 cycles: no host range of ours still held" \
	bash -c "! find /run/sluice/idmap -maxdepth 1 -type l -lname '$STATE/*' | grep -q ."

finish
