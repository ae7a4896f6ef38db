#include "fabric/parallel/pfc_cross.h"

#include <array>
#include <map>
#include <sstream>
#include <utility>

#include "base/pod_bytes.h"
#include "fabric/sim/port.h"

namespace fathom::parallel {
namespace {

alignas(sim::QpFlow) const sim::QpFlow kDeliveredMacControl{};

void AddCounters(sim::PfcCounters* a, const sim::PfcCounters& b) {
  for (int c = 0; c < sim::kPriorities; ++c) {
    const size_t i = static_cast<size_t>(c);
    a->rx_pause[i] += b.rx_pause[i];
    a->tx_pause[i] += b.tx_pause[i];
    a->rx_pause_duration_ps[i] += b.rx_pause_duration_ps[i];
    a->tx_pause_duration_ps[i] += b.tx_pause_duration_ps[i];
    a->headroom_drops[i] += b.headroom_drops[i];
    a->watchdog_dropped[i] += b.watchdog_dropped[i];
    a->watchdog_forwarded[i] += b.watchdog_forwarded[i];
  }
}

// The summary's first line (PfcField::Summary): "pfc ... by tier: NAME
// TX/RX ...", split into its tiers; the rest of the summary after it.
constexpr char kTierHead[] = "pfc        PAUSE frames sent / received by tier:";
bool SplitTierLine(const std::string& summary,
                   std::vector<std::pair<std::string, std::array<uint64_t, 2>>>* out,
                   std::string* rest) {
  if (summary.rfind(kTierHead, 0) != 0) return false;
  const size_t eol = summary.find('\n');
  const std::string line = summary.substr(sizeof(kTierHead) - 1, eol - (sizeof(kTierHead) - 1));
  *rest = eol == std::string::npos ? "" : summary.substr(eol + 1);
  std::istringstream in(line);
  std::string name, counts;
  while (in >> name >> counts) {
    const size_t slash = counts.find('/');
    if (slash == std::string::npos) return false;
    out->emplace_back();
    out->back().first = name;
    out->back().second[0] = std::stoull(counts.substr(0, slash));
    out->back().second[1] = std::stoull(counts.substr(slash + 1));
  }
  return true;
}

}  // namespace

const sim::QpFlow* MacControlFlow() { return &kDeliveredMacControl; }

bool UsesPfc(const sim::Network& net) { return net.qos().lossless_mask() != 0; }

uint64_t SettleDigest(const std::vector<sim::Port*>& ports) {
  uint64_t sum = 0;
  for (const sim::Port* p : ports) sum += p->settle_digest();
  return sum;
}

uint64_t SettleEvents(const std::vector<sim::Port*>& ports) {
  uint64_t n = 0;
  for (const sim::Port* p : ports) n += p->settle_events();
  return n;
}

std::string EncodePfcReport(const sim::RunReport& r) {
  std::string out;
  AppendPod(&out, static_cast<uint64_t>(r.port_pfc.size()));
  for (const auto& [name, c] : r.port_pfc) {
    AppendPod(&out, static_cast<uint64_t>(name.size()));
    out += name;
    AppendPod(&out, c);
  }
  AppendPod(&out, static_cast<uint64_t>(r.pfc_field_summary.size()));
  out += r.pfc_field_summary;
  return out;
}

bool DecodePfcReport(const std::string& bytes, sim::RunReport* r) {
  const char* at = bytes.data();
  const char* end = at + bytes.size();
  uint64_t n = 0;
  if (!ReadPod(at, end, &n) || n > (uint64_t{1} << 26)) return false;
  r->port_pfc.clear();
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len = 0;
    if (!ReadPod(at, end, &len) || static_cast<uint64_t>(end - at) < len) return false;
    std::string name(at, len);
    at += len;
    sim::PfcCounters c;
    if (!ReadPod(at, end, &c)) return false;
    r->port_pfc.emplace_back(std::move(name), c);
  }
  uint64_t len = 0;
  if (!ReadPod(at, end, &len) || static_cast<uint64_t>(end - at) != len) return false;
  r->pfc_field_summary.assign(at, len);
  return true;
}

void MergePfcReport(sim::RunReport* a, const sim::RunReport& b) {
  if (!b.port_pfc.empty()) {
    // By name, in the order of the report's ports (RunScenario's order).
    std::map<std::string, sim::PfcCounters> by;
    for (const auto& [name, c] : a->port_pfc) by[name] = c;
    for (const auto& [name, c] : b.port_pfc) AddCounters(&by[name], c);
    a->port_pfc.clear();
    for (const sim::PortReport& p : a->ports) {
      auto it = by.find(p.name);
      if (it != by.end()) a->port_pfc.emplace_back(p.name, it->second);
    }
  }
  std::vector<std::pair<std::string, std::array<uint64_t, 2>>> ta, tb;
  std::string rest_a, rest_b;
  if (!SplitTierLine(a->pfc_field_summary, &ta, &rest_a) ||
      !SplitTierLine(b.pfc_field_summary, &tb, &rest_b)) {
    return;
  }
  for (const auto& [name, v] : tb) {
    bool found = false;
    for (auto& [an, av] : ta) {
      if (an != name) continue;
      av[0] += v[0];
      av[1] += v[1];
      found = true;
    }
    if (!found) {
      ta.emplace_back();
      ta.back().first = name;
      ta.back().second[0] = v[0];
      ta.back().second[1] = v[1];
    }
  }
  std::string line = kTierHead;
  for (const auto& [name, v] : ta) {
    line += " " + name + " " + std::to_string(v[0]) + "/" + std::to_string(v[1]);
  }
  a->pfc_field_summary = line + "\n" + rest_a;
}

}  // namespace fathom::parallel
