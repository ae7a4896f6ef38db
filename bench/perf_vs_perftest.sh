#!/usr/bin/env bash
# `fathom perf` against rdma-core's perftest (ib_write_bw, ib_write_lat) in the
# same rxe VM pair and the same run, same sizes and iterations. Prints both
# tables and, last, "transport/perftest write_bw ratio: X.XX write_lat ratio:
# Y.YY" (bandwidth: ours / perftest's average, higher is better; latency: ours
# / perftest's typical, lower is better). A benchmark, not a test.
# Usage: bench/perf_vs_perftest.sh [BUILD_DIR] [SIZE] [ITERS]
set -euo pipefail
BUILD=${1:-build}
SIZE=${2:-65536}
ITERS=${3:-2000}
FATHOM="$(cd "$BUILD" && pwd)/tools/fathom"
OUT=$(mktemp -d /tmp/fathom-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

# Each VM runs the four servers/clients in sequence; the client retries until
# the server is listening (perftest's client fails at once otherwise).
read -r -d '' SCRIPT <<SCRIPT_EOF || true
retry() { for i in \$(seq 1 60); do "\$@" > try.out 2>&1 && { cat try.out; return 0; }; sleep 0.5; done; cat try.out; return 1; }
if [ "\$FATHOM_VM_ID" = 0 ]; then
  ib_write_bw -d \$FATHOM_RDMA_DEV -F -s $SIZE -n $ITERS > pt_bw.txt 2>&1
  "$FATHOM" perf write_bw -s $SIZE -n $ITERS > fa_bw.txt 2>&1
  ib_write_lat -d \$FATHOM_RDMA_DEV -F -s 2 -n $ITERS > pt_lat.txt 2>&1
  "$FATHOM" perf write_lat -s 2 -n $ITERS > fa_lat.txt 2>&1
else
  sleep 2; retry ib_write_bw -d \$FATHOM_RDMA_DEV -F -s $SIZE -n $ITERS \$FATHOM_VM0_IP4 > pt_bw.txt
  sleep 2; retry "$FATHOM" perf write_bw -s $SIZE -n $ITERS \$FATHOM_VM0_IP4 > fa_bw.txt
  sleep 2; retry ib_write_lat -d \$FATHOM_RDMA_DEV -F -s 2 -n $ITERS \$FATHOM_VM0_IP4 > pt_lat.txt
  sleep 2; retry "$FATHOM" perf write_lat -s 2 -n $ITERS \$FATHOM_VM0_IP4 > fa_lat.txt
fi
SCRIPT_EOF

"$FATHOM" testbed run --vms 2 --cmd "$SCRIPT" --out "$OUT" --timeout 900 > "$OUT/testbed.txt" 2>&1 \
  || { cat "$OUT/testbed.txt"; echo "testbed run failed" >&2; exit 1; }
C="$OUT/vm1"
cat "$C/pt_bw.txt" "$C/fa_bw.txt" "$C/pt_lat.txt" "$C/fa_lat.txt"
# The row whose first column is the size: BW average is column 4; t_typical column 5.
bw() { awk -v s="$1" '$1 == s && NF >= 5 { print $4; exit }' "$2"; }
lat() { awk -v s="$1" '$1 == s && NF >= 7 { print $5; exit }' "$2"; }
PT_BW=$(bw "$SIZE" "$C/pt_bw.txt"); FA_BW=$(bw "$SIZE" "$C/fa_bw.txt")
PT_LAT=$(lat 2 "$C/pt_lat.txt"); FA_LAT=$(lat 2 "$C/fa_lat.txt")
if [ -z "$PT_BW" ] || [ -z "$FA_BW" ] || [ -z "$PT_LAT" ] || [ -z "$FA_LAT" ]; then
  echo "could not read every result (perftest bw '$PT_BW' lat '$PT_LAT', fathom bw '$FA_BW' lat '$FA_LAT')" >&2
  exit 1
fi
awk -v fb="$FA_BW" -v pb="$PT_BW" -v fl="$FA_LAT" -v pl="$PT_LAT" \
  'BEGIN { printf "transport/perftest write_bw ratio: %.2f write_lat ratio: %.2f\n", fb / pb, fl / pl }'
