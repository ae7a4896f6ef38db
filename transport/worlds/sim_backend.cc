#include "transport/worlds/sim_backend.h"

#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "transport/collectives/report.h"
#include "transport/worlds/hot_links.h"

namespace fathom::transport::worlds {

std::vector<int> SimBackend::local_ranks() const {
  std::vector<int> r(static_cast<size_t>(world_->nranks()));
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int>(i);
  return r;
}

std::string SimBackend::Where() const {
  const sim::NetworkConfig& nc = world_->network_config();
  return std::to_string(nranks()) + " ranks on " + world_->topology().name() + ", profile " +
         world_->profile() + ", " + (world_->lossless() ? "lossless" : "lossy") +
         (nc.ecn.enabled ? ", ECN" : "") + (nc.dcqcn.enabled ? ", DCQCN" : "");
}

std::string SimBackend::WhereJson() const {
  const sim::NetworkConfig& nc = world_->network_config();
  return "\"topology\":\"" + world_->topology().name() + "\",\"profile\":\"" + world_->profile() +
         "\",\"fabric\":\"" + (world_->lossless() ? "lossless" : "lossy") +
         "\",\"ecn\":" + (nc.ecn.enabled ? "true" : "false") +
         ",\"dcqcn\":" + (nc.dcqcn.enabled ? "true" : "false");
}

std::vector<std::string> SimBackend::DeviceLines() {
  std::vector<std::string> lines;
  for (int r = 0; r < nranks(); ++r) {
    const std::string dev = world_->comm(r).device().info().name;
    const std::string host = dev.rfind("sim:", 0) == 0 ? dev.substr(4) : dev;
    lines.push_back(coll::DeviceLine(r, static_cast<int>(getpid()), host, dev + " (emulated)"));
  }
  return lines;
}

BitsPerSecond SimBackend::link_bandwidth() {
  return BitsPerSecond::Gbps(static_cast<int64_t>(world_->comm(0).device().info().active_gbps));
}

void SimBackend::MarkLinks() { link_mark_ = PortBytes(world_->network()); }

std::vector<coll::HotLinkRow> SimBackend::HotLinksSinceMark() {
  std::vector<coll::HotLinkRow> rows;
  for (const LinkLoad& l :
       HotLinks(world_->network(), link_mark_, PortBytes(world_->network()), 8)) {
    rows.push_back({l.name, l.bytes, l.ratio});
  }
  return rows;
}

Backend::Counters SimBackend::FabricCounters() {
  sim::Network& net = world_->network();
  Counters c;
  for (size_t i = 0; i < static_cast<size_t>(sim::DropReason::kCount); ++i) {
    if (static_cast<sim::DropReason>(i) == sim::DropReason::kNone) continue;  // not a drop
    c.emplace_back("drops_" + std::string(sim::DropReasonName(static_cast<sim::DropReason>(i))),
                   net.drops().by_reason[i]);
  }
  sim::PortCounters ports;
  for (const sim::Port* port : net.ports()) {
    const sim::PortCounters& p = port->counters();
    ports.port_xmit_packets += p.port_xmit_packets;
    ports.port_xmit_discards += p.port_xmit_discards;
    ports.mtu_discards += p.mtu_discards;
    ports.port_rcv_errors += p.port_rcv_errors;
  }
  c.emplace_back("port_xmit_packets", ports.port_xmit_packets);
  c.emplace_back("port_xmit_discards", ports.port_xmit_discards);
  c.emplace_back("mtu_discards", ports.mtu_discards);
  c.emplace_back("port_rcv_errors", ports.port_rcv_errors);
  const sim::QpCounters q = net.TotalQpCounters();
  c.emplace_back("retransmitted_packets", q.retransmitted_packets);
  c.emplace_back("packet_seq_err", q.packet_seq_err);
  c.emplace_back("implied_nak_seq_err", q.implied_nak_seq_err);
  c.emplace_back("local_ack_timeout_err", q.local_ack_timeout_err);
  c.emplace_back("rnr_naks", q.rcvd_rnr_err);
  c.emplace_back("out_of_sequence", q.out_of_sequence);
  c.emplace_back("duplicate_request", q.duplicate_request);
  c.emplace_back("retry_exceeded_err", q.retry_exceeded_err);
  c.emplace_back("rnr_nak_retry_err", q.rnr_nak_retry_err);
  c.emplace_back("roce_adp_retrans", q.roce_adp_retrans);
  // PFC: PAUSE frames of each lossless priority, summed over every port, by
  // their ethtool names (a fixed list per run: rows are diffed by position).
  const uint8_t lossless = net.qos().lossless_mask();
  for (int prio = 0; prio < sim::kPriorities; ++prio) {
    if (((lossless >> prio) & 1) == 0) continue;
    uint64_t tx = 0, rx = 0;
    for (const sim::Port* port : net.ports()) {
      if (const std::optional<sim::PfcCounters> pfc = port->pfc_counters(); pfc.has_value()) {
        tx += pfc->tx_pause[static_cast<size_t>(prio)];
        rx += pfc->rx_pause[static_cast<size_t>(prio)];
      }
    }
    c.emplace_back("tx_prio" + std::to_string(prio) + "_pause", tx);
    c.emplace_back("rx_prio" + std::to_string(prio) + "_pause", rx);
  }
  // ECN marks at switch egress and DCQCN's mlx5 counters (0 when off).
  c.emplace_back("ecn_marked_packets", net.TotalEcnMarkedPackets());
  const sim::DcqcnCounters d = net.TotalDcqcnCounters();
  c.emplace_back("np_cnp_sent", d.np_cnp_sent);
  c.emplace_back("rp_cnp_handled", d.rp_cnp_handled);
  return c;
}

void SimBackend::WatchProgress(Progress* progress) {
  if (progress == nullptr || !progress->enabled()) {
    world_->engine().set_progress(nullptr, nullptr, 0);
    return;
  }
  // Every 64K events: cheap next to the events themselves.
  world_->engine().set_progress(
      [](void* ctx, const sim::Engine& e) {
        char buf[48];
        std::snprintf(buf, sizeof(buf), ", sim t=%.0fus", e.Now().us());
        static_cast<Progress*>(ctx)->Tick(buf);
      },
      progress, 1u << 16);
}

bool SimBackend::WriteTrace(const std::string& path, const coll::Trace& trace, bool) {
  return WriteTraceFile(path, trace.ToJson());
}

}  // namespace fathom::transport::worlds
