// WriteBundle: a simulator run as the evidence a field engineer collects
// (bundle.h). Every line is in a format ReadEvidence parses (see the parsers'
// headers for the sources of each format).
#include "replay/bundle.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include "fabric/sim/pfc.h"

namespace fathom::replay {
namespace {
namespace fs = std::filesystem;

// A fault's link selector from the report's target ("link leaf0-spine1";
// "host h3" selects no link: its counters are the host's own).
std::string FaultLinkSelector(const std::string& target) {
  constexpr std::string_view kLink = "link ";
  return target.rfind(kLink, 0) == 0 ? target.substr(kLink.size()) : std::string();
}

std::string Fmt(const char* f, auto... args) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf), f, args...);
  return buf;
}

// "[2025-12-05 11:00:00.000050] ": NCCL 2.26+'s timestamp prefix with
// NCCL_DEBUG_TIMESTAMP_LEVELS=ALL, TZ=UTC and a microsecond fraction (the
// default "[%F %T] " has whole seconds; ReadEvidence takes both).
std::string Stamp(double unix_s) {
  const auto whole = static_cast<time_t>(std::floor(unix_s));
  const int us = static_cast<int>(std::lround((unix_s - static_cast<double>(whole)) * 1e6));
  std::tm tm{};
  gmtime_r(&whole, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%F %T", &tm);
  return Fmt("%s.%06d", buf, std::min(us, 999999));
}

Status WriteFile(const fs::path& p, const std::string& text) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return IoError("WriteBundle: cannot write " + p.string());
  return Status::Ok();
}

// IB MTU a RoCE port reports for a netdev MTU: the largest IB MTU not above
// the netdev MTU less the RoCE headers (include/rdma/ib_addr.h
// iboe_get_mtu: GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4 =
// 96 bytes): 4200 -> 4096, 2200 -> 2048, 1500 -> 1024 (CASES.md 4).
int ActiveMtu(int netdev_mtu) {
  int best = 256;
  for (int m : {256, 512, 1024, 2048, 4096}) {
    if (m <= netdev_mtu - 96) best = m;
  }
  return best;
}
int MtuEnum(int ib_mtu) {  // ibv_mtu: IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5
  return 1 + static_cast<int>(std::log2(ib_mtu / 256));
}

struct HostOut {
  int index = 0;
  std::string name;
  std::string addr;
  int netdev_mtu = 0;
  std::string leaf;
  int leaf_port = -1;
  sim::QpCounters req, resp;  // its NIC's QPs: as requester, as responder
  std::string nccl;           // the log's lines after init
};

}  // namespace

// The simulator's own addresses (fabric/scenario/capture.cc FrameFor):
// 10.<rank bits 16-23>.<8-15>.<0-7>, so captures and logs agree.
std::string BundleHostAddress(int i) {
  return Fmt("10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255, i & 255);
}

Status WriteBundle(const sim::LoadedScenario& sc, const sim::RunReport& report,
                   const std::string& dir, const BundleOptions& opt) {
  const topo::Topology& topo = sc.topology;
  const proto::TransportSpec& tr = sc.spec.transport();
  const std::string driver =
      !opt.driver.empty() ? opt.driver : (report.nic_profile == "rxe" ? "rxe" : "mlx5");
  const std::string device = driver == "rxe" ? "rxe0" : "mlx5_0";
  const fs::path root(dir);
  const double end_s = sc.spec.end_time_us() / 1e6;

  // Hosts, their leaf port and netdev MTU (the host link's; an `mtu` fault
  // on a host's own link is that host's NIC MTU, CASES.md 4).
  std::vector<HostOut> hosts;
  std::map<std::string, int> by_name;
  for (size_t i = 0; i < topo.hosts().size(); ++i) {
    const int32_t id = topo.hosts()[i];
    HostOut h;
    h.index = static_cast<int>(i);
    h.name = topo.node(id).name;
    h.addr = BundleHostAddress(h.index);
    for (int32_t l : topo.LinksOf(id)) {
      const topo::Link& link = topo.link(l);
      const bool a = link.a == id;
      h.netdev_mtu = a ? link.mtu_ab : link.mtu_ba;
      h.leaf = topo.node(a ? link.b : link.a).name;
      h.leaf_port = a ? link.b_port : link.a_port;
      break;
    }
    by_name[h.name] = h.index;
    hosts.push_back(h);
  }
  for (const proto::FaultSpec& f : sc.spec.faults()) {
    if (f.kind() != "mtu" || f.link().empty()) continue;
    auto links = topo.SelectLinks(f.link());
    if (!links.ok()) continue;
    for (int32_t l : *links) {
      const topo::Link& link = topo.link(l);
      for (int32_t end : {link.a, link.b}) {
        auto it = by_name.find(topo.node(end).name);
        if (it != by_name.end()) hosts[it->second].netdev_mtu = f.mtu_bytes();
      }
    }
  }

  // Per-host QP counters and the error lines, from the flow table.
  const int timeout = tr.has_ib_timeout() ? tr.ib_timeout() : 20;
  const int retry_cnt = tr.has_retry_cnt() ? tr.retry_cnt() : 7;
  auto host_of = [&](const std::string& n) -> HostOut* {
    auto it = by_name.find(n);
    return it == by_name.end() ? nullptr : &hosts[it->second];
  };
  struct Line {
    double t;
    std::string host;
    std::string text;
  };
  std::vector<Line> lines;
  std::map<std::string, bool> stalled_hosts;
  for (const sim::FlowReport& fl : report.flow_table) {
    if (fl.status == "stalled") stalled_hosts[fl.src] = true;
    for (const sim::QpReport& q : fl.qps) {
      HostOut* h = host_of(q.host);
      HostOut* p = host_of(q.peer_host);
      if (h != nullptr) h->req += q.requester;
      if (p != nullptr) p->resp += q.responder;
      if (q.first_error.empty() || q.first_error_ns < 0 || h == nullptr || p == nullptr) continue;
      int status = -1;
      for (int c = 0; c <= static_cast<int>(WcStatus::kGeneralErr); ++c) {
        if (WcStatusName(static_cast<WcStatus>(c)) == q.first_error) status = c;
      }
      if (status < 0) continue;
      // NCCL 2.19-2.22 net_ib.cc's format. Vendor error 0x81 is what mlx5
      // reports for a transport retry exhaustion (CASES.md 13, 14); rxe
      // reports none.
      const int vendor = driver == "mlx5" && status == 12 ? 129 : 0;
      const std::string opcode = tr.opcode() == "read" ? "2" : tr.opcode() == "send" ? "0" : "1";
      lines.push_back(
          {q.first_error_ns / 1e9, h->name,
           Fmt("%s:%d:%d [0] NCCL WARN NET/IB : Got completion from peer %s<%d> with status=%d "
               "opcode=%s len=0 vendor err %d (Send) localGid ::ffff:%s remoteGids ::ffff:%s",
               h->name.c_str(), 4000 + h->index, 4100 + h->index, p->addr.c_str(), 40000 + p->index,
               status, opcode.c_str(), vendor, h->addr.c_str(), p->addr.c_str())});
    }
  }

  // Fault timeline: link state events, and async events on hosts whose own
  // link goes down (ibv_event_type_str: "port error", "port active").
  std::string link_events;
  auto link_event = [&](double t_s, const topo::Link& link, bool up) {
    if (t_s > end_s) return;
    link_events += Stamp(opt.epoch_s + t_s) + " " + link.name + (up ? " up\n" : " down\n");
    for (int32_t end : {link.a, link.b}) {
      HostOut* h = host_of(topo.node(end).name);
      if (h == nullptr) continue;
      lines.push_back({t_s, h->name,
                       Fmt("%s:%d:%d [0] NCCL WARN NET/IB : Got async event : %s", h->name.c_str(),
                           4000 + h->index, 4200 + h->index, up ? "port active" : "port error")});
    }
  };
  for (const proto::FaultSpec& f : sc.spec.faults()) {
    if ((f.kind() != "link_down" && f.kind() != "link_flap") || f.link().empty()) continue;
    auto links = topo.SelectLinks(f.link());
    if (!links.ok()) continue;
    const double start = f.start_us() / 1e6;
    const double dur = f.has_duration_us() ? f.duration_us() / 1e6 : 1e30;
    for (int32_t l : *links) {
      if (f.kind() == "link_down") {
        link_event(start, topo.link(l), false);
        if (f.has_duration_us()) link_event(start + dur, topo.link(l), true);
      } else {
        const double period = f.has_period_us() && f.period_us() > 0 ? f.period_us() / 1e6 : 1e30;
        const double until = f.has_until_us() ? f.until_us() / 1e6 : end_s;
        for (double t = start; t < until && t <= end_s; t += period) {
          link_event(t, topo.link(l), false);
          link_event(t + dur, topo.link(l), true);
        }
      }
    }
  }
  // A hang with no error: PyTorch's watchdog (ProcessGroupNCCL) at the end
  // of the run, on the hosts of stalled flows.
  for (const auto& [name, stalled] : stalled_hosts) {
    HostOut* h = host_of(name);
    if (h == nullptr) continue;
    lines.push_back(
        {end_s, name,
         Fmt("[Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
             "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=%.0f) ran for %.0f "
             "milliseconds before timing out.",
             h->index, end_s * 1e3, end_s * 1e3)});
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const Line& a, const Line& b) { return a.t < b.t; });

  // NCCL logs.
  const int n = static_cast<int>(hosts.size());
  for (HostOut& h : hosts) {
    const std::string pre = Fmt("[%s] %s:%d:%d [0] NCCL INFO ", Stamp(opt.epoch_s).c_str(),
                                h.name.c_str(), 4000 + h.index, 4000 + h.index);
    std::string log;
    if (h.index == 0) log += pre + "NCCL version " + opt.nccl_version + "\n";
    log += pre + Fmt("NCCL_IB_TIMEOUT set by environment to %d.\n", timeout);
    log += pre + Fmt("NCCL_IB_RETRY_CNT set by environment to %d.\n", retry_cnt);
    log += pre + Fmt("NCCL_IB_GID_INDEX set by environment to %d.\n", opt.gid_index);
    if (tr.has_traffic_class()) {
      log += pre + Fmt("NCCL_IB_TC set by environment to %d.\n", tr.traffic_class());
    }
    if (tr.has_qps_per_connection()) {
      log += pre +
             Fmt("NCCL_IB_QPS_PER_CONNECTION set by environment to %d.\n", tr.qps_per_connection());
    }
    log += pre + Fmt("NET/IB : Using [0]%s:1/RoCE [RO]; OOB eth0:%s<0>\n", device.c_str(),
                     h.addr.c_str());
    log += pre + Fmt("comm 0x7f%06x rank %d nranks %d cudaDev 0 nvmlDev 0 busId 1b000 commId "
                     "0x5f3a9c1d2b4e6078 - Init START\n",
                     h.index, h.index, n);
    if (h.index == 0) {
      std::string ring = pre + "Channel 00/02 :";
      for (int r = 0; r < n; ++r) ring += Fmt(" %4d", r);
      log += ring + "\n";
    }
    log += pre + Fmt("comm 0x7f%06x rank %d nranks %d cudaDev 0 nvmlDev 0 busId 1b000 commId "
                     "0x5f3a9c1d2b4e6078 - Init COMPLETE\n",
                     h.index, h.index, n);
    for (const Line& l : lines) {
      if (l.host == h.name) log += "[" + Stamp(opt.epoch_s + l.t) + "] " + l.text + "\n";
    }
    Status s = WriteFile(root / "hosts" / h.name / "nccl.log", log);
    if (!s.ok()) return s;
  }

  // Per-host RDMA counters, link state and GIDs.
  std::map<std::string, const sim::PortReport*> port_by_name;
  for (const sim::PortReport& p : report.ports) port_by_name[p.name] = &p;
  std::map<std::string, const sim::PfcCounters*> pfc_by_name;
  for (const auto& [name, c] : report.port_pfc) pfc_by_name[name] = &c;
  for (const HostOut& h : hosts) {
    const sim::QpCounters& q = h.req;
    const sim::QpCounters& r = h.resp;
    std::vector<std::pair<std::string, uint64_t>> c;
    if (driver == "rxe") {
      // rxe_hw_counters.c names, in its order.
      c = {{"sent_pkts", q.sent_pkts + r.sent_pkts},
           {"rcvd_pkts", q.rcvd_pkts + r.rcvd_pkts},
           {"duplicate_request", r.duplicate_request},
           {"out_of_seq_request", r.out_of_sequence},
           {"rcvd_rnr_err", q.rcvd_rnr_err},
           {"send_rnr_err", r.send_rnr_err},
           {"rcvd_seq_err", q.packet_seq_err},
           {"ack_deferred", r.ack_deferred},
           {"retry_exceeded_err", q.retry_exceeded_err},
           {"retry_rnr_exceeded_err", q.rnr_nak_retry_err},
           {"completer_retry_err", q.local_ack_timeout_err + q.packet_seq_err},
           {"send_err", 0},
           {"link_downed", 0},
           {"rdma_sends", q.rdma_sends + r.rdma_sends},
           {"rdma_recvs", q.rdma_recvs + r.rdma_recvs}};
    } else {
      // mlx5 q-counters (Documentation of the mlx5 counters: rnr_nak_retry_err
      // counts RNR NAKs received, req_rnr_retries_exceeded the completions).
      c = {{"out_of_sequence", r.out_of_sequence},
           {"duplicate_request", r.duplicate_request},
           {"rnr_nak_retry_err", q.rcvd_rnr_err},
           {"packet_seq_err", q.packet_seq_err},
           {"implied_nak_seq_err", q.implied_nak_seq_err},
           {"local_ack_timeout_err", q.local_ack_timeout_err},
           {"req_cqe_error", q.retry_exceeded_err + q.rnr_nak_retry_err},
           {"req_transport_retries_exceeded", q.retry_exceeded_err},
           {"req_rnr_retries_exceeded", q.rnr_nak_retry_err},
           {"roce_adp_retrans", q.roce_adp_retrans}};
    }
    std::string stat = "link " + device + "/1";
    for (const auto& [k, v] : c) stat += Fmt(" %s %" PRIu64, k.c_str(), v);
    Status s = WriteFile(root / "hosts" / h.name / "rdma_statistic.txt", stat + "\n");
    if (!s.ok()) return s;

    // ethtool -S: the host port's packets, PAUSE counters (mlx5 names; the
    // durations in microseconds) and FEC counters of a fault on its link.
    std::string eth = "NIC statistics:\n";
    const std::string port = h.name + "->" + h.leaf;
    if (auto it = port_by_name.find(port); it != port_by_name.end()) {
      const sim::PortCounters& pc = it->second->counters;
      eth += Fmt("     tx_packets_phy: %" PRIu64 "\n", pc.port_xmit_packets);
      eth += Fmt("     tx_bytes_phy: %" PRIu64 "\n", pc.port_xmit_data);
      eth += Fmt("     rx_packets_phy: %" PRIu64 "\n", pc.port_rcv_packets);
      eth += Fmt("     rx_bytes_phy: %" PRIu64 "\n", pc.port_rcv_data);
      eth += Fmt("     rx_crc_errors_phy: %" PRIu64 "\n", pc.port_rcv_errors);
    }
    const sim::PfcCounters* pfc = nullptr;
    if (auto it = pfc_by_name.find(port); it != pfc_by_name.end()) pfc = it->second;
    for (int prio = 0; prio < 8; ++prio) {
      const auto u = [](int64_t ps) { return static_cast<uint64_t>(ps / 1000000); };
      eth += Fmt("     rx_prio%d_pause: %" PRIu64 "\n", prio, pfc ? pfc->rx_pause[prio] : 0);
      eth += Fmt("     rx_prio%d_pause_duration: %" PRIu64 "\n", prio,
                 pfc ? u(pfc->rx_pause_duration_ps[prio]) : 0);
      eth += Fmt("     tx_prio%d_pause: %" PRIu64 "\n", prio, pfc ? pfc->tx_pause[prio] : 0);
      eth += Fmt("     tx_prio%d_pause_duration: %" PRIu64 "\n", prio,
                 pfc ? u(pfc->tx_pause_duration_ps[prio]) : 0);
    }
    for (const sim::FaultStats& fs_ : report.fault_stats) {
      auto links = topo.SelectLinks(FaultLinkSelector(fs_.target));
      if (!links.ok() || links->size() != 1) continue;
      const topo::Link& link = topo.link((*links)[0]);
      if (topo.node(link.a).name != h.name && topo.node(link.b).name != h.name) continue;
      eth += Fmt("     rx_corrected_bits_phy: %" PRIu64 "\n", fs_.counters.fec_symbol_errors);
      eth += Fmt("     rx_fec_corrected_blocks: %" PRIu64 "\n", fs_.counters.fec_corrected_blocks);
      eth += Fmt("     rx_fec_uncorrectable_blocks: %" PRIu64 "\n",
                 fs_.counters.fec_uncorrectable_blocks);
      eth += Fmt("     link_down_events_phy: %" PRIu64 "\n", fs_.counters.link_downed);
    }
    s = WriteFile(root / "hosts" / h.name / "ethtool_S.txt", eth);
    if (!s.ok()) return s;

    // `ip -d addr`: `ip -d link`'s lines plus the addresses.
    s = WriteFile(root / "hosts" / h.name / "ip_addr.txt",
                  Fmt("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode "
                      "DEFAULT group default qlen 1000\n"
                      "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00 promiscuity 0\n"
                      "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu %d qdisc mq state UP mode "
                      "DEFAULT group default qlen 1000\n"
                      "    link/ether 52:54:00:%02x:%02x:%02x brd ff:ff:ff:ff:ff:ff promiscuity 0 "
                      "minmtu 68 maxmtu 9978\n"
                      "    inet %s/16 brd 10.255.255.255 scope global eth0\n"
                      "       valid_lft forever preferred_lft forever\n",
                      h.netdev_mtu, (h.index >> 16) & 255, (h.index >> 8) & 255, h.index & 255,
                      h.addr.c_str()));
    if (!s.ok()) return s;

    const int amtu = ActiveMtu(h.netdev_mtu);
    const std::string mac_gid = Fmt("fe80:0000:0000:0000:5054:00ff:fe%02x:%02x%02x",
                                    (h.index >> 16) & 255, (h.index >> 8) & 255, h.index & 255);
    std::string dev =
        Fmt("hca_id:\t%s\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t%s\n"
            "\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
            "\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t%d (%d)\n"
            "\t\t\tlink_layer:\t\tEthernet\n"
            "\t\t\tGID[  0]:\t\t%s, RoCE v1\n\t\t\tGID[  1]:\t\t%s, RoCE v2\n"
            "\t\t\tGID[  2]:\t\t::ffff:%s, RoCE v1\n\t\t\tGID[  3]:\t\t::ffff:%s, RoCE v2\n",
            device.c_str(), driver == "rxe" ? "0.0.0" : "20.43.4100", amtu, MtuEnum(amtu),
            mac_gid.c_str(), mac_gid.c_str(), h.addr.c_str(), h.addr.c_str());
    s = WriteFile(root / "hosts" / h.name / "ibv_devinfo.txt", dev);
    if (!s.ok()) return s;
    int a, b, cc, d;
    std::sscanf(h.addr.c_str(), "%d.%d.%d.%d", &a, &b, &cc, &d);
    const std::string v4gid = Fmt("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a, b, cc, d);
    std::string gids =
        "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n"
        "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n";
    gids += Fmt("%s\t1\t0\t%s\t\t\tv1\teth0\n", device.c_str(), mac_gid.c_str());
    gids += Fmt("%s\t1\t1\t%s\t\t\tv2\teth0\n", device.c_str(), mac_gid.c_str());
    gids += Fmt("%s\t1\t2\t%s\t%s  \tv1\teth0\n", device.c_str(), v4gid.c_str(), h.addr.c_str());
    gids += Fmt("%s\t1\t3\t%s\t%s  \tv2\teth0\n", device.c_str(), v4gid.c_str(), h.addr.c_str());
    gids += "n_gids_found=4\n";
    s = WriteFile(root / "hosts" / h.name / "show_gids.txt", gids);
    if (!s.ok()) return s;
  }

  // Fabric: topology, neighbours, switch counters, link events.
  std::string topo_json;
  google::protobuf::util::JsonPrintOptions jopt;
  jopt.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(sc.spec.topology(), &topo_json, jopt).ok()) {
    return Internal("WriteBundle: the topology spec does not print as JSON");
  }
  Status s = WriteFile(root / "topology.yaml", topo_json + "\n");
  if (!s.ok()) return s;
  std::string nb = "host,nic,switch,port\n";
  for (const HostOut& h : hosts) {
    nb += Fmt("%s,%s,%s,%d\n", h.name.c_str(), device.c_str(), h.leaf.c_str(), h.leaf_port);
  }
  s = WriteFile(root / "fabric" / "neighbors.csv", nb);
  if (!s.ok()) return s;
  std::string sw = "port,counter,value\n";
  for (const sim::PortReport& p : report.ports) {
    if (by_name.count(p.node)) continue;  // host ports: ethtool's business
    const sim::PortCounters& c = p.counters;
    if (c.port_xmit_discards)
      sw += Fmt("%s,port_xmit_discards,%" PRIu64 "\n", p.name.c_str(), c.port_xmit_discards);
    if (c.port_rcv_errors)
      sw += Fmt("%s,port_rcv_errors,%" PRIu64 "\n", p.name.c_str(), c.port_rcv_errors);
    if (c.mtu_discards) sw += Fmt("%s,mtu_discards,%" PRIu64 "\n", p.name.c_str(), c.mtu_discards);
    if (auto it = pfc_by_name.find(p.name); it != pfc_by_name.end()) {
      for (int prio = 0; prio < 8; ++prio) {
        if (it->second->rx_pause[prio])
          sw += Fmt("%s,rx_prio%d_pause,%" PRIu64 "\n", p.name.c_str(), prio,
                    it->second->rx_pause[prio]);
        if (it->second->tx_pause[prio])
          sw += Fmt("%s,tx_prio%d_pause,%" PRIu64 "\n", p.name.c_str(), prio,
                    it->second->tx_pause[prio]);
        if (it->second->watchdog_dropped[prio])
          sw += Fmt("%s,pfc_wd_prio%d_dropped,%" PRIu64 "\n", p.name.c_str(), prio,
                    it->second->watchdog_dropped[prio]);
      }
    }
  }
  // A fault's counters on the one link it targets (a switch counts them per
  // port; the fault model keeps one total for both directions, so they are
  // filed under the link's name). Faults over several links have no
  // per-port split and are left out.
  for (const sim::FaultStats& f : report.fault_stats) {
    auto links = topo.SelectLinks(FaultLinkSelector(f.target));
    if (!links.ok() || links->size() != 1) continue;
    const topo::Link& link = topo.link((*links)[0]);
    if (by_name.count(topo.node(link.a).name) || by_name.count(topo.node(link.b).name)) continue;
    const faults::Counters& c = f.counters;
    const std::pair<const char*, uint64_t> rows[] = {
        {"symbol_error", c.symbol_error},
        {"fec_corrected_blocks", c.fec_corrected_blocks},
        {"fec_uncorrectable_blocks", c.fec_uncorrectable_blocks},
        {"fec_symbol_errors", c.fec_symbol_errors},
        {"link_downed", c.link_downed},
        {"port_xmit_discards", c.port_xmit_discards},
        {"port_rcv_errors", c.port_rcv_errors}};
    for (const auto& [k, v] : rows) {
      if (v) sw += Fmt("%s,%s,%" PRIu64 "\n", link.name.c_str(), k, v);
    }
  }
  s = WriteFile(root / "fabric" / "switch_counters.csv", sw);
  if (!s.ok()) return s;
  return WriteFile(root / "fabric" / "link_events.txt",
                   link_events.empty() ? "# no link state change\n" : link_events);
}

}  // namespace fathom::replay
