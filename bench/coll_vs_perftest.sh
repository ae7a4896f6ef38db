#!/usr/bin/env bash
# `fathom coll allreduce --backend verbs` (2 ranks, ring, one per VM) against
# perftest's ib_write_bw in the same rxe VM pair and the same run. Prints
# ib_write_bw's table (unidirectional, and bidirectional with -b: a 2-rank
# ring allreduce sends and receives on both sides at once), the coll table,
# ib_write_bw again, and last: "coll ring allreduce busbw X Gb/s,
# ib_write_bw Y Gb/s (before, after; bidir Z Gb/s per direction): ratio R
# (R2 vs bidir)", Y the mean of the two unidirectional runs. busbw of a 2-rank allreduce
# is S / time: the bytes each rank sends (and receives) per second, the same
# quantity ib_write_bw measures per direction. Gb/s = 1e9 bit/s on both
# sides (perftest's --report_gbits; nccl-tests' GB/s x 8). A benchmark, not a
# test. Run it under `flock /tmp/fathom-vm.lock` on a shared machine.
# A perftest reading of 0 (its clock calibration can fail in a TCG VM: "r^2
# < 0.9") is left out of the mean and said so.
# Usage: bench/coll_vs_perftest.sh [BUILD_DIR] [SIZE] [ITERS] [EXTRA COLL FLAGS...]
set -euo pipefail
BUILD=${1:-build}
SIZE=${2:-4194304}
ITERS=${3:-20}
shift $(( $# > 3 ? 3 : $# ))
EXTRA="$*"
FATHOM="$(cd "$BUILD" && pwd)/tools/fathom"
OUT=$(mktemp -d /tmp/fathom-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

# perftest's client fails at once when its server is not up yet: retry.
# The collective's ranks find each other through the bootstrap by themselves.
# ib_write_bw moves ITERS x SIZE per direction (perftest: timeout 14).
PT="ib_write_bw -d \$FATHOM_RDMA_DEV -F --report_gbits -s $SIZE -n $ITERS"
COLL="\"$FATHOM\" coll allreduce --backend verbs --nranks 2 --bootstrap \$FATHOM_VM0_IP4:18800 \
--algo ring -b $SIZE -e $SIZE -n $ITERS -w 2 $EXTRA --rank \$FATHOM_VM_ID"
read -r -d '' SCRIPT <<SCRIPT_EOF || true
retry() { for i in \$(seq 1 60); do "\$@" > try.out 2>&1 && { cat try.out; return 0; }; sleep 0.5; done; cat try.out; return 1; }
if [ "\$FATHOM_VM_ID" = 0 ]; then
  $PT > pt_bw.txt 2>&1
  $PT -b > pt_bibw.txt 2>&1
else
  sleep 2; retry $PT \$FATHOM_VM0_IP4 > pt_bw.txt
  sleep 2; retry $PT -b \$FATHOM_VM0_IP4 > pt_bibw.txt
fi
sleep 2
# rxe's counters around the collective: retransmissions (duplicate_request,
# out_of_seq_request, rcvd_seq_err) and drops explain a low figure.
HW=/sys/class/infiniband/\$FATHOM_RDMA_DEV/ports/1/hw_counters
for c in \$HW/*; do echo "\$(basename \$c) \$(cat \$c)"; done > cnt.before
$COLL > coll.txt 2>&1
for c in \$HW/*; do echo "\$(basename \$c) \$(cat \$c)"; done > cnt.after
awk 'NR == FNR { b[\$1] = \$2; next } \$2 != b[\$1] { printf "%s+%d ", \$1, \$2 - b[\$1] }' cnt.before cnt.after > cnt.moved
# ib_write_bw again: the VMs' speed drifts with the host's load; the ratio
# uses the mean of the runs before and after the collective.
sleep 2
if [ "\$FATHOM_VM_ID" = 0 ]; then
  $PT > pt_bw2.txt 2>&1
else
  sleep 2; retry $PT \$FATHOM_VM0_IP4 > pt_bw2.txt
fi
SCRIPT_EOF

"$FATHOM" testbed run --vms 2 --cmd "$SCRIPT" --out "$OUT" --timeout 1200 > "$OUT/testbed.txt" 2>&1 \
  || { cat "$OUT/testbed.txt"; cat "$OUT"/vm*/coll.txt 2>/dev/null; echo "testbed run failed" >&2; exit 1; }
cat "$OUT/vm1/pt_bw.txt" "$OUT/vm1/pt_bibw.txt" "$OUT/vm0/coll.txt" "$OUT/vm1/pt_bw2.txt"
for vm in 0 1; do echo "rxe counters moved during the collective, vm$vm: $(cat "$OUT/vm$vm/cnt.moved")"; done
# perftest: the row whose first column is the size, BW average is column 4.
# coll: the row whose first column is the size, out-of-place busbw column 8.
PT_BW=$(awk -v s="$SIZE" '$1 == s && NF >= 5 { print $4; exit }' "$OUT/vm1/pt_bw.txt")
PT_BW2=$(awk -v s="$SIZE" '$1 == s && NF >= 5 { print $4; exit }' "$OUT/vm1/pt_bw2.txt")
PT_BIBW=$(awk -v s="$SIZE" '$1 == s && NF >= 5 { print $4; exit }' "$OUT/vm1/pt_bibw.txt")
CO_BUS=$(awk -v s="$SIZE" '$1 == s && NF >= 13 { print $8; exit }' "$OUT/vm0/coll.txt")
CO_TIME=$(awk -v s="$SIZE" '$1 == s && NF >= 13 { print $6; exit }' "$OUT/vm0/coll.txt")
if [ -z "$PT_BW" ] || [ -z "$PT_BW2" ] || [ -z "$PT_BIBW" ] || [ -z "$CO_TIME" ]; then
  echo "could not read every result (ib_write_bw '$PT_BW' '$PT_BW2' bidir '$PT_BIBW', coll time '$CO_TIME')" >&2
  exit 1
fi
# busbw from the time (the table rounds GB/s to 2 decimals): S / t.
awk -v s="$SIZE" -v t="$CO_TIME" -v pb1="$PT_BW" -v pb2="$PT_BW2" -v pbb="$PT_BIBW" 'BEGIN {
  cb = s * 8 / (t * 1e3);  # bits per microsecond / 1e3 = Gb/s
  if (pb1 + 0 == 0 && pb2 + 0 == 0) { print "both ib_write_bw runs read 0 Gb/s: no ratio" > "/dev/stderr"; exit 1 }
  if (pb1 + 0 == 0 || pb2 + 0 == 0) print "one ib_write_bw run read 0 Gb/s (perftest clock calibration): left out"
  pb = pb1 + 0 == 0 ? pb2 : pb2 + 0 == 0 ? pb1 : (pb1 + pb2) / 2;
  pbd = pbb / 2;           # perftest -b reports both directions together
  printf "coll ring allreduce busbw %.4f Gb/s, ib_write_bw %.4f Gb/s (before %.4f, after %.4f; bidir %.4f Gb/s per direction): ratio %.2f (%.2f vs bidir)\n",
         cb, pb, pb1, pb2, pbd, cb / pb, cb / pbd }'
