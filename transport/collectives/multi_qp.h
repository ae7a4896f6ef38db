// Several RC QPs per network connection, as NCCL's IB transport opens them
// (NCCL_IB_QPS_PER_CONNECTION, since NCCL 2.10; 1..128, default 1): each QP
// has its own QPN and so its own RoCEv2 UDP source port (fabric/sim/nic.cc
// derives it from the QPN), so ECMP hashes the QPs of one connection onto
// different paths. How a connection's messages use them follows
// NCCL_IB_SPLIT_DATA_ON_QPS (NVIDIA/nccl docs/userguide/source/env.rst;
// src/transport/net_ib/common.h ncclIbCommBaseGetQpForRequest and
// src/transport/net_ib/p2p.cc, master 5067397c):
//  - round-robin (0, NCCL's default since 2.20): message k of a connection
//    goes whole on QP k mod N (request id k; one data QP per device);
//  - split (1, the default in 2.18 and 2.19): every message is cut into N
//    parts of DIVUP(DIVUP(bytes, N), 128) * 128 bytes (the last ones shorter
//    or empty; IB_WRITE_CHUNK_ALIGNMENT 128), part i on QP i, each part
//    ending in a write with immediate, so the receiver sees N completions
//    per message (an empty part still carries its immediate).
// Only connections across the network get N QPs: peers on one server
// (CommOptions::gpus_per_server) talk over NVLink, which NCCL's P2P
// transport drives without IB QPs.
//
// Who owns what: the Communicator (communicator.h) creates, posts and polls
// the QPs; these are the pure rules it applies, kept apart for tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fathom::transport::coll {

// NCCL's alignment of a split message's parts (p2p.cc
// IB_WRITE_CHUNK_ALIGNMENT).
inline constexpr uint64_t kSplitAlignmentBytes = 128;
// NCCL_IB_QPS_PER_CONNECTION's accepted range (env.rst: "between 1 and 128").
inline constexpr int kMaxQpsPerConnection = 128;

// How many QPs the connection from `rank` to `peer` gets: `qps` across the
// network, 1 to a peer on the same server (gpus_per_server > 1, ranks
// server-major).
inline int QpsForPeer(int qps, int gpus_per_server, int rank, int peer) {
  if (qps <= 1) return 1;
  if (gpus_per_server > 1 && rank / gpus_per_server == peer / gpus_per_server) return 1;
  return qps;
}

// Split mode: the bytes of part `part` of a `bytes` message over `nqps` QPs,
// and its offset in the message.
inline uint64_t SplitPartBytes(uint64_t bytes, int nqps) {
  const uint64_t n = static_cast<uint64_t>(nqps);
  return (((bytes + n - 1) / n + kSplitAlignmentBytes - 1) / kSplitAlignmentBytes) *
         kSplitAlignmentBytes;
}
inline uint64_t SplitPartOffset(uint64_t bytes, int nqps, int part) {
  return std::min(bytes, SplitPartBytes(bytes, nqps) * static_cast<uint64_t>(part));
}
inline uint64_t SplitPartLength(uint64_t bytes, int nqps, int part) {
  const uint64_t off = SplitPartOffset(bytes, nqps, part);
  return std::min(bytes - off, SplitPartBytes(bytes, nqps));
}

// The messages of a connection that have wholly arrived, in order, from the
// writes with immediate each of its QPs delivered (RC keeps each QP in
// order, not the QPs among themselves):
//  - round-robin: message k is on QP k mod N, so QP q's first missing
//    message is N * arrived[q] + q, and every message before the least of
//    those is in;
//  - split: every message has one part on every QP, so as many messages as
//    the QP with the fewest parts.
inline uint64_t MessagesArrived(const std::vector<uint64_t>& arrived_per_qp, bool split) {
  const uint64_t n = arrived_per_qp.size();
  uint64_t in = UINT64_MAX;
  for (uint64_t q = 0; q < n; ++q) {
    const uint64_t a = arrived_per_qp[q];
    in = std::min(in, split ? a : n * a + q);
  }
  return n == 0 ? 0 : in;
}

}  // namespace fathom::transport::coll
