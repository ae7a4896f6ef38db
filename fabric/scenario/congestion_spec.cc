#include "fabric/scenario/congestion_spec.h"

#include <string>
#include <tuple>

namespace fathom::sim {
namespace {

// RED defaults when a class gives no thresholds: the DCQCN paper's
// (Zhu et al., SIGCOMM 2015, section 5: Kmin = 5 KB, Kmax = 200 KB,
// Pmax = 1%).
constexpr int64_t kDefaultKminBytes = 5 * 1024;
constexpr int64_t kDefaultKmaxBytes = 200 * 1024;
constexpr double kDefaultPmax = 0.01;

Status Range(const config::SourceMap& map, const std::string& path, int64_t v, int64_t lo,
             int64_t hi) {
  if (v < lo || v > hi) {
    return map.Error(path, std::to_string(v) + " is out of range " + std::to_string(lo) + ".." +
                               std::to_string(hi));
  }
  return Status::Ok();
}

// The fastest host link's rate in Mb/s: no DCQCN rate may exceed it.
int64_t HostLineRateMbps(const topo::Topology& topo) {
  int64_t best = 0;
  for (int32_t h : topo.hosts()) {
    if (topo.PortCount(h) == 0) continue;
    const int64_t mbps = topo.link(topo.LinkAt(h, 0)).rate.bps() / 1000000;
    if (mbps > best) best = mbps;
  }
  return best;
}

}  // namespace

Status ValidateCongestion(const proto::Scenario& s, const topo::Topology& topo,
                          const config::SourceMap& m) {
  if (s.network().has_ecn()) {
    const proto::EcnSpec& e = s.network().ecn();
    if (e.classes().empty() && (!e.has_enabled() || e.enabled())) {
      return m.Error("network.ecn.classes",
                     "ECN is on but no class is marked: list at least one priority with "
                     "kmin_bytes, kmax_bytes and pmax");
    }
    bool seen[8] = {};
    for (int i = 0; i < e.classes_size(); ++i) {
      const std::string p = "network.ecn.classes[" + std::to_string(i) + "]";
      const proto::EcnClassSpec& c = e.classes(i);
      if (!c.has_priority()) return m.Error(p + ".priority", "missing: a traffic class 0..7");
      if (c.priority() < 0 || c.priority() > 7) {
        return m.Error(p + ".priority", "unknown priority " + std::to_string(c.priority()) +
                                            " (traffic classes are 0..7)");
      }
      if (seen[c.priority()]) {
        return m.Error(p + ".priority",
                       "priority " + std::to_string(c.priority()) + " is listed twice");
      }
      seen[c.priority()] = true;
      const int64_t kmin = c.has_kmin_bytes() ? c.kmin_bytes() : kDefaultKminBytes;
      const int64_t kmax = c.has_kmax_bytes() ? c.kmax_bytes() : kDefaultKmaxBytes;
      if (kmin < 0) return m.Error(p + ".kmin_bytes", std::to_string(kmin) + " is negative");
      if (kmin > kmax) {
        return m.Error(
            c.has_kmin_bytes() ? p + ".kmin_bytes" : p + ".kmax_bytes",
            "kmin_bytes " + std::to_string(kmin) + " is above kmax_bytes " + std::to_string(kmax));
      }
      if (kmax > (int64_t{1} << 31)) {
        return m.Error(p + ".kmax_bytes", std::to_string(kmax) + " is above 2 GiB");
      }
      if (c.has_pmax() && !(c.pmax() > 0 && c.pmax() <= 1)) {
        return m.Error(p + ".pmax", std::to_string(c.pmax()) + " is not in (0, 1]");
      }
    }
  }
  if (!s.transport().has_dcqcn()) return Status::Ok();
  const proto::DcqcnSpec& d = s.transport().dcqcn();
  const std::string t = "transport.dcqcn.";
  const int64_t line = HostLineRateMbps(topo);
  for (const auto& [field, has, v] : {
           std::tuple{"rpg_ai_rate_mbps", d.has_rpg_ai_rate_mbps(), d.rpg_ai_rate_mbps()},
           std::tuple{"rpg_hai_rate_mbps", d.has_rpg_hai_rate_mbps(), d.rpg_hai_rate_mbps()},
           std::tuple{"rpg_min_rate_mbps", d.has_rpg_min_rate_mbps(), d.rpg_min_rate_mbps()},
           std::tuple{"rpg_max_rate_mbps", d.has_rpg_max_rate_mbps(), d.rpg_max_rate_mbps()},
           std::tuple{"rate_to_set_on_first_cnp_mbps", d.has_rate_to_set_on_first_cnp_mbps(),
                      d.rate_to_set_on_first_cnp_mbps()},
       }) {
    if (!has) continue;
    const int64_t lo = std::string(field) == "rpg_min_rate_mbps" ? 1 : 0;
    if (v < lo) {
      return m.Error(t + field, std::to_string(v) + " Mb/s must be >= " + std::to_string(lo));
    }
    if (line > 0 && v > line) {
      return m.Error(t + field, std::to_string(v) + " Mb/s is above the hosts' line rate (" +
                                    std::to_string(line) + " Mb/s)");
    }
  }
  if (d.has_rpg_time_reset_us()) {
    FATHOM_RETURN_IF_ERROR(Range(m, t + "rpg_time_reset_us", d.rpg_time_reset_us(), 1, 1 << 30));
  }
  if (d.has_rpg_byte_reset_bytes()) {
    FATHOM_RETURN_IF_ERROR(
        Range(m, t + "rpg_byte_reset_bytes", d.rpg_byte_reset_bytes(), 1, int64_t{1} << 31));
  }
  if (d.has_rpg_threshold()) {
    FATHOM_RETURN_IF_ERROR(Range(m, t + "rpg_threshold", d.rpg_threshold(), 1, 31));
  }
  if (d.has_rpg_gd()) FATHOM_RETURN_IF_ERROR(Range(m, t + "rpg_gd", d.rpg_gd(), 1, 15));
  if (d.has_rpg_min_dec_fac_percent()) {
    FATHOM_RETURN_IF_ERROR(
        Range(m, t + "rpg_min_dec_fac_percent", d.rpg_min_dec_fac_percent(), 0, 100));
  }
  if (d.has_dce_tcp_g()) FATHOM_RETURN_IF_ERROR(Range(m, t + "dce_tcp_g", d.dce_tcp_g(), 0, 1023));
  if (d.has_dce_tcp_rtt_us()) {
    FATHOM_RETURN_IF_ERROR(Range(m, t + "dce_tcp_rtt_us", d.dce_tcp_rtt_us(), 1, 131071));
  }
  if (d.has_initial_alpha_value()) {
    FATHOM_RETURN_IF_ERROR(Range(m, t + "initial_alpha_value", d.initial_alpha_value(), 0, 1023));
  }
  if (d.has_rate_reduce_monitor_period_us()) {
    FATHOM_RETURN_IF_ERROR(Range(m, t + "rate_reduce_monitor_period_us",
                                 d.rate_reduce_monitor_period_us(), 1, 1 << 30));
  }
  if (d.has_min_time_between_cnps_us()) {
    FATHOM_RETURN_IF_ERROR(
        Range(m, t + "min_time_between_cnps_us", d.min_time_between_cnps_us(), 0, 4095));
  }
  if (d.has_cnp_dscp()) FATHOM_RETURN_IF_ERROR(Range(m, t + "cnp_dscp", d.cnp_dscp(), 0, 63));
  if (d.has_cnp_802p_prio()) {
    FATHOM_RETURN_IF_ERROR(Range(m, t + "cnp_802p_prio", d.cnp_802p_prio(), 0, 7));
  }
  return Status::Ok();
}

void ApplyCongestion(const proto::Scenario& s, NetworkConfig* nc) {
  if (s.network().has_ecn()) {
    const proto::EcnSpec& e = s.network().ecn();
    nc->ecn.enabled = !e.has_enabled() || e.enabled();
    for (const proto::EcnClassSpec& c : e.classes()) {
      EcnClassConfig& k = nc->ecn.classes[static_cast<size_t>(c.priority() & 7)];
      k.enabled = true;
      k.kmin_bytes = c.has_kmin_bytes() ? c.kmin_bytes() : kDefaultKminBytes;
      k.kmax_bytes = c.has_kmax_bytes() ? c.kmax_bytes() : kDefaultKmaxBytes;
      k.pmax = c.has_pmax() ? c.pmax() : kDefaultPmax;
    }
  }
  if (!s.transport().has_dcqcn()) return;
  const proto::DcqcnSpec& d = s.transport().dcqcn();
  DcqcnConfig& c = nc->dcqcn;
  c.enabled = !d.has_enabled() || d.enabled();
  if (d.has_np_enabled()) c.np_enabled = d.np_enabled();
  if (d.has_rp_enabled()) c.rp_enabled = d.rp_enabled();
  if (d.has_rpg_time_reset_us()) c.rpg_time_reset_us = d.rpg_time_reset_us();
  if (d.has_rpg_byte_reset_bytes()) c.rpg_byte_reset_bytes = d.rpg_byte_reset_bytes();
  if (d.has_rpg_threshold()) c.rpg_threshold = d.rpg_threshold();
  if (d.has_rpg_ai_rate_mbps()) c.rpg_ai_rate_mbps = d.rpg_ai_rate_mbps();
  if (d.has_rpg_hai_rate_mbps()) c.rpg_hai_rate_mbps = d.rpg_hai_rate_mbps();
  if (d.has_rpg_gd()) c.rpg_gd = d.rpg_gd();
  if (d.has_rpg_min_dec_fac_percent()) c.rpg_min_dec_fac_percent = d.rpg_min_dec_fac_percent();
  if (d.has_rpg_min_rate_mbps()) c.rpg_min_rate_mbps = d.rpg_min_rate_mbps();
  if (d.has_rpg_max_rate_mbps()) c.rpg_max_rate_mbps = d.rpg_max_rate_mbps();
  if (d.has_rate_to_set_on_first_cnp_mbps()) {
    c.rate_to_set_on_first_cnp_mbps = d.rate_to_set_on_first_cnp_mbps();
  }
  if (d.has_dce_tcp_g()) c.dce_tcp_g = d.dce_tcp_g();
  if (d.has_dce_tcp_rtt_us()) c.dce_tcp_rtt_us = d.dce_tcp_rtt_us();
  if (d.has_initial_alpha_value()) c.initial_alpha_value = d.initial_alpha_value();
  if (d.has_rate_reduce_monitor_period_us()) {
    c.rate_reduce_monitor_period_us = d.rate_reduce_monitor_period_us();
  }
  if (d.has_clamp_tgt_rate()) c.clamp_tgt_rate = d.clamp_tgt_rate();
  if (d.has_clamp_tgt_rate_after_time_inc()) {
    c.clamp_tgt_rate_after_time_inc = d.clamp_tgt_rate_after_time_inc();
  }
  if (d.has_min_time_between_cnps_us()) c.min_time_between_cnps_us = d.min_time_between_cnps_us();
  if (d.has_cnp_dscp()) c.cnp_dscp = d.cnp_dscp();
  if (d.has_cnp_802p_prio()) c.cnp_802p_prio = d.cnp_802p_prio();
}

}  // namespace fathom::sim
