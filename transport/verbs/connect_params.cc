#include "transport/verbs/connect_params.h"

#include <cstdio>
#include <cstring>

#include "base/verbs_types.h"

namespace fathom::transport::verbs {

StatusOr<int> NegotiatePathMtu(int local_bytes, int remote_bytes, int forced_bytes) {
  if (MtuBytesToEnum(local_bytes) < 0) {
    return InvalidArgument("NegotiatePathMtu: local active_mtu " + std::to_string(local_bytes) +
                           " is not a verbs MTU (256, 512, 1024, 2048, 4096)");
  }
  if (MtuBytesToEnum(remote_bytes) < 0) {
    return InvalidArgument("NegotiatePathMtu: remote active_mtu " + std::to_string(remote_bytes) +
                           " is not a verbs MTU (256, 512, 1024, 2048, 4096)");
  }
  if (forced_bytes != 0) {
    if (MtuBytesToEnum(forced_bytes) < 0) {
      return InvalidArgument("NegotiatePathMtu: forced path_mtu " + std::to_string(forced_bytes) +
                             " is not a verbs MTU (256, 512, 1024, 2048, 4096)");
    }
    return forced_bytes;
  }
  return local_bytes < remote_bytes ? local_bytes : remote_bytes;
}

std::string VerbsCallError(std::string_view call, std::string_view detail, int err) {
  std::string out(call);
  if (!detail.empty()) {
    out += ' ';
    out += detail;
  }
  out += ": ";
  out += err != 0 ? std::strerror(err) : "failed without errno";
  return out;
}

Status VerbsError(std::string_view call, std::string_view detail, int err) {
  return IoError(VerbsCallError(call, detail, err));
}

QpTransition InitTransition(int port, uint32_t access) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = 0;
  t.attr.port_num = static_cast<uint8_t>(port);
  t.attr.qp_access_flags = access;
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return t;
}

QpTransition RtrTransition(const QpOptions& options, const EndpointInfo& remote, int path_mtu_bytes,
                           int port, int sgid_index, bool is_roce) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTR;
  t.attr.path_mtu = static_cast<ibv_mtu>(MtuBytesToEnum(path_mtu_bytes));
  t.attr.dest_qp_num = remote.qpn;
  t.attr.rq_psn = remote.psn & 0xffffff;
  t.attr.max_dest_rd_atomic = static_cast<uint8_t>(options.max_rd_atomic);
  t.attr.min_rnr_timer = static_cast<uint8_t>(options.min_rnr_timer);
  t.attr.ah_attr.dlid = is_roce ? 0 : remote.lid;
  t.attr.ah_attr.sl = static_cast<uint8_t>(options.service_level);
  t.attr.ah_attr.src_path_bits = 0;
  t.attr.ah_attr.port_num = static_cast<uint8_t>(port);
  // RoCE has no LIDs: every packet carries a GRH (IPv4/IPv6 header) built
  // from the GIDs. Within an InfiniBand subnet the LID routes alone.
  if (is_roce) {
    t.attr.ah_attr.is_global = 1;
    std::memcpy(t.attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    t.attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(sgid_index);
    t.attr.ah_attr.grh.hop_limit = 64;
    t.attr.ah_attr.grh.traffic_class = static_cast<uint8_t>(options.traffic_class);
    t.attr.ah_attr.grh.flow_label = 0;
  }
  t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return t;
}

QpTransition RtsTransition(const QpOptions& options, uint32_t local_psn) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTS;
  t.attr.timeout = static_cast<uint8_t>(options.timeout);
  t.attr.retry_cnt = static_cast<uint8_t>(options.retry_cnt);
  t.attr.rnr_retry = static_cast<uint8_t>(options.rnr_retry);
  t.attr.sq_psn = local_psn & 0xffffff;
  t.attr.max_rd_atomic = static_cast<uint8_t>(options.max_rd_atomic);
  t.mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
           IBV_QP_MAX_QP_RD_ATOMIC;
  return t;
}

Status ValidateQpOptions(const QpOptions& o) {
  auto check = [](const char* field, int value, int lo, int hi) -> Status {
    if (value < lo || value > hi) {
      return InvalidArgument("QpOptions." + std::string(field) + " = " + std::to_string(value) +
                             " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    return Status::Ok();
  };
  FATHOM_RETURN_IF_ERROR(check("max_send_wr", o.max_send_wr, 1, 1 << 20));
  FATHOM_RETURN_IF_ERROR(check("max_recv_wr", o.max_recv_wr, 1, 1 << 20));
  FATHOM_RETURN_IF_ERROR(check("timeout", o.timeout, 0, 31));  // 5 bits (IBTA 9.7.6.1.3)
  FATHOM_RETURN_IF_ERROR(check("retry_cnt", o.retry_cnt, 0, 7));
  FATHOM_RETURN_IF_ERROR(check("rnr_retry", o.rnr_retry, 0, 7));
  FATHOM_RETURN_IF_ERROR(check("min_rnr_timer", o.min_rnr_timer, 0, 31));
  FATHOM_RETURN_IF_ERROR(check("traffic_class", o.traffic_class, 0, 255));
  FATHOM_RETURN_IF_ERROR(check("service_level", o.service_level, 0, 15));
  FATHOM_RETURN_IF_ERROR(check("max_rd_atomic", o.max_rd_atomic, 0, 255));
  if (o.path_mtu != 0 && MtuBytesToEnum(o.path_mtu) < 0) {
    return InvalidArgument("QpOptions.path_mtu = " + std::to_string(o.path_mtu) +
                           " is not 0 or a verbs MTU (256, 512, 1024, 2048, 4096)");
  }
  return Status::Ok();
}

double ActivePortGbps(int active_speed, int active_width) {
  int lanes = 0;
  switch (active_width) {
    case 1:
      lanes = 1;
      break;
    case 2:
      lanes = 4;
      break;
    case 4:
      lanes = 8;
      break;
    case 8:
      lanes = 12;
      break;
    case 16:
      lanes = 2;
      break;
    default:
      return 0;
  }
  double lane_gbps = 0;
  switch (active_speed) {
    case 1:
      lane_gbps = 2.5;
      break;
    case 2:
      lane_gbps = 5.0;
      break;
    case 4:
      lane_gbps = 10.0;
      break;
    case 8:
      lane_gbps = 10.3125;
      break;
    case 16:
      lane_gbps = 14.0625;
      break;
    case 32:
      lane_gbps = 25.78125;
      break;
    case 64:
      lane_gbps = 53.125;
      break;
    case 128:
      lane_gbps = 106.25;
      break;
    default:
      return 0;
  }
  return lane_gbps * lanes;
}

std::string_view PortStateName(int state) {
  switch (state) {
    case IBV_PORT_NOP:
      return "NOP";
    case IBV_PORT_DOWN:
      return "DOWN";
    case IBV_PORT_INIT:
      return "INIT";
    case IBV_PORT_ARMED:
      return "ARMED";
    case IBV_PORT_ACTIVE:
      return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "ACTIVE_DEFER";
    default:
      return "UNKNOWN";
  }
}

std::string_view AsyncEventName(int event_type) {
  switch (event_type) {
    case IBV_EVENT_CQ_ERR:
      return "IBV_EVENT_CQ_ERR";
    case IBV_EVENT_QP_FATAL:
      return "IBV_EVENT_QP_FATAL";
    case IBV_EVENT_QP_REQ_ERR:
      return "IBV_EVENT_QP_REQ_ERR";
    case IBV_EVENT_QP_ACCESS_ERR:
      return "IBV_EVENT_QP_ACCESS_ERR";
    case IBV_EVENT_COMM_EST:
      return "IBV_EVENT_COMM_EST";
    case IBV_EVENT_SQ_DRAINED:
      return "IBV_EVENT_SQ_DRAINED";
    case IBV_EVENT_PATH_MIG:
      return "IBV_EVENT_PATH_MIG";
    case IBV_EVENT_PATH_MIG_ERR:
      return "IBV_EVENT_PATH_MIG_ERR";
    case IBV_EVENT_DEVICE_FATAL:
      return "IBV_EVENT_DEVICE_FATAL";
    case IBV_EVENT_PORT_ACTIVE:
      return "IBV_EVENT_PORT_ACTIVE";
    case IBV_EVENT_PORT_ERR:
      return "IBV_EVENT_PORT_ERR";
    case IBV_EVENT_LID_CHANGE:
      return "IBV_EVENT_LID_CHANGE";
    case IBV_EVENT_PKEY_CHANGE:
      return "IBV_EVENT_PKEY_CHANGE";
    case IBV_EVENT_SM_CHANGE:
      return "IBV_EVENT_SM_CHANGE";
    case IBV_EVENT_SRQ_ERR:
      return "IBV_EVENT_SRQ_ERR";
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      return "IBV_EVENT_SRQ_LIMIT_REACHED";
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return "IBV_EVENT_QP_LAST_WQE_REACHED";
    case IBV_EVENT_CLIENT_REREGISTER:
      return "IBV_EVENT_CLIENT_REREGISTER";
    case IBV_EVENT_GID_CHANGE:
      return "IBV_EVENT_GID_CHANGE";
    case IBV_EVENT_WQ_FATAL:
      return "IBV_EVENT_WQ_FATAL";
    default:
      return "IBV_EVENT_UNKNOWN";
  }
}

}  // namespace fathom::transport::verbs
