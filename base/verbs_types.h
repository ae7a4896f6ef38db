// The verbs vocabulary shared by every layer that speaks RDMA: completion
// statuses, completion opcodes, work-request opcodes, access flags, work
// requests, completions and QP states, with the same numbers, names and
// fields as libibverbs (<infiniband/verbs.h>: ibv_wc_status, ibv_wc_opcode,
// ibv_wr_opcode, ibv_access_flags, ibv_sge, ibv_send_wr, ibv_recv_wr, ibv_wc,
// ibv_qp_state). It lives in base/ because both the emulated NIC (fabric/sim)
// and the transport backends (transport/) use it, and the NIC may not depend
// on transport/. The verbs backend checks with static_asserts that these
// numbers match the installed verbs.h.
#pragma once

#include <cstdint>
#include <string_view>

namespace fathom {

// ibv_wc_status.
enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};

// ibv_wc_opcode. Receive-side opcodes have bit 7 set (IBV_WC_RECV = 128).
enum class WcOpcode : uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

// ibv_wr_opcode (the subset fathom posts).
enum class WrOpcode : uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
};

// ibv_access_flags bits (same values).
enum AccessFlags : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
  kAccessRemoteAtomic = 1u << 3,
  kAccessAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic,
};

// One scatter/gather element (ibv_sge). fathom posts one SGE per WR.
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// ibv_send_wr, flattened to the fields fathom uses.
struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  Sge sge;
  bool signaled = true;      // IBV_SEND_SIGNALED
  uint32_t imm_data = 0;     // *_WITH_IMM, host byte order
  uint64_t remote_addr = 0;  // RDMA and atomics
  uint32_t rkey = 0;         // RDMA and atomics
  uint64_t compare_add = 0;  // atomics: FETCH_ADD's add, CMP_SWP's compare
  uint64_t swap = 0;         // CMP_SWP
};

// ibv_recv_wr with one SGE.
struct RecvWr {
  uint64_t wr_id = 0;
  Sge sge;
};

// ibv_wc, the fields fathom reads. The emulated NIC adds the virtual time
// of the completion (sim::Completion), the transport API the peer's rank
// (transport::Completion); both convert to and from this by slicing.
struct WorkCompletion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // valid when has_imm
  bool has_imm = false;   // IBV_WC_WITH_IMM
  uint32_t qp_num = 0;
  uint32_t vendor_err = 0;
};

// ibv_qp_state.
enum class QpState : uint8_t {
  kReset = 0,
  kInit = 1,
  kRtr = 2,
  kRts = 3,
  kSqd = 4,
  kSqe = 5,
  kErr = 6,
};

// "IBV_WC_RETRY_EXC_ERR" etc.: the enumerator names users grep logs for.
std::string_view WcStatusName(WcStatus s);
// ibv_wc_status_str()'s text, e.g. "transport retry counter exceeded".
std::string_view WcStatusString(WcStatus s);
std::string_view WcOpcodeName(WcOpcode op);  // "IBV_WC_SEND", ...
std::string_view WrOpcodeName(WrOpcode op);  // "IBV_WR_SEND", ...
std::string_view QpStateName(QpState s);     // "IBV_QPS_RTS", ...

// The completion opcode of a send-queue WR (WRITE_WITH_IMM completes as
// IBV_WC_RDMA_WRITE, SEND_WITH_IMM as IBV_WC_SEND, as in verbs).
WcOpcode SendCompletionOpcode(WrOpcode op);

// The MTU enum of verbs (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5) <-> bytes.
// Returns 0 / -1 for values that are not a verbs MTU.
int MtuEnumToBytes(int mtu_enum);
int MtuBytesToEnum(int bytes);

// Local ACK timeout for the QP attribute `timeout` (IBTA 9.7.6.1.3):
// 4.096 us * 2^timeout; timeout 0 means no timer (returns 0).
constexpr int64_t LocalAckTimeoutPs(int timeout) {
  return timeout <= 0 ? 0 : int64_t{4096000} << timeout;
}

// RNR NAK timer codes (IBTA table 45): code 0 is 655.36 ms, 1..31 run from
// 0.01 ms to 491.52 ms. Returns picoseconds; codes outside 0..31 give -1.
int64_t RnrTimerPs(int code);

}  // namespace fathom
