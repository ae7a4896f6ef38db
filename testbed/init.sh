#!/bin/busybox sh
# PID 1 of a testbed VM (packed into the initramfs by make_assets.sh).
# Loads the modules TESTBED.md lists, mounts the host root read-only over 9p
# (tag hostroot) and this VM's writable share (tag results) at /run/fathom,
# brings up eth0 and rxe0 as the share's `config` says, announces readiness,
# then serves commands: the host drops cmd/N.env + cmd/N.sh into the share,
# this loop runs each in the host-root chroot and leaves res/N.out, N.err and
# N.rc (N.rc last, by rename, so the host never reads a partial result).
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev

log() { echo "fathom-init: $*" >/dev/console; }
fail() {
  log "FAILED: $*"
  [ -d /newroot/run/fathom ] && echo "$*" >/newroot/run/fathom/failed
  sleep 2
  poweroff -f
}

while read -r m; do
  insmod "/modules/$m" || log "insmod $m failed"
done </modules/order

mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro hostroot /newroot ||
  fail "mount hostroot"
# No tmpfs over /tmp: the host's /tmp stays visible (read-only), because the
# build tree whose binaries the VMs run may live there (CI clones into a
# temporary folder). Commands get a writable HOME and TMPDIR in /run/tmp.
mount -t tmpfs tmpfs /newroot/run
mkdir -p /newroot/run/tmp
mount -o bind /dev /newroot/dev
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mkdir -p /newroot/run/fathom /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 results /newroot/run/fathom ||
  fail "mount results"

S=/newroot/run/fathom
[ -f $S/config ] || fail "no config in results share"
. $S/config
C="chroot /newroot"

# No duplicate address detection: the addresses are ours by construction and
# DAD would delay the link-local GID rxe needs (GID 0).
echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad
echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_dad
$C ip link set eth0 mtu "$FATHOM_MTU" || fail "ip link set eth0 mtu $FATHOM_MTU"
$C ip link set eth0 up || fail "ip link set eth0 up"
$C ip link set lo up || fail "ip link set lo up"
$C ip addr add "$FATHOM_IP4/24" dev eth0 || fail "ip addr add $FATHOM_IP4"
$C ip -6 addr add "$FATHOM_IP6/64" dev eth0 || fail "ip -6 addr add $FATHOM_IP6"
$C rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0"

# Ready means: rxe0 port ACTIVE and GID 0 (link-local) and GID 1 (IPv4) set.
i=0
while :; do
  st=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
  g0=$(cat /sys/class/infiniband/rxe0/ports/1/gids/0 2>/dev/null)
  g1=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null)
  case "$st" in *ACTIVE*)
    if [ "${g0#fe80}" != "$g0" ] && [ "${g1#0000:0000:0000:0000:0000:ffff}" != "$g1" ]; then break; fi ;;
  esac
  i=$((i + 1))
  [ $i -gt 300 ] && fail "rxe0 not ACTIVE with GIDs: state=$st gid0=$g0 gid1=$g1"
  sleep 0.1
done
# One multicast frame so the host switch learns this port's MAC and endpoint
# before any peer needs to reach it.
$C ping -6 -c 1 -W 1 -I eth0 ff02::1 >/dev/null 2>&1

mkdir -p $S/cmd $S/res $S/out
read -r up _ </proc/uptime
echo "uptime_s=$up" >$S/ready.tmp && mv $S/ready.tmp $S/ready
echo "FATHOM_TESTBED_READY vm=$FATHOM_VM_ID uptime_s=$up" >/dev/console

while :; do
  for f in $S/cmd/*.sh; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .sh)
    mv "$f" "$S/cmd/$n.run"
    T=60
    . "$S/cmd/$n.env"
    (
      $C /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/run/tmp TMPDIR=/run/tmp FATHOM_OUT=/run/fathom/out /bin/sh -c \
        ". /run/fathom/config; cd /run/fathom/out && exec timeout -k 2 $T /bin/sh /run/fathom/cmd/$n.run" \
        >"$S/res/$n.out" 2>"$S/res/$n.err" </dev/null
      echo $? >"$S/res/$n.rc.tmp"
      mv "$S/res/$n.rc.tmp" "$S/res/$n.rc"
    ) &
  done
  sleep 0.1
done
