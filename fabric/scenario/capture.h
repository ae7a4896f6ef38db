// Port capture: writes the packets of a set of links (both directions) to
// one pcap file as real RoCEv2 frames, built by the wire codec from the
// packet's header fields (addresses derived from node ids, payload from the
// source memory or zeros, ICRC computed), so Wireshark, tshark and `fathom
// decode` read them. Frames are only built when a capture is attached: the
// normal hot path pays one null check per transmitted packet.
//
// Ownership: a PortCapture owns its PcapWriter and its taps; the Network
// must outlive it (or its Detach). Timestamps are virtual time (ns from the
// start of the run).
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
  // Resolves `what` with the names `--fault link=` accepts — a link name or
  // its endpoints in either order ("h0-leaf0", "leaf0-h0"), a node name (all
  // of its links: a host's NIC link, every port of a switch), "tier:N" or a
  // glob ("leaf0-spine*") — and creates the pcap file at `path`. Every link
  // goes to that one file, both directions. InvalidArgument (with examples
  // of the names) when nothing matches, IoError when the file cannot be
  // created. Attach() starts the capture.
  // With `create_file` false nothing is created: a process of a
  // distributed run other than rank 0, whose frames go to a sink.
  static StatusOr<std::unique_ptr<PortCapture>> Open(const topo::Topology& topology,
                                                     const std::string& what,
                                                     const std::string& path,
                                                     bool create_file = true);
  ~PortCapture();
  PortCapture(const PortCapture&) = delete;
  PortCapture& operator=(const PortCapture&) = delete;

  // Taps every port of the links (the network must be built from the
  // topology given to Open, and outlive the capture or a Detach()). A port
  // has one tap: two captures must not share a link (CheckDisjoint).
  void Attach(Network* network);
  void Detach();
  // Writes what is buffered to the file; the first write error, if any.
  Status Flush();

  // A distributed run (fabric/parallel/capture_merge.h): each frame goes to
  // `sink` (built, timestamped and counted in frames() as for the file)
  // instead of the file; rank 0 writes the merged frames with WriteMerged.
  using FrameSink = void (*)(void* ctx, std::span<const uint8_t> frame, int64_t timestamp_ns);
  void set_sink(FrameSink sink, void* ctx) {
    sink_ = sink;
    sink_ctx_ = ctx;
  }
  // Writes a frame to the file without counting it (the process that
  // captured it counted it); the first write error is kept in status().
  void WriteMerged(std::span<const uint8_t> frame, int64_t timestamp_ns);

  // The --pcap argument ("what=path"), for messages.
  const std::string& label() const { return label_; }
  const std::vector<int32_t>& links() const { return links_; }
  uint64_t frames() const { return frames_; }
  // The first write error, if any (writes stop after it).
  const Status& status() const { return status_; }

 private:
  PortCapture() = default;
  static void OnPacket(void* ctx, const Packet& p, Picoseconds at);

  Network* network_ = nullptr;
  std::string label_;
  std::vector<int32_t> links_;
  std::unique_ptr<wire::PcapWriter> writer_;  // null: no file here (a sink takes the frames)
  FrameSink sink_ = nullptr;
  void* sink_ctx_ = nullptr;
  std::vector<Port*> ports_;
  PacketTap tap_{&PortCapture::OnPacket, this};
  std::vector<uint8_t> buffer_;
  uint64_t frames_ = 0;
  Status status_;
};

// InvalidArgument naming both captures and the link when two of `captures`
// take the same link (a port has one tap, so one would see nothing).
Status CheckDisjoint(const std::vector<PortCapture*>& captures, const topo::Topology& topology);

}  // namespace fathom::sim
