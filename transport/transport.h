// The transport API: one non-blocking RDMA interface with verbs semantics,
// implemented by real verbs (transport/verbs: InfiniBand, RoCE, rxe) and by
// the emulated RoCEv2 NIC of the simulator (transport/emulated). Collectives
// (transport/collectives) are written once against it (DESIGN.md, "the one
// idea"): they post work requests and react to completions, never block.
//
// Semantics are those of libibverbs, on purpose:
//  - completion statuses, opcodes and QP states are verbs' (base/verbs_types.h);
//  - CreateQp() returns the QP in INIT (receives may be posted from then on),
//    Connect() takes it INIT -> RTR -> RTS, and a completion error takes it
//    to ERR, after which every outstanding WR, and every WR posted later,
//    completes with IBV_WC_WR_FLUSH_ERR; PostSend() before RTS is
//    FAILED_PRECONDITION (tests/transport/conformance_test.cc pins all this
//    on every backend);
//  - Post*() never waits: a full queue is an error (ibv_post_send's ENOMEM),
//    reported with the queue depth.
//  - Path MTU is min(local active_mtu, remote active_mtu) on both sides
//    (ROCEV2.md; CASES.md 1-2), unless the caller forces one (to stage a
//    mismatch).
//
// Ownership: a Device owns nothing it hands out; the caller owns every
// CompletionQueue, QueuePair and MemoryRegion it creates and must destroy
// QPs before the CQs they use, and all of them before the Device (the verbs
// rule; backends assert it in debug builds).
// Threading: objects are not thread-safe; one thread drives a Device and all
// its objects (a polling loop on verbs, the event loop in the simulator).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "base/verbs_types.h"

namespace fathom::transport {

// The verbs vocabulary of base/verbs_types.h, under this API's names.
using fathom::AccessFlags;
using fathom::kAccessAll;
using fathom::kAccessLocalWrite;
using fathom::kAccessRemoteAtomic;
using fathom::kAccessRemoteRead;
using fathom::kAccessRemoteWrite;
using fathom::RecvWr;
using fathom::SendWr;
using fathom::Sge;

// A registered memory region. The memory stays the caller's; the region must
// be deregistered (destroyed) before the memory is freed.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual void* addr() const = 0;
  virtual uint64_t length() const = 0;
  virtual uint32_t lkey() const = 0;
  virtual uint32_t rkey() const = 0;
};

// What a peer needs to RDMA into or out of one of our regions.
struct RemoteBuffer {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
};

// ibv_wc, plus the peer's rank so that errors name who we were talking to.
struct Completion : WorkCompletion {
  int peer_rank = -1;
};

// RC QP attributes set in Connect(). Defaults are rc_pingpong's/perftest's;
// NCCL uses timeout 20 (4.29 s per retry) and retry_cnt 7.
struct QpOptions {
  int max_send_wr = 256;
  int max_recv_wr = 256;
  int timeout = 14;        // local ACK timeout: 4.096 us * 2^timeout (0 = none)
  int retry_cnt = 7;       // transport retries; rxe treats 7 as infinite
  int rnr_retry = 7;       // RNR retries; 7 = infinite (IBTA)
  int min_rnr_timer = 12;  // RNR NAK timer code (0.64 ms)
  int traffic_class = 0;   // GRH traffic class (DSCP << 2 | ECN)
  int service_level = 0;
  int max_rd_atomic = 16;  // outstanding RDMA READ / atomics, both directions
  int path_mtu = 0;        // bytes; 0 = min(local, remote active_mtu)
  // Largest send/write posted inline (bytes); -1 = the backend's default
  // (verbs: 128, or 0 on a device without inline support).
  int max_inline_data = -1;
};

// The connection record a QP's owner sends to its peer (over the bootstrap,
// or directly inside the simulator) before Connect().
struct EndpointInfo {
  int rank = -1;
  uint32_t qpn = 0;
  uint32_t psn = 0;               // initial PSN (24 bits)
  uint16_t lid = 0;               // InfiniBand; 0 on RoCE
  std::array<uint8_t, 16> gid{};  // RoCE / global routing
  int gid_index = -1;
  int active_mtu = 0;  // bytes: the port's active MTU
};

// A completion queue. Poll() is ibv_poll_cq: non-blocking, returns how many
// completions it wrote (0 when none are ready).
class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  virtual int Poll(std::span<Completion> out) = 0;
  // Called (from the driving thread) when completions become available, so a
  // driver can keep a ready list instead of polling every CQ: the simulator
  // calls it at the completion's virtual time; the verbs backend when its
  // completion channel reports an event. May be empty.
  virtual void SetNotify(std::function<void()> notify) = 0;
};

// An RC queue pair to one peer.
class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual uint32_t qp_num() const = 0;
  virtual int peer_rank() const = 0;
  virtual QpState state() const = 0;
  // Our half of the connection record (valid from creation on).
  virtual EndpointInfo LocalInfo() const = 0;
  // INIT -> RTR -> RTS toward `remote` with the options given at creation.
  // Errors name the transition, the QPNs and the values; FAILED_PRECONDITION
  // when the QP is not in INIT (connected already, or in ERR).
  virtual Status Connect(const EndpointInfo& remote) = 0;
  // The path MTU in bytes chosen by Connect() (0 before).
  virtual int path_mtu() const = 0;
  virtual Status PostSend(const SendWr& wr) = 0;
  // Posts `wrs` in order with one doorbell where the backend can (verbs: one
  // ibv_post_send of a chained list, perftest's -l); by default one by one.
  // On an error the WRs before the failing one stay posted.
  virtual Status PostSendList(std::span<const SendWr> wrs) {
    for (const SendWr& wr : wrs) FATHOM_RETURN_IF_ERROR(PostSend(wr));
    return Status::Ok();
  }
  virtual Status PostRecv(const RecvWr& wr) = 0;
  // WRs posted and not yet completed (signaled or not), per queue.
  virtual int outstanding_sends() const = 0;
  virtual int outstanding_recvs() const = 0;
  // ibv_modify_qp(IBV_QPS_ERR): every outstanding WR, and every WR posted
  // later, completes with IBV_WC_WR_FLUSH_ERR (IBTA 10.3.1). For fault
  // injection (transport/faulty); FAILED_PRECONDITION where a backend cannot.
  virtual Status ModifyToError() {
    return FailedPrecondition("ibv_modify_qp(ERR): not supported by this backend");
  }
};

// Facts about the device and port a backend runs on (for doctor and logs).
struct DeviceInfo {
  std::string name;  // "rxe0", "mlx5_0", "sim:h17"
  std::string fw_ver;
  std::string link_layer;  // "InfiniBand" | "Ethernet" | "Emulated"
  int port = 1;
  std::string port_state;  // "ACTIVE", "DOWN", ...
  int active_mtu = 0;      // bytes
  int gid_index = -1;
  std::string gid;         // text form
  std::string gid_type;    // "RoCE v2", "RoCE v1", "IB"
  int netdev_mtu = 0;      // Ethernet MTU of the netdev behind a RoCE port
  double active_gbps = 0;  // speed x width
};

// An asynchronous event (ibv_async_event), surfaced, never swallowed
// (CASES.md 20): port error, QP fatal, device fatal, ...
struct AsyncEvent {
  std::string type;  // "IBV_EVENT_PORT_ERR", ...
  uint32_t qp_num = 0;
  int port = 0;
  std::string detail;
};

// A device context with one protection domain and one port: the factory of
// everything above.
class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  virtual StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, uint64_t length,
                                                                 uint32_t access) = 0;
  virtual StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) = 0;
  // `cq` must outlive the QP; it receives both send and receive completions.
  virtual StatusOr<std::unique_ptr<QueuePair>> CreateQp(int peer_rank, const QpOptions& options,
                                                        CompletionQueue* cq) = 0;
  // Async events that arrived since the last call (non-blocking).
  virtual std::vector<AsyncEvent> TakeAsyncEvents() = 0;
};

// The time source and progress engine a driver runs against: wall-clock for
// verbs (the NIC progresses by itself), virtual time for the simulator (where
// Progress() runs events). Wait helpers (wait.h) are written against it, so
// one deadline logic serves both worlds.
class Clock {
 public:
  virtual ~Clock() = default;
  // Time since an arbitrary origin: wall time for verbs, virtual for sim.
  virtual Picoseconds Now() = 0;
  // Lets work happen until at most `until`: the simulator runs events up to
  // the next completion notification or `until`, whichever is first; verbs
  // returns at once (the hardware needs no help). Returns false when nothing
  // can ever happen again (the simulator's event list is empty): a waiter can
  // then report a hang at once instead of spinning to its deadline.
  virtual bool Progress(Picoseconds until) = 0;
};

}  // namespace fathom::transport
