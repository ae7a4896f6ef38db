// Capture analysis: counts frames by kind, opcode and ICRC verdict, and keeps
// per-flow statistics (a flow = IP source, IP destination, destination QPN)
// of RoCEv2 traffic — packets, payload bytes, PSN range, PSN gaps,
// retransmitted PSNs (a PSN seen again), NAKs by code, RNR NAKs. This is what
// `fathom decode` prints and what tests check the simulator's captures with.
//
// Not for hot paths: it keeps a set of seen PSNs per flow. Single-threaded.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fabric/wire/roce.h"

namespace fathom::wire {

struct FlowKey {
  IpVersion ip_version = IpVersion::kIpv4;
  Ipv6Address src{};  // IPv4 addresses use the first 4 bytes
  Ipv6Address dst{};
  uint32_t dest_qpn = 0;
  bool operator==(const FlowKey&) const = default;
};

struct FlowStats {
  FlowKey key;
  std::string src;  // printable, e.g. "192.0.2.1" or "fe80::1"
  std::string dst;
  uint64_t packets = 0;
  uint64_t payload_bytes = 0;
  // PSNs of sequenced packets (every opcode except ACKNOWLEDGE,
  // ATOMIC_ACKNOWLEDGE and CNP); of the ACKs when the flow has only ACKs.
  uint32_t first_psn = 0;
  uint32_t last_psn = 0;
  uint64_t psn_gaps = 0;                     // times a new PSN jumped past the next expected one
  uint64_t missing_psns = 0;                 // PSNs skipped by those jumps
  uint64_t retransmitted_packets = 0;        // sequenced packets whose PSN was seen before
  std::vector<uint32_t> retransmitted_psns;  // distinct, in order of first repeat
  uint64_t acks = 0;
  std::map<uint8_t, uint64_t> naks_by_code;  // NAK code (NakCode) -> count
  uint64_t rnr_naks = 0;
};

class CaptureStats {
 public:
  // Accounts one frame: its parse result and, for RoCE frames, its ICRC.
  void Add(const ParseResult& parsed);

  uint64_t frames() const { return frames_; }
  uint64_t roce_frames() const { return roce_frames_; }
  uint64_t non_roce_frames() const { return non_roce_frames_; }
  uint64_t malformed_frames() const { return malformed_frames_; }
  uint64_t icrc_ok() const { return icrc_ok_; }
  uint64_t icrc_bad() const { return icrc_bad_; }
  const std::map<std::string_view, uint64_t>& opcodes() const { return opcodes_; }
  const std::map<std::string_view, uint64_t>& malformed_by_reason() const {
    return malformed_by_reason_;
  }
  // Flows in the order their first packet appeared.
  const std::vector<FlowStats>& flows() const { return flows_; }

 private:
  struct FlowKeyHash {
    size_t operator()(const FlowKey& k) const;
  };
  struct FlowState {
    bool have_sequenced = false;
    bool have_ack = false;
    uint32_t next_psn = 0;
    uint32_t first_ack_psn = 0;
    uint32_t last_ack_psn = 0;
    std::unordered_set<uint32_t> seen;
    std::unordered_set<uint32_t> repeated;
  };

  uint64_t frames_ = 0;
  uint64_t roce_frames_ = 0;
  uint64_t non_roce_frames_ = 0;
  uint64_t malformed_frames_ = 0;
  uint64_t icrc_ok_ = 0;
  uint64_t icrc_bad_ = 0;
  std::map<std::string_view, uint64_t> opcodes_;
  std::map<std::string_view, uint64_t> malformed_by_reason_;
  std::unordered_map<FlowKey, size_t, FlowKeyHash> index_;
  std::vector<FlowStats> flows_;
  std::vector<FlowState> states_;
};

// Printable source / destination address of a parsed frame.
std::string FormatIpAddress(IpVersion version, const Ipv6Address& address);
std::string SourceAddress(const RoceFrame& frame);
std::string DestinationAddress(const RoceFrame& frame);

}  // namespace fathom::wire
