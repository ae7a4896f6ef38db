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
#   model: the alpha term, 2(n-1) ring steps x alpha_us (the JSON's, one
#          hop's latency), is over 10% of the time (small sizes: latency,
#          not bandwidth, bounds the ring);
#   topology: hot links (ECMP placed several rings' flows on one link: the
#          row's hot_links, worlds/hot_links.h);
#   else: "unexplained" with the figures.
# A benchmark, not a test: run it by hand.
# Usage: bench/coll_peak.sh [BUILD_DIR] [MIN_BYTES] [MAX_BYTES] [LEVEL...]
set -euo pipefail
BUILD=${1:-build}
MIN=${2:-1M}
MAX=${3:-256M}
shift $(( $# > 3 ? 3 : $# ))
LEVELS=("$@")
[ ${#LEVELS[@]} -eq 0 ] && LEVELS=(small medium large)
FATHOM="$(cd "$BUILD" && pwd)/tools/fathom"
NVLINK_GBS=450  # --server h100 (topologies/server.cc), one way per GPU
for level in "${LEVELS[@]}"; do
  case $level in
    small) ranks=16 ;;
    medium) ranks=128 ;;
    large) ranks=64 ;;
    *) echo "coll_peak.sh: unknown level $level (small, medium, large)" >&2; exit 2 ;;
  esac
  json=$("$FATHOM" coll allreduce --topology "$level" --ranks $ranks --server h100 --modelled \
    --algo ring -b "$MIN" -e "$MAX" -f 4 -n 1 -w 0 --json)
  LEVEL=$level RANKS=$ranks NVLINK=$NVLINK_GBS python3 -c '
import json, os, sys
j = json.loads(sys.stdin.read())
level, n, nvlink = os.environ["LEVEL"], int(os.environ["RANKS"]), float(os.environ["NVLINK"])
rail = j["bandwidth_gbs"]
peak = min(nvlink, 8 * rail)
print(f"# {level}: {n} ranks, rail payload {rail:.2f} GB/s x 8 NICs, NVLink {nvlink:.0f} GB/s: "
      f"peak busbw {peak:.2f} GB/s; alpha {j[\"alpha_us\"]:.3f} us")
print(f"{\"size\":>12} {\"time_us\":>12} {\"busbw\":>9} {\"peak\":>9} {\"ratio\":>7}  why")
for r in j["rows"]:
    m = r["out_of_place"]
    ratio = m["busbw_gbs"] / peak
    why = ""
    if ratio < 0.9:
        alpha_us = 2 * (n - 1) * j["alpha_us"]
        hot = r.get("hot_links", [])
        if alpha_us > 0.1 * m["time_us"]:
            why = (f"model: 2(n-1) steps x alpha = {alpha_us:.1f} us of {m[\"time_us\"]:.1f} us "
                   f"(latency-bound size)")
        elif hot:
            why = (f"topology: {len(hot)} hot links, {hot[0][\"link\"]} at "
                   f"{hot[0][\"x_mean\"]:.1f}x the mean (ECMP collisions)")
        else:
            why = "unexplained: no alpha share or hot link accounts for it"
    print(f"{r[\"size\"]:>12} {m[\"time_us\"]:>12.1f} {m[\"busbw_gbs\"]:>9.2f} {peak:>9.2f} "
          f"{100 * ratio:>6.1f}%  {why}")
' <<< "$json"
done
