// The host-side Ethernet switch of the testbed: it connects the VMs' ports
// (qemu UDP sockets today; TAP or DPDK ports later) with L2 learning, floods
// broadcast, multicast and unknown-unicast frames (ARP and IPv6 neighbour
// discovery must reach every VM: rxe resolves peers through the kernel's
// neighbour table, TESTBED.md), keeps per-port counters with drops by reason,
// optionally writes every frame it receives to pcap, and applies per-port
// impairments on egress (a port MTU smaller than the frame drops it silently,
// CASES.md case 4).
//
// Threading: the Switch owns its ports and runs on one Boost.Asio io_context;
// every port callback runs on that context's thread. Counters are atomics and
// may be read from any thread. It is the seed of the live emulator (fabric/live).
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "testbed/port.h"

namespace fathom::wire {
class PcapWriter;
}

namespace fathom::testbed {

enum class DropReason {
  kOverMtu,      // frame longer than the egress port's max_frame_bytes
  kRandom,       // the egress port's seeded drop probability
  kSizeFilter,   // frame length inside the egress port's filtered range
  kHook,         // the port's impairment hook said drop
  kNoPeer,       // the port could not transmit (peer unknown, socket error)
  kSameSegment,  // learned destination is the ingress port itself
  kRunt,         // shorter than an Ethernet header
};
inline constexpr int kNumDropReasons = 7;
std::string_view DropReasonName(DropReason reason);

// Per-port impairments, applied to frames leaving through the port.
struct PortImpairments {
  // Drop Ethernet frames (header + payload, no FCS) longer than this; 0 = no
  // limit. An MTU 1024 RoCE frame is 1082 bytes (TESTBED.md), so 1000 stages
  // the path-MTU mismatch hang.
  int max_frame_bytes = 0;
  // Probability of dropping each frame, from a stream seeded by `seed`.
  double drop_probability = 0.0;
  uint64_t seed = 1;
  // Drop frames whose length is within [filter_min_bytes, filter_max_bytes];
  // inactive while filter_max_bytes == 0.
  int filter_min_bytes = 0;
  int filter_max_bytes = 0;
};

// Extra per-port verdict for fault models that need the frame's content
// (later: corruption, targeted drops). Returns true to drop (counted as kHook).
using ImpairmentHook = std::function<bool(std::span<const uint8_t> frame)>;

struct PortCounters {
  uint64_t rx_frames = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_frames = 0;
  uint64_t tx_bytes = 0;
  std::array<uint64_t, kNumDropReasons> drops{};  // indexed by DropReason
  uint64_t TotalDrops() const;
};

class Switch {
 public:
  Switch();
  ~Switch();
  Switch(const Switch&) = delete;
  Switch& operator=(const Switch&) = delete;

  boost::asio::io_context& io() { return io_; }

  // Adds a port (before Start). Returns its index.
  int AddPort(std::unique_ptr<Port> port, PortImpairments impairments = {});
  Status SetImpairments(int port, PortImpairments impairments);  // before Start
  Status SetHook(int port, ImpairmentHook hook);                 // before Start
  // Writes every received frame (before forwarding) to a pcap file.
  Status EnableCapture(const std::string& path);

  // Runs the event loop on a thread of its own until Stop.
  void Start();
  // Stops the loop, joins the thread, closes ports and flushes the capture.
  Status Stop();

  int NumPorts() const { return static_cast<int>(ports_.size()); }
  const std::string& PortName(int port) const { return ports_[port]->port->Name(); }
  PortCounters Counters(int port) const;
  // Frames forwarded (one per egress copy) since Start.
  uint64_t ForwardedFrames() const;
  // One line per port: "vm0 rx=.. tx=.. drop[over_mtu]=..".
  std::string CountersText() const;
  // {"vm0": {"rx_frames":..,"drops":{"over_mtu":..}}, ...}
  std::string CountersJson() const;

  // The forwarding decision, on the io thread (public for ports that feed
  // frames directly, e.g. a future TAP port).
  void OnFrame(int ingress, std::span<const uint8_t> frame);

 private:
  struct Slot {
    std::unique_ptr<Port> port;
    PortImpairments impairments;
    ImpairmentHook hook;
    std::mt19937_64 rng;
    std::uniform_real_distribution<double> uniform{0.0, 1.0};
    std::atomic<uint64_t> rx_frames{0}, rx_bytes{0}, tx_frames{0}, tx_bytes{0};
    std::array<std::atomic<uint64_t>, kNumDropReasons> drops{};
  };
  void Egress(int port, std::span<const uint8_t> frame);
  void Drop(Slot& slot, DropReason reason);

  boost::asio::io_context io_;
  std::vector<std::unique_ptr<Slot>> ports_;
  std::map<uint64_t, int> mac_table_;  // MAC (48 bits) -> port; io thread only
  std::unique_ptr<wire::PcapWriter> capture_;
  Status capture_status_;
  std::thread thread_;
  bool running_ = false;
};

}  // namespace fathom::testbed
