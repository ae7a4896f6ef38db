#!/usr/bin/env bash
# Issue 29 benchmark (prints figures, asserts nothing): the live emulator's
# DPDK data path forwarding through a modelled two-leaf fabric
# (scenarios/live/two_leaf_clean.yaml: h0 -> leaf0 -> spine -> leaf1 -> h1,
# four links of 10 Gb/s and 1 us) versus dpdk-testpmd io-fwd on the same
# virtual devices (net_af_packet on two veth pairs), in the same run, with
# the same UDP blast between two network namespaces; then the emulator's
# lateness (how much later than the model says a frame leaves), end to end
# and per modelled hop. Needs root, dpdk-testpmd and python3 (the traffic).
#   bench/emulate_vs_testpmd.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
BUILD=${1:-build}
SECS=${2:-3}
FATHOM=$BUILD/tools/fathom
SCEN=$(dirname "$0")/../scenarios/live/two_leaf_clean.yaml
[ "$(id -u)" = 0 ] || { echo "needs root (netns, veth, DPDK)"; exit 2; }
command -v dpdk-testpmd >/dev/null || { echo "needs dpdk-testpmd"; exit 2; }
T=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns del fbA 2>/dev/null || true
  ip netns del fbB 2>/dev/null || true
  ip link del fbva 2>/dev/null || true
  ip link del fbvb 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$T"; [ -n "${KEEP:-}" ] && echo "kept $T"
}
trap cleanup EXIT
ip netns add fbA
ip netns add fbB
i=1
for s in a b; do
  ns=fb${s^^}
  ip link add fbv$s type veth peer name fbv${s}i
  ip link set fbv$s up
  ip link set fbv${s}i netns $ns
  ip -n $ns addr add 10.78.0.$i/24 dev fbv${s}i
  ip -n $ns link set fbv${s}i up
  i=$((i + 1))
done
cat > "$T/recv.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 5000)); s.settimeout(float(sys.argv[1]) + 3)
n = 0
try:
    while True:
        s.recv(2048); n += 1; s.settimeout(1.0)
except socket.timeout:
    pass
print(n)
PY
cat > "$T/send.py" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 11, 1)  # SO_NO_CHECK: a veth offloads it (README)
for _ in range(3):  # resolve the neighbour first
    s.sendto(b"x", ("10.78.0.2", 5001)); time.sleep(0.2)
payload = b"\0" * 64
n = 0; end = time.time() + float(sys.argv[1])
while time.time() < end:
    s.sendto(payload, ("10.78.0.2", 5000)); n += 1
print(n)
PY
# Prints "sent received" for one blast of SECS seconds.
blast() {
  ip netns exec fbB python3 "$T/recv.py" "$SECS" > "$T/rx" &
  local rx=$!
  sleep 0.3
  local sent
  sent=$(ip netns exec fbA python3 "$T/send.py" "$SECS")
  wait $rx
  echo "$sent $(cat "$T/rx")"
}

# 1. dpdk-testpmd io-fwd between the two net_af_packet ports.
mkfifo "$T/stdin"
dpdk-testpmd --no-huge --no-pci --no-shconf -m 1024 -l 0,1 \
  --vdev=net_af_packet0,iface=fbva --vdev=net_af_packet1,iface=fbvb -- \
  --forward-mode=io --auto-start --total-num-mbufs=8192 < "$T/stdin" > "$T/testpmd.log" 2>&1 &
PIDS+=($!)
exec 3> "$T/stdin"
for _ in $(seq 200); do grep -q "Press enter to exit" "$T/testpmd.log" && break; sleep 0.1; done
read -r tp_sent tp_rx < <(blast)
echo >&3  # testpmd exits on a newline
exec 3>&-
wait "${PIDS[-1]}" || true

# 2. fathom emulate, the same devices, through the modelled fabric.
"$FATHOM" emulate "$SCEN" -e "h0=dpdk:net_af_packet0,iface=fbva" \
  -e "h1=dpdk:net_af_packet1,iface=fbvb" --listen 127.0.0.1:0 \
  --metrics-out "$T/metrics" 2> "$T/emulate.log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q ready "$T/emulate.log" && break; sleep 0.1; done
read -r em_sent em_rx < <(blast)
kill -TERM "${PIDS[-1]}"
wait "${PIDS[-1]}" || true

awk -v s="$SECS" -v ts="$tp_sent" -v tr="$tp_rx" -v es="$em_sent" -v er="$em_rx" 'BEGIN {
  printf "testpmd io-fwd:        sent %d, received %d: %.0f frames/s\n", ts, tr, tr / s
  printf "fathom emulate (DPDK): sent %d, received %d: %.0f frames/s\n", es, er, er / s
  if (tr > 0) printf "ratio emulate/testpmd: %.1f%% (goal >= 50%%)\n", 100 * er / tr
}'
grep "lateness after the model" "$T/emulate.log" | sed 's/^fathom emulate: //'
# The emulator adds its lateness once per frame, whatever the hops inside
# the model: per modelled hop it is the path's figure over its 4 links.
grep "lateness after the model" "$T/emulate.log" |
  sed -E 's/.*median ([0-9.]+) us, p99 ([0-9.]+) us.*/\1 \2/' |
  awk '{ printf "per modelled hop (4 links): median %.1f us, p99 %.1f us\n", $1 / 4, $2 / 4 }'
grep -E '^fathom_endpoint_drops_total.*[1-9][0-9]*$' "$T/metrics" || true
