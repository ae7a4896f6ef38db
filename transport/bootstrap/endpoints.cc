#include "transport/bootstrap/endpoints.h"

#include <cstring>

namespace fathom::transport::bootstrap {

proto::EndpointRecord MakeEndpointRecord(const EndpointInfo& local) {
  proto::EndpointRecord r;
  r.set_rank(local.rank);
  r.set_lid(local.lid);
  r.set_gid(std::string(reinterpret_cast<const char*>(local.gid.data()), local.gid.size()));
  r.set_gid_index(local.gid_index);
  r.set_active_mtu(local.active_mtu);
  return r;
}

void AddQp(proto::EndpointRecord* record, int peer_rank, const EndpointInfo& local) {
  auto* qp = record->add_qps();
  qp->set_peer_rank(peer_rank);
  qp->set_qpn(local.qpn);
  qp->set_psn(local.psn);
}

void AddBuffer(proto::EndpointRecord* record, const MemoryRegion& mr) {
  auto* b = record->add_buffers();
  b->set_addr(reinterpret_cast<uint64_t>(mr.addr()));
  b->set_length(mr.length());
  b->set_rkey(mr.rkey());
}

StatusOr<EndpointInfo> RemoteEndpoint(const proto::EndpointRecord& record, int my_rank, int nth) {
  if (record.gid().size() != 16) {
    return InvalidArgument("endpoint record of rank " + std::to_string(record.rank()) +
                           " has a GID of " + std::to_string(record.gid().size()) +
                           " bytes, not 16");
  }
  int seen = 0;
  for (const auto& qp : record.qps()) {
    if (qp.peer_rank() != my_rank || seen++ != nth) continue;
    EndpointInfo e;
    e.rank = record.rank();
    e.qpn = qp.qpn();
    e.psn = qp.psn();
    e.lid = static_cast<uint16_t>(record.lid());
    std::memcpy(e.gid.data(), record.gid().data(), 16);
    e.gid_index = record.gid_index();
    e.active_mtu = record.active_mtu();
    return e;
  }
  return NotFound("endpoint record of rank " + std::to_string(record.rank()) + " has no QP #" +
                  std::to_string(nth) + " toward rank " + std::to_string(my_rank));
}

StatusOr<RemoteBuffer> RemoteBufferOf(const proto::EndpointRecord& record, int index) {
  if (index < 0 || index >= record.buffers_size()) {
    return NotFound("endpoint record of rank " + std::to_string(record.rank()) +
                    " has no buffer #" + std::to_string(index));
  }
  const auto& b = record.buffers(index);
  return RemoteBuffer{b.addr(), b.length(), b.rkey()};
}

}  // namespace fathom::transport::bootstrap
