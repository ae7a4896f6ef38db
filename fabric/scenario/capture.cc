#include "fabric/scenario/capture.h"

#include <algorithm>
#include <map>

#include "fabric/wire/pfc_frame.h"

namespace fathom::sim {
namespace {

// Payload for modelled transfers: the frame has the right length, of zeros.
const uint8_t kZeros[4096] = {};

wire::MacAddress MacOf(int32_t node) {
  // 02:xx: locally administered, unicast.
  return {0x02,
          0x00,
          static_cast<uint8_t>(node >> 24),
          static_cast<uint8_t>(node >> 16),
          static_cast<uint8_t>(node >> 8),
          static_cast<uint8_t>(node)};
}

}  // namespace

wire::RoceFrame FrameFor(const Packet& p, const topo::Topology& topo) {
  wire::RoceFrame f;
  const QpFlow& flow = *p.flow;
  f.eth.src = MacOf(flow.src_host);
  f.eth.dst = MacOf(flow.dst_host);
  const uint32_t src_rank = static_cast<uint32_t>(topo.HostRank(flow.src_host));
  const uint32_t dst_rank = static_cast<uint32_t>(topo.HostRank(flow.dst_host));
  if (flow.ipv6) {
    f.ip_version = wire::IpVersion::kIpv6;
    f.ipv6.traffic_class = flow.traffic_class;
    f.ipv6.src = {0xfd,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  static_cast<uint8_t>(src_rank >> 24),
                  static_cast<uint8_t>(src_rank >> 16),
                  static_cast<uint8_t>(src_rank >> 8),
                  static_cast<uint8_t>(src_rank)};
    f.ipv6.dst = {0xfd,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  static_cast<uint8_t>(dst_rank >> 24),
                  static_cast<uint8_t>(dst_rank >> 16),
                  static_cast<uint8_t>(dst_rank >> 8),
                  static_cast<uint8_t>(dst_rank)};
  } else {
    f.ipv4.dscp = flow.traffic_class >> 2;
    f.ipv4.ecn = flow.traffic_class & 3;
    f.ipv4.src = {10, static_cast<uint8_t>(src_rank >> 16), static_cast<uint8_t>(src_rank >> 8),
                  static_cast<uint8_t>(src_rank)};
    f.ipv4.dst = {10, static_cast<uint8_t>(dst_rank >> 16), static_cast<uint8_t>(dst_rank >> 8),
                  static_cast<uint8_t>(dst_rank)};
  }
  // A CNP travels in its own class; a packet a switch marked carries CE.
  if (p.opcode == Opcode::kCnp) {
    f.ipv4.dscp = p.ext().cnp_traffic_class >> 2;
    f.ipv4.ecn = p.ext().cnp_traffic_class & 3;
    f.ipv6.traffic_class = p.ext().cnp_traffic_class;
  }
  if (p.ecn_ce) {
    f.ipv4.ecn = 3;
    f.ipv6.traffic_class |= 3;
  }
  f.udp.src_port = flow.udp_sport;
  f.bth.opcode = p.opcode;
  f.bth.migration = true;  // rxe sets M
  f.bth.dest_qpn = p.dest_qpn;
  f.bth.ack_request = p.ack_req != 0;
  f.bth.psn = p.psn;
  switch (p.opcode) {
    case Opcode::kRdmaWriteFirst:
    case Opcode::kRdmaWriteOnly:
    case Opcode::kRdmaWriteOnlyWithImmediate:
    case Opcode::kRdmaReadRequest:
      f.reth = wire::Reth{p.ext().va, p.ext().rkey, p.ext().dma_len};
      break;
    case Opcode::kCompareSwap:
    case Opcode::kFetchAdd:
      f.atomic_eth = wire::AtomicEth{p.ext().va, p.ext().rkey, p.ext().swap_add, p.ext().compare};
      break;
    default:
      break;
  }
  if (p.opcode == Opcode::kAtomicAcknowledge || p.opcode == Opcode::kAcknowledge ||
      p.opcode == Opcode::kRdmaReadResponseFirst || p.opcode == Opcode::kRdmaReadResponseLast ||
      p.opcode == Opcode::kRdmaReadResponseOnly) {
    f.aeth = wire::Aeth{p.aeth_syndrome, p.ext().msn};
  }
  if (p.opcode == Opcode::kAtomicAcknowledge) f.atomic_ack_eth = p.ext().swap_add;
  if (p.opcode == Opcode::kSendLastWithImmediate || p.opcode == Opcode::kSendOnlyWithImmediate ||
      p.opcode == Opcode::kRdmaWriteLastWithImmediate ||
      p.opcode == Opcode::kRdmaWriteOnlyWithImmediate) {
    f.immdt = p.ext().imm;
  }
  const uint8_t* data = p.has_data ? p.data() : kZeros;
  f.payload = std::span<const uint8_t>(data, std::min<size_t>(p.payload_bytes, sizeof kZeros));
  return f;
}

StatusOr<std::unique_ptr<PortCapture>> PortCapture::Open(const topo::Topology& topo,
                                                         const std::string& what,
                                                         const std::string& path,
                                                         bool create_file) {
  // The order `--fault link=` resolves a name in (fault_attach.cc).
  std::vector<int32_t> links;
  if (auto one = topo.FindLink(what); one.ok()) {
    links = {*one};
  } else if (auto some = topo.SelectLinks(what); some.ok()) {
    links = std::move(some).value();
  } else {
    std::string examples;
    const size_t kExamples = 6;
    for (size_t i = 0; i < topo.links().size() && i < kExamples; ++i) {
      examples += (i == 0 ? "" : ", ") + topo.links()[i].name;
    }
    if (topo.links().size() > kExamples) {
      examples += ", ... (" + std::to_string(topo.links().size()) + " links)";
    }
    return InvalidArgument("--pcap " + what + "=" + path + ": '" + what +
                           "' names no link or node of topology '" + topo.name() + "'; links are " +
                           examples +
                           "; a node name captures all its links, as do tier:N and globs "
                           "like leaf0-*");
  }
  std::unique_ptr<PortCapture> cap(new PortCapture());
  if (create_file) {
    auto writer = wire::PcapWriter::Open(path, /*nanosecond=*/true);
    if (!writer.ok()) {
      return IoError("--pcap " + what + "=" + path + ": cannot create the file (" +
                     writer.status().message() + ")");
    }
    cap->writer_ = std::move(writer).value();
  }
  cap->label_ = what + "=" + path;
  cap->links_ = std::move(links);
  cap->buffer_.resize(9216);
  return cap;
}

void PortCapture::Attach(Network* network) {
  Detach();
  network_ = network;
  const topo::Topology& topo = network->topology();
  for (const int32_t id : links_) {
    const topo::Link& l = topo.link(id);
    ports_.push_back(&network->port(l.a, l.a_port));
    ports_.push_back(&network->port(l.b, l.b_port));
  }
  for (Port* port : ports_) port->set_tap(&tap_);
}

void PortCapture::Detach() {
  for (Port* port : ports_) port->set_tap(nullptr);
  ports_.clear();
  network_ = nullptr;
}

Status PortCapture::Flush() {
  if (status_.ok() && writer_ != nullptr) {
    if (Status s = writer_->Flush(); !s.ok()) status_ = s;
  }
  return status_;
}

PortCapture::~PortCapture() { Detach(); }

void PortCapture::WriteMerged(std::span<const uint8_t> frame, int64_t timestamp_ns) {
  if (!status_.ok() || writer_ == nullptr) return;
  if (Status s = writer_->Write(frame, timestamp_ns); !s.ok()) status_ = s;
}

Status CheckDisjoint(const std::vector<PortCapture*>& captures, const topo::Topology& topology) {
  std::map<int32_t, const PortCapture*> owner;
  for (const PortCapture* cap : captures) {
    for (const int32_t link : cap->links()) {
      auto [it, fresh] = owner.emplace(link, cap);
      if (!fresh && it->second != cap) {
        return InvalidArgument("--pcap " + cap->label() + " and --pcap " + it->second->label() +
                               " both capture link " + topology.link(link).name +
                               "; a link goes to one capture file");
      }
    }
  }
  return Status::Ok();
}

void PortCapture::OnPacket(void* ctx, const Packet& p, Picoseconds at) {
  auto* self = static_cast<PortCapture*>(ctx);
  if (!self->status_.ok()) return;
  StatusOr<size_t> n = 0;
  if (static_cast<uint8_t>(p.opcode) == kPauseOpcode) {
    // A PAUSE frame (fabric/sim/pfc.h): the sender's node in dest_qpn, the
    // class-enable vector in psn, the quanta in the extension.
    wire::PfcFrame f;
    f.src = MacOf(static_cast<int32_t>(p.dest_qpn));
    f.class_enable = static_cast<uint8_t>(p.psn);
    for (size_t c = 0; c < 8; ++c) {
      const uint64_t word = c < 4 ? p.ext().va : p.ext().compare;
      f.quanta[c] = static_cast<uint16_t>(word >> (16 * (c & 3)));
    }
    n = wire::BuildPfc(f, self->buffer_);
  } else {
    n = wire::Build(FrameFor(p, self->network_->topology()), self->buffer_);
  }
  if (!n.ok()) {
    self->status_ = n.status();
    return;
  }
  if (self->sink_ != nullptr) {
    self->sink_(self->sink_ctx_, std::span<const uint8_t>(self->buffer_.data(), *n),
                at.ps() / 1000);
    ++self->frames_;
    return;
  }
  Status s =
      self->writer_->Write(std::span<const uint8_t>(self->buffer_.data(), *n), at.ps() / 1000);
  if (!s.ok()) {
    self->status_ = s;
    return;
  }
  ++self->frames_;
}

}  // namespace fathom::sim
