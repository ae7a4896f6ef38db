#!/usr/bin/env bash
# Issue 29 benchmark (prints figures, asserts nothing): the live emulator's
# DPDK data path forwarding through a modelled two-leaf fabric with
# impairments on (h0 -> leaf0 -> spine -> leaf1 -> h1, four links of 10 Gb/s
# and 1 us; 0.1% loss on h0's uplink, 0.1% of frames corrupted on h1's link)
# versus dpdk-testpmd io-fwd on the same virtual devices
# (net_af_packet on two veth pairs), in the same run; then the lateness the
# emulator adds beyond the model's own delay, end to end and per modelled
# hop. Needs root and dpdk-testpmd.
#
# The traffic is not the bottleneck: a second dpdk-testpmd in txonly mode
# (64-byte UDP frames, bursts of 64 from a PACKET_MMAP ring) is the source on
# the far end of the first veth, and the sink is the kernel's rx counter of
# the far end of the second veth (no process reads the frames; they are
# dropped as not for that host). Each forwarder runs WARM s, then its
# frames/s is the sink's counter over SECS s. The python3 sockets of the
# first version (one sendto per frame) topped out near 7,000 frames/s.
#
# Latency: a second emulator run with light traffic (200 UDP datagrams,
# 100 per second, from python3), so its lateness is the emulator's own cost per frame, not a
# saturated queue; the lateness is per frame, whatever the hops inside the
# model, so per modelled hop it is the path's figure over its 4 links.
#   bench/emulate_vs_testpmd.sh [BUILD_DIR] [SECS] [WARM]
set -euo pipefail
BUILD=${1:-build}
SECS=${2:-3}
WARM=${3:-1}
FATHOM=$BUILD/tools/fathom
BASE=$(dirname "$0")/../scenarios/live/two_leaf_clean.yaml
[ "$(id -u)" = 0 ] || { echo "needs root (netns, veth, DPDK)"; exit 2; }
command -v dpdk-testpmd >/dev/null || { echo "needs dpdk-testpmd"; exit 2; }
[ -x "$FATHOM" ] || { echo "no $FATHOM (build the fathom target)"; exit 2; }
T=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del fbA 2>/dev/null || true
  ip netns del fbB 2>/dev/null || true
  ip link del fbva 2>/dev/null || true
  ip link del fbvb 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$T"
  [ -z "${KEEP:-}" ] || echo "kept $T"
}
trap cleanup EXIT

# The scenario: the clean two-leaf fabric plus the impairments.
{
  sed '/^faults:/,$d' "$BASE"
  cat <<'YAML'
faults:
  - {kind: loss, link: h0-leaf0, from: h0, rate: 0.001}
  - {kind: corrupt, host: h1, rate: 0.001}
YAML
} > "$T/scenario.yaml"

# fbva/fbvb: the forwarder's devices; fbvai (in fbA) the source's, fbvbi
# (in fbB) the sink's. No IPv6 on them: no router solicitations in the count.
ip netns add fbA
ip netns add fbB
i=1
for s in a b; do
  ns=fb${s^^}
  ip link add fbv$s type veth peer name fbv${s}i
  sysctl -qw net.ipv6.conf.fbv$s.disable_ipv6=1
  ip link set fbv$s up
  ip link set "fbv${s}i" netns "$ns"
  ip netns exec "$ns" sysctl -qw "net.ipv6.conf.fbv${s}i.disable_ipv6=1"
  ip -n "$ns" addr add "10.78.0.$i/24" dev "fbv${s}i"
  ip -n "$ns" link set "fbv${s}i" up
  i=$((i + 1))
done
SINK_MAC=$(ip -n fbB -o link show fbvbi | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)

rx_count() { ip -n fbB -s -j link show fbvbi | grep -o '"rx":{"bytes":[0-9]*,"packets":[0-9]*' | grep -o '[0-9]*$'; }
tx_count() { ip -n fbA -s -j link show fbvai | grep -o '"tx":{"bytes":[0-9]*,"packets":[0-9]*' | grep -o '[0-9]*$'; }

# A testpmd on its own EAL (file prefix NAME) in namespace NS ("-": this
# one): stdin from a fifo (a newline stops it), log in $T/NAME.log. Sets
# TP_PID.
start_testpmd() {
  local name=$1 ns=$2 in=()
  shift 2
  [ "$ns" = - ] || in=(ip netns exec "$ns")
  mkfifo "$T/$name.in"
  "${in[@]}" stdbuf -oL dpdk-testpmd --no-huge --no-pci --no-shconf --file-prefix="fb$name" -m 128 \
    "$@" --disable-link-check < "$T/$name.in" > "$T/$name.log" 2>&1 &
  TP_PID=$!
  PIDS+=("$TP_PID")
  eval "exec {fd_$name}>\"\$T/\$name.in\""
  for _ in $(seq 600); do grep -q "Press enter to exit" "$T/$name.log" && return 0; sleep 0.1; done
  echo "dpdk-testpmd $name did not start:" >&2
  cat "$T/$name.log" >&2
  exit 1
}
stop_testpmd() {
  local name=$1 pid=$2 fd
  fd=fd_$name
  echo >&"${!fd}" || true
  eval "exec {$fd}>&-"
  wait "$pid" || true
}

# FPS: frames/s at the sink over SECS s (after WARM s) while the forwarder
# runs: the source starts, and stops after the count.
measure() {
  local label=$1 c0 c1 s0 s1 src
  start_testpmd "src$label" fbA -l 0,1 --vdev=net_af_packet2,iface=fbvai -- --forward-mode=txonly \
    --txpkts=64 --burst=64 --eth-peer=0,"$SINK_MAC" --auto-start --total-num-mbufs=4096
  src=$TP_PID
  sleep "$WARM"
  c0=$(rx_count)
  s0=$(tx_count)
  sleep "$SECS"
  c1=$(rx_count)
  s1=$(tx_count)
  stop_testpmd "src$label" "$src"
  FPS=$(awk -v a="$c0" -v b="$c1" -v s="$SECS" 'BEGIN { printf "%.0f", (b - a) / s }')
  SRC_FPS=$(awk -v a="$s0" -v b="$s1" -v s="$SECS" 'BEGIN { printf "%.0f", (b - a) / s }')
}

# 1. dpdk-testpmd io-fwd between the two net_af_packet ports. Each
# forwarder polls on CPU 0 (testpmd's forwarding lcore here, the emulator's
# one lcore) and the source on CPU 1 (its forwarding lcore).
start_testpmd fwd - -l 0,1 --main-lcore 1 --vdev=net_af_packet0,iface=fbva --vdev=net_af_packet1,iface=fbvb -- \
  --forward-mode=io --auto-start --total-num-mbufs=8192
fwd=$TP_PID
measure 1
tp_fps=$FPS
tp_src=$SRC_FPS
stop_testpmd fwd "$fwd"

# 2. fathom emulate on the same devices, through the modelled fabric. A
# broadcast ping from the sink first, so the emulator learns its MAC and
# the source's frames go unicast (not flooded).
emulate() {
  "$FATHOM" emulate "$T/scenario.yaml" -e "h0=dpdk:net_af_packet0,iface=fbva" \
    -e "h1=dpdk:net_af_packet1,iface=fbvb" --listen 127.0.0.1:0 \
    --metrics-out "$T/metrics.$1" 2> "$T/emulate.$1.log" &
  EM_PID=$!
  PIDS+=("$EM_PID")
  for _ in $(seq 100); do grep -q ready "$T/emulate.$1.log" && return 0; sleep 0.1; done
  echo "fathom emulate did not start:" >&2
  cat "$T/emulate.$1.log" >&2
  exit 1
}
stop_emulate() {
  kill -TERM "$EM_PID"
  wait "$EM_PID" || true
}
emulate load
ip netns exec fbB python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.sendto(b"x", ("10.78.0.255", 9))'
sleep 0.2
measure 2
em_fps=$FPS
em_src=$SRC_FPS
stop_emulate
# 3. Light traffic: the emulator's lateness when it is not saturated.
emulate light
ip netns exec fbA python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(200):
    s.sendto(b"\0" * 64, ("10.78.0.2", 9)); time.sleep(0.01)'
sleep 0.2
stop_emulate

metric() { awk -v m="$1" '$1 ~ "^"m { s += $NF } END { printf "%.0f", s }' "$2"; }
echo "frames/s at the sink (64-byte UDP from dpdk-testpmd txonly; ${SECS} s after ${WARM} s):"
echo "  dpdk-testpmd io-fwd:                     $tp_fps (the source sent $tp_src)"
echo "  fathom emulate (DPDK, 2-leaf, impaired): $em_fps (the source sent $em_src;" \
  "the modelled faults dropped $(metric fathom_fault_frames_dropped_total "$T/metrics.load")" \
  "and corrupted $(metric fathom_fault_frames_corrupted_total "$T/metrics.load")," \
  "flooded $(metric fathom_emulator_flooded_frames_total "$T/metrics.load")," \
  "endpoint drops $(metric fathom_endpoint_drops_total "$T/metrics.load"))"
awk -v t="$tp_fps" -v e="$em_fps" 'BEGIN { if (t > 0) printf "  ratio emulate/testpmd: %.1f%% (goal >= 50%%)\n", 100 * e / t }'
echo "under load:  $(grep "lateness after the model" "$T/emulate.load.log" | sed 's/^fathom emulate: //')"
echo "light (100/s): $(grep "lateness after the model" "$T/emulate.light.log" | sed 's/^fathom emulate: //')"
grep "lateness after the model" "$T/emulate.light.log" |
  sed -E 's/.*median ([0-9.]+) us, p99 ([0-9.]+) us.*/\1 \2/' |
  awk '{ printf "  added per modelled hop (4 links), light: median %.2f us, p99 %.2f us\n", $1 / 4, $2 / 4 }'
