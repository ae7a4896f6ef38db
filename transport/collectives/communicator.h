// Communicator: one rank's connections for the collectives — a CQ, one RC QP
// per (peer, channel), and for each connection a receive staging area of
// `slots` chunks the peer RDMA-writes into. Flow control is credit based
// (NCCL's proxy FIFO): a sender may have at most `slots` chunks in flight to
// a peer; the receiver returns a credit (a zero-length SEND with immediate)
// each time it has consumed a chunk. Data is RDMA WRITE WITH IMM into slot
// (sequence % slots); RC ordering makes the sequence implicit.
//
// Setup: Create() makes the CQ, QPs and staging; LocalRecords() are what the
// peers need (EndpointInfo + the staging RemoteBuffer), exchanged over the
// bootstrap (verbs) or directly (ExchangeAndConnect, one process); Connect()
// takes the peers' records.
//
// Ownership: the Communicator owns its CQ, QPs and memory regions and the
// staging memory; the Device must outlive it. It is driven by one thread.
// Modelled mode (emulated backend only): no bytes move (lkey/rkey 0, the sim
// NIC's "modelled" key), no staging is allocated and nothing is reduced — for
// timing runs at scales whose buffers would not fit in memory.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "transport/collectives/schedule.h"
#include "transport/transport.h"

namespace fathom::transport::coll {

struct StagingBudget;

struct CommOptions {
  int channels = 1;                   // QPs per peer for ring collectives
  uint64_t chunk_bytes = 512 * 1024;  // one staging slot, the largest transfer
  int slots = 4;                      // staging slots (credits) per connection
  QpOptions qp;                       // RC attributes (timeout, retry_cnt, ...)
  bool modelled = false;              // emulated backend: move no bytes
  // Emulated backend: the rank's memory bandwidth for its reductions, in
  // bytes/s (a GPU's HBM or a host's DRAM: transport/worlds/coll_profile.h);
  // a step that reduces sends its result that much later (collective.h).
  // 0: reductions take no time (the ideal profile). Over verbs the host
  // reduces for real and this is not used.
  double host_reduce_bytes_per_s = 0;
  // > 1: ranks are GPUs of servers this large, and the collectives run
  // NCCL's hierarchical rings and trees (schedule.h); 0: flat.
  int gpus_per_server = 0;
  // Connect every pair of ranks on channel 0 too (alltoall, gather,
  // scatter: NeedsAllPairs); off, the rings' and trees' peers only.
  bool all_pairs = false;
  // Emulated backend: staging slots give their pages back (ZeroedBuffer::
  // Release) once consumed, beyond a budget. One process holds every rank's
  // staging there, and a slot once written stays resident: a 1024-rank
  // world kept GBs of consumed chunks. Slots stay resident (and are reused
  // without a page fault) while the world's resident staging is within
  // `staging_budget_bytes`; past it, a slot written for the first time is
  // released as soon as its chunk is consumed. Never over verbs (registered
  // memory is pinned).
  bool release_staging = false;
  uint64_t staging_budget_bytes = uint64_t{256} << 20;
  // The world's account of resident staging (SimWorld owns it; null: every
  // consumed slot is released).
  StagingBudget* staging_budget = nullptr;
  // RC QPs per connection across the network (NCCL_IB_QPS_PER_CONNECTION,
  // 1..128) and how a connection's messages use them
  // (NCCL_IB_SPLIT_DATA_ON_QPS: false = whole messages round-robin, NCCL's
  // default since 2.20; true = every message split over all of them):
  // multi_qp.h. Peers on one server keep one.
  int qps_per_connection = 1;
  bool split_data_on_qps = false;
};

// Resident staging of every communicator of one process, against
// CommOptions::staging_budget_bytes.
struct StagingBudget {
  uint64_t resident = 0;
  uint64_t peak = 0;
};

// One direction's connection record, sent by `rank` to `peer`.
struct ConnRecord {
  int rank = -1;
  int peer = -1;
  int channel = 0;
  EndpointInfo endpoint;
  RemoteBuffer staging;
};

// Zeroed, page-aligned memory straight from mmap: untouched pages cost
// nothing, so a rank's staging costs memory only where chunks are written (a
// server tier's eight channels give every rank dozens of connections, most
// of whose slots a small collective never reaches), and Release() can hand
// whole pages back (CommOptions::release_staging).
class ZeroedBuffer {
 public:
  ZeroedBuffer() = default;
  ZeroedBuffer(const ZeroedBuffer&) = delete;
  ZeroedBuffer& operator=(const ZeroedBuffer&) = delete;
  ~ZeroedBuffer() { Reset(); }
  // Replaces the contents with `size` zero bytes.
  void assign(size_t size, uint8_t /*zero*/);
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Gives back the whole pages inside [offset, offset + bytes): they read as
  // zeros again and hold no memory until written. Only for memory no device
  // pins (a verbs registration keeps the old pages: the emulated NIC only).
  void Release(size_t offset, size_t bytes);
  // Bytes of its pages in memory now (mincore), for the memory figures.
  size_t ResidentBytes() const;

 private:
  void Reset();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

// The state of one (peer, channel) connection. What a completion and a step
// read comes first, in two aligned lines: at 1024 ranks the Conns are cold
// when their completions arrive, and each line is a miss.
struct alignas(64) Conn {
  int peer = -1;
  bool have_last = false;
  // !more_qps.empty(), here in the first line, which a post reads anyway.
  bool multi_qp = false;
  size_t index = 0;  // position in its Communicator (the wr_id's connection field)
  std::unique_ptr<QueuePair> qp;
  std::unique_ptr<MemoryRegion> staging_mr;
  uint64_t arrived = 0;   // data chunks received
  uint64_t consumed = 0;  // data chunks consumed (credits owed back)
  uint64_t sent = 0;      // data chunks written
  uint64_t credits = 0;   // credits the peer returned
  Completion last;        // last completion on this QP
  Picoseconds last_completion_time;
  // CommOptions::qps_per_connection > 1 across the network (multi_qp.h):
  // QPs 1.. of the connection (`qp` is QP 0, which also carries the
  // credits), the writes with immediate each QP delivered, the payload
  // bytes posted on each, and the peer's records Connect() has taken.
  // Empty with one QP.
  std::vector<std::unique_ptr<QueuePair>> more_qps;
  int channel = 0;
  ZeroedBuffer staging;      // incoming slots
  ZeroedBuffer out_staging;  // outgoing slots (results not kept in `out`)
  std::unique_ptr<MemoryRegion> out_staging_mr;
  RemoteBuffer remote;  // the peer's staging for our data
  // Bytes of each staging slot kept resident and counted in the world's
  // StagingBudget (release_staging; empty until a slot is consumed).
  std::vector<uint64_t> slot_resident;
  std::vector<uint64_t> qp_arrived;
  std::vector<uint64_t> qp_bytes;
  int records_taken = 0;
  int nqps() const { return 1 + static_cast<int>(more_qps.size()); }
  QueuePair& qp_at(int q) { return q == 0 ? *qp : *more_qps[static_cast<size_t>(q - 1)]; }
};

// The (peer, channel) connections a rank needs for ring collectives on
// `channels` channels and the double binary tree (channels 0 and 1).
std::vector<std::pair<int, int>> NeededConnections(int nranks, int rank, int channels,
                                                   int gpus_per_server = 0, bool all_pairs = false);

class Communicator {
 public:
  static StatusOr<std::unique_ptr<Communicator>> Create(Device* device, int rank, int nranks,
                                                        const CommOptions& options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const CommOptions& options() const { return options_; }
  Device& device() { return *device_; }
  CompletionQueue& cq() { return *cq_; }

  std::vector<ConnRecord> LocalRecords() const;
  // Records the peers sent to this rank (rank == their rank, peer == ours).
  Status Connect(const std::vector<ConnRecord>& from_peers);

  Conn* FindConn(int peer, int channel);
  std::vector<Conn*> conns();

  // Registered memory for a user buffer (cached; null region = modelled).
  StatusOr<const MemoryRegion*> Register(void* addr, uint64_t length);
  // Outgoing staging of a connection, allocated on first use.
  StatusOr<uint8_t*> OutStaging(Conn& conn, uint32_t* lkey);

  // Posts a data chunk (slot conn.sent % slots) and a credit return.
  Status PostData(Conn& conn, const void* src, uint32_t lkey, uint64_t bytes, uint64_t wr_tag);
  Status ReturnCredit(Conn& conn);
  // Chunk `seq` of `bytes` has been consumed: its slot's pages go back when
  // options().release_staging says so.
  void ReleaseSlot(Conn& conn, uint64_t seq, uint64_t bytes);
  // Staging bytes (incoming and outgoing slots) in memory now, and reserved
  // (address space), over this rank's connections.
  size_t StagingResidentBytes() const;
  size_t StagingReservedBytes() const;
  uint8_t* SlotData(Conn& conn, uint64_t seq) {
    return conn.staging.data() +
           (seq % static_cast<uint64_t>(options_.slots)) * options_.chunk_bytes;
  }

  // Drains the CQ into connection state (arrivals, credits, send
  // completions), reposting receives. Returns how many completions it saw; a
  // completion error becomes ABORTED naming the status, the peer and the QP
  // (NCCL's "Got completion from peer ... with status=12").
  StatusOr<int> Poll(Picoseconds now);

  // Completions processed so far (the watchdog's progress measure).
  uint64_t completions() const { return completions_; }
  // A count per connection (by Conn::index) that changes whenever its
  // arrived, consumed, sent or credits do: a collective blocked on a
  // connection skips it until it changes, without touching the Conn (at 1024
  // ranks the Conns are cold in cache and re-checking every blocked stream
  // on every completion dominated the run).
  uint32_t version(size_t conn) const { return watch_[conn].version; }
  void Touch(size_t conn) {
    Watch& w = watch_[conn];  // in the Communicator for its first connections
    ++w.version;
    runnable_ |= w.waiters;
    w.waiters = 0;
  }
  // The running collective's streams (bit per stream, streams 0..63) that
  // wait on a connection, and those to check again: Touch moves a
  // connection's waiters to runnable, so a rank whose completions touched
  // nothing it waits on skips its streams without reading them.
  void AddWaiter(size_t conn, int stream) { watch_[conn].waiters |= uint64_t{1} << stream; }
  uint64_t runnable() const { return runnable_; }
  void SetRunnable(uint64_t streams) { runnable_ = streams; }
  void ClearRunnable(int stream) { runnable_ &= ~(uint64_t{1} << stream); }
  void ClearWaiters() {
    for (size_t i = 0; i < nconns_; ++i) watch_[i].waiters = 0;
  }

 private:
  Communicator(Device* device, int rank, int nranks, const CommOptions& options)
      : device_(device), rank_(rank), nranks_(nranks), options_(options) {
    release_staging_ = options.release_staging;
    modelled_ = options.modelled;
  }
  Status PostRecvs(Conn& conn, int count);
  // Several QPs per connection (multi_qp.h): receives on QP `q`, and one
  // message posted round-robin or split.
  Status PostRecvsOn(Conn& conn, int q, int count);
  Status PostDataOnQps(Conn& conn, const void* src, uint32_t lkey, uint64_t bytes);

  // The connection at `idx` (< conns_.size()): the first kInlineConns
  // without reading conns_'s heap block.
  Conn& ConnAt(size_t idx) { return idx < kInlineConns ? *first_conns_[idx] : *conns_[idx]; }

  // What Poll reads for every completion first, together: the CQ, the
  // first connections' pointers and their watches (a rank of a ring or a
  // tree has a handful), so a completion's turn reads the Communicator's
  // lines and then its Conn, not a pointer array and a watch array in two
  // more heap blocks (cold at thousands of ranks).
  static constexpr size_t kInlineConns = 8;
  std::unique_ptr<CompletionQueue> cq_;
  uint64_t completions_ = 0;
  uint64_t runnable_ = 0;
  size_t nconns_ = 0;
  // options_.release_staging and .modelled, which every consumed chunk
  // (ReleaseSlot) and every post asks.
  bool release_staging_ = false;
  bool modelled_ = false;
  Conn* first_conns_[kInlineConns] = {};
  struct Watch {
    uint32_t version = 0;
    uint64_t waiters = 0;
  };
  // By connection index: see version() and AddWaiter(). first_watch_ for
  // at most kInlineConns connections, more_watch_'s storage beyond.
  Watch* watch_ = first_watch_;
  Watch first_watch_[kInlineConns];
  std::vector<Watch> more_watch_;

  Device* device_;
  int rank_, nranks_;
  CommOptions options_;
  std::vector<std::unique_ptr<Conn>> conns_;
  // (peer << 32 | channel, position in conns_), sorted: a handful of entries
  // searched on every step, where a map's node chase costs more.
  std::vector<std::pair<uint64_t, size_t>> index_;
  std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<MemoryRegion>> regions_;
};

// Exchanges every rank's records and connects them all (one process: the
// simulator, or tests).
Status ExchangeAndConnect(const std::vector<Communicator*>& comms);

}  // namespace fathom::transport::coll
