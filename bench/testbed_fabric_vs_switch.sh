#!/usr/bin/env bash
# Two rxe VMs, ib_write_bw from vm1 to vm0, through the live emulator's
# modelled leaf-spine (`fathom testbed run --fabric`, issue 29) and through
# the plain host switch (`fathom testbed run`), in the same run: REPS
# rounds, the wiring order alternating (fabric first in odd rounds), each
# round booting a fresh VM pair per wiring. Prints every result and, last,
# "ib_write_bw fabric/switch: X.XX (median MB/s fabric F, switch S)". A
# benchmark, not a test. The fabric is scenarios/live/two_leaf_clean.yaml
# (10 Gb/s links, 1 us each: not the bottleneck for TCG VMs, which move
# about 10 MB/s), at time dilation 1.
# Usage: bench/testbed_fabric_vs_switch.sh [BUILD_DIR] [SIZE] [ITERS] [REPS]
# Run it under `flock /tmp/fathom-vm.lock` on shared machines. KEEP=1 keeps
# the outputs (each run's testbed output, the fabric's metrics).
set -euo pipefail
BUILD=${1:-build}
SIZE=${2:-65536}
ITERS=${3:-500}
REPS=${4:-1}
SRC="$(cd "$(dirname "$0")/.." && pwd)"
FATHOM="$(cd "$BUILD" && pwd)/tools/fathom"
SCENARIO="$SRC/scenarios/live/two_leaf_clean.yaml"
OUT=$(mktemp -d /tmp/fathom-bench.XXXXXX)
fail() {
  echo "testbed_fabric_vs_switch: $*; outputs kept in $OUT" >&2
  exit 1
}
# vm0 serves, vm1 connects (retrying until the server listens); IPv4 GID.
PT="ib_write_bw -d rxe0 -x 1 -F -s $SIZE -n $ITERS -p 18600"
CLIENT="for i in \$(seq 1 60); do $PT \$FATHOM_VM0_IP4 > bw.txt 2>&1 && break; sleep 0.5; done; cat bw.txt"

run() {  # run NAME [fathom testbed flags...]
  local name=$1
  shift
  local t0=$SECONDS
  if ! "$FATHOM" testbed run --vms 2 --vm-cmd "0=timeout 300 $PT" --vm-cmd "1=timeout 300 sh -c '$CLIENT'" \
    --timeout 400 "$@" > "$OUT/$name.txt" 2>&1; then
    cat "$OUT/$name.txt"
    fail "$name: testbed run failed"
  fi
  # The client's row for SIZE: BW average [MB/sec] is column 4.
  local bw
  bw=$(awk -v s="$SIZE" '$1 == s && NF >= 5 { v = $4 } END { if (v != "") print v }' "$OUT/$name.txt")
  [ -n "$bw" ] || { cat "$OUT/$name.txt"; fail "$name: no ib_write_bw result"; }
  echo "$name: ib_write_bw ${SIZE} B x ${ITERS}: ${bw} MB/s (boot + run $((SECONDS - t0)) s)"
  echo "$bw" >> "$OUT/${name%%.*}.bw"
}

for r in $(seq 1 "$REPS"); do
  if [ $((r % 2)) = 1 ]; then order="fabric switch"; else order="switch fabric"; fi
  for w in $order; do
    if [ "$w" = fabric ]; then
      run "fabric.$r" --fabric "$SCENARIO" --metrics-out "$OUT/fabric.$r.metrics"
      # What the modelled fabric did to the frames: drops by reason, lateness.
      grep -E '^fathom_fabric_drops_total|^fathom_emulator_lateness_max_seconds|^fathom_port_xmit_packets_total\{link="leaf[01]->spine' \
        "$OUT/fabric.$r.metrics" | grep -v ' 0$' | sed 's/^/  /' || true
    else
      run "switch.$r"
    fi
  done
done
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
F=$(median < "$OUT/fabric.bw")
S=$(median < "$OUT/switch.bw")
echo "host load while it ran: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min; $(nproc) CPUs)"
awk -v f="$F" -v s="$S" 'BEGIN { printf "ib_write_bw fabric/switch: %.2f (median MB/s fabric %s, switch %s)\n", (s > 0 ? f / s : 0), f, s }'
if [ "${KEEP:-0}" = 1 ]; then echo "outputs kept in $OUT"; else rm -rf "$OUT"; fi
