#!/bin/sh
# Collects what a field engineer takes from an RDMA node after a hang (issue
# 28's evidence, read by `fathom replay`): the RDMA device's counters, its
# port and GID table, the netdev's MTU and statistics. Runs inside a testbed
# VM (busybox sh, the host's tools over 9p) or on any Linux host.
# Usage: collect_evidence.sh DIR [RDMA_DEV] [NETDEV]
# Writes DIR/hw_counters.txt ("name value" per line), DIR/rdma_statistic.txt,
# DIR/ibv_devinfo.txt, DIR/ip_link.txt, DIR/gids.txt (show_gids' columns),
# and DIR/ethtool.txt when ethtool exists. A tool that is missing leaves its
# file out; nothing here fails the caller.
dir=$1
dev=${2:-${FATHOM_RDMA_DEV:-rxe0}}
netdev=${3:-eth0}
[ -n "$dir" ] || { echo "usage: collect_evidence.sh DIR [RDMA_DEV] [NETDEV]" >&2; exit 2; }
mkdir -p "$dir"
port=/sys/class/infiniband/$dev/ports/1
if [ -d "$port/hw_counters" ]; then
  for f in "$port"/hw_counters/*; do
    echo "$(basename "$f") $(cat "$f")"
  done > "$dir/hw_counters.txt"
fi
command -v rdma >/dev/null 2>&1 && timeout 20 rdma statistic show > "$dir/rdma_statistic.txt" 2>&1
command -v ibv_devinfo >/dev/null 2>&1 && timeout 20 ibv_devinfo -v -d "$dev" > "$dir/ibv_devinfo.txt" 2>&1
timeout 20 ip -d link show > "$dir/ip_link.txt" 2>&1
command -v ethtool >/dev/null 2>&1 && timeout 20 ethtool -S "$netdev" > "$dir/ethtool.txt" 2>&1
if [ -d "$port/gids" ]; then
  {
    echo "DEV	PORT	INDEX	GID					IPv4  		VER	DEV"
    for g in "$port"/gids/*; do
      i=$(basename "$g")
      gid=$(cat "$g" 2>/dev/null)
      case "$gid" in ""|0000:0000:0000:0000:0000:0000:0000:0000) continue ;; esac
      type=$(cat "$port/gid_attrs/types/$i" 2>/dev/null)
      nd=$(cat "$port/gid_attrs/ndevs/$i" 2>/dev/null)
      ver=v1
      case "$type" in *v2*) ver=v2 ;; esac
      ipv4=
      case "$gid" in 0000:0000:0000:0000:0000:ffff:*)
        h=$(echo "$gid" | cut -d: -f7-8 | tr -d :)
        ipv4=$(printf '%d.%d.%d.%d' 0x$(echo $h | cut -c1-2) 0x$(echo $h | cut -c3-4) 0x$(echo $h | cut -c5-6) 0x$(echo $h | cut -c7-8))
        ;;
      esac
      echo "$dev	1	$i	$gid		$ipv4  	$ver	$nd"
    done
  } > "$dir/gids.txt"
fi
exit 0
