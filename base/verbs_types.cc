#include "base/verbs_types.h"

#include <array>

namespace fathom {

std::string_view WcStatusName(WcStatus s) {
  static constexpr std::array<std::string_view, 22> kNames = {
      "IBV_WC_SUCCESS",           "IBV_WC_LOC_LEN_ERR",
      "IBV_WC_LOC_QP_OP_ERR",     "IBV_WC_LOC_EEC_OP_ERR",
      "IBV_WC_LOC_PROT_ERR",      "IBV_WC_WR_FLUSH_ERR",
      "IBV_WC_MW_BIND_ERR",       "IBV_WC_BAD_RESP_ERR",
      "IBV_WC_LOC_ACCESS_ERR",    "IBV_WC_REM_INV_REQ_ERR",
      "IBV_WC_REM_ACCESS_ERR",    "IBV_WC_REM_OP_ERR",
      "IBV_WC_RETRY_EXC_ERR",     "IBV_WC_RNR_RETRY_EXC_ERR",
      "IBV_WC_LOC_RDD_VIOL_ERR",  "IBV_WC_REM_INV_RD_REQ_ERR",
      "IBV_WC_REM_ABORT_ERR",     "IBV_WC_INV_EECN_ERR",
      "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",
      "IBV_WC_RESP_TIMEOUT_ERR",  "IBV_WC_GENERAL_ERR"};
  const auto i = static_cast<size_t>(s);
  return i < kNames.size() ? kNames[i] : "IBV_WC_UNKNOWN";
}

std::string_view WcStatusString(WcStatus s) {
  // Same text as rdma-core's ibv_wc_status_str().
  static constexpr std::array<std::string_view, 22> kText = {"success",
                                                             "local length error",
                                                             "local QP operation error",
                                                             "local EE context operation error",
                                                             "local protection error",
                                                             "Work Request Flushed Error",
                                                             "memory management operation error",
                                                             "bad response error",
                                                             "local access error",
                                                             "remote invalid request error",
                                                             "remote access error",
                                                             "remote operation error",
                                                             "transport retry counter exceeded",
                                                             "RNR retry counter exceeded",
                                                             "local RDD violation error",
                                                             "remote invalid RD request",
                                                             "aborted error",
                                                             "invalid EE context number",
                                                             "invalid EE context state",
                                                             "fatal error",
                                                             "response timeout error",
                                                             "general error"};
  const auto i = static_cast<size_t>(s);
  return i < kText.size() ? kText[i] : "unknown";
}

std::string_view WcOpcodeName(WcOpcode op) {
  switch (op) {
    case WcOpcode::kSend:
      return "IBV_WC_SEND";
    case WcOpcode::kRdmaWrite:
      return "IBV_WC_RDMA_WRITE";
    case WcOpcode::kRdmaRead:
      return "IBV_WC_RDMA_READ";
    case WcOpcode::kCompSwap:
      return "IBV_WC_COMP_SWAP";
    case WcOpcode::kFetchAdd:
      return "IBV_WC_FETCH_ADD";
    case WcOpcode::kBindMw:
      return "IBV_WC_BIND_MW";
    case WcOpcode::kLocalInv:
      return "IBV_WC_LOCAL_INV";
    case WcOpcode::kRecv:
      return "IBV_WC_RECV";
    case WcOpcode::kRecvRdmaWithImm:
      return "IBV_WC_RECV_RDMA_WITH_IMM";
  }
  return "IBV_WC_UNKNOWN";
}

std::string_view WrOpcodeName(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
      return "IBV_WR_RDMA_WRITE";
    case WrOpcode::kRdmaWriteWithImm:
      return "IBV_WR_RDMA_WRITE_WITH_IMM";
    case WrOpcode::kSend:
      return "IBV_WR_SEND";
    case WrOpcode::kSendWithImm:
      return "IBV_WR_SEND_WITH_IMM";
    case WrOpcode::kRdmaRead:
      return "IBV_WR_RDMA_READ";
    case WrOpcode::kAtomicCmpAndSwp:
      return "IBV_WR_ATOMIC_CMP_AND_SWP";
    case WrOpcode::kAtomicFetchAndAdd:
      return "IBV_WR_ATOMIC_FETCH_AND_ADD";
  }
  return "IBV_WR_UNKNOWN";
}

std::string_view QpStateName(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "IBV_QPS_RESET";
    case QpState::kInit:
      return "IBV_QPS_INIT";
    case QpState::kRtr:
      return "IBV_QPS_RTR";
    case QpState::kRts:
      return "IBV_QPS_RTS";
    case QpState::kSqd:
      return "IBV_QPS_SQD";
    case QpState::kSqe:
      return "IBV_QPS_SQE";
    case QpState::kErr:
      return "IBV_QPS_ERR";
  }
  return "IBV_QPS_UNKNOWN";
}

WcOpcode SendCompletionOpcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return WcOpcode::kSend;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp:
      return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd:
      return WcOpcode::kFetchAdd;
  }
  return WcOpcode::kSend;
}

int MtuEnumToBytes(int mtu_enum) {
  return (mtu_enum >= 1 && mtu_enum <= 5) ? (128 << mtu_enum) : 0;
}

int MtuBytesToEnum(int bytes) {
  for (int e = 1; e <= 5; ++e) {
    if ((128 << e) == bytes) return e;
  }
  return -1;
}

int64_t RnrTimerPs(int code) {
  // IBTA vol. 1, table 45, in units of 0.01 ms.
  static constexpr std::array<int, 32> kCentiMs = {
      65536, 1,    2,    3,    4,    6,     8,     12,    16,    24,   32,
      48,    64,   96,   128,  192,  256,   384,   512,   768,   1024, 1536,
      2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  if (code < 0 || code > 31) return -1;
  return int64_t{kCentiMs[static_cast<size_t>(code)]} * 10000000;  // 0.01 ms = 1e7 ps
}

}  // namespace fathom
