#!/bin/bash
# sim_ab.sh: is build B of the simulator faster than build A? Runs the two
# sim_bench binaries one at a time, pinned to one core, in ABBA order for
# ROUNDS rounds (each run --repeat 3, its best M hops/s kept), and prints
# each round's ratio B/A and their geometric mean.
#
# Why this way: on the shared VMs here, one core can run 20-30% slower than
# the other for minutes at a time, and both drift. Pinning keeps a round on
# one core, ABBA cancels a drift within the round, and a ratio per round
# cancels the phase between rounds: a 2% step shows within 4-6 rounds,
# where medians of separate runs needed 15 or more.
#
# --pairs: the same question in about 15 s. Alternates single runs of A and
# B, ROUNDS pairs (default 20), and prints each build's best, the mean of
# its best quarter and its median, then B/A of the best quarters and the
# median of the pairs' ratios. A pair takes half a second, so a phase spans
# many pairs and hits both builds alike, and a neighbour only slows a run
# down: the best quarter is what a build does on a quiet core. 20 pairs
# told the 1% steps of stop 22 from noise (two builds of the same code gave
# 0.997 and 0.994); when the two columns disagree by more than 1%, run again.
#
# usage: bench/sim_ab.sh [--pairs] A B [ROUNDS] [K] [FLOW_BYTES] [CORE]
#   A, B        sim_bench binaries (e.g. a worktree's build-release/bench/sim_bench)
#   ROUNDS      default 5 (--pairs: 20);  K default 16;  FLOW_BYTES default 2097152;  CORE default 0
set -euo pipefail
shopt -s inherit_errexit  # a failed run inside $(...) stops the script

usage() {
  sed -n '/^# usage:/,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
PAIRS=false
if [[ ${1:-} == --pairs ]]; then
  PAIRS=true
  shift
fi
[[ $# -ge 2 ]] || usage
A=$1
B=$2
ROUNDS=${3:-$($PAIRS && echo 20 || echo 5)}
K=${4:-16}
BYTES=${5:-2097152}
CORE=${6:-0}
for bin in "$A" "$B"; do
  [[ -x $bin ]] || { echo "sim_ab: $bin is not an executable" >&2; exit 2; }
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "sim_ab: ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2; }

# M hops/s of each run of `$1 ARGS...` (one line each); exits when the
# bench fails.
rates() {
  local bin=$1 out
  shift
  if ! out=$(taskset -c "$CORE" "$bin" "$@" "$K" "$BYTES" 2>&1); then
    echo "sim_ab: $bin failed:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "$out" | grep -o '[0-9.]* M hops/s' | awk '{print $1}'
}

if $PAIRS; then
  rows=""
  for ((i = 1; i <= ROUNDS; i++)); do
    a=$(rates "$A")
    b=$(rates "$B")
    rows+="$a $b"$'\n'
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
  exit 0
fi

# Best M hops/s of one --repeat 3 run.
best() {
  local r
  r=$(rates "$1" --repeat 3)
  echo "$r" | sort -n | tail -1
}

ratios=()
for ((i = 1; i <= ROUNDS; i++)); do
  a1=$(best "$A")
  b1=$(best "$B")
  b2=$(best "$B")
  a2=$(best "$A")
  r=$(awk -v a1="$a1" -v a2="$a2" -v b1="$b1" -v b2="$b2" \
    'BEGIN { a = a1 > a2 ? a1 : a2; b = b1 > b2 ? b1 : b2; printf "%.3f", b / a }')
  echo "round $i (core $CORE): A $a1 $a2  B $b1 $b2 M hops/s  B/A $r"
  ratios+=("$r")
done
printf '%s\n' "${ratios[@]}" |
  awk '{ s += log($1) } END { printf "geometric mean B/A over %d rounds: %.3f\n", NR, exp(s / NR) }'
