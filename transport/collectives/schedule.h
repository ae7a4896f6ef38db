// Collective schedules as pure logic: for one rank of one collective, the
// ordered steps it executes (receive from whom, reduce or copy into which
// part of which buffer, send to whom). The state machine (collective.h)
// executes them over the transport API; tests check them without any
// transport. Nothing here allocates per step: a stream computes its steps on
// demand, so a 1024-rank, 1 GiB ring needs no step tables.
//
// Algorithms (NCCL's, see its docs and src/graph/trees.cc for the tree):
//  - ring allreduce: reduce-scatter then allgather over the ring r -> r+1,
//    in loops of n chunks, so that consecutive chunks pipeline around the
//    ring and every link stays busy;
//  - double binary tree allreduce: two trees, each carrying half the data,
//    every rank interior (has children) in at most one of them; reduce up and
//    broadcast down run as two streams so that chunks pipeline both ways;
//  - ring allgather, ring reduce-scatter, pipelined chain broadcast from the
//    root; barrier = tree allreduce of one int32 (it cannot finish on any
//    rank before every rank has contributed).
// Channels (QPs per peer) split the data into contiguous parts, one stream
// group per channel, each on its own QPs.
//
// Hierarchical (CollSpec::gpus_per_server G > 1: ranks are GPUs, server-major,
// rank = server * G + gpu; NCCL's rings and trees on multi-GPU servers):
//  - rings (RingOrder) cross each server over NVLink and servers over the
//    rails: channel c's ring enters every server on a GPU whose NIC is on the
//    rail it left the previous server by, so every inter-server hop stays on
//    one rail (rail-only wiring carries it). Even servers visit GPUs c, c+1,
//    ..., c-1; odd servers c-1, c-2, ..., c (a snake); each NIC sends one
//    channel and receives one when channels = G (one channel per NIC);
//  - trees (HierTreeLinks): a double binary tree over the servers whose
//    edges join the GPUs `head` = channel mod G of each server (one rail),
//    and inside each server a chain head -> head+1 -> ... over NVLink; a
//    head has up to three children (its chain's next and two servers), as
//    NCCL's trees (NCCL_MAX_TREE_ARITY 3).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/units.h"

namespace fathom::transport::coll {

// After kBarrier, nccl-tests' point-to-point and rooted collectives
// (alltoall_perf, sendrecv_perf, reduce_perf, gather_perf, scatter_perf).
enum class CollKind : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kBarrier,
  kAllToAll,
  kSendRecv,
  kReduce,
  kGather,
  kScatter,
  // All-to-all with a size matrix (CollSpec::counts; size_matrix.h).
  kAllToAllV,
};
// alltoall, gather and scatter talk to every peer (CommOptions::all_pairs).
bool NeedsAllPairs(CollKind k);
enum class Algorithm : uint8_t { kAuto, kRing, kTree };

// The most peers one step receives from or sends to (a hierarchical tree's
// head: its chain and two child servers).
inline constexpr int kMaxPeers = 3;

std::string_view CollKindName(CollKind k);  // "allreduce", "allgather", ...
StatusOr<CollKind> ParseCollKind(std::string_view name);
std::string_view AlgorithmName(Algorithm a);  // "auto", "ring", "tree"
StatusOr<Algorithm> ParseAlgorithm(std::string_view name);

// One step of one stream. Offsets and counts are in elements. Executing it:
// wait until every `recv` peer's data has arrived, every `send` peer has a
// free slot, and `after_step` of stream `after_stream` is done; then
// result = in[in_offset] (if >= 0) OP each received chunk (or a copy of the
// first received chunk when there is no local part); store it at
// out[out_offset] when >= 0 (else in a send staging slot); send the result
// to every `send` peer. With neither a local part nor a receive, the result
// is out[out_offset] as it stands (a tree root sending down what it reduced).
// A step with count 0 moves nothing on either side.
struct Step {
  uint64_t count = 0;
  int64_t in_offset = -1;
  int64_t out_offset = -1;
  std::array<int32_t, kMaxPeers> recv{-1, -1, -1};
  std::array<int32_t, kMaxPeers> send{-1, -1, -1};
  int32_t after_stream = -1;
  uint64_t after_step = 0;
  // The reduction this step does completes the sum: every rank's share is
  // in it (where integer avg divides, as NCCL's sum-then-divide).
  bool final_sum = false;
  // Send a copy of the local part taken now (through a staging slot), not
  // the input itself: in place, the input is overwritten by a later receive
  // before the NIC would read it (NCCL copies to its FIFO the same way).
  bool stage = false;
};

// An in-order sequence of steps bound to one channel (one QP per peer).
class Stream {
 public:
  explicit Stream(int channel) : channel_(channel) {}
  virtual ~Stream() = default;
  int channel() const { return channel_; }
  virtual uint64_t size() const = 0;
  virtual Step At(uint64_t i) const = 0;

 private:
  int channel_;
};

// What to run: the collective, its geometry and the knobs of the issue.
struct CollSpec {
  CollKind kind = CollKind::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;  // resolved (not kAuto)
  int nranks = 1;
  // Elements: allreduce/broadcast/reduce/sendrecv: of each buffer;
  // allgather and gather: of each rank's input (output, the root's for
  // gather, is nranks x count); reduce-scatter and scatter: of each rank's
  // output (input, the root's for scatter, is nranks x count); alltoall: of
  // each block (input and output are nranks blocks, block j for / from rank
  // j). nccl-tests' "count" column is this times nranks for the kinds whose
  // size is a total.
  //
  // The new kinds run as NCCL runs them: alltoall, gather and scatter as
  // direct sends and receives between each pair (channel 0); sendrecv from
  // each rank to the next on the ring of channel 0 (rank + 1 when flat;
  // the snake keeps it on a rail); reduce as a pipelined chain along each
  // channel's ring ending at the root.
  uint64_t count = 0;
  int root = 0;              // broadcast, reduce, gather, scatter
  int channels = 1;          // QPs per peer used in parallel
  uint64_t chunk_elems = 1;  // largest transfer (one staging slot)
  // > 1: ranks are GPUs of servers of this many (server-major) and rings and
  // trees are hierarchical (see above); 0 or 1: flat.
  int gpus_per_server = 0;
  // alltoall, sendrecv: input and output share memory (nccl-tests'
  // in-place column). A block received from a peer then lands only after
  // this rank's send of the same block (to that peer, or of the same range
  // for sendrecv) was staged. RankCollective sets it when the buffers
  // overlap; the other kinds need no ordering (the layout of nccl_tests.h).
  bool in_place = false;
  // alltoallv: elements rank i sends rank j at [i * nranks + j] (rows =
  // senders); a rank's input is its row's blocks in rank order, its output
  // its column's. `count` is unused.
  std::shared_ptr<const std::vector<uint64_t>> counts;
};

// The ring of one channel: which rank sits at each position. Flat: rank =
// position. Hierarchical: the snake described above (n a multiple of G);
// with one server (n <= G) the ring is rotated by the channel.
class RingOrder {
 public:
  RingOrder(int nranks, int gpus_per_server, int channel);
  int RankAt(int64_t pos) const;
  int PosOf(int rank) const;
  int nranks() const { return n_; }

 private:
  int n_, g_, c_;
  bool snake_;
};

// The rank's streams. Element counts of `in` and `out` follow CollSpec.
struct Plan {
  std::vector<std::unique_ptr<Stream>> streams;
  uint64_t in_count = 0;
  uint64_t out_count = 0;
};

StatusOr<Plan> BuildPlan(const CollSpec& spec, int rank);

// The peers a rank talks to on each channel for a spec (the connections the
// communicator must have); sorted, unique.
std::vector<std::pair<int, int>> PlanPeers(const CollSpec& spec, int rank);

// The (peer, channel) connections on which a rank may send data for a spec
// (PlanPeers less a ring's previous rank, which a rank sends only credits):
// a superset of its steps' `send` peers. Sorted, unique.
std::vector<std::pair<int, int>> DataPeers(const CollSpec& spec, int rank);

// NCCL-style double binary tree over n ranks. Trees index 0 and 1.
struct TreeLinks {
  int parent = -1;
  std::array<int, kMaxPeers> children{-1, -1, -1};
};
TreeLinks DoubleTreeLinks(int nranks, int tree, int rank);
int DoubleTreeRoot(int nranks, int tree);
// The tree of `channel` (tree channel % 2 over the servers, head GPU
// channel % G) for the spec's layout: DoubleTreeLinks(n, channel % 2, rank)
// when flat.
TreeLinks HierTreeLinks(int nranks, int gpus_per_server, int channel, int rank);
// Whether a spec's layout is hierarchical (G > 1 and n a multiple of G, or
// n <= G).
bool Hierarchical(int nranks, int gpus_per_server);

// The choice of algorithm by size: cost_model.h.

}  // namespace fathom::transport::coll
