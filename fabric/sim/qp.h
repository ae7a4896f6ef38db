// The emulated NIC's public vocabulary: memory regions, work requests,
// completions, completion queues, QP attributes and per-QP counters. The
// names and numbers follow libibverbs (ibv_send_wr, ibv_wc, ibv_qp_attr) so
// that transport/emulated maps onto them one to one.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>

#include "base/units.h"
#include "base/verbs_types.h"

namespace fathom::sim {

// A registered range of host memory. Addresses are real pointers of this
// process (the emulator moves real bytes for the transport API).
struct MemoryRegion {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint32_t access = 0;
};

// Key 0 means "modelled bytes": the NIC times and counts the transfer but
// moves no data and checks no region — what flow workloads use (the key an
// Sge and a SendWr hold by default).
inline constexpr uint32_t kModelledKey = 0;

// ibv_wc and the virtual time the completion was generated (a NIC queues
// these: the verbs fields plus 8 bytes).
struct Completion : WorkCompletion {
  Picoseconds time;
};

// The verbs fields of a send WR's completion (byte_len: READ and atomics;
// 0 otherwise and on errors, as mlx5 reports).
inline WorkCompletion SendWc(const SendWr& wr, WcStatus status, uint32_t byte_len = 0) {
  WorkCompletion c;
  c.wr_id = wr.wr_id;
  c.status = status;
  c.opcode = SendCompletionOpcode(wr.opcode);
  c.byte_len = byte_len;
  return c;
}
// A receive WR's completion; has_imm with the immediate data when given.
inline WorkCompletion RecvWc(uint64_t wr_id, WcStatus status, WcOpcode opcode = WcOpcode::kRecv,
                             uint32_t byte_len = 0) {
  WorkCompletion c;
  c.wr_id = wr_id;
  c.status = status;
  c.opcode = opcode;
  c.byte_len = byte_len;
  return c;
}
inline WorkCompletion RecvWcImm(uint64_t wr_id, WcOpcode opcode, uint32_t byte_len,
                                uint32_t imm_data, bool has_imm) {
  WorkCompletion c = RecvWc(wr_id, WcStatus::kSuccess, opcode, byte_len);
  c.imm_data = imm_data;
  c.has_imm = has_imm;
  return c;
}

// A completion queue. The owner polls it, or sets a callback that sees each
// completion as it is generated (in virtual time, from inside the engine);
// with a callback set, completions are not queued.
class CompletionQueue {
 public:
  // Moves up to out.size() completions out, oldest first; returns how many.
  int Poll(std::span<Completion> out);
  size_t size() const { return entries_.size(); }
  void set_callback(std::function<void(const Completion&)> cb) { callback_ = std::move(cb); }
  // A plain function instead (takes precedence over the callback): it also
  // gets the context the completion's QP carries (Nic::SetQpContext; null
  // when none), so that a transport above finds its own QP without a
  // lookup. `owner` is passed back as the first argument.
  using DirectFn = void (*)(void* owner, void* qp_context, const Completion& c);
  void set_direct(DirectFn fn, void* owner) {
    direct_ = fn;
    direct_owner_ = owner;
  }
  void Push(const Completion& c, void* qp_context = nullptr) {
    if (direct_ != nullptr) {
      direct_(direct_owner_, qp_context, c);
    } else if (callback_) {
      callback_(c);
    } else {
      entries_.push_back(c);
    }
  }

 private:
  // First: what a completion delivered to its owner reads.
  DirectFn direct_ = nullptr;
  void* direct_owner_ = nullptr;
  std::deque<Completion> entries_;
  std::function<void(const Completion&)> callback_;
};

// ibv_qp_attr fields that shape the RC protocol (ROCEV2.md "PSN arithmetic
// and timers").
struct QpAttr {
  int path_mtu_bytes = 4096;  // 256..4096
  int timeout = 14;           // local ACK timeout 4.096 us * 2^timeout; 0 = none
  int retry_cnt = 7;          // 0..7
  int rnr_retry = 7;          // 0..7; 7 = infinite (IBTA)
  int min_rnr_timer = 12;     // RNR timer code the responder sends (0..31)
  int max_rd_atomic = 16;     // outstanding READ/atomic requests
  uint8_t traffic_class = 0;  // IP TOS byte (DSCP << 2 | ECN)
  // rxe treats retry_cnt 7 as infinite; the IBTA and hardware NICs do not.
  bool rxe_infinite_retry = false;
  // The requester asks for an ACK at least every this many packets (rxe's
  // RXE_MAX_PKT_PER_ACK) and on the last packet of every message.
  int ack_every_packets = 64;
};

// Per-QP counters, named after rxe and mlx5 hw_counters (ROCEV2.md).
struct QpCounters {
  uint64_t sent_pkts = 0;
  uint64_t rcvd_pkts = 0;
  uint64_t retransmitted_packets = 0;
  // Requester side.
  uint64_t packet_seq_err = 0;         // NAK sequence errors received
  uint64_t implied_nak_seq_err = 0;    // gaps seen in READ responses / ACKs
  uint64_t local_ack_timeout_err = 0;  // local ACK timer expirations
  uint64_t roce_adp_retrans = 0;       // adaptive retransmissions (ConnectX profiles)
  uint64_t rcvd_rnr_err = 0;           // RNR NAKs received
  uint64_t retry_exceeded_err = 0;     // IBV_WC_RETRY_EXC_ERR completions
  uint64_t rnr_nak_retry_err = 0;      // IBV_WC_RNR_RETRY_EXC_ERR completions
  // Responder side.
  uint64_t out_of_sequence = 0;    // request PSN ahead of the expected PSN
  uint64_t duplicate_request = 0;  // request PSN behind it
  uint64_t send_rnr_err = 0;       // RNR NAKs sent (no receive WQE)
  uint64_t ack_deferred = 0;       // ACKs merged into a queued one
  uint64_t rdma_sends = 0;
  uint64_t rdma_recvs = 0;

  QpCounters& operator+=(const QpCounters& o) {
    sent_pkts += o.sent_pkts;
    rcvd_pkts += o.rcvd_pkts;
    retransmitted_packets += o.retransmitted_packets;
    packet_seq_err += o.packet_seq_err;
    implied_nak_seq_err += o.implied_nak_seq_err;
    local_ack_timeout_err += o.local_ack_timeout_err;
    roce_adp_retrans += o.roce_adp_retrans;
    rcvd_rnr_err += o.rcvd_rnr_err;
    retry_exceeded_err += o.retry_exceeded_err;
    rnr_nak_retry_err += o.rnr_nak_retry_err;
    out_of_sequence += o.out_of_sequence;
    duplicate_request += o.duplicate_request;
    send_rnr_err += o.send_rnr_err;
    ack_deferred += o.ack_deferred;
    rdma_sends += o.rdma_sends;
    rdma_recvs += o.rdma_recvs;
    return *this;
  }
};

}  // namespace fathom::sim
