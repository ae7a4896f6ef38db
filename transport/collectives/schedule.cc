#include "transport/collectives/schedule.h"

#include <algorithm>
#include <bit>
#include <string>

namespace fathom::transport::coll {
namespace {

int Mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

// Element range [offset, offset + count).
struct Range {
  uint64_t offset = 0;
  uint64_t count = 0;
};

// Part k of n of a range, balanced (the first count % n parts one larger).
Range Part(Range r, int n, int k) {
  const uint64_t q = r.count / static_cast<uint64_t>(n);
  const uint64_t extra = r.count % static_cast<uint64_t>(n);
  const uint64_t uk = static_cast<uint64_t>(k);
  return {r.offset + uk * q + std::min(uk, extra), q + (uk < extra ? 1 : 0)};
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

// n == 1, or no peers: out = in over the range.
class CopyStream final : public Stream {
 public:
  CopyStream(int channel, Range in, Range out) : Stream(channel), in_(in), out_(out) {}
  uint64_t size() const override { return in_.count == 0 ? 0 : 1; }
  Step At(uint64_t) const override {
    Step s;
    s.count = in_.count;
    s.in_offset = static_cast<int64_t>(in_.offset);
    s.out_offset = static_cast<int64_t>(out_.offset);
    return s;
  }

 private:
  Range in_, out_;
};

// Ring allreduce over `range` of both buffers, in loops of n chunks.
class RingAllreduceStream final : public Stream {
 public:
  RingAllreduceStream(int channel, const RingOrder& order, int rank, Range range, uint64_t chunk)
      : Stream(channel),
        n_(order.nranks()),
        rank_(order.PosOf(rank)),
        order_(order),
        range_(range),
        loop_(chunk * static_cast<uint64_t>(order.nranks())) {}
  uint64_t size() const override {
    return CeilDiv(range_.count, loop_) * static_cast<uint64_t>(2 * n_ - 1);
  }
  Step At(uint64_t i) const override {
    const uint64_t per_loop = static_cast<uint64_t>(2 * n_ - 1);
    const uint64_t loop = i / per_loop;
    const int j = static_cast<int>(i % per_loop);
    const uint64_t lo = range_.offset + loop * loop_;
    const Range loop_range{lo, std::min(loop_, range_.offset + range_.count - lo)};
    // rank_ is the ring position: segments go by position.
    const int prev = order_.RankAt(rank_ - 1), next = order_.RankAt(rank_ + 1);
    Step s;
    int seg;
    if (j == 0) {
      seg = rank_;
    } else if (j <= n_ - 1) {
      seg = Mod(rank_ - j, n_);  // reduce-scatter
    } else {
      seg = Mod(rank_ + 1 - (j - (n_ - 1)), n_);  // allgather
    }
    const Range r = Part(loop_range, n_, seg);
    s.count = r.count;
    if (j == 0) {
      s.in_offset = static_cast<int64_t>(r.offset);
    } else {
      s.recv[0] = prev;
      if (j <= n_ - 1) s.in_offset = static_cast<int64_t>(r.offset);
      s.out_offset = static_cast<int64_t>(r.offset);
      s.final_sum = j == n_ - 1;
    }
    if (j < 2 * n_ - 2) s.send[0] = next;
    return s;
  }

 private:
  int n_, rank_;
  RingOrder order_;
  Range range_;
  uint64_t loop_;
};

// Ring reduce-scatter: in = n blocks of `count`, out = block `rank`. `part`
// is this channel's share of a block.
class RingReduceScatterStream final : public Stream {
 public:
  RingReduceScatterStream(int channel, const RingOrder& order, int rank, uint64_t count, Range part,
                          uint64_t chunk)
      : Stream(channel),
        n_(order.nranks()),
        pos_(order.PosOf(rank)),
        order_(order),
        count_(count),
        part_(part),
        chunk_(chunk) {}
  uint64_t size() const override { return CeilDiv(part_.count, chunk_) * n_; }
  Step At(uint64_t i) const override {
    const uint64_t loop = i / static_cast<uint64_t>(n_);
    const int j = static_cast<int>(i % static_cast<uint64_t>(n_));
    const uint64_t lo = part_.offset + loop * chunk_;
    Step s;
    s.count = std::min(chunk_, part_.offset + part_.count - lo);
    // The block of the rank j + 1 positions back: at j = n - 1 our own.
    const int block = order_.RankAt(pos_ - 1 - j);
    s.in_offset = static_cast<int64_t>(static_cast<uint64_t>(block) * count_ + lo);
    if (j > 0) s.recv[0] = order_.RankAt(pos_ - 1);
    if (j < n_ - 1) {
      s.send[0] = order_.RankAt(pos_ + 1);
    } else {
      s.out_offset = static_cast<int64_t>(lo);
      s.final_sum = j > 0;
    }
    return s;
  }

 private:
  int n_, pos_;
  RingOrder order_;
  uint64_t count_;
  Range part_;
  uint64_t chunk_;
};

// Ring allgather: in = `count`, out = n blocks of `count`.
class RingAllgatherStream final : public Stream {
 public:
  RingAllgatherStream(int channel, const RingOrder& order, int rank, uint64_t count, Range part,
                      uint64_t chunk)
      : Stream(channel),
        n_(order.nranks()),
        pos_(order.PosOf(rank)),
        order_(order),
        count_(count),
        part_(part),
        chunk_(chunk) {}
  uint64_t size() const override { return CeilDiv(part_.count, chunk_) * n_; }
  Step At(uint64_t i) const override {
    const uint64_t loop = i / static_cast<uint64_t>(n_);
    const int j = static_cast<int>(i % static_cast<uint64_t>(n_));
    const uint64_t lo = part_.offset + loop * chunk_;
    Step s;
    s.count = std::min(chunk_, part_.offset + part_.count - lo);
    const int block = order_.RankAt(pos_ - j);
    s.out_offset = static_cast<int64_t>(static_cast<uint64_t>(block) * count_ + lo);
    if (j == 0) {
      s.in_offset = static_cast<int64_t>(lo);
    } else {
      s.recv[0] = order_.RankAt(pos_ - 1);
    }
    if (j < n_ - 1) s.send[0] = order_.RankAt(pos_ + 1);
    return s;
  }

 private:
  int n_, pos_;
  RingOrder order_;
  uint64_t count_;
  Range part_;
  uint64_t chunk_;
};

// Pipelined chain broadcast root -> root+1 -> ... -> root-1.
class ChainBroadcastStream final : public Stream {
 public:
  ChainBroadcastStream(int channel, const RingOrder& order, int rank, int root, Range part,
                       uint64_t chunk)
      : Stream(channel),
        n_(order.nranks()),
        pos_(order.PosOf(rank)),
        root_pos_(order.PosOf(root)),
        order_(order),
        part_(part),
        chunk_(chunk) {}
  uint64_t size() const override { return CeilDiv(part_.count, chunk_); }
  Step At(uint64_t i) const override {
    const uint64_t lo = part_.offset + i * chunk_;
    const int pos = Mod(pos_ - root_pos_, n_);
    Step s;
    s.count = std::min(chunk_, part_.offset + part_.count - lo);
    s.out_offset = static_cast<int64_t>(lo);
    if (pos == 0) {
      s.in_offset = static_cast<int64_t>(lo);
    } else {
      s.recv[0] = order_.RankAt(pos_ - 1);
    }
    if (pos < n_ - 1) s.send[0] = order_.RankAt(pos_ + 1);
    return s;
  }

 private:
  int n_, pos_, root_pos_;
  RingOrder order_;
  Range part_;
  uint64_t chunk_;
};

// Sends `part` of in[in_base..] to `dst`, a chunk per step (nothing to
// receive: the data go straight from the input).
class PeerSendStream final : public Stream {
 public:
  PeerSendStream(int channel, int dst, uint64_t in_base, Range part, uint64_t chunk,
                 bool stage = false)
      : Stream(channel), dst_(dst), in_base_(in_base), part_(part), chunk_(chunk), stage_(stage) {}
  uint64_t size() const override { return CeilDiv(part_.count, chunk_); }
  Step At(uint64_t i) const override {
    const uint64_t lo = part_.offset + i * chunk_;
    Step s;
    s.count = std::min(chunk_, part_.offset + part_.count - lo);
    s.in_offset = static_cast<int64_t>(in_base_ + lo);
    s.send[0] = dst_;
    s.stage = stage_;
    return s;
  }

 private:
  int dst_;
  uint64_t in_base_;
  Range part_;
  uint64_t chunk_;
  bool stage_;
};

// Receives `part` from `src` into out[out_base..], a chunk per step; with
// `after_stream` >= 0, step i only after that stream's step i (in place:
// the send that reads the same memory).
class PeerRecvStream final : public Stream {
 public:
  PeerRecvStream(int channel, int src, uint64_t out_base, Range part, uint64_t chunk,
                 int after_stream = -1)
      : Stream(channel),
        src_(src),
        out_base_(out_base),
        part_(part),
        chunk_(chunk),
        after_stream_(after_stream) {}
  uint64_t size() const override { return CeilDiv(part_.count, chunk_); }
  Step At(uint64_t i) const override {
    const uint64_t lo = part_.offset + i * chunk_;
    Step s;
    s.count = std::min(chunk_, part_.offset + part_.count - lo);
    s.out_offset = static_cast<int64_t>(out_base_ + lo);
    s.recv[0] = src_;
    if (after_stream_ >= 0) {
      s.after_stream = after_stream_;
      s.after_step = i;
    }
    return s;
  }

 private:
  int src_;
  uint64_t out_base_;
  Range part_;
  uint64_t chunk_;
  int after_stream_;
};

// Pipelined chain reduce along a ring toward `root`: the rank after the
// root starts, each adds its input and passes on, the root keeps the sum.
class ChainReduceStream final : public Stream {
 public:
  ChainReduceStream(int channel, const RingOrder& order, int rank, int root, Range part,
                    uint64_t chunk)
      : Stream(channel),
        n_(order.nranks()),
        pos_(order.PosOf(rank)),
        root_pos_(order.PosOf(root)),
        order_(order),
        part_(part),
        chunk_(chunk) {}
  uint64_t size() const override { return CeilDiv(part_.count, chunk_); }
  Step At(uint64_t i) const override {
    const uint64_t lo = part_.offset + i * chunk_;
    const int rel = Mod(pos_ - root_pos_, n_);  // 0 root, 1 first, n-1 last before root
    Step s;
    s.count = std::min(chunk_, part_.offset + part_.count - lo);
    s.in_offset = static_cast<int64_t>(lo);
    if (rel != 1) s.recv[0] = order_.RankAt(pos_ - 1);
    if (rel == 0) {
      s.out_offset = static_cast<int64_t>(lo);
      s.final_sum = true;
    } else {
      s.send[0] = order_.RankAt(pos_ + 1);
    }
    return s;
  }

 private:
  int n_, pos_, root_pos_;
  RingOrder order_;
  Range part_;
  uint64_t chunk_;
};

// The peers first, the -1s after.
std::array<int32_t, kMaxPeers> Compact(const std::array<int, kMaxPeers>& peers) {
  std::array<int32_t, kMaxPeers> out{-1, -1, -1};
  int k = 0;
  for (int p : peers) {
    if (p >= 0) out[static_cast<size_t>(k++)] = p;
  }
  return out;
}

// Tree reduce toward the root (up) or broadcast from it (down), chunked.
class TreeStream final : public Stream {
 public:
  TreeStream(int channel, bool up, TreeLinks links, Range part, uint64_t chunk, int up_stream)
      : Stream(channel),
        up_(up),
        links_(links),
        part_(part),
        chunk_(chunk),
        up_stream_(up_stream) {}
  uint64_t size() const override { return CeilDiv(part_.count, chunk_); }
  Step At(uint64_t i) const override {
    const uint64_t lo = part_.offset + i * chunk_;
    Step s;
    s.count = std::min(chunk_, part_.offset + part_.count - lo);
    const bool root = links_.parent < 0;
    if (up_) {
      s.recv = Compact(links_.children);
      s.in_offset = static_cast<int64_t>(lo);
      // A leaf sends straight from its input; anyone else keeps the partial
      // result in `out` (overwritten later by the broadcast down).
      if (s.recv[0] >= 0 || root) s.out_offset = static_cast<int64_t>(lo);
      s.send[0] = links_.parent;
      s.final_sum = root && s.recv[0] >= 0;
    } else {
      s.out_offset = static_cast<int64_t>(lo);
      if (root) {
        s.after_stream = up_stream_;
        s.after_step = i;
      } else {
        s.recv[0] = links_.parent;
      }
      s.send = Compact(links_.children);
    }
    return s;
  }

 private:
  bool up_;
  TreeLinks links_;
  Range part_;
  uint64_t chunk_;
  int up_stream_;
};

// Tree position (1-based label) of a rank in tree t: tree 0 labels r + 1;
// tree 1 mirrors (n even: n - r) or shifts (n odd: r, with rank 0 at n) so
// that its interior labels (even) fall on tree 0's leaves (odd labels).
int64_t Label(int n, int tree, int rank) {
  if (tree == 0) return rank + 1;
  if (n % 2 == 0) return n - rank;
  return rank == 0 ? n : rank;
}
int RankOfLabel(int n, int tree, int64_t label) {
  if (tree == 0) return static_cast<int>(label - 1);
  if (n % 2 == 0) return static_cast<int>(n - label);
  return label == n ? 0 : static_cast<int>(label);
}

// Parent label in the in-order binary tree on labels 1..n (NCCL's btree):
// the root is the largest power of two <= n; odd labels are leaves.
int64_t ParentLabel(int64_t n, int64_t x) {
  const int64_t bit = x & -x;
  int64_t up = (x ^ bit) | (bit << 1);
  if (up > n) up = x ^ bit;
  return up;  // 0: x is the root
}

}  // namespace

std::string_view CollKindName(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce:
      return "allreduce";
    case CollKind::kAllGather:
      return "allgather";
    case CollKind::kReduceScatter:
      return "reduce_scatter";
    case CollKind::kBroadcast:
      return "broadcast";
    case CollKind::kBarrier:
      return "barrier";
    case CollKind::kAllToAll:
      return "alltoall";
    case CollKind::kSendRecv:
      return "sendrecv";
    case CollKind::kReduce:
      return "reduce";
    case CollKind::kGather:
      return "gather";
    case CollKind::kScatter:
      return "scatter";
    case CollKind::kAllToAllV:
      return "alltoallv";
  }
  return "?";
}

bool NeedsAllPairs(CollKind k) {
  return k == CollKind::kAllToAll || k == CollKind::kGather || k == CollKind::kScatter ||
         k == CollKind::kAllToAllV;
}

StatusOr<CollKind> ParseCollKind(std::string_view name) {
  for (CollKind k :
       {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter, CollKind::kBroadcast,
        CollKind::kBarrier, CollKind::kAllToAll, CollKind::kSendRecv, CollKind::kReduce,
        CollKind::kGather, CollKind::kScatter, CollKind::kAllToAllV}) {
    if (name == CollKindName(k)) return k;
  }
  return InvalidArgument("collective '" + std::string(name) +
                         "': expected allreduce, allgather, reduce_scatter, broadcast, barrier, "
                         "alltoall, alltoallv, sendrecv, reduce, gather or scatter");
}

std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
  }
  return "?";
}

StatusOr<Algorithm> ParseAlgorithm(std::string_view name) {
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kTree}) {
    if (name == AlgorithmName(a)) return a;
  }
  return InvalidArgument("algorithm '" + std::string(name) + "': expected auto, ring or tree");
}

int DoubleTreeRoot(int nranks, int tree) {
  return RankOfLabel(nranks, tree,
                     static_cast<int64_t>(std::bit_floor(static_cast<unsigned>(nranks))));
}

TreeLinks DoubleTreeLinks(int nranks, int tree, int rank) {
  TreeLinks links;
  const int64_t n = nranks;
  const int64_t x = Label(nranks, tree, rank);
  const int64_t up = ParentLabel(n, x);
  if (up != 0) links.parent = RankOfLabel(nranks, tree, up);
  // Children: the labels whose parent is x. They lie at x -/+ 2^k below x's
  // low bit (the left child always exists; the right one may be cut off by n
  // and replaced by the deepest label that remains).
  const int64_t bit = x & -x;
  int found = 0;
  for (int64_t step = bit >> 1; step > 0 && found < 2; step >>= 1) {
    for (int64_t c : {x - step, x + step}) {
      if (found < 2 && c >= 1 && c <= n && ParentLabel(n, c) == x) {
        links.children[found++] = RankOfLabel(nranks, tree, c);
      }
    }
  }
  return links;
}

bool Hierarchical(int nranks, int gpus_per_server) {
  return gpus_per_server > 1 && nranks > 1 &&
         (nranks <= gpus_per_server || nranks % gpus_per_server == 0);
}

RingOrder::RingOrder(int nranks, int gpus_per_server, int channel)
    : n_(std::max(1, nranks)),
      g_(Hierarchical(nranks, gpus_per_server) ? std::min(gpus_per_server, nranks) : 1),
      c_(channel),
      snake_(Hierarchical(nranks, gpus_per_server) && nranks > gpus_per_server) {}

int RingOrder::RankAt(int64_t pos) const {
  const int p = Mod(pos, n_);
  if (snake_) {
    const int s = p / g_, i = p % g_;
    const int gpu = s % 2 == 0 ? Mod(c_ + i, g_) : Mod(c_ - 1 - i, g_);
    return s * g_ + gpu;
  }
  if (g_ > 1) return Mod(p + c_, n_);  // one server: rotated by the channel
  return p;
}

int RingOrder::PosOf(int rank) const {
  if (snake_) {
    const int s = rank / g_, gpu = rank % g_;
    const int i = s % 2 == 0 ? Mod(gpu - c_, g_) : Mod(c_ - 1 - gpu, g_);
    return s * g_ + i;
  }
  if (g_ > 1) return Mod(rank - c_, n_);
  return rank;
}

TreeLinks HierTreeLinks(int nranks, int gpus_per_server, int channel, int rank) {
  if (!Hierarchical(nranks, gpus_per_server)) return DoubleTreeLinks(nranks, channel % 2, rank);
  const int g = std::min(gpus_per_server, nranks);
  const int servers = nranks / g;
  const int server = rank / g, gpu = rank % g, head = channel % g;
  const int i = Mod(gpu - head, g);
  auto at = [g](int s, int64_t x) { return s * g + Mod(x, g); };
  TreeLinks l;
  if (i == 0) {
    // The server's head: the chain below it and the servers' tree, on the
    // head's rail.
    const TreeLinks up = servers > 1 ? DoubleTreeLinks(servers, channel % 2, server) : TreeLinks{};
    if (up.parent >= 0) l.parent = at(up.parent, head);
    int k = 0;
    if (g > 1) l.children[static_cast<size_t>(k++)] = at(server, head + 1);
    for (int c : up.children) {
      if (c >= 0 && k < kMaxPeers) l.children[static_cast<size_t>(k++)] = at(c, head);
    }
  } else {
    l.parent = at(server, head + i - 1);
    if (i < g - 1) l.children[0] = at(server, head + i + 1);
  }
  return l;
}

namespace {

Status CheckSpec(const CollSpec& spec, int rank) {
  if (spec.nranks < 1 || rank < 0 || rank >= spec.nranks) {
    return InvalidArgument("BuildPlan: rank " + std::to_string(rank) + " of nranks " +
                           std::to_string(spec.nranks));
  }
  if (spec.channels < 1 || spec.chunk_elems < 1) {
    return InvalidArgument("BuildPlan: channels " + std::to_string(spec.channels) +
                           " and chunk_elems " + std::to_string(spec.chunk_elems) +
                           " must be >= 1");
  }
  const bool rooted = spec.kind == CollKind::kBroadcast || spec.kind == CollKind::kReduce ||
                      spec.kind == CollKind::kGather || spec.kind == CollKind::kScatter;
  if (rooted && (spec.root < 0 || spec.root >= spec.nranks)) {
    return InvalidArgument("BuildPlan: " + std::string(CollKindName(spec.kind)) + " root " +
                           std::to_string(spec.root) + " outside 0.." +
                           std::to_string(spec.nranks - 1));
  }
  if (spec.algorithm == Algorithm::kAuto) {
    return InvalidArgument("BuildPlan: algorithm must be resolved (ChooseAlgorithm) first");
  }
  const uint64_t cells = static_cast<uint64_t>(spec.nranks) * static_cast<uint64_t>(spec.nranks);
  if (spec.kind == CollKind::kAllToAllV &&
      (spec.counts == nullptr || spec.counts->size() != cells)) {
    return InvalidArgument("BuildPlan: alltoallv needs a " + std::to_string(spec.nranks) + " x " +
                           std::to_string(spec.nranks) + " size matrix (got " +
                           std::to_string(spec.counts ? spec.counts->size() : 0) + " entries)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Plan> BuildPlan(const CollSpec& spec_in, int rank) {
  FATHOM_RETURN_IF_ERROR(CheckSpec(spec_in, rank));
  CollSpec spec = spec_in;
  if (spec.kind == CollKind::kBarrier) {
    spec.kind = CollKind::kAllReduce;
    spec.algorithm = Algorithm::kTree;
    spec.count = 1;
  }
  const int n = spec.nranks;
  const uint64_t nn = static_cast<uint64_t>(n);
  Plan plan;
  switch (spec.kind) {
    case CollKind::kAllReduce:
    case CollKind::kBroadcast:
    case CollKind::kBarrier:
      plan.in_count = plan.out_count = spec.count;
      break;
    case CollKind::kAllGather:
      plan.in_count = spec.count;
      plan.out_count = spec.count * nn;
      break;
    case CollKind::kReduceScatter:
    case CollKind::kScatter:
      plan.in_count = spec.count * nn;
      plan.out_count = spec.count;
      break;
    case CollKind::kAllToAll:
      plan.in_count = plan.out_count = spec.count * nn;
      break;
    case CollKind::kSendRecv:
    case CollKind::kReduce:
      plan.in_count = plan.out_count = spec.count;
      break;
    case CollKind::kGather:
      plan.in_count = spec.count;
      plan.out_count = spec.count * nn;
      break;
    case CollKind::kAllToAllV:
      for (int j = 0; j < n; ++j) {
        plan.in_count += (*spec.counts)[static_cast<size_t>(rank) * nn + static_cast<size_t>(j)];
        plan.out_count += (*spec.counts)[static_cast<size_t>(j) * nn + static_cast<size_t>(rank)];
      }
      break;
  }
  if (spec.kind == CollKind::kAllToAllV) {
    // As alltoall, with each pair's own size: the block for rank j starts
    // after the row's blocks for ranks < j, the block from rank i after the
    // column's blocks from ranks < i.
    const std::vector<uint64_t>& m = *spec.counts;
    auto cell = [&](int i, int j) {
      return m[static_cast<size_t>(i) * nn + static_cast<size_t>(j)];
    };
    std::vector<uint64_t> send_off(nn + 1, 0), recv_off(nn + 1, 0);
    for (int j = 0; j < n; ++j) {
      send_off[static_cast<size_t>(j) + 1] = send_off[static_cast<size_t>(j)] + cell(rank, j);
      recv_off[static_cast<size_t>(j) + 1] = recv_off[static_cast<size_t>(j)] + cell(j, rank);
    }
    const size_t ur = static_cast<size_t>(rank);
    plan.streams.push_back(std::make_unique<CopyStream>(0, Range{send_off[ur], cell(rank, rank)},
                                                        Range{recv_off[ur], cell(rank, rank)}));
    for (int k = 1; k < n; ++k) {
      const int dst = Mod(rank + k, n), src = Mod(rank - k, n);
      plan.streams.push_back(std::make_unique<PeerSendStream>(
          0, dst, send_off[static_cast<size_t>(dst)], Range{0, cell(rank, dst)}, spec.chunk_elems));
      plan.streams.push_back(std::make_unique<PeerRecvStream>(
          0, src, recv_off[static_cast<size_t>(src)], Range{0, cell(src, rank)}, spec.chunk_elems));
    }
    return plan;
  }
  if (n == 1) {
    const uint64_t off = 0;
    plan.streams.push_back(
        std::make_unique<CopyStream>(0, Range{off, spec.count}, Range{off, spec.count}));
    return plan;
  }
  const bool hier = Hierarchical(n, spec.gpus_per_server);
  const Range all_elems{0, spec.count};
  const uint64_t ur = static_cast<uint64_t>(rank);
  const uint64_t uroot = static_cast<uint64_t>(spec.root);
  auto copy_block = [&](uint64_t in_base, uint64_t out_base) {
    plan.streams.push_back(
        std::make_unique<CopyStream>(0, Range{in_base, spec.count}, Range{out_base, spec.count}));
  };
  switch (spec.kind) {
    case CollKind::kAllToAll:
      // Block `rank` stays; every other goes straight to its rank (and
      // comes from it), all pairs at once, as NCCL's grouped send/recv.
      // In place, block `src` is both what goes to src and what comes
      // from it: the receive of each chunk follows the staged send of the
      // same chunk (stream 2k - 1 sends to rank + k; src = rank + (n - k)).
      copy_block(ur * spec.count, ur * spec.count);
      for (int k = 1; k < n; ++k) {
        const int dst = Mod(rank + k, n), src = Mod(rank - k, n);
        plan.streams.push_back(
            std::make_unique<PeerSendStream>(0, dst, static_cast<uint64_t>(dst) * spec.count,
                                             all_elems, spec.chunk_elems, spec.in_place));
        plan.streams.push_back(std::make_unique<PeerRecvStream>(
            0, src, static_cast<uint64_t>(src) * spec.count, all_elems, spec.chunk_elems,
            spec.in_place ? 2 * (n - k) - 1 : -1));
      }
      return plan;
    case CollKind::kSendRecv: {
      const RingOrder order(n, spec.gpus_per_server, 0);
      const int pos = order.PosOf(rank);
      plan.streams.push_back(std::make_unique<PeerSendStream>(
          0, order.RankAt(pos + 1), 0, all_elems, spec.chunk_elems, spec.in_place));
      plan.streams.push_back(std::make_unique<PeerRecvStream>(
          0, order.RankAt(pos - 1), 0, all_elems, spec.chunk_elems, spec.in_place ? 0 : -1));
      return plan;
    }
    case CollKind::kGather:
      if (rank != spec.root) {
        plan.streams.push_back(
            std::make_unique<PeerSendStream>(0, spec.root, 0, all_elems, spec.chunk_elems));
        return plan;
      }
      copy_block(0, uroot * spec.count);
      for (int src = 0; src < n; ++src) {
        if (src == spec.root) continue;
        plan.streams.push_back(std::make_unique<PeerRecvStream>(
            0, src, static_cast<uint64_t>(src) * spec.count, all_elems, spec.chunk_elems));
      }
      return plan;
    case CollKind::kScatter:
      if (rank != spec.root) {
        plan.streams.push_back(
            std::make_unique<PeerRecvStream>(0, spec.root, 0, all_elems, spec.chunk_elems));
        return plan;
      }
      copy_block(uroot * spec.count, 0);
      for (int dst = 0; dst < n; ++dst) {
        if (dst == spec.root) continue;
        plan.streams.push_back(std::make_unique<PeerSendStream>(
            0, dst, static_cast<uint64_t>(dst) * spec.count, all_elems, spec.chunk_elems));
      }
      return plan;
    case CollKind::kReduce:
      for (int c = 0; c < spec.channels; ++c) {
        plan.streams.push_back(std::make_unique<ChainReduceStream>(
            c, RingOrder(n, spec.gpus_per_server, c), rank, spec.root,
            Part(all_elems, spec.channels, c), spec.chunk_elems));
      }
      return plan;
    default:
      break;
  }
  if (spec.kind == CollKind::kAllReduce && spec.algorithm == Algorithm::kTree) {
    const Range all{0, spec.count};
    // Flat: NCCL's two trees; hierarchical: one tree per channel (at least
    // the two of the double binary tree over the servers).
    const int trees = hier ? std::max(2, spec.channels) : 2;
    for (int t = 0; t < trees; ++t) {
      const Range half = Part(all, trees, t);
      const TreeLinks links = HierTreeLinks(n, spec.gpus_per_server, t, rank);
      const int up_index = static_cast<int>(plan.streams.size());
      plan.streams.push_back(
          std::make_unique<TreeStream>(t, true, links, half, spec.chunk_elems, -1));
      plan.streams.push_back(
          std::make_unique<TreeStream>(t, false, links, half, spec.chunk_elems, up_index));
    }
    return plan;
  }
  for (int c = 0; c < spec.channels; ++c) {
    const Range part = Part(Range{0, spec.count}, spec.channels, c);
    const RingOrder order(n, spec.gpus_per_server, c);
    switch (spec.kind) {
      case CollKind::kAllReduce:
      case CollKind::kBarrier:
        plan.streams.push_back(
            std::make_unique<RingAllreduceStream>(c, order, rank, part, spec.chunk_elems));
        break;
      case CollKind::kAllGather:
        plan.streams.push_back(std::make_unique<RingAllgatherStream>(c, order, rank, spec.count,
                                                                     part, spec.chunk_elems));
        break;
      case CollKind::kReduceScatter:
        plan.streams.push_back(std::make_unique<RingReduceScatterStream>(c, order, rank, spec.count,
                                                                         part, spec.chunk_elems));
        break;
      case CollKind::kBroadcast:
        plan.streams.push_back(std::make_unique<ChainBroadcastStream>(c, order, rank, spec.root,
                                                                      part, spec.chunk_elems));
        break;
      default:  // the point-to-point and rooted kinds returned above
        break;
    }
  }
  return plan;
}

std::vector<std::pair<int, int>> PlanPeers(const CollSpec& spec, int rank) {
  std::vector<std::pair<int, int>> peers;
  const int n = spec.nranks;
  if (n <= 1) return peers;
  const bool tree = spec.kind == CollKind::kBarrier ||
                    (spec.kind == CollKind::kAllReduce && spec.algorithm == Algorithm::kTree);
  if (tree) {
    const int trees = Hierarchical(n, spec.gpus_per_server) ? std::max(2, spec.channels) : 2;
    for (int t = 0; t < trees; ++t) {
      const TreeLinks l = HierTreeLinks(n, spec.gpus_per_server, t, rank);
      for (int p : {l.parent, l.children[0], l.children[1], l.children[2]}) {
        if (p >= 0) peers.emplace_back(p, t);
      }
    }
  } else if (NeedsAllPairs(spec.kind)) {
    for (int p = 0; p < n; ++p) {
      if (p != rank) peers.emplace_back(p, 0);
    }
  } else {
    for (int c = 0; c < spec.channels; ++c) {
      const RingOrder order(n, spec.gpus_per_server, c);
      const int pos = order.PosOf(rank);
      peers.emplace_back(order.RankAt(pos - 1), c);
      peers.emplace_back(order.RankAt(pos + 1), c);
    }
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

std::vector<std::pair<int, int>> DataPeers(const CollSpec& spec, int rank) {
  const int n = spec.nranks;
  const bool tree = spec.kind == CollKind::kBarrier ||
                    (spec.kind == CollKind::kAllReduce && spec.algorithm == Algorithm::kTree);
  if (n <= 1 || tree || NeedsAllPairs(spec.kind)) return PlanPeers(spec, rank);
  // The ring kinds (and the chains along a ring) send to the next rank.
  std::vector<std::pair<int, int>> peers;
  for (int c = 0; c < spec.channels; ++c) {
    const RingOrder order(n, spec.gpus_per_server, c);
    peers.emplace_back(order.RankAt(order.PosOf(rank) + 1), c);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

}  // namespace fathom::transport::coll
