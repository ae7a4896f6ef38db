#!/usr/bin/env bash
# The seed's validation step (issue 31): all-reduce busbw against the
# theoretical peak on the three scale levels, per size; the goal is >= 90%.
# Runs `fathom coll allreduce --modelled --algo ring` (timing only: no bytes
# move, the fabric and NVLink are timed as in a checked run) on:
#   small  16 ranks (2 servers, rail-only back-to-back copper)
#   medium 128 ranks (16 servers, leaf-spine)
#   large  64 ranks (8 of the 128 servers of the fat-tree; the full level's
#          1024 ranks take far longer, see h/collscale's benchmark)
# The peak of a hierarchical ring allreduce (8 channels, one per NIC) is
# min(NVLink per GPU, 8 NICs x the rail's payload rate): every NIC carries
# one channel's inter-server hop, NVLink carries every channel's hops inside
# the server. The rail's payload rate is the JSON's bandwidth_gbs (the
# world's alpha-beta: the line rate times payload / frame bytes at the path
# MTU). Below 90% the line says why:
#   model: the alpha term, 2(n-1) ring steps x alpha (the slowest hop's
#          latency: NVLink's 0.47 us per transfer, or the JSON's network
#          alpha_us), is over 10% of the time (small sizes: latency, not
#          bandwidth, bounds the ring);
#   topology: hot links (ECMP placed several rings' flows on one link: the
#          row's hot_links, worlds/hot_links.h); both when both apply;
#   else: "unexplained" with the figures.
#   topology: packets dropped / ACK timeouts (the row's counters: a lossy
#          fabric where collisions overflow a queue);
# The model line's alpha term is an upper bound (every step at the slowest
# hop's latency).
# Configurations (CONFIGS, default all six below; small runs qps1 only: its
# back-to-back copper has no ECMP), one table each:
#   qps1, qps2, qps4    --qps-per-connection N (NCCL_IB_QPS_PER_CONNECTION,
#                       whole messages round-robin over the QPs, NCCL's
#                       default since 2.20), on the level's preset;
#   qps4split           the same with --split-data-on-qps 1;
#   rail, rail-qps4     the level rail-optimized (medium:rail, large:rail:
#                       NIC i of every server on leaf/edge i, as production
#                       clusters are cabled), qps 1 and 4.
# CONFIGS=qps1 gives one table per level, the presets with one QP.
# A benchmark, not a test: run it by hand. COLL_FLAGS adds flags to every
# run (e.g. '--fabric lossless').
# Usage: bench/coll_peak.sh [BUILD_DIR] [MIN_BYTES] [MAX_BYTES] [LEVEL...]
set -euo pipefail
BUILD=${1:-build}
MIN=${2:-1M}
MAX=${3:-256M}
shift $(( $# > 3 ? 3 : $# ))
LEVELS=("$@")
[ ${#LEVELS[@]} -eq 0 ] && LEVELS=(small medium large)
FATHOM="$(cd "$BUILD" && pwd)/tools/fathom"
PY=$(mktemp /tmp/fathom-coll-peak.XXXXXX.py)
trap 'rm -f "$PY"' EXIT
cat > "$PY" <<'PY_EOF'
import json, os
j = json.loads(os.environ["JSON"])
level, n, nvlink = os.environ["LEVEL"], int(os.environ["RANKS"]), float(os.environ["NVLINK"])
config = os.environ.get("CONFIG", "qps1")
rail = j["bandwidth_gbs"]
# A ring step waits for its slowest hop's latency: NVLink's per-transfer
# 0.47 us (h100 preset, topologies/server.cc) inside the servers, the JSON's
# alpha (the network path) between them.
alpha = max(j["alpha_us"], float(os.environ["NVLINK_ALPHA"]))
peak = min(nvlink, 8 * rail)
print("# %s [%s: topology %s, %s]: %d ranks, rail payload %.2f GB/s x 8 NICs, NVLink %.0f GB/s: "
      "peak busbw %.2f GB/s; alpha %.3f us (network %.3f us)" % (
          level, config, j["topology"], os.environ["CONFIG_FLAGS"].strip() or "qps 1", n, rail,
          nvlink, peak, alpha, j["alpha_us"]))
print("%12s %12s %9s %9s %7s  why" % ("size", "time_us", "busbw", "peak", "ratio"))
for r in j["rows"]:
    m = r["out_of_place"]
    ratio = m["busbw_gbs"] / peak
    why = ""
    if ratio < 0.9:
        alpha_us = 2 * (n - 1) * alpha
        hot = r.get("hot_links", [])
        reasons = []
        if hot:
            reasons.append("topology: ECMP collisions, %d hot links, %s "
                           "(rings sharing a link split its rate)" % (
                               len(hot), ", ".join("%s at %.1fx the mean" % (h["link"], h["x_mean"])
                                                   for h in hot[:3])))
        c = r.get("counters", {})
        drops = sum(v for k, v in c.items() if k.startswith("drops_"))
        if drops or c.get("local_ack_timeout_err", 0):
            reasons.append("topology: %d packets dropped, %d retransmitted, %d ACK timeouts "
                           "(a lossy fabric under collisions; try COLL_FLAGS='--fabric lossless')" % (
                               drops, c.get("retransmitted_packets", 0),
                               c.get("local_ack_timeout_err", 0)))
        if alpha_us > 0.1 * m["time_us"]:
            reasons.append("model: alpha term <= 2(n-1) x %.2f us = %.1f us of %.1f us (latency)" % (
                alpha, alpha_us, m["time_us"]))
        why = "; ".join(reasons) or "unexplained: no alpha share or hot link accounts for it"
    print("%12d %12.1f %9.2f %9.2f %6.1f%%  %s" % (r["size"], m["time_us"], m["busbw_gbs"], peak,
                                                   100 * ratio, why))
PY_EOF
NVLINK_GBS=450      # --server h100 (topologies/server.cc), one way per GPU
NVLINK_ALPHA_US=0.47  # its per-transfer latency (NCCL's tuning table's figure)
read -r -a CONFIG_LIST <<< "${CONFIGS:-qps1 qps2 qps4 qps4split rail rail-qps4}"
for level in "${LEVELS[@]}"; do
  case $level in
    small) ranks=16 ;;
    medium) ranks=128 ;;
    large) ranks=64 ;;
    *) echo "coll_peak.sh: unknown level $level (small, medium, large)" >&2; exit 2 ;;
  esac
  for config in "${CONFIG_LIST[@]}"; do
    topology=$level
    case $config in
      qps1) flags="" ;;
      qps2) flags="--qps-per-connection 2" ;;
      qps4) flags="--qps-per-connection 4" ;;
      qps4split) flags="--qps-per-connection 4 --split-data-on-qps 1" ;;
      rail) topology=$level:rail; flags="" ;;
      rail-qps4) topology=$level:rail; flags="--qps-per-connection 4" ;;
      *) echo "coll_peak.sh: unknown config $config (qps1 qps2 qps4 qps4split rail rail-qps4)" >&2
         exit 2 ;;
    esac
    # small: two servers back to back, no switch to hash on.
    [ "$level" = small ] && [ "$config" != qps1 ] && continue
    json=$("$FATHOM" coll allreduce --topology "$topology" --ranks $ranks --server h100 \
      --modelled --algo ring -b "$MIN" -e "$MAX" -f 4 -n 1 -w 0 --json $flags ${COLL_FLAGS:-})
    LEVEL=$level CONFIG=$config CONFIG_FLAGS="$flags" RANKS=$ranks NVLINK=$NVLINK_GBS \
      NVLINK_ALPHA=$NVLINK_ALPHA_US JSON=$json python3 "$PY"
  done
done
