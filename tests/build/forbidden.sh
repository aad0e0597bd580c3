#!/usr/bin/env bash
# forbidden.sh BUILD PROBES SRC: the include direction holds.
#
# Builds every probe target listed in PROBES ("target allow|forbid header"
# per line, written by tests/build/CMakeLists.txt): a forbidden probe must
# fail, and fail because the header is not on the include path; an allowed
# one must build (it shows the probe set-up itself works). Then no source
# may reach past its folder with a relative include ("../"), which no
# include path can stop.
set -u
build=$1 probes=$2 src=$3
pass=0 fail=0

while read -r target expect header; do
	[ -n "$target" ] || continue
	out=$(cmake --build "$build" --target "$target" 2>&1)
	rc=$?
	if [ "$expect" = allow ]; then
		if [ $rc -eq 0 ]; then
			pass=$((pass + 1))
		else
			echo "FAIL: $target: $header should be includable"
			echo "$out" | tail -5
			fail=$((fail + 1))
		fi
	elif [ $rc -ne 0 ] && grep -q "fatal error: $header: No such file or directory" <<<"$out"; then
		pass=$((pass + 1))
	else
		echo "FAIL: $target: including $header should fail to compile (rc $rc)"
		echo "$out" | tail -5
		fail=$((fail + 1))
	fi
done <"$probes"

rel=$(grep -rn --include='*.c' --include='*.h' '#include "\.\./' "$src"/gateway "$src"/sandbox "$src"/pools \
	"$src"/agent "$src"/conf "$src"/nft "$src"/cli 2>/dev/null)
if [ -n "$rel" ]; then
	echo "FAIL: relative includes reach past a folder:"
	echo "$rel"
	fail=$((fail + 1))
else
	pass=$((pass + 1))
fi

echo "build_includes: $pass passed, $fail failed"
[ $pass -gt 0 ] && [ $fail -eq 0 ]
