#include "transport/collectives/communicator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <vector>

#include "transport/collectives/multi_qp.h"
#include "transport/wait.h"

namespace fathom::transport::coll {
namespace {

uint64_t ConnKey(int peer, int channel) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32) |
         static_cast<uint32_t>(channel);
}

// wr_id = connection index << 2 | kind.
enum WrKind : uint64_t { kWrData = 0, kWrCredit = 1, kWrRecv = 2 };
uint64_t WrId(size_t conn, WrKind kind) { return (static_cast<uint64_t>(conn) << 2) | kind; }
// With several QPs per connection (multi_qp.h) the QP's index within its
// connection sits above: 0 leaves the single-QP ids as they were.
constexpr int kWrQpShift = 48;
constexpr uint64_t kWrConnMask = (uint64_t{1} << (kWrQpShift - 2)) - 1;
uint64_t WrIdOn(size_t conn, WrKind kind, int q) {
  return WrId(conn, kind) | (static_cast<uint64_t>(q) << kWrQpShift);
}

size_t PageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

void ZeroedBuffer::Reset() {
  if (data_ != nullptr) munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

void ZeroedBuffer::assign(size_t size, uint8_t /*zero*/) {
  Reset();
  const size_t page = PageBytes();
  const size_t mapped = (std::max<size_t>(size, 1) + page - 1) / page * page;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();  // as std::vector's bad_alloc would end the run
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  mapped_ = mapped;
}

void ZeroedBuffer::Release(size_t offset, size_t bytes) {
  if (data_ == nullptr || offset >= size_) return;
  const size_t page = PageBytes();
  const size_t end = std::min(size_, offset + bytes);
  // Whole pages only: a neighbouring slot's bytes may share the edge pages.
  const size_t first = (offset + page - 1) / page * page;
  const size_t last = end / page * page;
  if (last <= first) return;
  // MADV_DONTNEED on private anonymous memory: the next touch reads zeros
  // (madvise(2)); the pages are freed now, not under memory pressure.
  madvise(data_ + first, last - first, MADV_DONTNEED);
}

size_t ZeroedBuffer::ResidentBytes() const {
  if (data_ == nullptr) return 0;
  const size_t page = PageBytes();
  std::vector<unsigned char> in_core(mapped_ / page);
  if (mincore(data_, mapped_, in_core.data()) != 0) return 0;
  size_t pages = 0;
  for (unsigned char c : in_core) pages += c & 1u;
  return pages * page;
}

std::vector<std::pair<int, int>> NeededConnections(int nranks, int rank, int channels,
                                                   int gpus_per_server, bool all_pairs) {
  CollSpec ring;
  ring.nranks = nranks;
  ring.channels = channels;
  ring.gpus_per_server = gpus_per_server;
  std::vector<std::pair<int, int>> all = PlanPeers(ring, rank);
  CollSpec tree = ring;
  tree.algorithm = Algorithm::kTree;
  for (const auto& p : PlanPeers(tree, rank)) all.push_back(p);
  if (all_pairs) {
    for (int p = 0; p < nranks; ++p) {
      if (p != rank) all.emplace_back(p, 0);
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

StatusOr<std::unique_ptr<Communicator>> Communicator::Create(Device* device, int rank, int nranks,
                                                             const CommOptions& options) {
  if (options.slots < 1 || options.chunk_bytes < 8 || options.chunk_bytes > (1u << 31) ||
      options.channels < 1) {
    return InvalidArgument("Communicator::Create rank " + std::to_string(rank) + ": slots " +
                           std::to_string(options.slots) + ", chunk_bytes " +
                           std::to_string(options.chunk_bytes) + ", channels " +
                           std::to_string(options.channels) + " out of range");
  }
  if (options.qps_per_connection < 1 || options.qps_per_connection > kMaxQpsPerConnection) {
    return InvalidArgument("Communicator::Create rank " + std::to_string(rank) +
                           ": qps_per_connection " + std::to_string(options.qps_per_connection) +
                           " out of range 1.." + std::to_string(kMaxQpsPerConnection));
  }
  std::unique_ptr<Communicator> c(new Communicator(device, rank, nranks, options));
  // Every connection needs room for `slots` data and `slots` credit
  // receives, and as many sends, at once.
  c->options_.qp.max_send_wr = std::max(c->options_.qp.max_send_wr, 2 * options.slots + 2);
  c->options_.qp.max_recv_wr = std::max(c->options_.qp.max_recv_wr, 2 * options.slots + 2);
  const auto needed =
      NeededConnections(nranks, rank, options.channels, options.gpus_per_server, options.all_pairs);
  const int depth =
      static_cast<int>(needed.size() + 1) * 4 * (options.slots + 1) * options.qps_per_connection;
  FATHOM_ASSIGN_OR_RETURN(c->cq_, device->CreateCq(depth));
  for (const auto& [peer, channel] : needed) {
    auto conn = std::make_unique<Conn>();
    conn->peer = peer;
    conn->channel = channel;
    FATHOM_ASSIGN_OR_RETURN(conn->qp, device->CreateQp(peer, c->options_.qp, c->cq_.get()));
    const int nqps = QpsForPeer(options.qps_per_connection, options.gpus_per_server, rank, peer);
    for (int q = 1; q < nqps; ++q) {
      FATHOM_ASSIGN_OR_RETURN(auto more, device->CreateQp(peer, c->options_.qp, c->cq_.get()));
      conn->more_qps.push_back(std::move(more));
      conn->multi_qp = true;
    }
    if (nqps > 1) {
      conn->qp_arrived.assign(static_cast<size_t>(nqps), 0);
      conn->qp_bytes.assign(static_cast<size_t>(nqps), 0);
    }
    if (!options.modelled) {
      conn->staging.assign(options.chunk_bytes * static_cast<uint64_t>(options.slots), 0);
      FATHOM_ASSIGN_OR_RETURN(
          conn->staging_mr,
          device->RegisterMemory(conn->staging.data(), conn->staging.size(), kAccessAll));
    }
    conn->index = c->conns_.size();
    c->index_.emplace_back(ConnKey(peer, channel), conn->index);
    c->conns_.push_back(std::move(conn));
  }
  std::sort(c->index_.begin(), c->index_.end());
  c->nconns_ = c->conns_.size();
  for (size_t i = 0; i < c->nconns_ && i < kInlineConns; ++i) {
    c->first_conns_[i] = c->conns_[i].get();
  }
  if (c->nconns_ > kInlineConns) {
    c->more_watch_.assign(c->nconns_, Watch{});
    c->watch_ = c->more_watch_.data();
  }
  return c;
}

Communicator::~Communicator() {
  // QPs before the CQ, regions before their memory (transport.h ownership).
  for (auto& conn : conns_) {
    conn->qp.reset();
    conn->more_qps.clear();
    conn->multi_qp = false;
  }
  regions_.clear();
  for (auto& conn : conns_) {
    conn->staging_mr.reset();
    conn->out_staging_mr.reset();
  }
  cq_.reset();
}

std::vector<ConnRecord> Communicator::LocalRecords() const {
  std::vector<ConnRecord> out;
  for (const auto& conn : conns_) {
    ConnRecord r;
    r.rank = rank_;
    r.peer = conn->peer;
    r.channel = conn->channel;
    r.endpoint = conn->qp->LocalInfo();
    if (conn->staging_mr) {
      r.staging = {reinterpret_cast<uint64_t>(conn->staging_mr->addr()), conn->staging_mr->length(),
                   conn->staging_mr->rkey()};
    }
    out.push_back(r);
    // A connection's further QPs: one record each, in QP order (Connect
    // pairs the k-th record of a connection with its QP k).
    for (const auto& more : conn->more_qps) {
      r.endpoint = more->LocalInfo();
      out.push_back(r);
    }
  }
  return out;
}

Status Communicator::Connect(const std::vector<ConnRecord>& from_peers) {
  int connected = 0, expected = 0;
  for (const auto& conn : conns_) expected += conn->nqps();
  for (const ConnRecord& r : from_peers) {
    if (r.peer != rank_) continue;
    Conn* conn = FindConn(r.rank, r.channel);
    if (conn == nullptr) {
      return InvalidArgument("Communicator::Connect rank " + std::to_string(rank_) +
                             ": unexpected record from rank " + std::to_string(r.rank) +
                             " channel " + std::to_string(r.channel));
    }
    if (conn->records_taken >= conn->nqps()) {
      return InvalidArgument("Communicator::Connect rank " + std::to_string(rank_) + ": " +
                             std::to_string(conn->records_taken + 1) + " records from rank " +
                             std::to_string(r.rank) + " channel " + std::to_string(r.channel) +
                             " for " + std::to_string(conn->nqps()) +
                             " QPs (do both ranks use the same qps_per_connection?)");
    }
    const int q = conn->records_taken++;
    conn->remote = r.staging;
    FATHOM_RETURN_IF_ERROR(conn->qp_at(q).Connect(r.endpoint));
    FATHOM_RETURN_IF_ERROR(PostRecvsOn(*conn, q, 2 * options_.slots + 2));
    ++connected;
  }
  if (connected != expected) {
    return FailedPrecondition("Communicator::Connect rank " + std::to_string(rank_) + ": got " +
                              std::to_string(connected) + " of " + std::to_string(expected) +
                              " peer records");
  }
  return Status::Ok();
}

Conn* Communicator::FindConn(int peer, int channel) {
  const uint64_t key = ConnKey(peer, channel);
  auto it = std::lower_bound(index_.begin(), index_.end(), std::pair<uint64_t, size_t>(key, 0));
  return it == index_.end() || it->first != key ? nullptr : conns_[it->second].get();
}

std::vector<Conn*> Communicator::conns() {
  std::vector<Conn*> out;
  for (auto& c : conns_) out.push_back(c.get());
  return out;
}

StatusOr<const MemoryRegion*> Communicator::Register(void* addr, uint64_t length) {
  if (options_.modelled || addr == nullptr || length == 0) return nullptr;
  auto key = std::make_pair(reinterpret_cast<uint64_t>(addr), length);
  auto it = regions_.find(key);
  if (it != regions_.end()) return it->second.get();
  FATHOM_ASSIGN_OR_RETURN(auto mr, device_->RegisterMemory(addr, length, kAccessAll));
  const MemoryRegion* p = mr.get();
  regions_[key] = std::move(mr);
  return p;
}

StatusOr<uint8_t*> Communicator::OutStaging(Conn& conn, uint32_t* lkey) {
  *lkey = 0;
  if (options_.modelled) return nullptr;
  if (!conn.out_staging_mr) {
    conn.out_staging.assign(options_.chunk_bytes * static_cast<uint64_t>(options_.slots), 0);
    FATHOM_ASSIGN_OR_RETURN(conn.out_staging_mr,
                            device_->RegisterMemory(conn.out_staging.data(),
                                                    conn.out_staging.size(), kAccessLocalWrite));
  }
  *lkey = conn.out_staging_mr->lkey();
  // The slot mirrors the remote one: its credit came back, so the write that
  // last used it has been placed at the peer.
  return conn.out_staging.data() +
         (conn.sent % static_cast<uint64_t>(options_.slots)) * options_.chunk_bytes;
}

void Communicator::ReleaseSlot(Conn& conn, uint64_t seq, uint64_t bytes) {
  if (!release_staging_ || bytes < PageBytes() || !conn.staging.data()) return;
  const size_t slot = static_cast<size_t>(seq % static_cast<uint64_t>(options_.slots));
  if (conn.slot_resident.empty()) conn.slot_resident.assign(static_cast<size_t>(options_.slots), 0);
  uint64_t& kept = conn.slot_resident[slot];
  if (kept >= bytes) return;  // reused: its pages are resident and counted
  StagingBudget* budget = options_.staging_budget;
  if (budget != nullptr && budget->resident + (bytes - kept) <= options_.staging_budget_bytes) {
    budget->resident += bytes - kept;
    budget->peak = std::max(budget->peak, budget->resident);
    kept = bytes;
    return;
  }
  conn.staging.Release(slot * options_.chunk_bytes, std::max(bytes, kept));
  if (budget != nullptr) budget->resident -= kept;
  kept = 0;
}

size_t Communicator::StagingResidentBytes() const {
  size_t total = 0;
  for (const auto& c : conns_) total += c->staging.ResidentBytes() + c->out_staging.ResidentBytes();
  return total;
}

size_t Communicator::StagingReservedBytes() const {
  size_t total = 0;
  for (const auto& c : conns_) total += c->staging.size() + c->out_staging.size();
  return total;
}

Status Communicator::PostRecvs(Conn& conn, int count) { return PostRecvsOn(conn, 0, count); }

Status Communicator::PostRecvsOn(Conn& conn, int q, int count) {
  RecvWr wr;
  wr.wr_id = WrIdOn(conn.index, kWrRecv, q);
  if (conn.staging_mr)
    wr.sge = {reinterpret_cast<uint64_t>(conn.staging.data()), 0, conn.staging_mr->lkey()};
  QueuePair& qp = conn.qp_at(q);
  for (int i = 0; i < count; ++i) FATHOM_RETURN_IF_ERROR(qp.PostRecv(wr));
  return Status::Ok();
}

Status Communicator::PostData(Conn& conn, const void* src, uint32_t lkey, uint64_t bytes,
                              uint64_t /*wr_tag*/) {
  if (conn.multi_qp) return PostDataOnQps(conn, src, lkey, bytes);
  SendWr wr;
  wr.wr_id = WrId(conn.index, kWrData);
  wr.opcode = WrOpcode::kRdmaWriteWithImm;
  wr.sge = {reinterpret_cast<uint64_t>(src), static_cast<uint32_t>(bytes), lkey};
  if (!modelled_) {
    wr.remote_addr = conn.remote.addr +
                     (conn.sent % static_cast<uint64_t>(options_.slots)) * options_.chunk_bytes;
    wr.rkey = conn.remote.rkey;
  }
  wr.imm_data = static_cast<uint32_t>(conn.sent & 0xffffffu);
  FATHOM_RETURN_IF_ERROR(conn.qp->PostSend(wr));
  ++conn.sent;
  Touch(conn.index);
  return Status::Ok();
}

Status Communicator::PostDataOnQps(Conn& conn, const void* src, uint32_t lkey, uint64_t bytes) {
  const int n = conn.nqps();
  const uint64_t slot_offset =
      (conn.sent % static_cast<uint64_t>(options_.slots)) * options_.chunk_bytes;
  SendWr wr;
  wr.wr_id = WrId(conn.index, kWrData);
  wr.opcode = WrOpcode::kRdmaWriteWithImm;
  wr.imm_data = static_cast<uint32_t>(conn.sent & 0xffffffu);
  wr.rkey = options_.modelled ? 0 : conn.remote.rkey;
  // One message = one part per QP (split) or the whole on QP sent mod n
  // (round-robin): multi_qp.h.
  const int first = options_.split_data_on_qps ? 0 : static_cast<int>(conn.sent % n);
  const int last = options_.split_data_on_qps ? n - 1 : first;
  for (int q = first; q <= last; ++q) {
    const uint64_t off = options_.split_data_on_qps ? SplitPartOffset(bytes, n, q) : 0;
    const uint64_t len = options_.split_data_on_qps ? SplitPartLength(bytes, n, q) : bytes;
    wr.sge = {src == nullptr ? 0 : reinterpret_cast<uint64_t>(src) + off,
              static_cast<uint32_t>(len), lkey};
    if (!options_.modelled) wr.remote_addr = conn.remote.addr + slot_offset + off;
    FATHOM_RETURN_IF_ERROR(conn.qp_at(q).PostSend(wr));
    conn.qp_bytes[static_cast<size_t>(q)] += len;
  }
  ++conn.sent;
  Touch(conn.index);
  return Status::Ok();
}

Status Communicator::ReturnCredit(Conn& conn) {
  SendWr wr;
  wr.wr_id = WrId(conn.index, kWrCredit);
  wr.opcode = WrOpcode::kSendWithImm;
  wr.imm_data = 1;
  if (conn.staging_mr) {
    wr.sge = {reinterpret_cast<uint64_t>(conn.staging.data()), 0, conn.staging_mr->lkey()};
  }
  return conn.qp->PostSend(wr);
}

StatusOr<int> Communicator::Poll(Picoseconds now) {
  // One buffer for every communicator of the thread: warm in cache (one per
  // communicator was a cold line per poll at 1024 ranks) and set up once.
  static thread_local std::array<Completion, 32> batch;
  int total = 0;
  Status first_error;
  while (true) {
    const int n = cq_->Poll(std::span<Completion>(batch.data(), batch.size()));
    for (int i = 0; i < n; ++i) {
      Completion& c = batch[static_cast<size_t>(i)];
      const size_t idx = static_cast<size_t>((c.wr_id >> 2) & kWrConnMask);
      if (idx >= nconns_) {
        return Internal("Communicator::Poll rank " + std::to_string(rank_) + ": unknown wr_id in " +
                        DescribeCompletion(c));
      }
      Conn& conn = ConnAt(idx);
      if (c.peer_rank < 0) c.peer_rank = conn.peer;
      conn.last = c;
      conn.have_last = true;
      conn.last_completion_time = now;
      ++completions_;
      if (c.status != WcStatus::kSuccess) {
        // Report the cause, not its echo: a flushed WR (5) only says that
        // its QP failed earlier; prefer a real error later in the batch.
        if (!first_error.ok() && c.status == WcStatus::kWrFlushErr) continue;
        const bool flush = c.status == WcStatus::kWrFlushErr;
        if (first_error.ok() || !flush) {
          first_error =
              Aborted("rank " + std::to_string(rank_) + " -> rank " + std::to_string(conn.peer) +
                      " channel " + std::to_string(conn.channel) + ": " + DescribeCompletion(c));
          if (!flush) return first_error;
        }
        continue;
      }
      if ((c.wr_id & 3) == kWrRecv) {
        const int q = static_cast<int>(c.wr_id >> kWrQpShift);
        if (c.opcode != WcOpcode::kRecvRdmaWithImm) {
          conn.credits += c.has_imm ? c.imm_data : 1;
        } else if (!conn.multi_qp) {
          ++conn.arrived;
        } else {
          ++conn.qp_arrived[static_cast<size_t>(q)];
          conn.arrived = MessagesArrived(conn.qp_arrived, options_.split_data_on_qps);
        }
        Touch(idx);
        FATHOM_RETURN_IF_ERROR(PostRecvsOn(conn, q, 1));
      }
    }
    total += n;
    if (n < static_cast<int>(batch.size())) break;
  }
  if (!first_error.ok()) return first_error;
  return total;
}

Status ExchangeAndConnect(const std::vector<Communicator*>& comms) {
  std::vector<std::vector<ConnRecord>> inbox(comms.size());
  for (Communicator* c : comms) {
    for (const ConnRecord& r : c->LocalRecords()) {
      if (r.peer < 0 || static_cast<size_t>(r.peer) >= comms.size()) {
        return InvalidArgument("ExchangeAndConnect: record for rank " + std::to_string(r.peer));
      }
      inbox[static_cast<size_t>(r.peer)].push_back(r);
    }
  }
  for (size_t i = 0; i < comms.size(); ++i) {
    FATHOM_RETURN_IF_ERROR(comms[i]->Connect(inbox[i]));
  }
  return Status::Ok();
}

}  // namespace fathom::transport::coll
