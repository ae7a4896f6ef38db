// MakeCorpus: seeded fault scenarios -> simulator runs -> evidence bundles
// with hidden ground truth (corpus.h).
//
// Every scenario uses one transport so that nothing but the fault differs:
// ib_timeout 14 (perftest's and rc_pingpong's default, ROCEV2.md) and
// retry_cnt 7 give a retry budget of 8 x 67.1 ms = 537 ms (CASES.md, "How
// long things take"), SENDs (so a receiver that is not ready meets RNR NAKs,
// rnr_retry 7 / min_rnr_timer 12 as NCCL leaves them), traffic class 104
// (DSCP 26, priority 3: RoCE's lossless class in the common deployment,
// CASES.md 16), which only the PFC storm's network makes lossless.
#include "replay/corpus.h"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/rng.h"
#include "fabric/scenario/scenario.h"
#include "replay/bundle.h"
#include "topologies/builders.h"

namespace fathom::replay {
namespace {
namespace fs = std::filesystem;

std::string Fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), f, args...);
  return buf;
}

std::string Num(double v) { return Fmt("%.6g", v); }

}  // namespace

const std::vector<std::string>& CorpusKinds() {
  static const std::vector<std::string> kinds = {
      "mtu_mismatch", "link_down", "link_flap",  "lossy_link",     "fec_past_limit",
      "pfc_storm",    "rnr",       "congestion", "link_down_short"};
  return kinds;
}

CorpusTruth CorpusScenario(const std::string& preset, uint64_t seed, int index) {
  Rng rng(seed, static_cast<uint64_t>(index) + 1);
  const auto topo = topo::BuildPreset(preset);
  std::vector<std::string> hosts, host_links;
  int servers = 1, gpus = 1;
  if (topo.ok()) {
    servers = std::max(1, topo->servers());
    for (int32_t h : topo->hosts()) {
      hosts.push_back(topo->node(h).name);
      host_links.push_back(topo->link(topo->LinksOf(h)[0]).name);
    }
    gpus = std::max<int>(1, static_cast<int>(hosts.size()) / servers);
  }
  const int n = static_cast<int>(hosts.size());
  const std::string& kind_name = CorpusKinds()[index % CorpusKinds().size()];
  CorpusTruth t;
  t.kind = kind_name == "link_down_short" ? "link_down" : kind_name;
  const int victim = n > 0 ? static_cast<int>(rng.Below(n)) : 0;
  const std::string host = n > 0 ? hosts[victim] : "h0";
  const std::string link = n > 0 ? host_links[victim] : "h0-leaf0";
  const double start_us = 50 + rng.Uniform() * 100000;  // within the first 100 ms
  double end_us = 1500000;
  std::string fault, network, extra_flows;
  if (kind_name == "mtu_mismatch") {
    // A NIC reset to 1500 while the QPs use 4096 (CASES.md 4).
    t.target = link;
    t.params["mtu"] = "1500";
    fault = Fmt("  - {kind: mtu, link: %s, mtu_bytes: 1500}\n", link.c_str());
  } else if (kind_name == "link_down" || kind_name == "link_down_short") {
    const bool longer = kind_name == "link_down";
    // Longer than the 537 ms retry budget, or far shorter (CASES.md 9).
    const double dur_us = longer ? 800000 + rng.Uniform() * 700000 : 1000 + rng.Uniform() * 99000;
    t.target = link;
    t.params["at_s"] = Num(start_us / 1e6);
    t.params["duration_s"] = Num(dur_us / 1e6);
    fault = Fmt("  - {kind: link_down, link: %s, start_us: %.1f, duration_us: %.1f}\n",
                link.c_str(), start_us, dur_us);
    end_us = std::max(end_us, start_us + dur_us + 700000);
  } else if (kind_name == "link_flap") {
    const double dur_us = 2000 + rng.Uniform() * 18000;
    const double period_us = 100000 + rng.Uniform() * 200000;
    t.target = link;
    t.params["at_s"] = Num(start_us / 1e6);
    t.params["duration_s"] = Num(dur_us / 1e6);
    t.params["period_s"] = Num(period_us / 1e6);
    fault =
        Fmt("  - {kind: link_flap, link: %s, start_us: %.1f, duration_us: %.1f, period_us: %.1f}\n",
            link.c_str(), start_us, dur_us, period_us);
  } else if (kind_name == "lossy_link") {
    const double rate = 0.005 + rng.Uniform() * 0.045;
    t.target = link;
    t.params["rate"] = Num(rate);
    fault = Fmt("  - {kind: loss, link: %s, rate: %.5f}\n", link.c_str(), rate);
  } else if (kind_name == "fec_past_limit") {
    // KP4 past its limit (CASES.md 18; scenarios/faults/fec_kp4_past_limit.yaml).
    const double ber = 3e-3 + rng.Uniform() * 3e-3;
    t.target = link;
    t.params["pre_fec_ber"] = Num(ber);
    fault = Fmt("  - {kind: fec, link: %s, fec_mode: kp4, pre_fec_ber: %.6g}\n", link.c_str(), ber);
  } else if (kind_name == "pfc_storm") {
    // scenarios/faults/pfc_storm.yaml's class and SONiC watchdog defaults.
    const double dur_us = 100000 + rng.Uniform() * 300000;
    t.target = host;
    t.params["at_s"] = Num(start_us / 1e6);
    t.params["duration_s"] = Num(dur_us / 1e6);
    t.params["priority"] = "3";
    fault = Fmt("  - {kind: pfc_storm, host: %s, priority: 3, start_us: %.1f, duration_us: %.1f}\n",
                host.c_str(), start_us, dur_us);
    network =
        "network:\n  qos:\n    classes:\n      - {priority: 3, lossless: true, xoff_bytes: 65536, "
        "xon_bytes: 32768}\n    pfc_watchdog: {action: drop}\n";
  } else if (kind_name == "rnr") {
    const double dur_us = 5000 + rng.Uniform() * 45000;
    t.target = host;
    t.params["at_s"] = Num(start_us / 1e6);
    t.params["duration_s"] = Num(dur_us / 1e6);
    extra_flows = Fmt("  receiver_not_ready:\n    - {host: %s, from_us: %.1f, to_us: %.1f}\n",
                      host.c_str(), start_us, start_us + dur_us);
  } else {  // congestion: an incast of 8 other hosts onto one
    t.target = host;
    t.params["senders"] = "8";
    std::string flows;
    for (int k = 1, added = 0; added < 8 && k < n; ++k) {
      const int s = (victim + k * std::max(1, n / 9)) % n;
      if (s == victim) continue;
      flows += Fmt("    - {src: %s, dst: %s, bytes: 4194304}\n", hosts[s].c_str(), host.c_str());
      ++added;
    }
    extra_flows = "INCAST" + flows;
  }
  std::string flows;
  for (int i = 0; i < n; ++i) {
    const int s = i / gpus, g = i % gpus;
    const int peer = ((s + 1) % servers) * gpus + g;
    flows += Fmt("    - {src: %s, dst: %s}\n", hosts[i].c_str(), hosts[peer].c_str());
  }
  std::string receive;
  if (extra_flows.rfind("INCAST", 0) == 0) {
    flows += extra_flows.substr(6);
  } else {
    receive = extra_flows;
  }
  std::string y;
  y += Fmt("name: corpus-%s-%03d\nseed: %" PRIu64 "\nend_time_us: %.0f\n", preset.c_str(), index,
           seed * 1000 + static_cast<uint64_t>(index), end_us);
  y += "topology: {preset: " + preset + "}\n";
  y += "transport:\n  ib_timeout: 14\n  retry_cnt: 7\n  opcode: send\n  traffic_class: 104\n"
       "  message_bytes: 262144\n";
  y += network;
  // The collective is running when the fault strikes: the flows start 10 us
  // after it (a 1 MiB flow takes ~21 us at 400 Gb/s, so flows that started
  // earlier would be done before any fault).
  y += Fmt("workload:\n  pattern: flows\n  flow_bytes: 1048576\n  start_us: %.1f\n  flows:\n",
           start_us + 10) +
       flows + receive;
  if (!fault.empty()) y += "faults:\n" + fault;
  t.scenario_yaml = y;
  return t;
}

StatusOr<std::vector<CorpusTruth>> MakeCorpus(const CorpusOptions& opt) {
  std::vector<CorpusTruth> out;
  std::error_code ec;
  fs::create_directories(opt.dir, ec);
  if (ec) return IoError("MakeCorpus: cannot create " + opt.dir + ": " + ec.message());
  for (int i = 0; i < opt.count; ++i) {
    CorpusTruth t = CorpusScenario(opt.preset, opt.seed, i);
    const std::string name = Fmt("corpus-%s-%03d", opt.preset.c_str(), i);
    auto sc = sim::LoadScenarioString(t.scenario_yaml, name + ".yaml");
    if (!sc.ok()) return sc.status().WithContext("MakeCorpus " + name);
    auto rep = sim::RunScenario(*sc, {});
    if (!rep.ok()) return rep.status().WithContext("MakeCorpus " + name);
    const std::string dir = (fs::path(opt.dir) / Fmt("%03d", i)).string();
    fs::remove_all(dir, ec);
    Status s = WriteBundle(*sc, *rep, dir);
    if (!s.ok()) return s;
    nlohmann::json j;
    j["kind"] = t.kind;
    j["target"] = t.target;
    j["params"] = t.params;
    j["scenario"] = t.scenario_yaml;
    j["flows_failed"] = rep->flows_failed;
    j["flows_stalled"] = rep->flows_stalled;
    std::ofstream f(fs::path(dir) / ".truth.json");
    f << j.dump(2) << "\n";
    f.close();
    if (!f) return IoError("MakeCorpus: cannot write " + dir + "/.truth.json");
    if (opt.progress) {
      std::fprintf(stderr, "%s: %s on %s: %d failed, %d stalled, %.1f s wall\n", dir.c_str(),
                   t.kind.c_str(), t.target.c_str(), rep->flows_failed, rep->flows_stalled,
                   rep->wall_s);
    }
    out.push_back(std::move(t));
  }
  return out;
}

StatusOr<CorpusTruth> ReadCorpusTruth(const std::string& bundle_dir) {
  const std::string p = (fs::path(bundle_dir) / ".truth.json").string();
  std::ifstream f(p);
  if (!f) return NotFound(p + ": no such file");
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(p + ": not a truth file");
  CorpusTruth t;
  t.kind = j.value("kind", "");
  t.target = j.value("target", "");
  if (j.contains("params") && j["params"].is_object()) {
    for (const auto& [k, v] : j["params"].items()) {
      if (v.is_string()) t.params[k] = v.get<std::string>();
    }
  }
  t.scenario_yaml = j.value("scenario", "");
  return t;
}

}  // namespace fathom::replay
