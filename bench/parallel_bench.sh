#!/bin/sh
# Distributed simulation (issue 30): a permutation of 2 MiB WRITEs on a
# k-ary fat-tree (500 ns links: the synchronization window) run by one
# process in the default order, one in the canonical order, and N MPI
# processes (oversubscribed when N exceeds the cores). Prints, for each:
# wall time, packet-hops/s, speedup and parallel efficiency against the
# one-process canonical run, peak RSS per process, windows and the packets
# and bytes that crossed between processes. Asserts nothing.
#   bench/parallel_bench.sh [FATHOM] [K] [PROCESSES...]   (default: build/tools/fathom 16 2)
# FLOW_BYTES=N sets the flows' size (default 2 MiB): a smaller k=32 run
#   (8,192 hosts) fits a loaded 2-core machine, e.g.
#   FLOW_BYTES=65536 bench/parallel_bench.sh build/tools/fathom 32 2
# MPIRUN_FLAGS replaces the launcher's tuning for a machine with fewer free
#   cores than processes (default: "--bind-to none --mca mpi_yield_when_idle 1":
#   a waiting process yields its core and may move to an idle one; see
#   docs/PARALLEL.md), e.g. MPIRUN_FLAGS= for Open MPI's defaults.
set -eu
MPIRUN_FLAGS=${MPIRUN_FLAGS---bind-to none --mca mpi_yield_when_idle 1}
FLOW_BYTES=${FLOW_BYTES:-2097152}
FATHOM=${1:-build/tools/fathom}
K=${2:-16}
shift 2 2>/dev/null || true
PROCS=${*:-2}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
cat > "$DIR/bench.yaml" <<YAML
name: parallel-bench-k$K
seed: 1
end_time_us: 1000000
topology:
  fat_tree:
    k: $K
    host_link: {rate_gbps: 100, latency_ns: 500}
    edge_link: {rate_gbps: 100, latency_ns: 500}
    core_link: {rate_gbps: 100, latency_ns: 500}
transport:
  ib_timeout: 14
workload:
  pattern: permutation
  flow_bytes: $FLOW_BYTES
YAML
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
ROOT=""
[ "$(id -u)" = 0 ] && ROOT="--allow-run-as-root"
# One run: "wall hops rss_kib..." from the JSON report and /usr/bin/time.
run() {
  label=$1
  shift
  start=$(date +%s.%N)
  "$@" > "$DIR/out.json" 2> "$DIR/err.txt"
  end=$(date +%s.%N)
  hops=$(grep -o '"packet_hops": *[0-9]*' "$DIR/out.json" | grep -o '[0-9]*$')
  digest=$(grep -o '"trace_digest": *"[0-9a-f]*"' "$DIR/out.json" | grep -o '[0-9a-f]\{16\}')
  rss=$(grep -o 'Maximum resident set size (kbytes): [0-9]*' "$DIR/err.txt" | grep -o '[0-9]*$' | tr '\n' ' ')
  sync=$(grep -o 'parallel .*' "$DIR/err.txt" || true)
  wall=$(echo "$end - $start" | bc -l)
  printf '%-22s wall %7.3f s  %6.2f M hops/s  digest %s  peak RSS/process %s KiB\n' \
    "$label" "$wall" "$(echo "$hops / $wall / 1000000" | bc -l)" "$digest" "$rss"
  [ -n "$sync" ] && printf '%22s %s\n' "" "$sync"
  echo "$wall" > "$DIR/wall.$label"
}
T="/usr/bin/time -v"
run "1 process, default" $T "$FATHOM" sim "$DIR/bench.yaml" --json
run "1 process, canonical" $T "$FATHOM" sim "$DIR/bench.yaml" --json --event-order canonical
base=$(cat "$DIR/wall.1 process, canonical")
for n in $PROCS; do
  run "$n processes" mpirun --oversubscribe $ROOT $MPIRUN_FLAGS -np "$n" $T "$FATHOM" sim "$DIR/bench.yaml" --json
  w=$(cat "$DIR/wall.$n processes")
  printf '%22s speedup %.2f, efficiency %.0f%% (against 1 process, canonical)\n' "" \
    "$(echo "$base / $w" | bc -l)" "$(echo "100 * $base / $w / $n" | bc -l)"
done
