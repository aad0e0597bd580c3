#!/usr/bin/env bash
# build.sh: the one entry point. ./build.sh help lists the commands.
set -euo pipefail
cd "$(dirname "$0")"

JOBS=$(nproc 2>/dev/null || echo 2)
E2E_JOBS=${E2E_JOBS:-2}

# Every build and test dependency, from Debian's packages.
# publicsuffix is data sluiced reads at run time (conf/conf_psl.c).
# podman and runc: sluice-supervisor-podman's engine (the rpc backend's
# tests; docs/supervisor-podman.md).
PKGS_BUILD="build-essential cmake pkg-config clang libclang-rt-14-dev
  libssl-dev libnghttp2-dev libc-ares-dev libnftnl-dev libmnl-dev libyaml-dev
  libcmocka-dev libjansson-dev libpsl-dev publicsuffix"
PKGS_TEST="curl wget git python3 iproute2 procps nftables nginx-light openssl util-linux
  dnsmasq-base nghttp2-client busybox-static netcat-openbsd openssh-client openssh-server
  qemu-system-x86 erofs-utils cpio kmod xz-utils zstd lz4
  python3-requests python3-socks python3-botocore python3-yaml python3-websockets nodejs npm
  podman runc"
# Only ./build.sh bench installs these: the proxies sluice is compared with.
# squid-openssl is squid built with TLS (ssl-bump, security_file_certgen);
# it replaces the squid package (they conflict) and serves forward.sh too.
# dnsperf loads the DNS door (bench/dns.sh).
PKGS_BENCH="wrk tinyproxy squid-openssl microsocks dante-server mitmproxy privoxy dnsperf"

say() { printf '==> %s\n' "$*"; }

# cmd_deps [PACKAGE...]: the build and test packages, plus any named.
cmd_deps() {
	local missing=()
	local provided
	# What installed packages provide counts too (NodeSource's nodejs
	# provides, and conflicts with, Debian's npm).
	provided=" $(dpkg-query -W -f='${db:Status-Abbrev}${Provides}\n' 2>/dev/null |
		sed -n 's/^ii *//p' | tr -s ', ' '\n\n' | grep -v '^[(=<>]' |
		sed 's/[:(].*//' | tr '\n' ' ') "
	for p in $PKGS_BUILD $PKGS_TEST "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
			[[ $provided == *" $p "* ]] || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing ${missing[*]}"
	if [ "$(id -u)" != 0 ]; then
		echo "build.sh deps: run as root to install packages" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# nginx-light's postinst starts nginx on port 80 of this machine (and
	# squid's, tinyproxy's and openssh-server's start theirs); the tests and
	# benchmarks run their own in namespaces, so keep the services down.
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	rm -f /usr/sbin/policy-rc.d
}

# configure DIR [cmake args...]
configure() {
	local dir=$1
	shift
	if [ ! -f "$dir/CMakeCache.txt" ]; then
		cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
	fi
}

cmd_build() {
	configure build
	cmake --build build -j "$JOBS"
	vm_images
}

# vm_inputs: what build/vm/ is made from, one line each (name, size, mtime):
# the agent, busybox, mkimage.sh itself and apt's package lists (a new kernel
# may have been published).
vm_inputs() {
	stat -c '%n %s %Y' build/agent/sluice-agent /bin/busybox \
		sandbox/vm/mkimage.sh /var/lib/apt/lists 2>&1 || true
}

# vm_images: the vm backend's guest kernel and initramfs into build/vm/,
# redone only when vm_inputs changed. Needs root (mknod, apt); without it
# the images are skipped with a note.
vm_images() {
	local stamp=build/vm/.stamp
	if [ -f "$stamp" ] && [ -f build/vm/release ] &&
		[ "$(vm_inputs)" = "$(cat "$stamp")" ]; then
		return 0
	fi
	if [ "$(id -u)" != 0 ]; then
		say "skipping vm images (build/vm/): run ./build.sh build as root to make them"
		return 0
	fi
	say "vm images"
	rm -f "$stamp"
	sandbox/vm/mkimage.sh build/vm build/agent/sluice-agent
	# After the run: mkimage.sh may have refreshed apt's lists itself.
	vm_inputs >"$stamp"
}

cmd_build_asan() {
	configure build/asan -DSLUICE_SANITIZE=ON
	cmake --build build/asan -j "$JOBS"
}

# run_ctest NAME DIR CTEST-ARGS...: ctest with its output kept in
# build/ctest-NAME.log. A label that matches nothing is an error, and so,
# as root, is any skipped test: every test that needs root or namespaces
# must run here (a skip exits 77, tests/unit/sl_test.h and e2e/lib.sh).
run_ctest() {
	local name=$1 dir=$2 log=build/ctest-$1.log
	shift 2
	ctest --test-dir "$dir" --no-tests=error --output-on-failure "$@" 2>&1 | tee "$log"
	if [ "$(id -u)" = 0 ] && grep -Eq '\*\*\*Skipped|Not Run' "$log"; then
		echo "build.sh test: tests skipped as root ($name): every test must run here" >&2
		grep -E '\*\*\*Skipped|Not Run' "$log" >&2
		return 1
	fi
}

cmd_test() {
	cmd_deps
	cmd_build
	say "unit tests"
	run_ctest unit build -L unit -j "$JOBS"
	say "unit tests under AddressSanitizer and UndefinedBehaviorSanitizer"
	cmd_build_asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		run_ctest unit-asan build/asan -L unit -j "$JOBS"
	# Every libFuzzer target (ASan+UBSan, clang) on its corpus and then
	# FUZZ_CI_SECONDS of new inputs: a crash a new input finds fails here.
	# ./build.sh fuzz is for long runs.
	say "fuzz targets"
	fuzz_build
	fuzz_all "${FUZZ_CI_SECONDS:-10}"
	# Each e2e pass starts by emptying build/e2e-keep (e2e_keep_reset) and
	# ends with the canary scan of what its tests kept (e2e_zz_canary,
	# tests/e2e/README.md).
	# Two e2e tests at a time: each makes its own namespaces, data_dir,
	# sandbox state and id ranges, and mostly waits (on sandboxes, origins
	# and timeouts), so the pass takes about half as long.
	say "end-to-end tests, $E2E_JOBS at a time"
	run_ctest e2e build -L e2e -j "$E2E_JOBS"
	say "end-to-end tests against sluiced built with ASan+UBSan"
	# The sanitized daemon with the plain build's static agent and vm
	# images beside it (it finds both relative to its own path; the
	# sanitized agent is dynamic and could not run in a guest).
	rm -rf build/e2e-asan
	mkdir -p build/e2e-asan/gateway
	cp build/asan/gateway/sluiced build/e2e-asan/gateway/
	ln -s ../agent build/e2e-asan/agent
	ln -s ../vm build/e2e-asan/vm
	SL_E2E_SLUICED=$PWD/build/e2e-asan/gateway/sluiced \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		run_ctest e2e-asan build -L e2e -LE nodaemon -j "$E2E_JOBS"
}

cmd_run() {
	cmd_deps
	cmd_build
	exec build/gateway/sluiced --config conf/sluice.yaml "$@"
}

# Runs every benchmark, bench/*.sh, against build/gateway/sluiced; each
# prints its own table (see bench/README.md).
cmd_bench() {
	cmd_deps $PKGS_BENCH
	cmd_build
	local b
	for b in bench/*.sh; do
		[ -f "$b" ] || continue
		say "benchmark ${b#bench/}"
		SLUICED="$PWD/build/gateway/sluiced" SL_SRC="$PWD" bash "$b"
	done
}

# fuzz_build: the libFuzzer targets (clang, ASan+UBSan, -DSLUICE_FUZZ=ON)
# into build/fuzz/tests/, and nothing else of that tree (fuzz_targets in
# tests/CMakeLists.txt).
fuzz_build() {
	CC=clang configure build/fuzz -DSLUICE_FUZZ=ON
	cmake --build build/fuzz -j "$JOBS" --target fuzz_targets
}

# fuzz_one NAME SECS: fuzz_NAME on build/fuzz/corpus/NAME, a scratch copy
# of tests/fuzz/corpus/NAME kept between runs (a run starts from what the
# last one found; the seeds themselves are never written), for SECS seconds
# after it has run every input of the corpus once (SECS 0: only that).
# Output to build/fuzz/logs/NAME.log. A crash, leak, timeout or out-of-memory
# leaves its input in build/fuzz/crashes/NAME-KIND-SHA1 and returns non-zero.
fuzz_one() {
	local name=$1 secs=$2 work=build/fuzz/corpus/$1
	local limit=(-max_total_time="$secs")
	[ "$secs" -gt 0 ] || limit=(-runs=0)
	mkdir -p "$work" && cp -r "tests/fuzz/corpus/$name/." "$work/" || return 1
	build/fuzz/tests/fuzz_"$name" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix=build/fuzz/crashes/"$name"- "$work" \
		>build/fuzz/logs/"$name".log 2>&1
}

# fuzz_all SECS: every target of tests/fuzz/fuzz_*.c through fuzz_one, JOBS
# at a time (each is one process on one core). Prints a line per target,
# and for each that failed its name, the input that made it fail and the
# sanitizer's report. Returns non-zero when any target failed or is missing.
fuzz_all() {
	local secs=$1 src name rc input running=0 logs=build/fuzz/logs failed=()
	if ! [[ $secs =~ ^[0-9]+$ ]]; then
		echo "build.sh: fuzz seconds must be a whole number, got '$secs'" >&2
		return 1
	fi
	rm -rf "$logs"
	mkdir -p "$logs" build/fuzz/crashes
	say "fuzzing every target for ${secs}s after its corpus, $JOBS at a time"
	for src in tests/fuzz/fuzz_*.c; do
		name=${src##*/fuzz_}
		name=${name%.c}
		if [ "$running" -ge "$JOBS" ]; then
			wait -n || true # its status is in its .rc file
			running=$((running - 1))
		fi
		(
			rc=0
			fuzz_one "$name" "$secs" || rc=$?
			echo "$rc" >"$logs/$name.rc"
		) &
		running=$((running + 1))
	done
	wait
	for src in tests/fuzz/fuzz_*.c; do
		name=${src##*/fuzz_}
		name=${name%.c}
		rc=$(cat "$logs/$name.rc" 2>/dev/null || echo "?")
		if [ "$rc" = 0 ]; then
			printf '    %-14s ok: %s\n' "$name" \
				"$(grep -E '^Done [0-9]+ runs' "$logs/$name.log" | tail -n 1)"
		else
			printf '    %-14s FAILED (exit %s)\n' "$name" "$rc"
			failed+=("$name")
		fi
	done
	for name in "${failed[@]}"; do
		input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$logs/$name.log" | tail -n 1)
		{
			echo "build.sh: fuzz target fuzz_$name failed on ${input:-no saved input (see its log)}"
			if [ -n "$input" ]; then
				echo "  reproduce: build/fuzz/tests/fuzz_$name $input"
				echo "  once fixed, keep it as a seed: cp $input tests/fuzz/corpus/$name/"
			fi
			echo "  log: $logs/$name.log, whose report begins:"
			grep -E -A 30 -m 1 '^==[0-9]+==|runtime error|^ERROR: libFuzzer|^Usage|No such file' \
				"$logs/$name.log" | head -n 30 | sed 's/^/    /'
		} >&2
	done
	[ ${#failed[@]} -eq 0 ]
}

# Runs every libFuzzer target for FUZZ_SECONDS (default 60) each.
cmd_fuzz() {
	cmd_deps
	fuzz_build
	fuzz_all "${FUZZ_SECONDS:-60}"
}

cmd_help() {
	cat <<'HELP'
usage: ./build.sh COMMAND
  deps   install every build and test dependency (Debian packages)
  build  build into build/ (CMake, -Wall -Wextra -Werror) and the vm guest
         images into build/vm/ (sandbox/vm/mkimage.sh, as root)
  test   deps, build, unit tests, unit tests under ASan+UBSan, every fuzz
         target for FUZZ_CI_SECONDS (default 10) each after its corpus,
         end-to-end tests
  run    deps, build, run sluiced in the foreground on conf/sluice.yaml
  bench  deps (with the peers: wrk, tinyproxy, squid, mitmproxy, ...), build,
         run every bench/*.sh
  fuzz   run every libFuzzer target for FUZZ_SECONDS (default 60) each;
         crashes land in build/fuzz/crashes/, logs in build/fuzz/logs/
HELP
}

case "${1:-help}" in
deps) cmd_deps ;;
build) cmd_deps; cmd_build ;;
test) cmd_test ;;
run) shift; cmd_run "$@" ;;
bench) cmd_bench ;;
fuzz) cmd_fuzz ;;
help|-h|--help) cmd_help ;;
*) cmd_help >&2; exit 2 ;;
esac
