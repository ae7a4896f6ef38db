#include "fabric/wire/capture_stats.h"

#include <arpa/inet.h>

#include <cstring>

#include "fabric/wire/psn.h"

namespace fathom::wire {
namespace {

Ipv6Address Widen(const Ipv4Address& a) {
  Ipv6Address out{};
  std::memcpy(out.data(), a.data(), a.size());
  return out;
}

FlowKey KeyOf(const RoceFrame& f) {
  FlowKey k;
  k.ip_version = f.ip_version;
  if (f.ip_version == IpVersion::kIpv4) {
    k.src = Widen(f.ipv4.src);
    k.dst = Widen(f.ipv4.dst);
  } else {
    k.src = f.ipv6.src;
    k.dst = f.ipv6.dst;
  }
  k.dest_qpn = f.bth.dest_qpn;
  return k;
}

// ACKs repeat PSNs legitimately (duplicate ACKs) and CNPs carry none.
bool IsSequenced(Opcode op) {
  return op != Opcode::kAcknowledge && op != Opcode::kAtomicAcknowledge && op != Opcode::kCnp;
}

}  // namespace

std::string FormatIpAddress(IpVersion version, const Ipv6Address& address) {
  char text[INET6_ADDRSTRLEN] = {};
  const int family = version == IpVersion::kIpv4 ? AF_INET : AF_INET6;
  if (inet_ntop(family, address.data(), text, sizeof(text)) == nullptr) return "?";
  return text;
}

std::string SourceAddress(const RoceFrame& f) {
  return f.ip_version == IpVersion::kIpv4 ? FormatIpAddress(f.ip_version, Widen(f.ipv4.src))
                                          : FormatIpAddress(f.ip_version, f.ipv6.src);
}

std::string DestinationAddress(const RoceFrame& f) {
  return f.ip_version == IpVersion::kIpv4 ? FormatIpAddress(f.ip_version, Widen(f.ipv4.dst))
                                          : FormatIpAddress(f.ip_version, f.ipv6.dst);
}

size_t CaptureStats::FlowKeyHash::operator()(const FlowKey& k) const {
  size_t h = static_cast<size_t>(k.dest_qpn) * 0x9E3779B97F4A7C15ull;
  for (uint8_t b : k.src) h = (h ^ b) * 0x100000001B3ull;
  for (uint8_t b : k.dst) h = (h ^ b) * 0x100000001B3ull;
  return h ^ static_cast<size_t>(k.ip_version);
}

void CaptureStats::Add(const ParseResult& parsed) {
  ++frames_;
  if (parsed.kind == ParseKind::kNotRoce) {
    ++non_roce_frames_;
    return;
  }
  if (parsed.kind == ParseKind::kMalformed) {
    ++malformed_frames_;
    ++malformed_by_reason_[ParseErrorName(parsed.error)];
    return;
  }
  ++roce_frames_;
  if (IcrcOk(parsed)) {
    ++icrc_ok_;
  } else {
    ++icrc_bad_;
  }
  const RoceFrame& f = parsed.frame;
  ++opcodes_[OpcodeName(f.bth.opcode)];

  const FlowKey key = KeyOf(f);
  auto [it, inserted] = index_.try_emplace(key, flows_.size());
  if (inserted) {
    FlowStats s;
    s.key = key;
    s.src = SourceAddress(f);
    s.dst = DestinationAddress(f);
    flows_.push_back(std::move(s));
    states_.emplace_back();
  }
  FlowStats& s = flows_[it->second];
  FlowState& st = states_[it->second];
  ++s.packets;
  s.payload_bytes += f.payload.size();
  const uint32_t psn = f.bth.psn;

  if (f.aeth) {
    switch (f.aeth->kind()) {
      case AethKind::kAck:
        if (f.bth.opcode == Opcode::kAcknowledge) ++s.acks;
        break;
      case AethKind::kRnrNak:
        ++s.rnr_naks;
        break;
      case AethKind::kNak:
        ++s.naks_by_code[f.aeth->code()];
        break;
      case AethKind::kReserved:
        break;
    }
  }

  if (!IsSequenced(f.bth.opcode)) {
    if (!st.have_ack) st.first_ack_psn = psn;
    st.have_ack = true;
    st.last_ack_psn = psn;
    if (!st.have_sequenced) {
      s.first_psn = st.first_ack_psn;
      s.last_psn = st.last_ack_psn;
    }
    return;
  }
  if (!st.have_sequenced) {
    st.have_sequenced = true;
    s.first_psn = psn;
    st.next_psn = PsnAdd(psn, 1);
  } else if (st.seen.contains(psn)) {
    ++s.retransmitted_packets;
    if (st.repeated.insert(psn).second) s.retransmitted_psns.push_back(psn);
  } else {
    const int32_t ahead = PsnDiff(psn, st.next_psn);
    if (ahead > 0) {
      ++s.psn_gaps;
      s.missing_psns += static_cast<uint64_t>(ahead);
    }
    if (ahead >= 0) st.next_psn = PsnAdd(psn, 1);
  }
  st.seen.insert(psn);
  s.last_psn = psn;
}

}  // namespace fathom::wire
