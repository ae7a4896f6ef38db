// Opening a device, port and GID, and the Device factory of the verbs backend.
#include "transport/verbs/verbs_device.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <poll.h>

#include <array>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <unordered_map>

#include "transport/verbs/connect_params.h"
#include "transport/verbs/verbs_objects.h"

namespace fathom::transport::verbs {
namespace internal {

int ReadNetdevMtu(const std::string& netdev) {
  if (netdev.empty()) return 0;
  std::ifstream in("/sys/class/net/" + netdev + "/mtu");
  int mtu = 0;
  in >> mtu;
  return in ? mtu : 0;
}

// ---- Device ----

StatusOr<std::unique_ptr<MemoryRegion>> VerbsDevice::RegisterMemory(void* addr, uint64_t length,
                                                                    uint32_t access) {
  ibv_mr* mr = ibv_reg_mr(pd_.get(), addr, length, static_cast<int>(access));
  if (mr == nullptr) {
    return VerbsError("ibv_reg_mr",
                      info_.name + " addr=" + Hex(reinterpret_cast<uintptr_t>(addr)) +
                          " length=" + std::to_string(length) + " access=" + Hex(access),
                      errno);
  }
  return std::unique_ptr<MemoryRegion>(new VerbsMr(mr, &live_));
}

StatusOr<std::unique_ptr<CompletionQueue>> VerbsDevice::CreateCq(int depth) {
  if (depth <= 0 || depth > dev_attr_.max_cqe) {
    return InvalidArgument("CreateCq " + info_.name + ": depth " + std::to_string(depth) +
                           " outside 1.." + std::to_string(dev_attr_.max_cqe));
  }
  std::unique_ptr<ibv_comp_channel, ChannelDeleter> channel;
  if (options_.cq_mode == CqMode::kEvents) {
    channel.reset(ibv_create_comp_channel(ctx_.get()));
    if (!channel) return VerbsError("ibv_create_comp_channel", info_.name, errno);
    FATHOM_RETURN_IF_ERROR(SetNonBlocking(channel->fd, "completion channel"));
  }
  ibv_cq* cq = ibv_create_cq(ctx_.get(), depth, nullptr, channel.get(), 0);
  if (cq == nullptr) {
    return VerbsError("ibv_create_cq", info_.name + " cqe=" + std::to_string(depth), errno);
  }
  auto out = std::make_unique<VerbsCq>(cq, channel.release(), &live_);
  if (options_.cq_mode == CqMode::kEvents) {
    if (const int rc = ibv_req_notify_cq(cq, 0); rc != 0) {
      return VerbsError("ibv_req_notify_cq", info_.name, rc);
    }
  }
  return std::unique_ptr<CompletionQueue>(std::move(out));
}

StatusOr<std::unique_ptr<QueuePair>> VerbsDevice::CreateQp(int peer_rank, const QpOptions& options,
                                                           CompletionQueue* cq) {
  FATHOM_RETURN_IF_ERROR(ValidateQpOptions(options));
  auto* vcq = dynamic_cast<VerbsCq*>(cq);
  if (vcq == nullptr) {
    return InvalidArgument("CreateQp " + info_.name + ": the CQ was not created by a verbs Device");
  }
  if (options.max_send_wr > dev_attr_.max_qp_wr || options.max_recv_wr > dev_attr_.max_qp_wr) {
    return InvalidArgument("CreateQp " + info_.name + ": max_send_wr " +
                           std::to_string(options.max_send_wr) + " / max_recv_wr " +
                           std::to_string(options.max_recv_wr) + " exceed the device's max_qp_wr " +
                           std::to_string(dev_attr_.max_qp_wr));
  }
  ibv_qp_init_attr init{};
  init.send_cq = vcq->cq();
  init.recv_cq = vcq->cq();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = static_cast<uint32_t>(options.max_send_wr);
  init.cap.max_recv_wr = static_cast<uint32_t>(options.max_recv_wr);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  // Small messages inline (perftest does the same): saves the NIC a DMA read.
  // An inline size the caller asked for is kept or the QP fails.
  const bool asked_inline = options.max_inline_data >= 0;
  init.cap.max_inline_data = asked_inline ? static_cast<uint32_t>(options.max_inline_data) : 128;
  ibv_qp* qp = ibv_create_qp(pd_.get(), &init);
  if (qp == nullptr && !asked_inline) {
    init.cap.max_inline_data = 0;  // a device without inline support
    qp = ibv_create_qp(pd_.get(), &init);
  }
  if (qp == nullptr) {
    return VerbsError("ibv_create_qp",
                      info_.name + " type=RC max_send_wr=" + std::to_string(options.max_send_wr) +
                          " max_inline_data=" + std::to_string(init.cap.max_inline_data) +
                          " max_recv_wr=" + std::to_string(options.max_recv_wr) +
                          " peer_rank=" + std::to_string(peer_rank),
                      errno);
  }
  const uint32_t psn = psn_rng_() & 0xffffff;
  auto out = std::make_unique<VerbsQp>(qp, vcq, this, peer_rank, options, psn, &live_);
  out->set_inline_size(init.cap.max_inline_data);
  FATHOM_RETURN_IF_ERROR(out->ToInit());
  return std::unique_ptr<QueuePair>(std::move(out));
}

std::vector<AsyncEvent> VerbsDevice::TakeAsyncEvents() {
  std::vector<AsyncEvent> events;
  ibv_async_event ev;
  // The async fd is non-blocking (OpenDevice), so this never waits.
  while (ibv_get_async_event(ctx_.get(), &ev) == 0) {
    AsyncEvent e;
    e.type = std::string(AsyncEventName(ev.event_type));
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED:
      case IBV_EVENT_PATH_MIG:
      case IBV_EVENT_PATH_MIG_ERR:
      case IBV_EVENT_QP_LAST_WQE_REACHED:
        e.qp_num = ev.element.qp->qp_num;
        e.detail = info_.name + " qpn " + Hex(e.qp_num);
        break;
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_PKEY_CHANGE:
      case IBV_EVENT_SM_CHANGE:
      case IBV_EVENT_CLIENT_REREGISTER:
      case IBV_EVENT_GID_CHANGE:
        e.port = ev.element.port_num;
        e.detail = info_.name + " port " + std::to_string(e.port);
        break;
      default:
        e.detail = info_.name;
        break;
    }
    ibv_ack_async_event(&ev);
    events.push_back(std::move(e));
  }
  return events;
}

// Reads the port's GID table: ibv_query_gid_table where the kernel has it,
// sysfs otherwise.
StatusOr<std::vector<GidEntry>> QueryGidTable(ibv_context* ctx, const ibv_device_attr& dev_attr,
                                              int port, bool is_ethernet,
                                              const DeviceOptions& options) {
  size_t capacity = 0;
  for (int p = 1; p <= dev_attr.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) == 0) capacity += pa.gid_tbl_len;
  }
  std::vector<ibv_gid_entry> entries(std::max<size_t>(capacity, 1));
  const ssize_t n = ibv_query_gid_table(ctx, entries.data(), entries.size(), 0);
  const std::string dev_name = ibv_get_device_name(ctx->device);
  if (n < 0) {
    return ReadSysfsGidTable(options.sysfs_root, dev_name, port, is_ethernet);
  }
  std::vector<GidEntry> table;
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& g = entries[static_cast<size_t>(i)];
    if (static_cast<int>(g.port_num) != port) continue;
    GidEntry e;
    e.index = static_cast<int>(g.gid_index);
    std::memcpy(e.gid.data(), g.gid.raw, 16);
    e.type = static_cast<GidType>(g.gid_type);
    char ifname[IF_NAMESIZE] = {};
    if (g.ndev_ifindex != 0 && if_indextoname(g.ndev_ifindex, ifname) != nullptr) {
      e.netdev = ifname;
    }
    if (!IsZeroGid(e.gid)) table.push_back(std::move(e));
  }
  return table;
}

StatusOr<std::unique_ptr<Device>> OpenOne(ibv_device* dev, const DeviceOptions& options) {
  const std::string name = ibv_get_device_name(dev);
  std::unique_ptr<ibv_context, ContextDeleter> ctx(ibv_open_device(dev));
  if (!ctx) return VerbsError("ibv_open_device", name, errno);
  ibv_device_attr dev_attr{};
  if (const int rc = ibv_query_device(ctx.get(), &dev_attr); rc != 0) {
    return VerbsError("ibv_query_device", name, rc);
  }
  int port = options.port;
  ibv_port_attr port_attr{};
  if (port == 0) {
    port = 1;
    for (int p = 1; p <= dev_attr.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx.get(), static_cast<uint8_t>(p), &pa) == 0 &&
          pa.state == IBV_PORT_ACTIVE) {
        port = p;
        break;
      }
    }
  }
  if (port < 1 || port > dev_attr.phys_port_cnt) {
    return NotFound("OpenDevice: " + name + " has no port " + std::to_string(port) + " (ports 1.." +
                    std::to_string(dev_attr.phys_port_cnt) + ")");
  }
  if (const int rc = ibv_query_port(ctx.get(), static_cast<uint8_t>(port), &port_attr); rc != 0) {
    return VerbsError("ibv_query_port", name + " port=" + std::to_string(port), rc);
  }
  const bool is_ethernet = port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  FATHOM_ASSIGN_OR_RETURN(auto table,
                          QueryGidTable(ctx.get(), dev_attr, port, is_ethernet, options));
  FATHOM_ASSIGN_OR_RETURN(GidEntry gid, SelectGid(table, options.gid, is_ethernet, name, port));
  std::unique_ptr<ibv_pd, PdDeleter> pd(ibv_alloc_pd(ctx.get()));
  if (!pd) return VerbsError("ibv_alloc_pd", name, errno);
  // Async events are drained by TakeAsyncEvents(), which must never block.
  FATHOM_RETURN_IF_ERROR(SetNonBlocking(ctx->async_fd, "async event fd"));

  DeviceInfo info;
  info.name = name;
  info.fw_ver = dev_attr.fw_ver;
  info.link_layer = is_ethernet ? "Ethernet" : "InfiniBand";
  info.port = port;
  info.port_state = std::string(PortStateName(port_attr.state));
  info.active_mtu = MtuEnumToBytes(port_attr.active_mtu);
  info.gid_index = gid.index;
  info.gid = FormatGid(gid.gid);
  info.gid_type = std::string(GidTypeName(gid.type));
  info.netdev_mtu = is_ethernet ? ReadNetdevMtu(gid.netdev) : 0;
  info.active_gbps = ActivePortGbps(port_attr.active_speed, port_attr.active_width);
  return std::unique_ptr<Device>(new VerbsDevice(ctx.release(), pd.release(), std::move(info),
                                                 options, dev_attr, port_attr, gid));
}

}  // namespace internal

using internal::DeviceListDeleter;
using internal::OpenOne;

StatusOr<std::vector<std::string>> ListDeviceNames() {
  int n = 0;
  std::unique_ptr<ibv_device*, DeviceListDeleter> list(ibv_get_device_list(&n));
  if (!list) {
    // ENOSYS: the kernel has no RDMA support (no uverbs); that is "no devices".
    if (errno == ENOSYS) return std::vector<std::string>{};
    return VerbsError("ibv_get_device_list", "", errno);
  }
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(list.get()[i]));
  return names;
}

StatusOr<std::unique_ptr<Device>> OpenDevice(const DeviceOptions& options) {
  int n = 0;
  std::unique_ptr<ibv_device*, DeviceListDeleter> list(ibv_get_device_list(&n));
  if (!list && errno != ENOSYS) return VerbsError("ibv_get_device_list", "", errno);
  if (!list || n == 0) {
    return NotFound(
        "OpenDevice: no RDMA device (ibv_get_device_list found none; load a driver or add a "
        "soft-RoCE device: rdma link add rxe0 type rxe netdev eth0)");
  }
  std::string names;
  for (int i = 0; i < n; ++i) {
    ibv_device* dev = list.get()[i];
    const std::string name = ibv_get_device_name(dev);
    names += (names.empty() ? "" : ", ") + name;
    if (!options.name.empty()) {
      if (name == options.name) return OpenOne(dev, options);
      continue;
    }
    // Automatic: the first device whose port is usable.
    auto opened = OpenOne(dev, options);
    if (opened.ok() && (*opened)->info().port_state == "ACTIVE") return opened;
    if (i == n - 1) return opened;
  }
  return NotFound("OpenDevice: no RDMA device named \"" + options.name + "\" (devices: " + names +
                  ")");
}

}  // namespace fathom::transport::verbs
