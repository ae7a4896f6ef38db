#!/usr/bin/env bash
# Builds the rxe testbed's VM assets from Debian packages into OUT (normally
# ${CMAKE_BINARY_DIR}/testbed-assets): the stock kernel that linux-image-amd64
# depends on (downloaded and unpacked, never installed), its depmod output,
# and an initramfs (busybox-static + the modules TESTBED.md lists + testbed/init.sh).
#
# Safe when builds or tests race: one flock on OUT.lock serialises builders,
# the work happens in a private temp dir, and the finished tree appears at OUT
# by one rename. OUT/stamp records the inputs; a matching stamp means done.
#
# usage: make_assets.sh OUT
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUT" >&2
  exit 2
fi
out=$(realpath -m "$1")
here=$(cd "$(dirname "$0")" && pwd)
init_src="$here/init.sh"
mkdir -p "$(dirname "$out")"

# Modules in load order (TESTBED.md); modprobe --show-depends adds their
# dependencies. Without crc32_generic rxe fails with "failed to add eth0".
modules=(virtio_pci virtio_net 9pnet_virtio 9p crc32_generic rdma_rxe)

kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$kpkg" ]; then
  apt-get update -qq >&2
  kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
fi
if [ -z "$kpkg" ]; then
  echo "make_assets: apt-cache depends linux-image-amd64 names no kernel package" >&2
  exit 1
fi
stamp="kernel=$kpkg init=$(sha256sum "$init_src" | cut -c1-16) script=$(sha256sum "$0" | cut -c1-16)"

exec 9>"$out.lock"
flock 9
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then
  exit 0
fi

work=$(mktemp -d "$out.tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

if ! apt-get download "$kpkg" >dl.log 2>&1; then
  # Package lists may be missing in a fresh container.
  apt-get update -qq >&2
  apt-get download "$kpkg" >dl.log 2>&1 || { cat dl.log >&2; exit 1; }
fi
dpkg-deb -x ./*.deb pkg
kver=$(ls pkg/lib/modules)
depmod -b pkg "$kver"

mkdir -p asset/initramfs/{bin,sbin,dev,proc,sys,newroot,modules}
cp /bin/busybox asset/initramfs/bin/busybox
cp "$init_src" asset/initramfs/init
chmod 755 asset/initramfs/init
: >asset/initramfs/modules/order
for m in "${modules[@]}"; do
  modprobe -d pkg -S "$kver" --show-depends "$m" | awk '$1=="insmod"{print $2}' |
    while read -r ko; do
      base=$(basename "$ko")
      if ! grep -qx "$base" asset/initramfs/modules/order; then
        cp "$ko" asset/initramfs/modules/
        echo "$base" >>asset/initramfs/modules/order
      fi
    done
done
(cd asset/initramfs && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >asset/initramfs.cpio.gz
rm -rf asset/initramfs
cp "pkg/boot/vmlinuz-$kver" asset/vmlinuz
mkdir -p asset/modules-dep
cp pkg/lib/modules/"$kver"/modules.dep pkg/lib/modules/"$kver"/modules.dep.bin asset/modules-dep/
echo "$kver" >asset/kernel-version
echo "$stamp" >asset/stamp

# Replace any stale tree with one rename of the finished one.
if [ -e "$out" ]; then
  mv "$out" "$work/old"
fi
mv asset "$out"
