#!/bin/bash
# bench/nft.sh: the `inet sluice` table: a whole-table reconcile with 1,000
# sandboxes, and one unlock and one lock with 1,000 attached, through
# nft/nft_bench (libnftnl batches); then the same unlock done by the `nft`
# command-line tool, for comparison. Everything runs in a network namespace
# of its own (sl-bench-nft-PID, removed on exit); the host's firewall is
# never touched. Needs root and nft (nftables). Builds nothing:
#
#   SL_BUILD       the build tree (default: build, after ./build.sh build)
#   NFT_SANDBOXES  sandboxes attached (default 1000, half of them unlocked)
#   NFT_CLI_RUNS   unlocks timed through nft (default 100)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${SL_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BENCH=$BUILD/nft/nft_bench
N=${NFT_SANDBOXES:-1000}
RUNS=${NFT_CLI_RUNS:-100}

[ -x "$BENCH" ] || { echo "bench/nft.sh: no $BENCH (./build.sh build)" >&2; exit 1; }
command -v nft >/dev/null || { echo "bench/nft.sh: nft is missing (apt-get install nftables)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench/nft.sh: run as root (it makes a network namespace)" >&2; exit 1; }

NS=sl-bench-nft-$$
TMP=$(mktemp -d /tmp/sl-bench-nft.XXXXXX)
cleanup() {
	local rc=$?
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$NS"
N() { ip netns exec "$NS" "$@"; }

echo "==> nft_bench: $N sandboxes in lane egress (10.88.0.0/16, 3 doors), half unlocked"
N "$BENCH" -n "$N" -k | tee "$TMP/ours"

# The peer: the same unlock (three doors elements of one locked sandbox,
# the odd-numbered ones from nft_bench: 10.88.0.2 + i) by the nft tool, one
# process per unlock, each followed by an untimed delete. The loop runs
# inside the namespace, so `ip netns exec` is not timed.
cat > "$TMP/cli.sh" <<'CLI'
N=$1 RUNS=$2 OUT=$3
addr() { local a=$((2 + $1)); echo "10.88.$((a >> 8)).$((a & 255))"; }
for k in $(seq 0 $((RUNS - 1))); do
	a=$(addr $((2 * (k % (N / 2)) + 1)))
	e="{ $a . 10.88.0.1 . 3128, $a . 10.88.0.1 . 1080, $a . 10.88.0.1 . 3129 }"
	t0=$(date +%s%N)
	nft add element inet sluice doors "$e"
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000)) >> "$OUT"
	nft delete element inet sluice doors "$e"
done
CLI
: > "$TMP/cli"
N bash "$TMP/cli.sh" "$N" "$RUNS" "$TMP/cli"
# nft_bench was told to keep the table (-k): now remove it.
N nft delete table inet sluice

q() { # FILE Q: the Q-quantile of the numbers in FILE
	sort -n "$1" | awk -v q="$2" '{ v[NR] = $1 } END { i = int(q * (NR - 1) + 1.5); if (i > NR) i = NR; print v[i] }'
}
cli_med=$(q "$TMP/cli" 0.5)
cli_p99=$(q "$TMP/cli" 0.99)
ours_med=$(awk '/^unlock:/ { print $3 }' "$TMP/ours")
echo "nft add element (nft $(nft --version | awk '{ print $2 }'), $RUNS runs): median $cli_med us p99 $cli_p99 us"
awk -v a="$cli_med" -v b="$ours_med" 'BEGIN {
	if (b > 0) printf "unlock through libnftnl is %.0fx faster than through the nft tool (median %s us against %s us)\n", a / b, b, a
}'
