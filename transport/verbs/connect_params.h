// The pure parts of connecting an RC QP with verbs: path-MTU negotiation, the
// attribute sets of RESET->INIT->RTR->RTS (the masks of rdma-core's
// rc_pingpong), port speed decoding and the error text of a failed ibv_*
// call. Kept apart from the device code so that all of it is unit-tested on
// machines without RDMA hardware. Values only; owns nothing.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <string_view>

#include "base/status.h"
#include "transport/transport.h"

namespace fathom::transport::verbs {

// Path MTU in bytes for a connection: min(local, remote active_mtu) — always,
// on both sides (ROCEV2.md; CASES.md 1-2: a side that takes its own MTU sends
// packets the other drops). `forced` (bytes, 0 = none) overrides it, for
// staging a mismatch on purpose. Every value must be a verbs MTU
// (256..4096, powers of two).
StatusOr<int> NegotiatePathMtu(int local_bytes, int remote_bytes, int forced_bytes);

// "ibv_modify_qp(RTR) qpn=0x11 dest_qpn=0x12 mtu=4096: Invalid argument":
// the call, the object and values, and strerror(err).
std::string VerbsCallError(std::string_view call, std::string_view detail, int err);
// The same as a Status (kIoError; kUnavailable for EAGAIN/ENOMEM on posts is
// the caller's choice).
Status VerbsError(std::string_view call, std::string_view detail, int err);

// One transition: the attributes and the mask to pass to ibv_modify_qp.
struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

// RESET -> INIT: port, P_Key index 0, access flags for RDMA and atomics.
QpTransition InitTransition(int port, uint32_t access);

// INIT -> RTR toward `remote`. On RoCE (`is_roce`) every packet carries a
// GRH built from `sgid_index`, the remote GID and the options' traffic class;
// on InfiniBand the route is the remote LID with the service level.
QpTransition RtrTransition(const QpOptions& options, const EndpointInfo& remote, int path_mtu_bytes,
                           int port, int sgid_index, bool is_roce);

// RTR -> RTS with our initial PSN and the retry/timeout options.
QpTransition RtsTransition(const QpOptions& options, uint32_t local_psn);

// Checks QpOptions against the field widths of the QP attributes (timeout 5
// bits, retry_cnt and rnr_retry 3 bits, ...), naming the field and value.
Status ValidateQpOptions(const QpOptions& options);

// Gbit/s of a port from ibv_port_attr's active_speed code and active_width
// code (IBTA 14.2.5.6: width 1=1x 2=4x 4=8x 8=12x 16=2x; speed 1=SDR 2.5,
// 2=DDR 5, 4=QDR 10, 8=FDR10 10.3125, 16=FDR 14.0625, 32=EDR 25.78125,
// 64=HDR 53.125, 128=NDR 106.25 per lane). Unknown codes give 0.
double ActivePortGbps(int active_speed, int active_width);

// "ACTIVE", "DOWN", ... (ibv_port_state_str without the PORT_ prefix).
std::string_view PortStateName(int state);

// "IBV_EVENT_PORT_ERR", ... for ibv_event_type.
std::string_view AsyncEventName(int event_type);

}  // namespace fathom::transport::verbs
