#!/usr/bin/env bash
# sandbox.sh: sandboxes through sluice-sandbox, in a scratch directory.
# `ns`: start-to-agent-ready latency (median, p99) for both templates,
# host memory per idle sandbox, and 1,000 idle busybox sandboxes alive at
# once. `vm` (where build/vm/ holds the guest images): cold boot to
# agent-ready, the template snapshot, restore of a clone, resuming a
# parked clone as a claim does, and host memory per parked clone. `rpc`
# (where podman and sluice-supervisor-podman are): the supervisor's
# sandbox.start to agent-ready. No sandbox has a network link, so nothing here
# touches any network namespace but the sandboxes' own. A trap stops
# every sandbox and removes what they leave. See bench/README.md.
set -euo pipefail
: "${SL_SRC:?SL_SRC must name the source tree}"
SBX=${SL_BUILD:-$SL_SRC/build}/sandbox/sluice-sandbox
N=${SBX_BENCH_N:-50}          # starts timed per template
IDLE=${SBX_BENCH_IDLE:-50}    # idle sandboxes measured per template
MANY=${SBX_BENCH_MANY:-1000}  # alive at once
VM_COLD=${SBX_BENCH_VM_COLD:-5}  # vm cold boots timed
VM_N=${SBX_BENCH_VM_N:-20}       # vm clones timed, then held parked
RPC_N=${SBX_BENCH_RPC_N:-20}     # rpc (podman) starts timed
[ -x "$SBX" ] || { echo "no $SBX: build first" >&2; exit 1; }
tmp=$(mktemp -d /tmp/sl-bench-sandbox.XXXXXX)
ID=slb$$
cli=

# Everything of ours is named $ID-*: end the CLI (it stops its
# sandboxes on SIGTERM), then remove whatever is left by force.
cleanup() {
	local rc=$? d
	exec 7>&- 2>/dev/null || true
	if [ -n "$cli" ] && kill -0 "$cli" 2>/dev/null; then
		kill "$cli" 2>/dev/null || true
		for _ in $(seq 300); do kill -0 "$cli" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$cli" 2>/dev/null || true
	fi
	for d in $(find /sys/fs/cgroup -maxdepth 8 -type d -name "$ID-*" 2>/dev/null); do
		xargs -r kill -9 <"$d/cgroup.procs" 2>/dev/null || true
	done
	for d in $(find /sys/fs/cgroup -maxdepth 8 -type d -name "$ID-*" 2>/dev/null); do
		for _ in $(seq 50); do rmdir "$d" 2>/dev/null && break; sleep 0.1; done
	done
	# the rpc supervisor's private podman storage: its containers, mounts
	if [ -d "$tmp/rpc/state" ]; then
		local P=(podman --root "$tmp/rpc/state/storage" --runroot "$tmp/rpc/state/run"
			--tmpdir "$tmp/rpc/state/tmp" --cgroup-manager cgroupfs --events-backend file)
		timeout 60 "${P[@]}" rm -af -t 0 >/dev/null 2>&1 || true
		timeout 60 "${P[@]}" rmi -af >/dev/null 2>&1 || true
		findmnt -rn -o TARGET | grep "^$tmp/" | sort -r | xargs -r umount -l 2>/dev/null || true
	fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sbx() { "$SBX" --cache "$tmp/t" --state "$tmp/s" "$@"; }
goal() { awk -v v="$1" -v g="$2" 'BEGIN { print (v + 0 < g + 0) ? "met" : "MISSED" }'; }
kib() { awk '/^'"$1"':/ { print $2 }' /proc/meminfo; }

# The memory cgroup directory our sandboxes get (sluice/<id> under the
# CLI's own group; v1 memory controller, else the v2 tree).
cg_base() {
	local p
	p=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/$1/cgroup)
	if [ -n "$p" ]; then echo "/sys/fs/cgroup/memory${p%/}/sluice"; else
		echo "/sys/fs/cgroup$(awk -F: '$1 == 0 { print $3 }' /proc/$1/cgroup | sed 's:/$::')/sluice"
	fi
}

# measure PREFIX: per-sandbox averages over the cgroups named PREFIX-*:
# "n procs rss_kib pss_kib pss_anon_kib kmem_kib cache_kib usage_kib".
measure() {
	local base dirs=() d
	base=$(cg_base "$cli")
	for d in "$base/$1"-*; do [ -d "$d" ] && dirs+=("$d"); done
	[ ${#dirs[@]} -gt 0 ] || { echo "0 0 0 0 0 0 0 0"; return; }
	local pids
	pids=$(cat "${dirs[@]/%//cgroup.procs}")
	{
		for d in "${dirs[@]}"; do
			echo "cg $(cat "$d/memory.usage_in_bytes") $(cat "$d/memory.kmem.usage_in_bytes" 2>/dev/null || echo 0) $(awk '$1 == "cache" || $1 == "file" { print $2; exit }' "$d/memory.stat")"
		done
		for p in $pids; do
			awk '/^(Rss|Pss|Pss_Anon):/ { printf "%s %s ", $1, $2 } END { print "" }' \
				"/proc/$p/smaps_rollup" 2>/dev/null | sed 's/^/pr /'
		done
	} | awk -v n=${#dirs[@]} '
		$1 == "cg" { usage += $2; kmem += $3; cache += $4 }
		$1 == "pr" { procs++; for (i = 2; i < NF; i += 2) v[$i] += $(i + 1) }
		END { printf "%d %d %.0f %.0f %.0f %.0f %.0f %.0f\n", n, procs,
			v["Rss:"] / n, v["Pss:"] / n, v["Pss_Anon:"] / n,
			kmem / 1024 / n, cache / 1024 / n, usage / 1024 / n }'
}

# hold PREFIX COUNT TEMPLATE: starts COUNT sandboxes kept alive at once
# (no network), in the background, until fd 7 closes; returns when
# they are all up. The CLI's report is in $tmp/hold.log.
hold() {
	rm -f "$tmp/fifo"
	mkfifo "$tmp/fifo"
	sbx -t "$3" --id "$1" --repeat "$2" --keep --wait-stdin <"$tmp/fifo" \
		>/dev/null 2>"$tmp/hold.log" &
	cli=$!
	exec 7>"$tmp/fifo"
	while ! grep -q 'holding them' "$tmp/hold.log"; do
		if ! kill -0 $cli 2>/dev/null; then
			wait $cli || true
			cli=
			return 1
		fi
		sleep 0.05
	done
}

release() {
	exec 7>&-
	wait $cli || true
	cli=
}

# What is left of PREFIX: cgroup dirs, processes, state dirs, and mounts
# of our state directory in any process's table.
leftovers() {
	local cgs procs state mnts
	cgs=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$1-*" 2>/dev/null | wc -l)
	procs=$(grep -l "/$1-" /proc/[0-9]*/cgroup 2>/dev/null | wc -l)
	state=$(find "$tmp/s" -mindepth 1 -maxdepth 1 -name "$1-*" 2>/dev/null | wc -l)
	mnts=$(grep -l "$tmp/s" /proc/[0-9]*/mountinfo 2>/dev/null | wc -l)
	echo "$cgs cgroup dirs, $procs processes, $state state dirs, $mnts mount tables"
	[ "$cgs$procs$state$mnts" = 0000 ]
}

for t in busybox host; do sbx -t $t -- true; done # build the templates

# ---- start-to-agent-ready latency ------------------------------------
echo "sandbox start: sbx_start() to the agent's hello, no network, then stop;"
echo "$N starts in a row per template (p99 of 50 is the largest)"
printf '%-10s %5s %9s %9s %9s %9s %9s   %s\n' template n wall_ms mean_ms median_ms p99_ms \
	max_ms "goal: median < 10, p99 < 50"
for t in busybox host; do
	t0=$(date +%s%N)
	line=$(sbx -t $t --id "$ID-l" --repeat "$N" 2>&1 | tail -n 1)
	t1=$(date +%s%N)
	read -r mean max med p99 < <(sed -E \
		's/.*mean ([0-9.]+) ms, max ([0-9.]+) ms, median ([0-9.]+) ms, p99 ([0-9.]+) ms/\1 \2 \3 \4/' \
		<<<"$line")
	printf '%-10s %5d %9d %9s %9s %9s %9s   median %s, p99 %s\n' $t "$N" \
		$(((t1 - t0) / 1000000)) "$mean" "$med" "$p99" "$max" \
		"$(goal "$med" 10)" "$(goal "$p99" 50)"
done

# ---- memory per idle sandbox -----------------------------------------
echo
echo "idle sandbox memory, KiB per sandbox: $IDLE kept alive at once, measured 1 s"
echo "after the last start. pss/rss/anon: its processes (smaps_rollup; the agent"
echo "binary's pages are file-backed and shared, so PSS splits them); kmem: kernel"
echo "memory charged to its cgroup; cache: page cache charged to it (the template's"
echo "files are cached once, by whoever read them first, not per sandbox);"
echo "per_sbx = pss + kmem (cache excluded)"
printf '%-10s %5s %6s %7s %7s %7s %7s %7s %9s %8s   %s\n' template n procs rss pss \
	pss_anon kmem cache cg_usage per_sbx "goal: < 1024"
for t in busybox host; do
	hold "$ID-m$t" "$IDLE" $t
	sleep 1
	read -r n procs rss pss anon kmem cache usage < <(measure "$ID-m$t")
	release
	per=$((pss + kmem))
	printf '%-10s %5d %6d %7d %7d %7d %7d %7d %9d %8d   %s\n' $t "$n" "$procs" "$rss" \
		"$pss" "$anon" "$kmem" "$cache" "$usage" "$per" "$(goal $per 1024)"
done

# ---- many idle sandboxes at once ---------------------------------------
echo
echo "$MANY idle busybox sandboxes alive at once (no network), every agent pinged"
echo "limits: pid_max $(cat /proc/sys/kernel/pid_max), nofile $(ulimit -Sn)/$(ulimit -Hn)," \
	"max_net_namespaces $(cat /proc/sys/user/max_net_namespaces 2>/dev/null || echo ?)," \
	"memory cgroups in use $(awk '$1 == "memory" { print $3 }' /proc/cgroups)"
memcg() { awk '$1 == "memory" { print $3 }' /proc/cgroups; }
memcg0=$(memcg)
sync
avail0=$(kib MemAvailable)
slab0=$(kib Slab)
t0=$(date +%s%N)
if hold "$ID-k" "$MANY" busybox; then
	up_ms=$((($(date +%s%N) - t0) / 1000000))
	sleep 1
	avail1=$(kib MemAvailable)
	slab1=$(kib Slab)
	read -r n procs rss pss anon kmem cache usage < <(measure "$ID-k")
	grep -E 'alive at once' "$tmp/hold.log" | sed 's/^sluice-sandbox: /  /'
	t1=$(date +%s%N)
	release
	down_ms=$((($(date +%s%N) - t1) / 1000000))
	sed -nE 's/.*mean ([0-9.]+) ms, max ([0-9.]+) ms, median ([0-9.]+) ms, p99 ([0-9.]+) ms/  start-to-ready while filling up: median \3 ms, p99 \4 ms, max \2 ms/p' \
		"$tmp/hold.log"
	alive=$(sed -n 's/.*; \([0-9]*\) of \([0-9]*\) agents answered.*/\1/p' "$tmp/hold.log")
	host_kib=$((avail0 - avail1))
	echo "  up in $up_ms ms; $procs processes in $n cgroups; stopped all in $down_ms ms"
	echo "  per sandbox (KiB): pss $pss, rss $rss, kmem $kmem, cache $cache," \
		"cg_usage $usage; pss+kmem $((pss + kmem))"
	echo "  host: MemAvailable fell by $((host_kib / 1024)) MiB ($((host_kib / MANY)) KiB each)," \
		"Slab rose by $(((slab1 - slab0) / 1024)) MiB; sum of pss+kmem" \
		"$(((pss + kmem) * n / 1024)) MiB"
	if left=$(leftovers "$ID-k"); then ok=1; else ok=0; fi
	echo "  left after stop: $left"
	# rmdir'd memory cgroups linger in the kernel (dying) while pages
	# or kernel objects are still charged to them; v1 allows 65535.
	echo "  memory cgroups in the kernel, dying ones included: $memcg0 before, $(memcg) after"
	printf '  goal: %d alive: %s; nothing left: %s\n' "$MANY" \
		"$([ "${alive:-0}" = "$MANY" ] && echo met || echo MISSED)" \
		"$([ $ok = 1 ] && echo met || echo MISSED)"
else
	echo "  could not keep $MANY alive:"
	sed 's/^/  /' "$tmp/hold.log" | tail -n 5
	echo "  pids.max: $(cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || echo -)," \
		"threads-max $(cat /proc/sys/kernel/threads-max)," \
		"inotify instances $(cat /proc/sys/fs/inotify/max_user_instances)"
	echo "  left after stop: $(leftovers "$ID-k" || true)"
	echo "  goal: $MANY alive: MISSED"
fi

# ---- rpc: podman through sluice-supervisor-podman ---------------------------
# The rpc backend's start as sluiced makes it: sandbox.start over the
# protocol (podman run -d, runc) to the agent listening on its socket, no
# network; the supervisor's podman storage is private, under $tmp/rpc.
SUP=${SL_BUILD:-$SL_SRC/build}/gateway/sluice-supervisor-podman
echo
if [ -x "$SUP" ] && command -v podman >/dev/null; then
	mkdir -p "$tmp/rpc/tree/bin" "$tmp/rpc/tree/tmp" "$tmp/rpc/tree/etc"
	cp /bin/busybox "$tmp/rpc/tree/bin/" && ln -s busybox "$tmp/rpc/tree/bin/sh"
	echo "root:x:0:0:root:/root:/bin/sh" >"$tmp/rpc/tree/etc/passwd"
	read -r _ ens rest < <(python3 "$SL_SRC/bench/rpc_start.py" "$SUP" \
		"$(dirname "$SBX")/../agent" "$tmp/rpc/tree" "$tmp/rpc" "$RPC_N" 2>&1 | tail -n 1)
	read -r mean max med p99 rmed smed < <(sed -E \
		's/.*mean ([0-9.]+) ms, max ([0-9.]+) ms, median ([0-9.]+) ms, p99 ([0-9.]+) ms; reply: median ([0-9.]+) ms; stop: median ([0-9.]+) ms/\1 \2 \3 \4 \5 \6/' <<<"$rest")
	echo "rpc sandboxes (podman $(podman --version | awk '{ print $3 }'), runc, busybox, no network):"
	echo "  template import (tar | podman import, once per template): ${ens:-?} ms"
	printf '  sandbox.start to agent-ready (%d): median %s ms, p99 %s ms, max %s ms (the reply alone: median %s ms); stop: median %s ms\n' \
		"$RPC_N" "$med" "$p99" "$max" "$rmed" "$smed"
else
	echo "rpc: no $SUP or no podman: skipped"
fi

# ---- vm: QEMU microVMs --------------------------------------------------
if [ ! -f "${SL_BUILD:-$SL_SRC/build}/vm/vmlinux" ]; then
	echo
	echo "vm: no guest images (./build.sh build makes build/vm/ as root): skipped"
	exit 0
fi
vm() { sbx --backend vm -t busybox "$@"; }
# median and p99 out of the CLI's summary line
stats() { sed -nE "s/.*$1 mean ([0-9.]+) ms, max ([0-9.]+) ms, median ([0-9.]+) ms, p99 ([0-9.]+) ms.*/\3 \4 \2/p"; }
vm --id "$ID-v0" -v -- true >/dev/null 2>"$tmp/vm0.log" || true
echo
echo "vm sandboxes (busybox template, 256 MiB, 1 vCPU, no network);" \
	"$(grep -o 'accelerator [a-z]*' "$tmp/vm0.log" | head -1 || true)"
snap=$(sed -nE 's/.*snapshot [^ ]+ made in ([0-9]+) ms.*/\1/p' "$tmp/vm0.log" | head -1)
read -r cmed cp99 cmax < <(SLUICE_VM_SNAPSHOTS=off vm --id "$ID-vc" --repeat "$VM_COLD" -- true 2>&1 |
	stats start-to-ready)
printf '  cold boot to agent-ready (%d): median %s ms, p99 %s ms   goal < 1500: %s\n' "$VM_COLD" \
	"$cmed" "$cp99" "$(goal "$cmed" 1500)"
echo "  template snapshot (boot, save; once per template, memory and vCPUs): ${snap:-(cached) } ms"
hold_vm() {
	rm -f "$tmp/fifo"
	mkfifo "$tmp/fifo"
	vm --id "$ID-vp" --repeat "$VM_N" --keep --park --wait-stdin -- true <"$tmp/fifo" \
		>/dev/null 2>"$tmp/hold.log" &
	cli=$!
	exec 7>"$tmp/fifo"
	while ! grep -q 'holding them' "$tmp/hold.log"; do
		kill -0 $cli 2>/dev/null || { wait $cli || true; cli=; return 1; }
		sleep 0.05
	done
}
if hold_vm; then
	sleep 1
	read -r n procs rss pss anon kmem cache usage < <(measure "$ID-vp")
	release
	read -r rmed rp99 rmax < <(stats start-to-ready <"$tmp/hold.log")
	read -r umed up99 umax < <(sed -nE 's/.*resumed, unpark-to-configured mean [0-9.]+ ms, median ([0-9.]+) ms, p99 ([0-9.]+) ms, max ([0-9.]+) ms.*/\1 \2 \3/p' "$tmp/hold.log")
	printf '  restore of a clone to agent-ready, configured (%d): median %s ms, p99 %s ms\n' \
		"$VM_N" "$rmed" "$rp99"
	printf '  claim of a parked clone (unpark, time and entropy): median %s ms, p99 %s ms   goal < 25: %s\n' \
		"$umed" "$up99" "$(goal "${umed:-999}" 25)"
	echo "  memory per parked clone, KiB ($n held): rss $rss, pss $pss, pss_anon $anon," \
		"cg_usage $usage (RAM pages the clone wrote, not the snapshot's)" \
		"  goal < 40960: $(goal "$pss" 40960)"
	echo "  left after stop: $(leftovers "$ID-vp" || true)"
else
	echo "  could not hold $VM_N parked clones:"
	sed 's/^/  /' "$tmp/hold.log" | tail -n 5
fi
