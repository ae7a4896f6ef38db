// Nic: the emulated RoCEv2 NIC of one host (one GPU's NIC) and its RC
// transport, to the IBTA spec as ROCEV2.md pins it: per-QP send and receive
// queues, segmentation at the path MTU, 24-bit PSNs, ACK coalescing, NAK on a
// PSN sequence error and go-back-N from the NAKed PSN, the local ACK timeout
// (4.096 us * 2^timeout) with retry_cnt, RNR NAK with min_rnr_timer and
// rnr_retry, RDMA READ and atomics with their responses and loss recovery,
// verbs completion statuses, QP to ERROR with flushed WRs.
//
// Ownership: the Network owns each Nic; a Nic owns its QPs, CQs and memory
// region table (not the memory). The port it sends on belongs to the Network.
// All calls and callbacks happen on the engine's thread, in virtual time.
//
// The requester side lives in requester.cc (its completer, what it does
// with responses, in completer.cc), the responder side in responder.cc,
// setup/scheduling/completions in nic.cc, the NIC profile's delays
// (nic_profile.h) in nic_delay.cc.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "base/status.h"
#include "fabric/sim/config.h"
#include "fabric/sim/engine.h"
#include "fabric/sim/packet.h"
#include "fabric/sim/port.h"
#include "fabric/sim/qp.h"
#include "fabric/sim/ring.h"

namespace fathom::sim {

// A rxe-like first QPN (QPNs 0 and 1 are special in IB).
inline constexpr uint32_t kFirstQpn = 0x11;

class FlowFabric;  // flow_fabric.h

class Nic {
 public:
  Nic(Engine* engine, PacketPool* pool, DropStats* drops, int32_t host_node,
      const NetworkConfig& config);
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;
  ~Nic();

  // The port the NIC transmits on (set by the Network).
  void AttachPort(Port* port) { port_ = port; }
  // The port resumed a paused class (Port::set_on_resume): the pump
  // looks again.
  static void OnPortResumed(void* nic) { static_cast<Nic*>(nic)->KickPump(); }
  // Receive entry for Port::Connect.
  static void Receive(void* nic, Packet* p, int32_t in_port);
  // ReceiveFullSizeFn: what Receive does for the next expected full-size
  // packet of a WRITE, without a pool packet; false for any other.
  static bool ReceiveFullSize(void* nic, const QpFlow& flow, uint32_t psn, Opcode opcode,
                              bool ack_req);
  // Fetch hint (ReceivePrefetchFn): the NIC's lines and the QP's.
  static void Prefetch(const void* nic, uint32_t dest_qpn, bool full_size);
  // Where the NIC gets the fixed route (QpFlow::path) of a QP's packets when
  // the QP connects: fills all kPathMax entries (set by the Network; without
  // it, the route stays unknown and each switch looks the packets up).
  using PathFn = void (*)(void* ctx, int32_t src_host, int32_t dst_host, uint32_t flow_hash,
                          Port** path);
  void set_paths(PathFn fn, void* ctx) {
    path_fn_ = fn;
    path_ctx_ = ctx;
  }

  int32_t host() const { return host_; }
  // Calls fn(QpFlow&) for every QP's flow: re-routing after a link fails
  // rewrites their routes (fabric/scenario/reroute.h).
  template <typename Fn>
  void ForEachFlow(Fn&& fn) {
    for (uint32_t i = 0; i < qp_count_; ++i) fn(QpAt(i)->flow);
  }

  // ibv_reg_mr: registers [addr, addr+length). The region must outlive its
  // use. Keys are unique per NIC and never kModelledKey.
  StatusOr<MemoryRegion> RegisterMemory(void* addr, uint64_t length, uint32_t access);
  // The region a remote key names (null: none). A distributed run
  // (fabric/parallel) ships a RETH's address relative to it: each process
  // holds its own copy of the memory.
  const MemoryRegion* RegionOfKey(uint32_t rkey) const {
    const uint32_t index = rkey >> 8;
    return (rkey & 0xFF) == 0x5A && index > 0 && index <= mrs_.size() ? &mrs_[index - 1] : nullptr;
  }
  Status DeregisterMemory(uint32_t lkey);

  // ibv_create_cq: the Nic owns the queue; the pointer stays valid while the
  // Nic lives.
  CompletionQueue* CreateCq();

  // ibv_create_qp (RC) in RESET, then the rc_pingpong transitions.
  StatusOr<uint32_t> CreateQp(CompletionQueue* send_cq, CompletionQueue* recv_cq,
                              const QpAttr& attr);
  Status ModifyToInit(uint32_t qpn);
  // RTR needs the peer: its host node, QPN and the first PSN it will send.
  Status ModifyToRtr(uint32_t qpn, int32_t remote_host, uint32_t remote_qpn, uint32_t rq_psn);
  Status ModifyToRts(uint32_t qpn, uint32_t sq_psn);
  // Moves the QP to ERROR and flushes its queues (ibv_modify_qp(IBV_QPS_ERR)).
  Status ModifyToError(uint32_t qpn);

  // ibv_post_send / ibv_post_recv. Errors are returned for what verbs
  // rejects at post time (bad QP state, bad opcode, oversized message).
  Status PostSend(uint32_t qpn, const SendWr& wr);
  Status PostRecv(uint32_t qpn, const RecvWr& wr);

  // What the QP's completions carry to a CQ's direct function
  // (CompletionQueue::set_direct): the transport's own QP object, found
  // without a lookup. Null (the default) clears it.
  Status SetQpContext(uint32_t qpn, void* context);

  StatusOr<QpState> GetQpState(uint32_t qpn) const;
  StatusOr<QpCounters> GetQpCounters(uint32_t qpn) const;
  // Sum over all QPs.
  QpCounters TotalCounters() const;
  size_t qp_count() const { return qp_count_; }

  // The port's state as the NIC sees it, for the async events a link fault
  // produces (CASES.md 9: "NET/IB : Got async event : port error"). A change
  // queues IBV_EVENT_PORT_ERR (down) or IBV_EVENT_PORT_ACTIVE (up); the
  // frames lost while down are the fault model's business, not the NIC's.
  void SetPortState(bool up);
  bool port_active() const { return port_active_; }
  struct PortEvent {
    Picoseconds at;
    bool up;  // false: IBV_EVENT_PORT_ERR, true: IBV_EVENT_PORT_ACTIVE
  };
  // Port events since the last call, oldest first.
  std::vector<PortEvent> TakePortEvents();

  // The host stops (a crash, a kernel panic): from now on the NIC sends
  // nothing, runs no timer, accepts no frame and reports no completion. Its
  // peers see only silence and time out (IBV_WC_RETRY_EXC_ERR).
  void Crash();
  bool crashed() const { return crashed_; }

  // DCQCN (NetworkConfig::dcqcn; nic_dcqcn.cc): the NIC's mlx5 counters, and
  // a QP's current rate (its line rate when no CNP limits it).
  const DcqcnCounters& dcqcn_counters() const { return dcqcn_counters_; }
  StatusOr<double> GetQpRateBps(uint32_t qpn) const;
  // A QP's rate limiter for the run report (dcqcn.h DcqcnRateStats): not
  // cnp_seen when DCQCN is off or no CNP reached the QP.
  StatusOr<DcqcnRateStats> GetQpDcqcnStats(uint32_t qpn) const;

  // The flow-level model (NetworkConfig::flow_model, flow_fabric.h): each
  // SEND/WRITE at the head of a QP's send queue moves as one flow instead
  // of packets (nic_flow.cc). Set once, before any QP connects.
  void set_flow_fabric(FlowFabric* fabric) {
    flow_ = fabric;
    flow_mode_ = fabric != nullptr;
  }
  // Fetch hint of the flow model's events (flow_fabric.h, flow_model.h):
  // the NIC's first lines and those of QP `qpn` that the flow's sender
  // (receive false: OnFlowSent, FlowAcked) or receiver (FlowReceive)
  // reads, when the QP is one of the NIC's first (no load to find it).
  static void PrefetchFlowQp(const Nic* nic, uint32_t qpn, bool receive);

 private:
  struct SendWqe {
    SendWr wr;
    uint32_t first_psn;
    uint32_t npkts;    // PSNs used (READ: response packets)
    bool local_error;  // bad lkey/range: fails with IBV_WC_LOC_PROT_ERR
  };
  struct RecvWqe {
    RecvWr wr;
  };
  // Responder: READ responses or an atomic ACK still to send. Responses
  // leave in PSN order, and ACKs queued behind them wait (IBTA 9.7.5.1).
  struct ReadJob {
    uint32_t first_psn;
    uint32_t npkts;
    uint32_t next;  // index of the next response packet
    uint64_t va;
    uint32_t len;
    bool modelled;
    bool atomic;
    uint64_t orig;  // atomic: the value before the operation
  };
  struct AtomicResult {
    uint32_t psn;
    uint64_t orig;
  };
  // A QP's state, laid out by who touches it: a NIC at 1024 hosts finds its
  // QPs cold, so each packet should fetch few lines. Line 0 is read by every
  // packet of either side, line 1 by the requester (sending, ACKs): a
  // full-size packet sent by RequesterSendFullSize reads these two and nothing
  // else of the QP. Line 2 holds the sender's other checks (attributes, READ
  // responses queued), line 3 the responder; the rest is rare. Every
  // packet's counters are here too; the others live in `counters` (see
  // Counters()). 128-byte aligned, as its QpFlow is. (The "lines" are
  // approximate: line 1's rings reach into line 2, and line 2 ends with
  // the send CQ and the context, read by every completion.)
  struct alignas(128) Qp {
    // Line 0.
    QpState state = QpState::kReset;
    bool active = false;  // in the NIC's round-robin list
    bool nak_sent = false;
    bool has_deferred_ack = false;  // an ACK/NAK waiting behind responses
    bool recv_active = false;       // the front RecvWqe is being filled by a SEND
    bool write_modelled = true;
    bool retry_pending = false;
    uint8_t deferred_ack_syndrome = 0;
    uint8_t buffer_class = 0;      // attr.traffic_class >> 5 (Packet::buffer_class)
    Opcode full_size_opcode{};     // of the full-size packets (full_size_left)
    uint16_t full_wire_bytes = 0;  // flow.full_wire_bytes, here for the full-size packets
    uint32_t qpn = 0;
    uint32_t remote_qpn = 0;
    uint32_t epsn = 0;  // responder: expected PSN
    uint32_t msn = 0;
    uint32_t pkts_since_ackreq = 0;
    Packet* pending_ack = nullptr;  // queued, unsent ACK (coalescing)
    uint64_t sent_pkts = 0;
    // The next packets to send from the cursor on, when they are full-size
    // packets of a modelled SEND or WRITE (set by RequesterNext, used up by
    // RequesterSendFullSize, cleared by every other move of the cursor,
    // MoveSendCursor): how many, and the PSN of the first. 0: none known.
    uint32_t full_size_left = 0;
    uint32_t full_size_psn = 0;
    uint32_t ack_every_packets = 64;  // attr.ack_every_packets
    uint32_t send_pkt = 0;            // packet index within the WQE at send_idx
    // Line 1: the requester.
    Ring<SendWqe> sq;             // front = oldest not completed
    uint32_t send_idx = 0;        // WQE being transmitted (index into sq)
    uint32_t max_sent_psn = 0;    // one past the highest PSN sent (retransmit detection)
    int64_t ack_deadline_ps = 0;  // 0 = timer stopped
    int64_t rnr_until_ps = 0;     // 0 = not waiting
    // Its count is in line 1 (ResponderHasWork), its storage pointer in 2.
    Ring<ReadJob> reads;
    // Line 2.
    uint32_t next_psn = 0;   // PSN for the next new WQE
    uint32_t acked_psn = 0;  // oldest PSN not yet acknowledged
    QpAttr attr;
    CompletionQueue* send_cq = nullptr;
    // SetQpContext: here, in a line that both a completing send and a
    // received message read (and the flow model's hints fetch).
    void* context = nullptr;
    // Line 3: the responder. A WRITE's full-size packet received reads this
    // line and line 0 only (ReceiveFullSize).
    Ring<RecvWqe> rq;
    uint64_t write_va = 0;  // WRITE in progress: next address
    uint32_t recv_offset = 0;
    uint32_t write_len = 0;  // bytes of the current WRITE so far
    CompletionQueue* recv_cq = nullptr;
    uint32_t deferred_ack_psn = 0;
    uint64_t rcvd_pkts = 0;
    // Rare.
    int outstanding_rd = 0;
    uint32_t retry_psn = 0;   // PSN of the last go-back-N (dedups implied NAKs)
    int64_t timer_at_ps = 0;  // time of the live timer event, 0 = none
    uint32_t timer_gen = 0;
    int retries_left = 0;
    int rnr_retries_left = 0;
    // The NIC profile's retransmission (nic_profile.h): the regular
    // interval, and the adaptive retransmissions this QP's timeout allows
    // and those made since the last progress.
    int64_t regular_timeout_ps = 0;
    uint8_t adp_steps = 0;
    uint8_t adp_step = 0;
    bool flow_busy = false;  // flow model: a message of this QP is in flight
    // Flow model: a one-packet message is sent at once, for the time it
    // leaves (FlowActivate's fold); until then the QP is busy with it (-1:
    // none is leaving). The message's FlowFabric slot + 1 (split: 1 while
    // its arrival is held), to withdraw its arrival if the QP fails before
    // it has left (FlowWithdrawFold).
    int64_t flow_free_ps = -1;
    uint32_t flow_fold_slot = 0;
    Ring<AtomicResult> atomics;  // for duplicate atomic requests
    QpCounters counters;         // but sent_pkts, rcvd_pkts
    // What the QP's packets point at (their addressing and route): only
    // its address is read to send, by the NIC; hops read its route.
    QpFlow flow;
    // The flow model's copy of the route (nic_flow.cc; reset when the route
    // is set, ModifyToRtr): the model's link per hop, and the forward and
    // back latencies last computed (a collective's messages repeat a size).
    struct FlowRoute {
      int32_t links[kPathMax];
      uint8_t nlinks = 0;
      bool known = false;
      uint32_t fwd_wire = 0;  // the last packet's wire bytes `fwd` is for (0: none)
      Picoseconds fwd;
      bool ack_known = false;  // `ack`: an ACK's latency on this QP's route
      Picoseconds ack;
      // A split run's requester (FlowFabric::NotePost, in the QP's own
      // process): posts noted, the number of the last one shipped to the
      // replicas, messages sent, and when the last post kept home leaves.
      uint32_t split_posts = 0;
      uint32_t split_shipped = 0;
      uint32_t split_sent = 0;
      // Its flows' slot class (FlowFabric::Plan): 0 with no plan (every
      // process replicates every flow), else 1.. for a declared data QP;
      // with a plan, 0 is a QP that sends one-packet messages only.
      uint32_t split_class = 0;
      int64_t split_kept_until = 0;
    } flow_route;
    QpCounters Counters() const {
      QpCounters c = counters;
      c.sent_pkts = sent_pkts;
      c.rcvd_pkts = rcvd_pkts;
      return c;
    }
  };

  static constexpr uint32_t kQpChunk = 4;
  Qp* QpAt(uint32_t index) {
    return index < kQpChunk ? &first_qps_[index]
                            : &qp_chunks_[index / kQpChunk - 1][index % kQpChunk];
  }
  const Qp* QpAt(uint32_t index) const {
    return index < kQpChunk ? &first_qps_[index]
                            : &qp_chunks_[index / kQpChunk - 1][index % kQpChunk];
  }
  Qp* FindQp(uint32_t qpn);
  const Qp* FindQp(uint32_t qpn) const;
  StatusOr<const MemoryRegion*> CheckLocal(const Sge& sge, uint32_t need) const;
  const MemoryRegion* CheckRemote(uint32_t rkey, uint64_t va, uint64_t len, uint32_t need) const;
  Packet* NewPacket(const Qp& qp, Opcode opcode, uint32_t psn);
  // Queues `c` (the verbs fields; its qp_num is the QP's) at the current
  // virtual time.
  void Complete(Qp& qp, CompletionQueue* cq, const WorkCompletion& c);
  void EnterError(Qp& qp);  // QP -> ERROR, flush both queues

  // Scheduling (nic.cc).
  void Activate(Qp& qp);
  void KickPump();
  // arg 0: the pump KickPump schedules (pump_pending_); else a paced pump
  // at time arg (DCQCN, paced_at_ps_).
  static void OnPump(void* nic, uint64_t arg);
  // The engine's fetch hint for pump events: the round-robin front QP's
  // lines, the port and a queued control packet.
  static void PrefetchPump(const void* nic, uint64_t arg);
  // Fetches the lines of a QP that sending (or receiving) a packet touches:
  // no more, since a burst of prefetches stalls on the CPU's miss buffers.
  static void PrefetchQp(const Qp* qp, bool receive);
  // Those a received packet touches: lines 0 and 3 for a full-size one
  // (the middle of a WRITE; that of a SEND or a READ response, rarer, also
  // reads a line or two unfetched, as does an ACK request), 0 to 3 for
  // others.
  static void PrefetchQpReceive(const Qp* qp, bool full_size) {
    if (!full_size) {
      PrefetchQp(qp, true);
      return;
    }
    __builtin_prefetch(qp);
    __builtin_prefetch(reinterpret_cast<const char*>(qp) + 192);
  }
  void Pump();
  // Pump while the port has paused classes (PFC): the QPs of a paused
  // class are skipped; the port's resume kicks the pump again.
  void PumpPaused(uint8_t paused);
  // The fetch hint's fields for the next pump, after `from` (null: none)
  // sent: when it is the round-robin's front again, its next full-size packet
  // (rr_full_size_: the QP's first lines), or else the WQE at its cursor.
  void SetPumpHint(const Qp* from) {
    const bool next = from != nullptr && rr_front_ == from;
    rr_full_size_ = next && from->full_size_left > 0;
    rr_wqe_ = next && !rr_full_size_ && from->send_idx < from->sq.size()
                  ? from->sq.at_address(from->send_idx)
                  : nullptr;
  }
  void SyncFront() { rr_front_ = active_.empty() ? nullptr : active_.front(); }
  void SendControl(Packet* p);
  // Takes the oldest control packet (the queue is not empty) and the QP that
  // sends it (null: none), which no longer holds it as its pending ACK.
  Packet* PopControl(Qp** from);

  // DCQCN (nic_dcqcn.cc); none of it runs when dcqcn_ is off.
  // Each on lines of its own: a pump's pacing (DcqcnRate::waits, OnSent)
  // reads the first two.
  struct alignas(64) DcqcnQp {
    DcqcnRate rate;            // reaction point
    int64_t last_cnp_ps = -1;  // notification point: the last CNP sent (-1: none)
    int64_t timer_at_ps = 0;   // the live DCQCN timer event, 0 = none
    uint32_t timer_gen = 0;
  };
  DcqcnQp& CcOf(const Qp& qp) { return dcqcn_base_[qp.qpn - kFirstQpn]; }
  // Puts a QP that may send now at the round-robin's front; false when
  // every active QP waits for its rate (the pump then runs at the
  // earliest, SchedulePacedPump).
  bool PaceFront();
  // The earliest time from `at` at which an active QP's rate lets it send
  // (`at` when one may then, or none is active).
  int64_t PaceTime(int64_t at);
  // KickPump under DCQCN: the pump at the port's free time, or (no control
  // packet queued and every active QP waiting for its rate) a paced pump
  // at PaceTime, so that a paced packet costs one event.
  void KickPumpPaced();
  // A pump at `at` (> now; its OnPump argument), unless one is pending by
  // then; an earlier one replaces a later (which then does nothing).
  void SchedulePacedPump(int64_t at);
  bool Paced(const Qp& qp) { return CcOf(qp).rate.waits(engine_->Now().ps()); }
  // A packet `qp` sent (its pacing and byte counter; not ACKs or CNPs).
  [[gnu::cold, gnu::noinline]] void DcqcnSent(Qp& qp, Opcode opcode, uint32_t wire_bytes);
  // NP: a packet for `qp` arrived CE-marked.
  [[gnu::cold, gnu::noinline]] void OnCeMarked(Qp& qp);
  // RP: a CNP for `qp` arrived.
  [[gnu::cold, gnu::noinline]] void OnCnp(Qp& qp);
  void ArmDcqcnTimer(Qp& qp);
  static void OnDcqcnTimer(void* nic, uint64_t arg);
  // Schedules a paced pump for the earliest send time of the active QPs not
  // in `paused` classes that their rate holds back (PumpPaused: PFC and
  // DCQCN together).
  void WakeForPace(uint8_t paused);
  static void OnTimer(void* nic, uint64_t arg);
  void ArmTimer(Qp& qp, int64_t at_ps);

  // Requester (requester.cc).
  bool RequesterHasWork(const Qp& qp) const;
  uint32_t SendPsn(const Qp& qp) const;
  Packet* RequesterNext(Qp& qp);
  // Pump's common case without a pool packet: when the next packet `qp`
  // (the round-robin's front, with no control packet queued) sends is a
  // full-size packet of a modelled SEND or WRITE, sends it to the port as a
  // compact entry, does the round-robin's turn and returns true; returns
  // false, having changed nothing, for any other packet. About half the
  // instructions of the general path, for nearly every packet of a bulk
  // transfer.
  bool RequesterSendFullSize(Qp& qp);
  // What every request packet sent does to the QP: retransmission count,
  // highest PSN sent, the local ACK timer.
  void NoteSent(Qp& qp, uint32_t psn, uint32_t psn_end);
  // Moves the send cursor other than forward by one packet (go-back-N, a
  // completed WQE, a flush): the full-size packets known ahead are no longer.
  static void MoveSendCursor(Qp& qp, uint32_t idx, uint32_t pkt) {
    qp.send_idx = idx;
    qp.send_pkt = pkt;
    qp.full_size_left = 0;
  }
  // The completer (completer.cc): each response packet runs through its
  // states (ACK, NAK, READ response, atomic ACK), as rxe_comp.c's do.
  class Completer;
  friend class Completer;
  void OnResponse(Qp& qp, Packet* p);
  void AckUpTo(Qp& qp, uint32_t psn);  // every PSN before `psn` is acknowledged
  // Removes the oldest WQE, acknowledged, keeping the send cursor on the
  // same WQE; returns it.
  SendWqe RetireFront(Qp& qp);
  // Progress: the retry budget starts over (rxe reset_retry_counters); an
  // ACK also restores the RNR budget.
  static void ResetRetryBudget(Qp& qp) {
    qp.retries_left = qp.attr.retry_cnt;
    qp.retry_pending = false;
    qp.adp_step = 0;
  }
  static void ResetRnrBudget(Qp& qp) { qp.rnr_retries_left = qp.attr.rnr_retry; }
  // After the acknowledged PSN moved: a go-back-N cursor left behind it
  // moves up, and the ACK timer runs while PSNs remain unacknowledged.
  void CatchUpCursorAndTimer(Qp& qp);
  void GoBackN(Qp& qp, uint32_t psn);
  void RetryOrFail(Qp& qp, uint32_t psn);
  void FailFront(Qp& qp, WcStatus status);
  void TimerExpired(Qp& qp);
  void RestartAckTimer(Qp& qp);
  // The profile's retransmission (retrans_profile_): the next timer interval,
  // an adaptive retransmission, a regular timeout (nic_profile.h).
  int64_t ProfileTimeoutPs(const Qp& qp) const;
  void AdaptiveRetransmit(Qp& qp);
  void ProfileTimeout(Qp& qp);

  // The profile's host/NIC delays (timed_, nic_profile.h): a posted WR
  // reaches the send queue, and a completion its CQ, later, in order.
  void EnqueueSend(Qp& qp, const SendWr& wr);
  void DeliverCompletion(CompletionQueue* cq, const Completion& c);
  static void OnDelayed(void* nic, uint64_t which);
  // Its fetch hint: the header of the queue `which` names.
  static void PrefetchDelayed(const void* nic, uint64_t which);
  void ScheduleDelayed(uint64_t which, int64_t at_ps);

  // The flow model (nic_flow.cc): the QP's next message starts as a flow;
  // its last byte left (FlowModel's callback); the receiver places it
  // (returns the status the requester sees, or kRnrRetryExcErr for an RNR
  // NAK to retry); the requester's ACK.
  friend class FlowFabric;
  void FlowActivate(Qp& qp);
  // The QP's route as model links (computed once: Qp::flow_route).
  void FlowRouteOf(Qp& qp);
  // The time `wr` takes alone on the QP's route (FlowModel::LoneTime).
  int64_t FlowLoneTime(Qp& qp, const SendWr& wr);
  static void OnFlowSent(void* nic, uint64_t qpn);
  // The work of a message's last byte leaving, `later_ps` from now (0: a
  // flow's finish; a one-packet message's lone time when it is folded):
  // the cursor moves on, the receiver gets it, the next message follows.
  void FlowSent(Qp& qp, int64_t later_ps);
  // The QP is free again after a folded message left (its wake event).
  static void OnFlowFree(void* nic, uint64_t qpn);
  // The QP fails (or the host crashes) while a folded message is still
  // leaving: it never left, as a flow's finish would find.
  void FlowWithdrawFold(Qp& qp);
  WcStatus FlowReceive(uint32_t qpn, const SendWr& wr, uint32_t npkts, uint32_t end_psn, bool* rnr);
  void FlowAcked(uint32_t qpn, uint32_t end_psn, WcStatus status);

  // Responder (responder.cc).
  void OnRequest(Qp& qp, Packet* p);
  void ExecuteRequest(Qp& qp, const Packet& p);
  // The end of a request executed: the next PSN expected, and the ACK it
  // asks for.
  void RequestDone(Qp& qp, uint32_t psn, bool ends_message, bool ack_req);
  void ResponderError(Qp& qp, uint32_t psn, uint8_t nak);
  void OnDuplicate(Qp& qp, const Packet& p);
  bool QueueResponses(Qp& qp, const Packet& p);  // READ: false on access error
  void QueueAck(Qp& qp, uint32_t psn, uint8_t syndrome);
  Packet* ResponderNext(Qp& qp);
  static bool ResponderHasWork(const Qp& qp) { return !qp.reads.empty() || qp.has_deferred_ack; }

  // The first two cache lines (the object is 64-byte aligned) hold what a
  // packet sent or received touches; the engine's and the ports' fetch hints
  // bring in both.
  alignas(64) Engine* engine_;
  Port* port_ = nullptr;
  // Round-robin of QPs with something to send.
  Ring<Qp*> active_;  // QPs are never destroyed (qp_chunks_ only grows)
  // ACKs, NAKs: sent before data.
  Packet* control_head_ = nullptr;
  PacketPool* pool_;
  int32_t host_;
  bool pump_pending_ = false;
  bool crashed_ = false;
  bool ipv6_;
  bool port_active_ = true;
  uint32_t qp_count_ = 0;
  // The next pump likely sends a full-size packet of rr_front_ (it did the
  // last, and has more): the fetch hint fetches only what that reads. In
  // the second line, which the engine fetches before the hint reads it.
  bool rr_full_size_ = false;
  // The profile retransmits otherwise than the IBTA timer alone
  // (RestartAckTimer's branch; in the padding before control_tail_).
  bool retrans_profile_ = false;
  bool dcqcn_ = false;      // NetworkConfig::dcqcn.enabled: pacing and CNPs
  bool flow_mode_ = false;  // flow_ is set (Activate's branch; in the padding)
  Packet* control_tail_ = nullptr;
  // dcqcn_qps_.data() (null when DCQCN is off), here on the second line:
  // every pump under DCQCN finds its QP's pacing state from it, which the
  // vector itself, on a cold line, would make a wait in every pump (and in
  // the fetch hint that fetches that state).
  DcqcnQp* dcqcn_base_ = nullptr;
  std::vector<MemoryRegion> mrs_;  // index = key - 1
  Qp* rr_front_ = nullptr;         // active_.front(), kept here for the fetch hint
  // The send-queue entry the next pump likely reads, for the fetch hint:
  // the entry of the QP that sent last, when it is also next. A guess (the
  // QP may send a response first, or go back on a NAK, or its queue may
  // have grown and moved since), which costs a fetch when wrong (a fetch
  // never faults); finding the entry from the QP takes a load that waits,
  // at 1024 hosts, the whole hint.
  const SendWqe* rr_wqe_ = nullptr;
  // Cold.
  DropStats* drops_;
  NicProfile profile_;
  bool timed_ = false;            // some host/NIC delay is not 0
  bool infinite_retry7_ = false;  // rxe: retry_cnt 7 retries forever
  struct DelayedPost {
    int64_t at_ps;
    uint32_t qpn;
    SendWr wr;
  };
  struct DelayedCompletion {
    int64_t at_ps;
    CompletionQueue* cq;
    Completion c;
  };
  std::deque<DelayedPost> delayed_posts_;
  std::deque<DelayedCompletion> delayed_completions_;
  FlowFabric* flow_ = nullptr;
  PathFn path_fn_ = nullptr;
  void* path_ctx_ = nullptr;
  // QPs by index (qpn - kFirstQpn), never moved: the first kQpChunk in the
  // NIC itself, where a fetch hint finds them from the NIC's address
  // without a load (NICs mostly have a few QPs, and a chunk pointer's load
  // would be a wait in every hint), the others in chunks.
  std::vector<std::unique_ptr<Qp[]>> qp_chunks_;  // kQpChunk QPs each
  Qp first_qps_[kQpChunk];
  std::vector<std::unique_ptr<CompletionQueue>> cqs_;
  std::vector<PortEvent> port_events_;
  // DCQCN: its parameters, counters, and per-QP state (by QP index; empty
  // when off).
  DcqcnConfig dcqcn_config_;
  DcqcnCounters dcqcn_counters_;
  std::vector<DcqcnQp> dcqcn_qps_;
  int64_t paced_at_ps_ = 0;  // the pending paced pump's time, 0 = none
  // DSCP -> priority (QosConfig): the buffer class of a QP's packets.
  std::array<uint8_t, 64> dscp_to_priority_;
};

}  // namespace fathom::sim
