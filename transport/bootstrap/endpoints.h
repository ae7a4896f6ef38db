// Conversions between the transport API's EndpointInfo / MemoryRegion and
// the bootstrap's EndpointRecord (proto/bootstrap.proto), so that drivers
// (perf, doctor, collectives, tests) exchange connection records in one
// AllGather round. Values only.
#pragma once

#include "base/status.h"
#include "proto/bootstrap.pb.h"
#include "transport/transport.h"

namespace fathom::transport::bootstrap {

// A record with the port facts of `local` (rank, LID, GID, GID index, MTU)
// and no QPs or buffers yet.
proto::EndpointRecord MakeEndpointRecord(const EndpointInfo& local);
// Appends the QP `local` (QPN, PSN) as the sender's QP toward `peer_rank`.
void AddQp(proto::EndpointRecord* record, int peer_rank, const EndpointInfo& local);
void AddBuffer(proto::EndpointRecord* record, const MemoryRegion& mr);

// The `nth` (0-based) QP of `record` toward `my_rank`, as the EndpointInfo
// that my QP connects to. NOT_FOUND naming the ranks when there is none.
StatusOr<EndpointInfo> RemoteEndpoint(const proto::EndpointRecord& record, int my_rank, int nth);
// The `index`th buffer of `record`.
StatusOr<RemoteBuffer> RemoteBufferOf(const proto::EndpointRecord& record, int index);

}  // namespace fathom::transport::bootstrap
