#include "transport/collectives/cost_model.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace fathom::transport::coll {

AlphaBeta ComputeAlphaBeta(const PathFigures& path) {
  AlphaBeta ab;
  ab.hops = std::max(1, path.hops);
  ab.mtu_payload_bytes = std::max<uint32_t>(1, path.mtu_payload_bytes);
  const Picoseconds small = path.bottleneck.bps() > 0
                                ? path.bottleneck.SerializationTime(path.small_frame_bytes)
                                : Picoseconds(0);
  ab.alpha = path.wire_latency + Picoseconds(small.ps() * ab.hops) + path.nic_latency;
  const double rate = static_cast<double>(path.bottleneck.bps()) / 8.0;  // wire bytes/s
  const double share = path.full_frame_bytes > 0 ? static_cast<double>(ab.mtu_payload_bytes) /
                                                       static_cast<double>(path.full_frame_bytes)
                                                 : 1.0;
  ab.payload_bytes_per_s = rate * std::min(1.0, share);
  ab.dma_bytes_per_s = static_cast<double>(path.dma_rate.bps()) / 8.0;
  return ab;
}

namespace {

double CeilDiv(double a, double b) {
  return b <= 0 ? 0 : static_cast<double>(static_cast<uint64_t>((a + b - 1) / b));
}

// One transfer on the critical path: the latency, `link_bytes` through the
// bottleneck link, and the first packet of `message_bytes` stored and
// forwarded once more at each switch on the way.
double StepSeconds(const AlphaBeta& ab, double link_bytes, double message_bytes) {
  const double beta = 1.0 / ab.payload_bytes_per_s;
  const double first_packet = std::min(message_bytes, static_cast<double>(ab.mtu_payload_bytes));
  const double dma = ab.dma_bytes_per_s > 0 ? 2 * first_packet / ab.dma_bytes_per_s : 0;
  return ab.alpha.seconds() + link_bytes * beta + (ab.hops - 1) * first_packet * beta + dma;
}

// The hierarchical estimates (cost_model.h states the ring's formula).
Picoseconds EstimateHierarchical(Algorithm algo, uint64_t bytes, int nranks, const AlphaBeta& ab,
                                 uint64_t chunk_bytes) {
  const double n = nranks;
  const double g = std::min(ab.gpus_per_server, nranks);
  const double servers = std::max(1.0, std::floor(n / g));
  const double c = std::max(1, ab.channels);
  const double chunk = static_cast<double>(std::max<uint64_t>(1, chunk_bytes));
  const bool one_server = nranks <= ab.gpus_per_server;
  const double b_nv = 1.0 / ab.nvlink_bytes_per_s;
  const double b_nv_eff = one_server ? c * b_nv : c * (g - 1) / g * b_nv;
  const double b_net_eff = one_server ? 0 : std::ceil(c / g) / ab.payload_bytes_per_s;
  const double f = one_server ? 0 : servers / n;
  const double a_nv = ab.nvlink_alpha.seconds();
  if (algo == Algorithm::kTree) {
    // Per tree channel: a chunk climbs the chain (G-1 NVLink hops) and the
    // servers' tree (log2 S network hops) and comes back down; in steady
    // state a GPU's links carry two chunks per chunk period per channel.
    const double trees = std::max(2.0, c);
    const double part = std::ceil(static_cast<double>(bytes) / trees);
    const double cc = std::min(part, chunk);
    const double chunks = std::max(1.0, CeilDiv(part, chunk));
    const double depth = std::bit_width(static_cast<unsigned>(servers)) - 1;
    const double net_step = one_server ? 0 : StepSeconds(ab, 2 * cc, cc);
    const double nv_step = a_nv + cc * trees * b_nv;
    const double period =
        2 * cc * std::max(trees * b_nv, one_server ? 0 : trees / g / ab.payload_bytes_per_s);
    return Picoseconds::FromSeconds(2 * (depth * net_step + (g - 1) * nv_step) +
                                    (chunks - 1) * period);
  }
  const double per_channel = static_cast<double>(bytes) / c;
  const double loop = std::min(per_channel, n * chunk);
  const double m = std::ceil(loop / n);
  const double loops = std::max(1.0, CeilDiv(per_channel, n * chunk));
  const double net_step =
      one_server ? 0
                 : ab.alpha.seconds() + m * b_net_eff +
                       (ab.hops - 1) * std::min(m, static_cast<double>(ab.mtu_payload_bytes)) /
                           ab.payload_bytes_per_s;
  const double nv_step = a_nv + m * b_nv_eff;
  const double t = 2 * (n - 1) * (f * net_step + (1 - f) * nv_step) +
                   (loops - 1) * 2 * (n - 1) * m * std::max(b_net_eff, b_nv_eff);
  return Picoseconds::FromSeconds(t);
}

}  // namespace

Picoseconds EstimateAllreduce(Algorithm algo, uint64_t bytes, int nranks, const AlphaBeta& ab,
                              uint64_t chunk_bytes) {
  if (nranks <= 1) return Picoseconds(0);
  if (ab.gpus_per_server > 1 && ab.nvlink_bytes_per_s > 0) {
    return EstimateHierarchical(algo, bytes, nranks, ab, chunk_bytes);
  }
  if (ab.payload_bytes_per_s <= 0) return Picoseconds(0);
  const double n = nranks;
  const double s = static_cast<double>(bytes);
  const double chunk = static_cast<double>(std::max<uint64_t>(1, chunk_bytes));
  const double beta = 1.0 / ab.payload_bytes_per_s;
  double t = 0;
  if (algo == Algorithm::kTree) {
    // Each tree carries half the data in chunks of one slot; a chunk climbs
    // and descends the depth (2 log2 n steps: NCCL's tree latency), and an
    // interior rank's link carries two children's chunks at each step (the
    // incast up, the two sends down). Later chunks pipeline behind the
    // first; in steady state a rank's links carry four chunks per chunk
    // period (two as interior of one tree, one each way as a leaf of the
    // other): 2S in all, NCCL's halved tree bandwidth.
    const double depth = std::bit_width(static_cast<unsigned>(nranks)) - 1;
    const double half = std::ceil(s / 2);
    const double c = std::min(half, chunk);
    const double chunks = std::max(1.0, CeilDiv(half, chunk));
    t = 2 * depth * StepSeconds(ab, 2 * c, c) + (chunks - 1) * 4 * c * beta;
  } else {
    // Ring: reduce-scatter then allgather, 2(n-1) steps of one segment (a
    // loop of n chunks split n ways); loops after the first pipeline behind
    // it on every link.
    const double loop = std::min(s, n * chunk);
    const double m = std::ceil(loop / n);
    const double loops = std::max(1.0, CeilDiv(s, n * chunk));
    t = 2 * (n - 1) * StepSeconds(ab, m, m) + (loops - 1) * 2 * (n - 1) * m * beta;
  }
  return Picoseconds::FromSeconds(t);
}

Algorithm ChooseAlgorithm(CollKind kind, uint64_t bytes, int nranks, const AlphaBeta& ab,
                          uint64_t chunk_bytes) {
  if (kind == CollKind::kBarrier) return Algorithm::kTree;
  if (kind != CollKind::kAllReduce || nranks <= 2) return Algorithm::kRing;
  const Picoseconds ring = EstimateAllreduce(Algorithm::kRing, bytes, nranks, ab, chunk_bytes);
  const Picoseconds tree = EstimateAllreduce(Algorithm::kTree, bytes, nranks, ab, chunk_bytes);
  return tree < ring ? Algorithm::kTree : Algorithm::kRing;
}

}  // namespace fathom::transport::coll
