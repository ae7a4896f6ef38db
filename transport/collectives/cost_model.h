// The cost model `--algo auto` chooses by: what one message between two
// ranks costs on the fabric the ranks actually run on (alpha, beta), and
// from it the time of each allreduce algorithm at a size, as this library
// runs them (schedule.h: chunks of one staging slot, a ring in loops of n
// chunks, a double binary tree carrying half the data per tree).
//
// The shape follows NCCL's tuning model (src/graph/tuning.cc in
// github:NVIDIA/nccl, ncclTopoTuneModel and ncclTopoGetAlgoTime): time =
// latency + bytes / bandwidth per algorithm, the ring's latency paid over
// 2(n-1) steps (nsteps = 2 * (nRanks - 1)) and the tree's over 2 log2(n)
// (2 * log2i(nNodes) * interLat), the tree's bus bandwidth halved against
// the ring's. The figures here are not NCCL's measured constants but the
// ones the model has: the path's links, its switches' store-and-forward of
// one packet, and the NIC profile's per-message latency.
//
// Pure arithmetic: the worlds (transport/worlds) fill PathFigures from what
// they know (the sim from its topology and NetworkConfig; verbs from the
// device) and the nccl-tests sweep asks ChooseAlgorithm per size.
#pragma once

#include <cstdint>

#include "base/units.h"
#include "transport/collectives/schedule.h"

namespace fathom::transport::coll {

// One path between two ranks, as the fabric has it.
struct PathFigures {
  int hops = 1;              // links crossed (host to host)
  Picoseconds wire_latency;  // sum of the links' latencies
  BitsPerSecond bottleneck;  // slowest link's rate
  // Wire bytes of one small message (no payload) and of one full packet
  // (payload = path MTU), headers, FCS, preamble and IFG included.
  uint32_t small_frame_bytes = 0;
  uint32_t full_frame_bytes = 0;
  uint32_t mtu_payload_bytes = 4096;
  // The NIC profile's per-message time outside the wire (sim::NicProfile:
  // post to wire, TX and RX pipelines, receive completion; 0 on the ideal
  // NIC), and its payload DMA rate for the first and last packet of each
  // message (0: not modelled).
  Picoseconds nic_latency;
  BitsPerSecond dma_rate;
};

// What the algorithms' estimates use.
struct AlphaBeta {
  // One small message from post to arrival: each hop's link latency and the
  // serialization of a small frame there (switches store and forward), plus
  // the NIC's per-message latency.
  Picoseconds alpha;
  // Payload bandwidth of the bottleneck link (its rate times the share of a
  // full packet's wire bytes that is payload); beta = 1 / bandwidth.
  double payload_bytes_per_s = 0;
  int hops = 1;
  uint32_t mtu_payload_bytes = 4096;
  // The NIC's DMA of a message's first packet (sender) and last (receiver)
  // at this rate, bytes/s; 0: not modelled.
  double dma_bytes_per_s = 0;
  // The server tier (gpus_per_server > 1): the fields above are the
  // network between servers, these NVLink inside them, and the estimates
  // are the hierarchical algorithms' (schedule.h) on `channels` channels.
  int gpus_per_server = 0;
  int channels = 1;
  Picoseconds nvlink_alpha;
  double nvlink_bytes_per_s = 0;
};

AlphaBeta ComputeAlphaBeta(const PathFigures& path);

// The estimated time of one allreduce of `bytes` on `nranks` ranks with
// algorithm `algo` (ring or tree), `chunk_bytes` per staging slot.
//
// Hierarchical ring (ab.gpus_per_server = G > 1, S = n / G servers, C
// channels of S_c = bytes / C each; m = ceil(min(S_c, n chunk) / n) bytes
// per step, L = ceil(S_c / (n chunk)) loops):
//   T = 2(n-1) [f (a_net + m b_net') + (1 - f) (a_nv + m b_nv')]
//       + (L - 1) 2(n-1) m max(b_net', b_nv')
// with f = S / n the share of ring hops that cross the network (S of the
// n hops; 0 on one server), b_net' = ceil(C / G) / B_net (each NIC carries
// ceil(C/G) channels: one channel per NIC), b_nv' = C (G-1) / G / B_nv (a
// GPU's NVLink egress carries every channel it does not leave the server
// in; C / B_nv on one server), a_net, B_net the network's alpha and payload
// bandwidth (above), a_nv the NVLink transfer latency and B_nv a GPU's
// NVLink bandwidth one way (topo::ServerSpec). For large sizes T is
// 2(n-1)/n x bytes / busbw with busbw = G x B_net when the NICs bound it.
Picoseconds EstimateAllreduce(Algorithm algo, uint64_t bytes, int nranks, const AlphaBeta& ab,
                              uint64_t chunk_bytes);

// NCCL-like choice by size: the cheaper estimate wins. Only allreduce has a
// choice here (a barrier runs as a tree, everything else as a ring).
Algorithm ChooseAlgorithm(CollKind kind, uint64_t bytes, int nranks, const AlphaBeta& ab,
                          uint64_t chunk_bytes);

}  // namespace fathom::transport::coll
