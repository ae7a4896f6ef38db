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
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/units.h"

namespace fathom::transport::coll {

enum class CollKind : uint8_t { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kBarrier };
enum class Algorithm : uint8_t { kAuto, kRing, kTree };

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
  std::array<int32_t, 2> recv{-1, -1};
  std::array<int32_t, 2> send{-1, -1};
  int32_t after_stream = -1;
  uint64_t after_step = 0;
  // The reduction this step does completes the sum: every rank's share is
  // in it (where integer avg divides, as NCCL's sum-then-divide).
  bool final_sum = false;
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
  // Elements: allreduce/broadcast: of each buffer; allgather: of each rank's
  // input (output is nranks x count); reduce-scatter: of each rank's output
  // (input is nranks x count). nccl-tests' "count" column.
  uint64_t count = 0;
  int root = 0;              // broadcast
  int channels = 1;          // QPs per peer used in parallel
  uint64_t chunk_elems = 1;  // largest transfer (one staging slot)
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

// NCCL-style double binary tree over n ranks. Trees index 0 and 1.
struct TreeLinks {
  int parent = -1;
  std::array<int, 2> children{-1, -1};
};
TreeLinks DoubleTreeLinks(int nranks, int tree, int rank);
int DoubleTreeRoot(int nranks, int tree);

// The choice of algorithm by size: cost_model.h.

}  // namespace fathom::transport::coll
