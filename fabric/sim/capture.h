// Port capture: writes the packets a link carries to a pcap file as real
// RoCEv2 frames, built by the wire codec from the packet's header fields
// (addresses derived from node ids, payload from the source memory or
// zeros, ICRC computed), so Wireshark, tshark and `fathom decode` read them.
// Frames are only built when a capture is attached: the normal hot path
// pays one null check per transmitted packet.
//
// Ownership: a PortCapture owns its PcapWriter and its taps; the Network
// must outlive it. Timestamps are virtual time (ns from the start of the run).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "fabric/sim/network.h"
#include "fabric/wire/pcap.h"
#include "fabric/wire/roce.h"

namespace fathom::sim {

// The addresses a simulated host uses on the wire: 10.<rank/65536>.<...>
// IPv4 (or fd00::rank IPv6) and a locally administered MAC from the node id.
wire::RoceFrame FrameFor(const Packet& p, const topo::Topology& topo);

class PortCapture {
 public:
  // `what` is a link name or endpoints ("h0-leaf0", "leaf0-h0"), or a node
  // name for a host (its NIC's link). Both directions are captured.
  static StatusOr<std::unique_ptr<PortCapture>> Open(Network* network, const std::string& what,
                                                     const std::string& path);
  ~PortCapture();
  PortCapture(const PortCapture&) = delete;
  PortCapture& operator=(const PortCapture&) = delete;

  uint64_t frames() const { return frames_; }
  // The first write error, if any (writes stop after it).
  const Status& status() const { return status_; }

 private:
  PortCapture() = default;
  static void OnPacket(void* ctx, const Packet& p, Picoseconds at);

  Network* network_ = nullptr;
  std::unique_ptr<wire::PcapWriter> writer_;
  std::vector<Port*> ports_;
  PacketTap tap_{&PortCapture::OnPacket, this};
  std::vector<uint8_t> buffer_;
  uint64_t frames_ = 0;
  Status status_;
};

}  // namespace fathom::sim
