#!/usr/bin/env bash
# mkimage.sh OUTDIR AGENT_BINARY: builds the guest images of the vm sandbox
# backend into OUTDIR (see sandbox/vm/README.md):
#   OUTDIR/vmlinux         PVH-bootable ELF from Debian's cloud kernel
#   OUTDIR/initramfs.cpio  uncompressed newc: /init = AGENT_BINARY, busybox,
#                          the virtio/overlay/erofs modules, unsigned
#   OUTDIR/release         the kernel release string
# The kernel package is downloaded (never installed) into $SLUICE_KERNEL_CACHE
# (default /var/cache/sluice/kernel). Runs as root (mknod, apt). The outputs
# are built in a temporary directory and renamed into place, so OUTDIR holds
# either the old images or the new ones, never a mix of half-written files.
set -euo pipefail
export LC_ALL=C

# The modules /init loads, by name; their dependencies are added before them.
MODULES="virtio_ring virtio virtio_mmio virtio_console failover net_failover
  virtio_net virtio_blk virtio-rng overlay erofs"
METAPKG=linux-image-cloud-amd64
KCACHE=${SLUICE_KERNEL_CACHE:-/var/cache/sluice/kernel}
BUSYBOX=${SLUICE_BUSYBOX:-/bin/busybox}

say() { printf 'mkimage: %s\n' "$*"; }
die() {
	printf 'mkimage: error: %s\n' "$*" >&2
	exit 1
}

[ $# -eq 2 ] || die "usage: $0 OUTDIR AGENT_BINARY"
OUT=$1
AGENT=$2
[ "$(id -u)" = 0 ] || die "run as root (the image needs device nodes owned by root)"
[ -x "$AGENT" ] || die "$AGENT: no agent binary; run ./build.sh build first"
[ -x "$BUSYBOX" ] || die "$BUSYBOX missing; apt-get install busybox-static"
file_is_static() { ! readelf -l "$1" 2>/dev/null | grep -q 'INTERP'; }
file_is_static "$BUSYBOX" || die "$BUSYBOX is dynamically linked; install busybox-static"
file_is_static "$AGENT" || die "$AGENT is dynamically linked; the guest has no libc"
for t in apt-cache apt-get dpkg-deb depmod modprobe readelf cpio; do
	command -v "$t" >/dev/null || die "$t not found; run ./build.sh deps"
done

mkdir -p "$KCACHE" "$OUT"
WORK=$(mktemp -d "$OUT/.mkimage.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# kernel_package: prints the versioned package the metapackage depends on
# (linux-image-6.1.0-57-cloud-amd64), refreshing apt's lists once if needed.
kernel_package() {
	local pkg
	pkg=$(apt-cache depends "$METAPKG" 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	if [ -z "$pkg" ]; then
		say "apt does not know $METAPKG; running apt-get update" >&2
		apt-get update -qq >&2 || true
		pkg=$(apt-cache depends "$METAPKG" 2>/dev/null |
			awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	fi
	printf '%s\n' "$pkg"
}

# fetch_deb PKG: prints the path of PKG's .deb in $KCACHE, downloading it
# (apt-get download, as the _apt user can write the temporary directory).
fetch_deb() {
	local pkg=$1 ver deb dl
	ver=$(apt-cache policy "$pkg" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
	ver=${ver//:/%3a}
	deb=$(ls "$KCACHE/${pkg}_${ver}_"*.deb 2>/dev/null | head -n 1 || true)
	if [ -n "$deb" ]; then
		printf '%s\n' "$deb"
		return
	fi
	say "downloading $pkg" >&2
	dl=$(mktemp -d "$KCACHE/.dl.XXXXXX")
	chown _apt "$dl" 2>/dev/null || true
	if ! (cd "$dl" && apt-get download -qq "$pkg" >&2); then
		say "download failed; running apt-get update and retrying" >&2
		apt-get update -qq >&2 || true
		(cd "$dl" && apt-get download -qq "$pkg" >&2) ||
			{ rm -rf "$dl"; die "apt-get download $pkg failed (network? sources.list?)"; }
	fi
	deb=$(ls "$dl"/*.deb | head -n 1)
	mv "$deb" "$KCACHE/"
	rm -rf "$dl"
	printf '%s\n' "$KCACHE/${deb##*/}"
}

PKG=$(kernel_package)
if [ -n "$PKG" ]; then
	DEB=$(fetch_deb "$PKG")
else
	# Offline with no apt lists: fall back on the newest cached package.
	DEB=$(ls -t "$KCACHE"/linux-image-*-cloud-amd64_*.deb 2>/dev/null | head -n 1 || true)
	[ -n "$DEB" ] || die "cannot resolve $METAPKG (apt-get update failed?) and $KCACHE holds no kernel"
	say "cannot resolve $METAPKG; using cached ${DEB##*/}"
fi

# Unpack once per package (dpkg-deb -x: no maintainer scripts, no /boot).
ROOT=$KCACHE/$(basename "$DEB" .deb)
if [ ! -d "$ROOT" ]; then
	say "unpacking ${DEB##*/}"
	rm -rf "$ROOT.tmp"
	dpkg-deb -x "$DEB" "$ROOT.tmp"
	mv "$ROOT.tmp" "$ROOT"
fi
REL=$(ls "$ROOT/lib/modules" | head -n 1)
[ -n "$REL" ] && [ -f "$ROOT/boot/vmlinuz-$REL" ] || die "$DEB holds no kernel"
[ -f "$ROOT/lib/modules/$REL/modules.dep" ] || depmod -b "$ROOT" "$REL"

# --- vmlinux: the ELF inside the bzImage (as scripts/extract-vmlinux does) ---
# bzImage = setup code + decompressor + compressed vmlinux. Try each format's
# magic at each offset it occurs; the right one decompresses to an ELF.
# format: magic (printf escapes), decompressor
FORMATS=(
	'\002\041\114\030|lz4 -dc'
	'\050\265\057\375|zstd -dcq'
	'\375\067\172\130\132\000|xz -dcq'
	'\037\213\010|gzip -dcq'
	'\135\000\000\000|xz -dcq --format=lzma'
	'BZh|bzip2 -dcq'
)
# elf_ok FILE: an x86-64 ELF with the PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY).
elf_ok() {
	[ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ] || return 1
	readelf -n "$1" 2>/dev/null | grep -Eq 'Xen[[:space:]]+0x[0-9a-f]+[[:space:]]+Unknown note type: \(0x00000012\)'
}
VMLINUZ=$ROOT/boot/vmlinuz-$REL
VMLINUX=$WORK/vmlinux
found=
for f in "${FORMATS[@]}"; do
	magic=${f%%|*}
	cmd=${f#*|}
	command -v "${cmd%% *}" >/dev/null || continue
	# shellcheck disable=SC2059 # magic is a printf escape sequence
	for off in $(grep -obUaP "$(printf "$magic" | od -An -tx1 |
		sed 's/ *\([0-9a-f][0-9a-f]\)/\\x\1/g')" "$VMLINUZ" | cut -d: -f1); do
		tail -c +$((off + 1)) "$VMLINUZ" | $cmd >"$VMLINUX" 2>/dev/null || true
		if elf_ok "$VMLINUX"; then
			found=${cmd%% *}
			break 2
		fi
	done
done
[ -n "$found" ] || die "no PVH-bootable ELF found in $VMLINUZ (unknown compression or CONFIG_PVH off)"
say "vmlinux: $REL, $found-compressed in the bzImage, $(($(stat -c %s "$VMLINUX") / 1048576)) MiB"

# --- modules, in load order, signatures stripped ---
STAGE=$WORK/stage
mkdir -p "$STAGE"/{bin,dev,proc,sys,run,tmp,newroot,etc/sluice,lib/modules/"$REL"}
MODDIR=$ROOT/lib/modules/$REL
: >"$WORK/order"
for m in $MODULES; do
	out=$(modprobe --show-depends -d "$ROOT" -S "$REL" "$m") ||
		die "modprobe cannot resolve $m in $REL"
	# "insmod /abs/path.ko", dependencies first; "builtin x" needs nothing.
	# Keep only hard dependencies (modules.dep): softdeps are optional
	# accelerators (libcrc32c's crc32c-intel; crc32c itself is built in).
	hard=$(printf '%s\n' "$out" | awk '$1 == "insmod" { p = $2 } END { print p }')
	hard=$(awk -v m="${hard#"$MODDIR"/}" '{ k = $1; sub(/:$/, "", k) }
		k == m { for (i = 1; i <= NF; i++) { sub(/:$/, "", $i); print $i } }' \
		"$MODDIR/modules.dep")
	printf '%s\n' "$out" | awk -v root="$MODDIR/" -v hard="$hard" '
		BEGIN { n = split(hard, h, "\n"); for (i = 1; i <= n; i++) want[root h[i]] = 1 }
		$1 == "insmod" && ($2 in want) { print $2 }' >>"$WORK/order"
done
# strip_sig FILE: drops an appended module signature: the file ends with
# struct module_signature (12 bytes, the last 4 the big-endian sig_len) and
# the 28-byte "~Module signature appended~\n", after sig_len signature bytes.
strip_sig() {
	local f=$1 len siglen
	len=$(stat -c %s "$f")
	[ "$len" -gt 40 ] || return 0
	[ "$(tail -c 28 "$f")" = "~Module signature appended~" ] || return 0
	siglen=$(tail -c 32 "$f" | head -c 4 | od -An -tu1 |
		awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }')
	truncate -s $((len - 28 - 12 - siglen)) "$f"
}
n=0
while read -r path; do
	rel=${path#"$ROOT"}
	[ -e "$STAGE$rel" ] && continue # shared dependency, already listed
	mkdir -p "$(dirname "$STAGE$rel")"
	cp "$path" "$STAGE$rel"
	strip_sig "$STAGE$rel"
	printf '%s\n' "$rel" >>"$STAGE/etc/sluice/modules"
	n=$((n + 1))
done <"$WORK/order"
say "modules: $n ($(tr '\n' ' ' <"$STAGE/etc/sluice/modules" | sed 's|[^ ]*/||g; s/\.ko//g'))"

# --- initramfs ---
cp "$AGENT" "$STAGE/init"
chmod 755 "$STAGE/init"
cp "$BUSYBOX" "$STAGE/bin/busybox"
ln -s busybox "$STAGE/bin/sh"
mknod -m 600 "$STAGE/dev/console" c 5 1
mknod -m 666 "$STAGE/dev/null" c 1 3
chmod 1777 "$STAGE/tmp"
(cd "$STAGE" && find . -mindepth 1 | sort |
	cpio -o -H newc -R 0:0 --quiet) >"$WORK/initramfs.cpio"
printf '%s\n' "$REL" >"$WORK/release"
say "initramfs.cpio: $(($(stat -c %s "$WORK/initramfs.cpio") / 1024)) KiB"

# --- into place: each file renamed atomically, release last ---
for f in vmlinux initramfs.cpio release; do
	mv -f "$WORK/$f" "$OUT/$f"
done
say "done: $OUT"
