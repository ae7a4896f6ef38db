#include "replay/report.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace fathom::replay {
namespace {

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::string FormatText(const ReplayResult& r) {
  std::ostringstream o;
  o << "evidence   " << r.evidence.root << "\n";
  if (r.evidence.sources.empty()) o << "  (no source report)\n";
  for (const auto& s : r.evidence.sources) {
    o << "  " << UseName(s.use) << "  " << s.path << "  [" << s.kind
      << (s.host.empty() ? "" : ", " + s.host) << "]";
    if (s.lines_recognised || s.lines_ignored) {
      o << "  " << s.lines_recognised << " lines recognised, " << s.lines_ignored << " ignored";
    }
    if (!s.reason.empty()) o << "  — " << s.reason;
    o << "\n";
  }
  for (const auto& n : r.notes) o << "  note: " << n << "\n";
  o << "symptom\n";
  if (r.symptoms.empty()) o << "  none\n";
  for (const auto& s : r.symptoms) o << "  " << s << "\n";
  if (!r.causes.empty()) {
    o << "causes     " << r.hypotheses_formed << " hypotheses formed, " << r.causes.size()
      << " simulated (the best by the evidence alone), " << r.simulations
      << " simulations with the ablations\n";
  }
  int rank = 0;
  for (const auto& c : r.causes) {
    ++rank;
    o << "  #" << rank << " " << c.hypothesis.kind << " on " << c.hypothesis.target << ": "
      << c.hypothesis.summary << "\n";
    o << "     score " << Fmt("%.2f", c.score) << ", prior " << Fmt("%.2f", c.prior) << ", "
      << (!c.ran         ? "not run: " + c.error
          : c.reproduces ? std::string("reproduces the symptom")
                         : std::string("does not reproduce"))
      << ", simulated in " << Fmt("%.2f", c.sim_wall_s) << " s\n";
    for (const auto& [k, v] : c.hypothesis.params) o << "     " << k << " = " << v << "\n";
    for (const auto& m : c.matches) {
      o << "     match " << Fmt("%.2f", m.score) << " (x" << Fmt("%g", m.weight) << ") " << m.what
        << ": evidence " << m.expected << " | simulated " << m.got << "\n";
    }
    for (const auto& s : c.evidence_for) o << "     + " << s << "\n";
    for (const auto& s : c.evidence_against) o << "     - " << s << "\n";
    for (const auto& s : c.ablation) o << "     ablation: " << s << "\n";
    if (!c.scenario_path.empty()) o << "     scenario: " << c.scenario_path << "\n";
  }
  if (!r.not_simulated.empty()) {
    o << "not simulated (ranked below the top " << r.causes.size() << " by the evidence):\n";
    for (const auto& s : r.not_simulated) o << "  " << s << "\n";
  }
  if (!r.suspects.empty()) {
    o << "suspects  ";
    for (const auto& [name, w] : r.suspects) o << " " << name << " (" << Fmt("%.2f", w) << ")";
    o << "\n";
  }
  o << "verdict    " << r.verdict << "\n";
  if (!r.scenario_path.empty())
    o << "scenario   " << r.scenario_path << " (run it: fathom sim " << r.scenario_path << ")\n";
  o << "wall       " << Fmt("%.2f", r.wall_s) << " s\n";
  return o.str();
}

std::string FormatJson(const ReplayResult& r) {
  nlohmann::json j;
  j["evidence"] = r.evidence.root;
  auto& sources = j["sources"] = nlohmann::json::array();
  for (const auto& s : r.evidence.sources) {
    sources.push_back({{"path", s.path},
                       {"kind", s.kind},
                       {"host", s.host},
                       {"use", UseName(s.use)},
                       {"reason", s.reason},
                       {"lines_recognised", s.lines_recognised},
                       {"lines_ignored", s.lines_ignored}});
  }
  j["notes"] = r.notes;
  j["symptoms"] = r.symptoms;
  j["found"] = r.found;
  j["verdict"] = r.verdict;
  j["scenario"] = r.scenario_path;
  j["hypotheses_formed"] = r.hypotheses_formed;
  j["simulations"] = r.simulations;
  j["not_simulated"] = r.not_simulated;
  auto& causes = j["causes"] = nlohmann::json::array();
  for (const auto& c : r.causes) {
    nlohmann::json m = nlohmann::json::array();
    for (const auto& x : c.matches) {
      m.push_back({{"what", x.what},
                   {"expected", x.expected},
                   {"got", x.got},
                   {"weight", x.weight},
                   {"score", x.score}});
    }
    causes.push_back({{"kind", c.hypothesis.kind},
                      {"target", c.hypothesis.target},
                      {"summary", c.hypothesis.summary},
                      {"params", c.hypothesis.params},
                      {"ran", c.ran},
                      {"error", c.error},
                      {"reproduces", c.reproduces},
                      {"score", c.score},
                      {"prior", c.prior},
                      {"matches", m},
                      {"evidence_for", c.evidence_for},
                      {"evidence_against", c.evidence_against},
                      {"ablation", c.ablation},
                      {"ablation_confirms", c.ablation_confirms},
                      {"sim_wall_s", c.sim_wall_s},
                      {"scenario_path", c.scenario_path},
                      {"scenario_yaml", c.hypothesis.scenario_yaml}});
  }
  auto& tl = j["timeline"] = nlohmann::json::array();
  for (const auto& e : r.timeline) {
    tl.push_back({{"host", e.host},
                  {"rank", e.rank},
                  {"time_s", e.time_s},
                  {"what", e.what},
                  {"error", e.error}});
  }
  j["suspects"] = r.suspects;
  j["wall_s"] = r.wall_s;
  return j.dump(2) + "\n";
}

}  // namespace fathom::replay
