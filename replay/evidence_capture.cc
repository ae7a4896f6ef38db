// Captures (pcap/pcapng, Ethernet) through fabric/wire's decoder, as `fathom
// decode` reads them: per conversation (source, destination, destination
// QPN) the frames, PSN gaps, retransmissions, NAKs, the largest frame and the
// frames larger than the bundle's smallest netdev MTU (ReadEvidence reads
// captures after every other file, so the MTUs are known).
#include <algorithm>
#include <climits>
#include <map>
#include <tuple>

#include "fabric/wire/capture_stats.h"
#include "fabric/wire/pcap.h"
#include "fabric/wire/roce.h"
#include "replay/evidence_internal.h"

namespace fathom::replay::internal {

void ParseCapture(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "capture";
  wire::PcapOpenOptions opt;
  opt.fifo_wait_ms = 0;
  auto reader = wire::PcapReader::Open(file.path, opt);
  if (!reader.ok()) {
    src->use = SourceReport::Use::kUnusable;
    src->reason = "not a capture: " + reader.status().message();
    return;
  }
  if ((*reader)->linktype() != wire::kLinktypeEthernet) {
    src->use = SourceReport::Use::kUnusable;
    src->reason = "link type " + std::to_string((*reader)->linktype()) + " is not Ethernet (1)";
    return;
  }
  int smallest_mtu = INT_MAX;
  for (const auto& [name, h] : ev->hosts) {
    if (h.netdev_mtu) smallest_mtu = std::min(smallest_mtu, *h.netdev_mtu);
  }
  struct Extra {
    uint64_t oversize = 0;
    uint32_t max_frame = 0;
    double first = -1, last = -1;
  };
  std::map<std::tuple<std::string, std::string, uint32_t>, Extra> extra;
  wire::CaptureStats stats;
  wire::PcapRecord rec;
  while (true) {
    auto more = (*reader)->Next(&rec);
    if (!more.ok()) {
      NoteProblem(src, 0,
                  more.status().message() + " (the " + std::to_string(stats.frames()) +
                      " frames before it are used)");
      break;
    }
    if (!*more) break;
    const wire::ParseResult parsed = wire::Parse(rec.data);
    stats.Add(parsed);
    if (parsed.kind != wire::ParseKind::kRoce) {
      ++src->lines_ignored;
      continue;
    }
    ++src->lines_recognised;
    const wire::RoceFrame& f = parsed.frame;
    Extra& x = extra[{wire::SourceAddress(f), wire::DestinationAddress(f), f.bth.dest_qpn}];
    const uint32_t len = rec.original_length;
    x.max_frame = std::max(x.max_frame, len);
    const int ip_len = static_cast<int>(len) - 14 - (f.vlan ? 4 : 0);
    if (smallest_mtu != INT_MAX && ip_len > smallest_mtu) ++x.oversize;
    if (!rec.timestamp_clamped) {
      const double t = static_cast<double>(rec.timestamp_ns) / 1e9;
      if (x.first < 0) x.first = t;
      x.last = t;
      SeeWallTime(ev, t);
    }
  }
  for (const wire::FlowStats& fl : stats.flows()) {
    CaptureFinding c;
    c.path = file.rel;
    c.src = fl.src;
    c.dst = fl.dst;
    c.dest_qp = fl.key.dest_qpn;
    c.frames = fl.packets;
    c.psn_gaps = fl.psn_gaps;
    c.retransmissions = fl.retransmitted_packets;
    for (const auto& [code, count] : fl.naks_by_code) c.naks += count;
    const auto it = extra.find({fl.src, fl.dst, fl.key.dest_qpn});
    if (it != extra.end()) {
      c.oversize_frames = it->second.oversize;
      c.max_frame = it->second.max_frame;
      c.first_s = it->second.first;
      c.last_s = it->second.last;
    }
    ev->captures.push_back(c);
  }
  if (stats.frames() > 0 && stats.roce_frames() == 0) {
    NoteProblem(src, 0, "no RoCEv2 frame among " + std::to_string(stats.frames()));
  }
}

}  // namespace fathom::replay::internal
