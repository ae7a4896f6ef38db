#!/usr/bin/env bash
# Tree vs ring allreduce on `fathom coll`'s default fabric and profile (the
# lossless RoCE class with ECN/DCQCN, cx6 NICs; issue 26): one size, both
# algorithms, timing only (--modelled: 128 ranks x 64 MiB of buffers would
# not fit), one iteration each. Prints each run's virtual time, busbw and
# wall time, then the tree/ring ratio and whether the tree stays within 2x
# of the ring (no collapse). The ring at 64 MiB on medium takes minutes of
# wall time on a loaded 2-core machine.
#
# Usage: bench/coll_tree_vs_ring.sh [BUILD_DIR] [SIZE] [EXTRA COLL FLAGS...]
#   default: build 64M on --topology medium (16 servers x 8 H100 = 128 ranks)
#   e.g.     bench/coll_tree_vs_ring.sh build 4M --ranks 16 --server none
set -euo pipefail
BUILD=${1:-build}
SIZE=${2:-64M}
shift $(($# > 2 ? 2 : $#))
FATHOM="$BUILD/tools/fathom"
[ -x "$FATHOM" ] || { echo "no $FATHOM (build the fathom target)" >&2; exit 2; }
# The topology unless the extra flags name one.
TOPO=(--topology medium)
for a in "$@"; do [ "$a" = "--topology" ] && TOPO=(); done

declare -A T
for algo in ring tree; do
  start=$(date +%s.%N)
  out=$("$FATHOM" coll allreduce "${TOPO[@]}" -b "$SIZE" -e "$SIZE" -n 1 -w 0 -c 0 --modelled \
        --algo "$algo" --json "$@")
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  t=$(echo "$out" | grep -o '"out_of_place":{"time_us":[0-9.e+-]*' | head -1 | sed 's/.*://')
  bw=$(echo "$out" | grep -o '"busbw_gbs":[0-9.e+-]*' | head -1 | sed 's/.*://')
  where=$(echo "$out" | grep -o '"nranks":[0-9]*,"topology":"[^"]*","profile":"[^"]*","fabric":"[^"]*","ecn":[a-z]*,"dcqcn":[a-z]*' | head -1)
  [ -n "$t" ] || { echo "$algo: no time in the output:" >&2; echo "$out" >&2; exit 1; }
  T[$algo]=$t
  printf "coll_tree_vs_ring: %s allreduce %s: %.2f us virtual, busbw %s GB/s, wall %.1f s (%s)\n" \
    "$algo" "$SIZE" "$t" "${bw:-?}" "$wall" "$where"
done
ratio=$(echo "scale=3; ${T[tree]} / ${T[ring]}" | bc)
verdict=$(echo "$ratio < 2" | bc)
printf "coll_tree_vs_ring: tree / ring at %s = %s (%s)\n" "$SIZE" "$ratio" \
  "$([ "$verdict" = 1 ] && echo "within 2x" || echo "NOT within 2x")"
