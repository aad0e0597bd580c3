#!/usr/bin/env bash
# sandbox.sh: start-to-ready latency of `ns` sandboxes (start, agent hello,
# one `true`, stop), for both templates, in a scratch directory.
set -euo pipefail
: "${SL_SRC:?SL_SRC must name the source tree}"
SBX=${SL_BUILD:-$SL_SRC/build}/sandbox/sluice-sandbox
N=${SBX_BENCH_N:-200}
tmp=$(mktemp -d /tmp/sl-bench-sandbox.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
printf '%-10s %6s %10s %12s\n' template n wall_ms ready_ms
for t in busybox host; do
	"$SBX" --cache "$tmp/t" --state "$tmp/s" -t $t -- true # build the template
	t0=$(date +%s%N)
	line=$("$SBX" --cache "$tmp/t" --state "$tmp/s" -t $t --id bench$$ \
		--repeat "$N" -- true 2>&1 | tail -n 1)
	t1=$(date +%s%N)
	printf '%-10s %6d %10d %12s\n' $t "$N" $(((t1 - t0) / 1000000)) \
		"$(sed -E 's/.*mean ([0-9.]+) ms, max ([0-9.]+) ms/\1 (max \2)/' <<<"$line")"
done
