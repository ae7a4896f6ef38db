#!/usr/bin/env bash
# `fathom perf` against rdma-core's perftest (ib_write_bw, ib_write_lat) in the
# same rxe VM pair and the same run, same sizes and iterations. Prints both
# tables and, last, "transport/perftest write_bw ratio: X.XX write_lat ratio:
# Y.YY" (bandwidth: ours / perftest's average, higher is better; latency: ours
# / perftest's typical, lower is better). A benchmark, not a test.
# Usage: bench/perf_vs_perftest.sh [BUILD_DIR] [BW_SIZE] [BW_ITERS] [LAT_ITERS] [REPS]
# The defaults fit TCG VMs (ib_write_bw moves about 10 MB/s there). TCG VMs
# on a shared machine are noisy, so each tool runs REPS times, interleaved
# (perftest first in odd repetitions, fathom first in even ones), and the
# ratios compare medians. Run it under
# `flock /tmp/fathom-vm.lock` on shared machines. The outputs (each VM's files,
# each step's exit status) stay in the directory printed on a failure, or
# always with KEEP=1. CONTROL=1 runs perftest in both slots (an A/A control).
set -euo pipefail
BUILD=${1:-build}
SIZE=${2:-65536}
ITERS=${3:-500}
LAT_ITERS=${4:-1000}
REPS=${5:-3}
# CONTROL=1: an A/A control run, perftest in fathom's slot too; its "ratios"
# show how far apart two runs of the same tool land on this machine.
CONTROL=${CONTROL:-0}
FATHOM="$(cd "$BUILD" && pwd)/tools/fathom"
OUT=$(mktemp -d /tmp/fathom-bench.XXXXXX)
fail() {
  echo "perf_vs_perftest: $*; outputs kept in $OUT" >&2
  exit 1
}

# Each step has its own TCP port, so a client never reaches the previous
# step's server while that one is still exiting (perftest and fathom's
# bootstrap both default to 18515). The client retries until its server
# listens (perftest's client fails at once otherwise); every step is bounded
# and its exit status is kept in steps.txt. Both tools use the IPv4-mapped
# RoCE v2 GID (index 1 on rxe) and the same message size, iterations and
# TX depth (perftest's default, 128).
read -r -d '' SCRIPT <<SCRIPT_EOF || true
HW=/sys/class/infiniband/\$FATHOM_RDMA_DEV/ports/1/hw_counters
snap() { for c in \$HW/*; do echo "\$(basename \$c) \$(cat \$c)"; done; echo "eth0_rx_dropped \$(cat /sys/class/net/eth0/statistics/rx_dropped)"; }
# A step's exit status and the rxe counters that moved (retransmissions show
# up as duplicate_request / out_of_seq_request / rcvd_seq_err).
record() {
  snap > after.cnt
  moved=\$(awk 'NR == FNR { b[\$1] = \$2; next } \$2 != b[\$1] { printf " %s+%d", \$1, \$2 - b[\$1] }' before.cnt after.cnt)
  echo "\$* \$moved" >> steps.txt
}
step() { name=\$1; shift; snap > before.cnt; timeout 300 "\$@" > \$name.txt 2>&1; record \$name rc=\$?; }
retry() {
  name=\$1; shift
  snap > before.cnt
  for i in \$(seq 1 120); do
    timeout 300 "\$@" > \$name.txt 2>&1; rc=\$?
    grep -q -i -e "Couldn't connect" -e "connection refused" -e "unable to connect" -e "cannot connect" \$name.txt || break
    sleep 0.5
  done
  record \$name rc=\$rc tries=\$i
}
PT="-d \$FATHOM_RDMA_DEV -x 1 -F"
# perftest converts CPU cycles to time with the guest's "cpu MHz", which a
# TCG guest calibrates at boot; fathom reads the same counter (rdtsc) and
# scales it by the monotonic clock over the whole loop.
echo "vm\$FATHOM_VM_ID \$(grep -m1 'cpu MHz' /proc/cpuinfo)" >> steps.txt
# The guest's clocksource, at the start and the end: a TCG guest whose TSC the
# watchdog marks unstable falls back to hpet or acpi_pm, where clock_gettime
# is a system call and an emulated device read instead of a vDSO read.
CS=/sys/devices/system/clocksource/clocksource0
clocksource() { echo "vm\$FATHOM_VM_ID \$1 clocksource \$(cat \$CS/current_clocksource) (available: \$(cat \$CS/available_clocksource))" >> steps.txt; }
clocksource start
# Which tool goes first alternates, so neither always runs right after the other.
run_pair() {
  test=\$1 first=\$2 second=\$3 p=\$4 pt_args=\$5 fa_args=\$6
  for t in \$first \$second; do
    if [ \$t = pt ]; then port=\$p; else port=\$((p + 1)); fi
    if [ "\$FATHOM_VM_ID" = 0 ]; then
      if [ \$t = pt ]; then step pt_\$test.\$r ib_write_\$test \$PT -p \$port \$pt_args
      elif [ "$CONTROL" = 1 ]; then step fa_\$test.\$r ib_write_\$test \$PT -p \$port \$pt_args
      else step fa_\$test.\$r "$FATHOM" perf write_\$test -p \$port --bind \$FATHOM_VM0_IP4 \$fa_args; fi
    else
      if [ \$t = pt ]; then retry pt_\$test.\$r ib_write_\$test \$PT -p \$port \$pt_args \$FATHOM_VM0_IP4
      elif [ "$CONTROL" = 1 ]; then retry fa_\$test.\$r ib_write_\$test \$PT -p \$port \$pt_args \$FATHOM_VM0_IP4
      else retry fa_\$test.\$r "$FATHOM" perf write_\$test -p \$port \$fa_args \$FATHOM_VM0_IP4; fi
    fi
  done
}
for r in \$(seq 1 $REPS); do
  if [ \$((r % 2)) = 1 ]; then a=pt b=fa; else a=fa b=pt; fi
  run_pair bw \$a \$b \$((18500 + 10 * r)) "-s $SIZE -n $ITERS" "-s $SIZE -n $ITERS"
  run_pair lat \$a \$b \$((18502 + 10 * r)) "-s 2 -n $LAT_ITERS" "-s 2 -n $LAT_ITERS"
done
clocksource end
dmesg | grep -i -e clocksource -e 'tsc' | sed "s/^/vm\$FATHOM_VM_ID dmesg: /" >> steps.txt
cat steps.txt
SCRIPT_EOF

if ! "$FATHOM" testbed run --vms 2 --cmd "$SCRIPT" --out "$OUT" --timeout 1500 \
  > "$OUT/testbed.txt" 2>&1; then
  cat "$OUT/testbed.txt"
  for v in 0 1; do
    for f in "$OUT/vm$v"/*.txt; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done
  done
  fail "testbed run failed"
fi
C="$OUT/vm1"
echo "== steps (exit status, rxe counters that moved) in vm0 (servers), then vm1 (clients)"
cat "$OUT/vm0/steps.txt" "$C/steps.txt" || fail "a VM wrote no steps.txt"
# The row whose first column is the size: BW average is column 4; t_typical column 5.
bw() { awk -v s="$1" '$1 == s && NF >= 5 { print $4; exit }' "$2"; }
lat() { awk -v s="$1" '$1 == s && NF >= 7 { print $5; exit }' "$2"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
PT_BWS="" FA_BWS="" PT_LATS="" FA_LATS="" BW_RATIOS="" LAT_RATIOS=""
for r in $(seq 1 "$REPS"); do
  echo "== repetition $r"
  cat "$C/pt_bw.$r.txt" "$C/fa_bw.$r.txt" "$C/pt_lat.$r.txt" "$C/fa_lat.$r.txt" ||
    fail "repetition $r: a step wrote no output"
  v=$(bw "$SIZE" "$C/pt_bw.$r.txt") && PT_BWS+="$v "
  v=$(bw "$SIZE" "$C/fa_bw.$r.txt") && FA_BWS+="$v "
  v=$(lat 2 "$C/pt_lat.$r.txt") && PT_LATS+="$v "
  v=$(lat 2 "$C/fa_lat.$r.txt") && FA_LATS+="$v "
  # Each repetition's own ratio: its two runs were neighbours in time, so a
  # load change on the host hits them alike more often than runs further apart.
  BW_RATIOS+="$(awk -v f="$(bw "$SIZE" "$C/fa_bw.$r.txt")" -v p="$(bw "$SIZE" "$C/pt_bw.$r.txt")" \
    'BEGIN { if (p > 0) printf "%.2f", f / p; else printf "-" }') "
  LAT_RATIOS+="$(awk -v f="$(lat 2 "$C/fa_lat.$r.txt")" -v p="$(lat 2 "$C/pt_lat.$r.txt")" \
    'BEGIN { if (p > 0) printf "%.2f", f / p; else printf "-" }') "
done
n() { echo $1 | wc -w; }
if [ "$(n "$PT_BWS")" != "$REPS" ] || [ "$(n "$FA_BWS")" != "$REPS" ] ||
  [ "$(n "$PT_LATS")" != "$REPS" ] || [ "$(n "$FA_LATS")" != "$REPS" ]; then
  fail "could not read every result (perftest bw '$PT_BWS' lat '$PT_LATS', fathom bw '$FA_BWS' lat '$FA_LATS')"
fi
PT_BW=$(echo $PT_BWS | tr ' ' '\n' | median); FA_BW=$(echo $FA_BWS | tr ' ' '\n' | median)
PT_LAT=$(echo $PT_LATS | tr ' ' '\n' | median); FA_LAT=$(echo $FA_LATS | tr ' ' '\n' | median)
echo "write_bw ${SIZE} B x ${ITERS}, BW average [MB/sec] per repetition: perftest $PT_BWS(median $PT_BW), fathom $FA_BWS(median $FA_BW)"
echo "write_lat 2 B x ${LAT_ITERS}, t_typical [usec] per repetition: perftest $PT_LATS(median $PT_LAT), fathom $FA_LATS(median $FA_LAT)"
echo "per-repetition ratios (fathom / perftest): write_bw $BW_RATIOS(median $(echo $BW_RATIOS | tr ' ' '\n' | median)), write_lat $LAT_RATIOS(median $(echo $LAT_RATIOS | tr ' ' '\n' | median))"
[ "$CONTROL" = 1 ] && echo "CONTROL=1: perftest ran in fathom's slot too; the ratios below are the noise floor"
echo "host load while it ran: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min; $(nproc) CPUs)"
if [ "${KEEP:-0}" = 1 ]; then echo "outputs kept in $OUT"; else rm -rf "$OUT"; fi
awk -v fb="$FA_BW" -v pb="$PT_BW" -v fl="$FA_LAT" -v pl="$PT_LAT" \
  'BEGIN { printf "transport/perftest write_bw ratio: %.2f write_lat ratio: %.2f\n", fb / pb, fl / pl }'
