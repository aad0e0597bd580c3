#!/usr/bin/env bash
# sandbox.sh: real `ns` sandboxes through sluice-sandbox, from both
# templates: exit codes, limits, what a guest can and cannot see, its one
# network link, and 100 start/stop cycles that leave nothing behind.
# Everything it makes lives under $E2E_TMP and in namespaces it creates.
. "$(dirname "$0")/lib.sh"

SBX=${SL_BUILD:?SL_BUILD must name the build tree}/sandbox/sluice-sandbox
[ -x "$SBX" ] || { echo "no $SBX: build first" >&2; exit 1; }
CACHE=$E2E_TMP/templates
STATE=$E2E_TMP/state
ID=sle2e$$
run() { "$SBX" --cache "$CACHE" --state "$STATE" --id "$ID" "$@"; }

quiet() { "$@" >/dev/null 2>&1; }
cg_left() { find /sys/fs/cgroup -maxdepth 6 -type d -name "$ID*" 2>/dev/null | wc -l; }
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
set +e
run -t host -- sh -c 'touch /usr/bin/sl-evil' 2>/dev/null
rc=$?
set -e
check "host: /usr is read-only" [ $rc != 0 ]
check "host: nothing was written to /usr" [ ! -e /usr/bin/sl-evil ]

# ---- what the guest sees ---------------------------------------------
sleep 300 &
marker=$!
track $marker
out=$(run -- ps -o pid,args)
check "guest: PID 1 is the agent" grep -Eq '^ *1 .*sluice-agent' <<<"$out"
check "guest: no host process in ps" bash -c "! grep -q 'sleep 300' <<<\"\$1\"" _ "$out"
n=$(run -- sh -c 'ls /proc | grep -c "^[0-9]"')
check "guest: only its own processes in /proc ($n)" [ "$n" -le 4 ]
echo secret >"$E2E_TMP/secret"
set +e
run -- cat "$E2E_TMP/secret" >/dev/null 2>&1
rc=$?
run -t host -- cat "$E2E_TMP/secret" >/dev/null 2>&1
rch=$?
set -e
check "guest: host files outside its root are invisible" [ $rc != 0 ]
check "guest (host template): same" [ $rch != 0 ]
check "guest: cannot mount" bash -c "! $(printf '%q ' "$SBX") --cache $CACHE --state $STATE -- mount -t tmpfs none /mnt 2>/dev/null"
check "guest: cannot change its host name" bash -c "! $(printf '%q ' "$SBX") --cache $CACHE --state $STATE -- hostname evil 2>/dev/null"
caps=$(run -- sh -c 'grep CapBnd /proc/self/status')
check "guest: bounding set reduced ($caps)" [ "$caps" = "CapBnd:	00000000000004fb" ]
out=$(run -- sh -c 'grep NoNewPrivs /proc/self/status; grep Seccomp: /proc/self/status')
check "guest: no_new_privs and seccomp filter" bash -c "grep -q 'NoNewPrivs:.1' <<<\"\$1\" && grep -q 'Seccomp:.2' <<<\"\$1\"" _ "$out"

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
# The peer is ours to wire: give it the gateway address and listen.
( run --netns "$NS" --peer sbxe2e0 --addr 10.88.1.7/24 --gw 10.88.1.1 -- \
	sh -c 'sleep 0.5; echo from-guest | nc -w 3 10.88.1.1 7777' >"$E2E_TMP/nc.out" 2>&1 ) &
for _ in $(seq 50); do ip -n "$NS" link show sbxe2e0 >/dev/null 2>&1 && break; sleep 0.02; done
ip -n "$NS" addr add 10.88.1.1/24 dev sbxe2e0
got=$(timeout 5 ip netns exec "$NS" busybox nc -l -p 7777 || true)
wait $! || true
check "net link: TCP from the guest reaches the peer namespace" [ "$got" = from-guest ]
check "net link: the peer is gone after stop" bash -c "! ip -n $NS link show sbxe2e0 2>/dev/null"

# ---- limits -----------------------------------------------------------
set +e
run -m 64 -- sh -c 'x=$(head -c 200000000 /dev/zero | tr "\0" a); echo ${#x}' >/dev/null 2>&1
rc=$?
run -p 64 -- sh -c 'for i in $(seq 100); do sleep 5 & done; wait' >/dev/null 2>&1
rcp=$?
run -- sh -c 'for i in $(seq 100); do sleep 0.2 & done; wait' >/dev/null 2>&1
rcp0=$?
set -e
check "memory 64 MiB: a 200 MB allocation is killed (status $rc)" [ $rc = 137 ]
check "pids 64: 100 processes cannot start (status $rcp)" [ $rcp != 0 ]
check "no pids limit: 100 processes can" [ $rcp0 = 0 ]

# ---- 100 start/stop cycles --------------------------------------------
mounts_before=$(grep -c . /proc/self/mountinfo)
t0=$(date +%s%N)
lat=$(run --netns "$NS" --peer sbxe2e0 --repeat 100 -- true 2>&1 | tail -n 1)
t1=$(date +%s%N)
echo "100 cycles in $(((t1 - t0) / 1000000)) ms; $lat"
check "100 cycles: all ran" grep -q '^sluice-sandbox: 100 sandbox' <<<"$lat"
check "100 cycles: no process left in our cgroups" [ "$(procs_left)" = 0 ]
check "100 cycles: no cgroup directory left" [ "$(cg_left)" = 0 ]
check "100 cycles: no mount left" [ "$(grep -c . /proc/self/mountinfo)" = "$mounts_before" ]
check "100 cycles: no overlay of ours in the host's mount table" \
	bash -c "! grep -q '$STATE' /proc/self/mountinfo"
check "100 cycles: no state left" [ -z "$(ls -A "$STATE")" ]
check "100 cycles: no link left in the peer namespace" \
	[ "$(ip -n "$NS" -o link | wc -l)" = 1 ]
# A surviving guest process would still see its overlay, named by our
# state directory, in its mountinfo.
check "100 cycles: no guest process left" \
	[ "$(grep -l "$STATE" /proc/[0-9]*/mountinfo 2>/dev/null | wc -l)" = 0 ]

finish
