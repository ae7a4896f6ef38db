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
# usage: bench/sim_ab.sh A B [ROUNDS] [K] [FLOW_BYTES] [CORE]
#   A, B        sim_bench binaries (e.g. a worktree's build-release/bench/sim_bench)
#   ROUNDS      default 5;  K default 16;  FLOW_BYTES default 2097152;  CORE default 0
set -euo pipefail

usage() {
  sed -n '/^# usage:/,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[[ $# -ge 2 ]] || usage
A=$1
B=$2
ROUNDS=${3:-5}
K=${4:-16}
BYTES=${5:-2097152}
CORE=${6:-0}
for bin in "$A" "$B"; do
  [[ -x $bin ]] || { echo "sim_ab: $bin is not an executable" >&2; exit 2; }
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "sim_ab: ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2; }

# Best M hops/s of one --repeat 3 run; exits when the bench fails.
best() {
  local out
  if ! out=$(taskset -c "$CORE" "$1" --repeat 3 "$K" "$BYTES" 2>&1); then
    echo "sim_ab: $1 failed:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "$out" | grep -o '[0-9.]* M hops/s' | awk '{print $1}' | sort -n | tail -1
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
