#include "fabric/scenario/qos.h"

#include <cmath>
#include <string>

#include "fabric/sim/packet.h"

namespace fathom::sim {
namespace {

std::string Class(int i) { return "network.qos.classes[" + std::to_string(i) + "]"; }

}  // namespace

Status ValidateQos(const proto::QosSpec& qos, const topo::Topology& topology,
                   const config::SourceMap& m) {
  const bool dynamic = qos.dynamic_alpha() != 0;
  if (!std::isfinite(qos.dynamic_alpha()) || qos.dynamic_alpha() < 0 || qos.dynamic_alpha() > 64) {
    return m.Error("network.qos.dynamic_alpha",
                   std::to_string(qos.dynamic_alpha()) + " must be in [0, 64] (0: static)");
  }
  if (dynamic && (!qos.has_shared_buffer_bytes() || qos.shared_buffer_bytes() == 0)) {
    return m.Error("network.qos.dynamic_alpha",
                   "dynamic thresholds need network.qos.shared_buffer_bytes (per switch)");
  }
  if (qos.has_shared_buffer_bytes() && !dynamic) {
    return m.Error("network.qos.shared_buffer_bytes",
                   "is used by dynamic thresholds only: set network.qos.dynamic_alpha");
  }
  if (qos.has_shared_buffer_bytes() && qos.shared_buffer_bytes() > (uint64_t{1} << 40)) {
    return m.Error("network.qos.shared_buffer_bytes", "is more than 2^40 bytes (1 TiB)");
  }
  bool seen[kPriorities] = {};
  bool any_lossless = false;
  for (int i = 0; i < qos.classes_size(); ++i) {
    const proto::PfcClassSpec& c = qos.classes(i);
    if (c.priority() < 0 || c.priority() >= kPriorities) {
      return m.Error(Class(i) + ".priority",
                     std::to_string(c.priority()) + " is not a priority (0..7)");
    }
    if (seen[c.priority()]) {
      return m.Error(Class(i) + ".priority",
                     "priority " + std::to_string(c.priority()) + " is configured twice");
    }
    seen[c.priority()] = true;
    any_lossless = any_lossless || c.lossless();
    if (!c.lossless()) {
      if (c.has_xoff_bytes() || c.has_xon_bytes()) {
        return m.Error(Class(i) + (c.has_xoff_bytes() ? ".xoff_bytes" : ".xon_bytes"),
                       "PFC thresholds on a lossy class (set lossless: true)");
      }
      continue;
    }
    if (!dynamic && !c.has_xoff_bytes()) {
      return m.Error(Class(i) + ".xoff_bytes",
                     "a lossless class needs PFC thresholds: xoff_bytes and xon_bytes (or "
                     "network.qos.dynamic_alpha)");
    }
    if (!dynamic && !c.has_xon_bytes()) {
      return m.Error(Class(i) + ".xon_bytes",
                     "a lossless class needs PFC thresholds: xoff_bytes and xon_bytes");
    }
    if (c.has_xoff_bytes() && (c.xoff_bytes() == 0 || c.xoff_bytes() > (uint64_t{1} << 30))) {
      return m.Error(Class(i) + ".xoff_bytes",
                     std::to_string(c.xoff_bytes()) + " must be in [1, 2^30]");
    }
    if (c.has_xoff_bytes() && c.has_xon_bytes() && c.xon_bytes() >= c.xoff_bytes()) {
      return m.Error(Class(i) + ".xon_bytes", "XON " + std::to_string(c.xon_bytes()) +
                                                  " is not below XOFF " +
                                                  std::to_string(c.xoff_bytes()));
    }
  }
  for (int i = 0; i < qos.dscp_to_priority_size(); ++i) {
    const proto::DscpPrioritySpec& d = qos.dscp_to_priority(i);
    const std::string p = "network.qos.dscp_to_priority[" + std::to_string(i) + "]";
    if (d.dscp() < 0 || d.dscp() > 63) {
      return m.Error(p + ".dscp", std::to_string(d.dscp()) + " is not a DSCP (0..63)");
    }
    if (d.priority() < 0 || d.priority() >= kPriorities) {
      return m.Error(p + ".priority", std::to_string(d.priority()) + " is not a priority (0..7)");
    }
  }
  if (qos.has_headroom_bytes()) {
    if (!any_lossless) {
      return m.Error("network.qos.headroom_bytes", "is for lossless classes, and none is set");
    }
    // Below one MTU's round trip (a maximum frame and the cable both ways)
    // the headroom overflows on the first pause of any link into a switch.
    for (const topo::Link& l : topology.links()) {
      for (int dir = 0; dir < 2; ++dir) {
        const int32_t to = dir == 0 ? l.b : l.a;
        if (topology.node(to).kind != topo::NodeKind::kSwitch) continue;
        const int64_t mtu = dir == 0 ? l.mtu_ab : l.mtu_ba;
        const int64_t frame = (mtu > 0 ? mtu : 4096) + static_cast<int64_t>(kEthernetWireOverhead);
        const int64_t cable = static_cast<int64_t>(std::ceil(
            static_cast<double>(l.rate.bps()) * static_cast<double>(l.latency.ps()) / 8e12));
        const int64_t need = frame + 2 * cable;
        if (static_cast<int64_t>(qos.headroom_bytes()) < need) {
          return m.Error("network.qos.headroom_bytes",
                         std::to_string(qos.headroom_bytes()) +
                             " is below one MTU's round trip on link " + l.name + " (" +
                             std::to_string(frame) + " frame bytes + 2 x " + std::to_string(cable) +
                             " cable bytes = " + std::to_string(need) +
                             "); leave it unset for the auto headroom");
        }
      }
    }
  }
  return Status::Ok();
}

QosConfig QosFromSpec(const proto::QosSpec& qos) {
  QosConfig q;
  for (const proto::PfcClassSpec& c : qos.classes()) {
    PfcClassConfig& k = q.classes[static_cast<size_t>(c.priority())];
    k.lossless = c.lossless();
    k.xoff_bytes = static_cast<int64_t>(c.xoff_bytes());
    k.xon_bytes = static_cast<int64_t>(c.xon_bytes());
  }
  for (const proto::DscpPrioritySpec& d : qos.dscp_to_priority()) {
    q.dscp_to_priority[static_cast<size_t>(d.dscp())] = static_cast<uint8_t>(d.priority());
  }
  q.dynamic_alpha = qos.dynamic_alpha();
  q.shared_buffer_bytes = static_cast<int64_t>(qos.shared_buffer_bytes());
  q.headroom_bytes = static_cast<int64_t>(qos.headroom_bytes());
  return q;
}

}  // namespace fathom::sim
