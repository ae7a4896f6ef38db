#!/bin/bash
# sim_pairs.sh: is build B of the simulator faster than build A? The quick
# companion of sim_ab.sh: runs the two sim_bench binaries alternately, one
# single run each per pair, pinned to one core, PAIRS times, and prints for
# each build its best, the mean of its best quarter and its median, then
# B/A of the best quarters and the median of the pairs' ratios.
#
# Why this way: a pair takes about half a second, so a machine phase (on the
# shared VMs here a core can run 20-30% slower for minutes at a time) spans
# many pairs and hits both builds alike; a neighbour only ever slows a run
# down, so the best quarter of each build is what it does on a quiet core.
# 20 pairs (15 s) told a 1% step from noise in this project, where sim_ab.sh
# needed 4-6 rounds of 2 minutes. Read both columns: when they disagree by
# more than 1%, run again.
#
# usage: bench/sim_pairs.sh A B [PAIRS] [K] [FLOW_BYTES] [CORE]
#   A, B        sim_bench binaries (as sim_ab.sh's arguments, PAIRS for ROUNDS)
#   PAIRS       default 20;  K default 16;  FLOW_BYTES default 2097152;  CORE default 0
set -euo pipefail

usage() {
  sed -n '/^# usage:/,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[[ $# -ge 2 ]] || usage
A=$1
B=$2
PAIRS=${3:-20}
K=${4:-16}
BYTES=${5:-2097152}
CORE=${6:-0}
for bin in "$A" "$B"; do
  [[ -x $bin ]] || { echo "sim_pairs: $bin is not an executable" >&2; exit 2; }
done
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "sim_pairs: PAIRS must be a positive integer, not '$PAIRS'" >&2; exit 2; }

# M hops/s of one run; exits when the bench fails.
rate() {
  local out
  if ! out=$(taskset -c "$CORE" "$1" "$K" "$BYTES" 2>&1); then
    echo "sim_pairs: $1 failed:" >&2
    echo "$out" >&2
    exit 1
  fi
  grep -o '[0-9.]* M hops/s' <<<"$out" | head -1 | cut -d' ' -f1
}

rows=""
for ((i = 1; i <= PAIRS; i++)); do
  rows+="$(rate "$A") $(rate "$B")"$'\n'
done
awk -v core="$CORE" -v k="$K" '
  NF == 2 { n++; a[n] = $1; b[n] = $2; r[n] = $2 / $1 }
  function sort(v, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
  }
  function median(v, n) { return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
  function top(v, n,   q, i, s) { q = int(n / 4); if (q < 1) q = 1; for (i = n - q + 1; i <= n; i++) s += v[i]; return s / q }
  END {
    sort(a, n); sort(b, n); sort(r, n)
    printf "k=%d core %d, %d pairs: A best %.1f top quarter %.2f median %.2f | B best %.1f top quarter %.2f median %.2f M hops/s\n", k, core, n, a[n], top(a, n), median(a, n), b[n], top(b, n), median(b, n)
    printf "B/A: top quarters %.3f, median of the pairs %.3f\n", top(b, n) / top(a, n), median(r, n)
  }' <<<"$rows"
