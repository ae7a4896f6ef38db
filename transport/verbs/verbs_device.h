// The verbs backend of the transport API (transport.h): real InfiniBand,
// RoCE NICs and soft-RoCE (rxe) through libibverbs. OpenDevice() picks a
// device, a port and a GID, and returns a Device owning the device context
// and one protection domain; everything it creates (MR, CQ, QP) is RAII and
// owned by the caller, destroyed before the Device (checked in debug builds).
//
// Differences from the bare API worth knowing:
//  - CreateQp() takes the QP to INIT at once (as rc_pingpong does), so
//    receives can be posted before Connect(); Connect() does RTR and RTS.
//  - Sends and RDMA writes no larger than the QP's inline size are posted
//    inline (IBV_SEND_INLINE), as perftest does for small messages.
//  - Errors of every ibv_* call name the call, the object and the values.
// Threading: one thread drives a Device and its objects (transport.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "transport/transport.h"
#include "transport/verbs/gid.h"

namespace fathom::transport::verbs {

// How completion queues learn of completions.
enum class CqMode {
  kBusyPoll,  // the driver spins on Poll(): lowest latency, one core busy
  kEvents,    // a completion channel: WaitForEvent() sleeps until one arrives
};

struct DeviceOptions {
  std::string name;  // "rxe0", "mlx5_0"; empty = the first device with an ACTIVE port
  int port = 0;      // 0 = the device's first ACTIVE port (else port 1)
  GidPolicy gid;     // default: IB index 0 / RoCE v2 IPv4-mapped
  CqMode cq_mode = CqMode::kBusyPoll;
  int rank = -1;  // our rank, written into EndpointInfo.rank
  // Where the GID table is read from when ibv_query_gid_table is not
  // supported (old kernels).
  std::string sysfs_root = "/sys/class/infiniband";
};

// The verbs CQ adds the completion channel (CqMode::kEvents).
class VerbsCompletionQueue : public CompletionQueue {
 public:
  // The completion channel's file descriptor (for an external poll loop), or
  // -1 in busy-poll mode.
  virtual int event_fd() const = 0;
  // Drains the channel without blocking: acknowledges the events, re-arms the
  // CQ (ibv_req_notify_cq) and calls the notify callback once if any came.
  virtual Status HandleEvents() = 0;
  // Sleeps up to `timeout` for a completion event, then HandleEvents().
  // Returns DEADLINE_EXCEEDED when none came. Busy-poll mode: returns at once.
  virtual Status WaitForEvent(Picoseconds timeout) = 0;
  // Completion events read from the channel so far (0 in busy-poll mode).
  virtual uint64_t events() const = 0;
};

// Names of the RDMA devices present ("rxe0"). An empty list is not an error.
StatusOr<std::vector<std::string>> ListDeviceNames();

// Opens a device context, queries the device and port, selects a GID and
// allocates a protection domain. NOT_FOUND when there is no device (the
// message says so and how to get one).
StatusOr<std::unique_ptr<Device>> OpenDevice(const DeviceOptions& options);

}  // namespace fathom::transport::verbs
