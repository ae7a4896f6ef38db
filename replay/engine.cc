#include "replay/engine.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/temp_dir.h"
#include "fabric/scenario/scenario.h"
#include "replay/hypotheses.h"
#include "replay/signature.h"

namespace fathom::replay {
namespace {

using Clock = std::chrono::steady_clock;

struct Job {
  std::string yaml;
  std::string name;
  double offset_s = 0;
  bool swallowed = false;
};

struct Outcome {
  bool ok = false;
  std::string error;
  Signature sig;
  double wall_s = 0;
};

Outcome RunOne(const Job& job) {
  Outcome o;
  auto start = Clock::now();
  auto loaded = sim::LoadScenarioString(job.yaml, job.name);
  if (!loaded.ok()) {
    o.error = loaded.status().message();
    return o;
  }
  auto report = sim::RunScenario(*loaded, sim::RunOptions{});
  if (!report.ok()) {
    o.error = report.status().message();
    return o;
  }
  o.sig = RunSignature(*report, loaded->topology, job.offset_s, job.swallowed);
  o.ok = true;
  o.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return o;
}

// Runs the jobs, `jobs` at a time in forked workers (each writes its
// signature as JSON to a file the parent reads back), or in this process.
std::vector<Outcome> RunAll(const std::vector<Job>& all, int jobs) {
  std::vector<Outcome> out(all.size());
  if (jobs <= 1 || all.size() <= 1) {
    for (size_t i = 0; i < all.size(); ++i) out[i] = RunOne(all[i]);
    return out;
  }
  // The workers' result files, under $TMPDIR (or /tmp); removed below.
  const StatusOr<std::string> tmp = MakeTempDir("fathom-replay");
  if (!tmp.ok()) {
    for (size_t i = 0; i < all.size(); ++i) out[i] = RunOne(all[i]);
    return out;
  }
  const std::string dir = tmp.value();
  std::fflush(nullptr);
  std::map<pid_t, size_t> running;
  size_t next = 0;
  auto path_of = [&](size_t i) { return dir + "/" + std::to_string(i) + ".json"; };
  while (next < all.size() || !running.empty()) {
    while (next < all.size() && static_cast<int>(running.size()) < jobs) {
      pid_t pid = fork();
      if (pid == 0) {
        Outcome o = RunOne(all[next]);
        std::ofstream f(path_of(next));
        if (o.ok) {
          f << "ok " << o.wall_s << "\n" << SignatureToJson(o.sig);
        } else {
          f << "error\n" << o.error;
        }
        f.close();
        _exit(0);
      }
      if (pid < 0) {  // no process: run it here
        out[next] = RunOne(all[next]);
        ++next;
        continue;
      }
      running[pid] = next++;
    }
    if (running.empty()) continue;
    int status = 0;
    pid_t done = waitpid(-1, &status, 0);
    if (done < 0) break;
    auto it = running.find(done);
    if (it == running.end()) continue;
    size_t i = it->second;
    running.erase(it);
    std::ifstream f(path_of(i));
    std::string head;
    std::getline(f, head);
    std::stringstream rest;
    rest << f.rdbuf();
    Outcome& o = out[i];
    if (head.rfind("ok ", 0) == 0 && SignatureFromJson(rest.str(), &o.sig)) {
      o.ok = true;
      o.wall_s = std::atof(head.c_str() + 3);
    } else {
      o.error = head == "error" ? rest.str()
                                : "the worker process ended without a result (status " +
                                      std::to_string(status) + ")";
    }
    std::filesystem::remove(path_of(i));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return out;
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string JoinSet(const std::set<std::string>& s, size_t limit = 8) {
  std::string out;
  size_t n = 0;
  for (const auto& x : s) {
    if (n == limit) {
      out += " +" + std::to_string(s.size() - limit) + " more";
      break;
    }
    out += (n++ ? " " : "") + x;
  }
  return out;
}

std::vector<std::string> Symptoms(const Signature& s) {
  std::vector<std::string> out;
  if (s.HasErrors()) {
    std::string line = std::to_string(s.error_hosts.size()) + " host(s) in failed connections (" +
                       JoinSet(s.error_hosts) + "), status " +
                       (s.statuses.empty() ? std::string("unknown") : JoinSet(s.statuses));
    if (s.first_error_s >= 0) line += ", first at " + Fmt("%.6f", s.first_error_s) + " s";
    out.push_back(line);
  }
  if (s.HasStalls()) {
    out.push_back(std::to_string(s.stalled_hosts.size()) + " host(s) stalled (" +
                  JoinSet(s.stalled_hosts) + ")" +
                  (s.HasErrors() ? "" : " with no completion error"));
  }
  for (const auto& [c, set] : s.host_classes) {
    out.push_back(c + " counters moved on host(s) " + JoinSet(set));
  }
  for (const auto& [c, set] : s.link_classes) {
    out.push_back(c + " counters / events on link(s) " + JoinSet(set));
  }
  return out;
}

std::string OutcomeLine(const Signature& s) {
  std::string line = std::to_string(s.flows_completed) + " flows completed, " +
                     std::to_string(s.flows_failed) + " failed, " +
                     std::to_string(s.flows_stalled) + " stalled";
  if (s.HasErrors()) line += "; errors on " + JoinSet(s.error_hosts, 4);
  return line;
}

std::string ExpectBlock(const Signature& s) {
  std::ostringstream y;
  y << "  flows_completed: " << s.flows_completed << "\n  flows_failed: " << s.flows_failed
    << "\n  flows_stalled: " << s.flows_stalled << "\n";
  bool any = false;
  for (const auto& [name, n] : s.completion_statuses) {
    if (name == "IBV_WC_SUCCESS") continue;
    if (!any) y << "  completion_statuses:\n";
    any = true;
    y << "    " << name << ": " << n << "\n";
  }
  return y.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

}  // namespace

StatusOr<ReplayResult> Replay(const Evidence& evidence, const ReplayOptions& options) {
  auto start = Clock::now();
  ReplayResult result;
  result.evidence = evidence;
  auto world_or = BuildWorld(evidence);
  if (!world_or.ok()) return world_or.status();
  const World& world = *world_or;
  result.notes = world.notes;
  result.notes.push_back("fabric: " + world.topology_source +
                         "; traffic: " + std::to_string(world.flows.size()) +
                         " flows (the ring and the erring pairs)");
  result.notes.push_back("retry budget: 4.096 us x 2^" + std::to_string(world.ib_timeout) + " x (" +
                         std::to_string(world.retry_cnt) +
                         " + 1) = " + Fmt("%.3f", world.retry_budget_s) + " s");
  std::set<std::string> observable;
  Signature ev = EvidenceSignature(evidence, world, &observable);
  result.symptoms = Symptoms(ev);

  // Timeline: the ranks' errors and events, by time.
  for (const auto& e : evidence.errors) {
    std::string status = e.status.empty() ? StatusName(e.status_code) : e.status;
    result.timeline.push_back(TimelineEvent{
        e.host, e.rank, e.time_s,
        "completion error " + status + (e.peer.empty() ? "" : " from " + e.peer), true});
  }
  for (const auto& e : evidence.rank_events) {
    result.timeline.push_back(
        TimelineEvent{e.host, e.rank, e.time_s, e.kind + ": " + e.detail, e.kind != "async_event"});
  }
  for (const auto& e : evidence.link_events) {
    result.timeline.push_back(
        TimelineEvent{e.link, -1, e.time_s, std::string("link ") + (e.up ? "up" : "down"), !e.up});
  }
  std::stable_sort(result.timeline.begin(), result.timeline.end(),
                   [](const auto& a, const auto& b) { return a.time_s < b.time_s; });

  if (!ev.HasSymptom()) {
    result.verdict =
        "No symptom in the evidence: no rank failed or stalled and no fault counter moved, so "
        "there is nothing to reproduce.";
    result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }

  std::vector<Candidate> candidates = FormHypotheses(evidence, world);
  result.hypotheses_formed = static_cast<int>(candidates.size());
  size_t top = std::min(candidates.size(), static_cast<size_t>(std::max(1, options.top)));
  for (size_t i = top; i < candidates.size(); ++i) {
    result.not_simulated.push_back(candidates[i].hypothesis.kind + " on " +
                                   candidates[i].hypothesis.target + " (prior " +
                                   Fmt("%.2f", candidates[i].prior) + ")");
  }
  candidates.resize(top);

  // Job 0: the world without any fault, the background every signature is
  // compared over (congestion drops and their timeouts happen anyway).
  std::vector<Job> jobs;
  {
    Plan base;
    base.end_us = 1e6;  // 1 s of virtual time when no candidate says longer
    for (const auto& c : candidates) base.end_us = std::max(base.end_us, c.plan.end_us);
    Hypothesis none;
    none.kind = "baseline";
    none.target = "none";
    none.summary = "the job without any fault";
    jobs.push_back(Job{ScenarioYaml(world, none, base, {}), "baseline", 0, false});
  }
  for (auto& c : candidates) {
    c.hypothesis.scenario_yaml = ScenarioYaml(world, c.hypothesis, c.plan, {});
    jobs.push_back(Job{c.hypothesis.scenario_yaml,
                       "hypothesis " + c.hypothesis.kind + " " + c.hypothesis.target,
                       c.plan.offset_s, c.plan.swallowed});
  }
  std::vector<Outcome> outcomes = RunAll(jobs, options.jobs);
  result.simulations = static_cast<int>(jobs.size());
  const Signature* baseline = nullptr;
  Signature baseline_sig;
  if (outcomes[0].ok) {
    baseline_sig = outcomes[0].sig;
    baseline = &baseline_sig;
  } else {
    result.notes.push_back("the baseline run (no fault) failed: " + outcomes[0].error +
                           "; counters are compared without it");
  }
  outcomes.erase(outcomes.begin());
  if (baseline && !ev.HasErrors() && !ev.HasStalls() && !Residual(ev, *baseline).HasSymptom()) {
    result.verdict =
        "No symptom in the evidence: no rank failed or stalled, and the counters that moved "
        "move as much in the job without any fault, so there is nothing to reproduce.";
    result.causes.clear();
    result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }

  std::vector<Signature> sims(top);
  for (size_t i = 0; i < top; ++i) {
    Cause cause;
    cause.hypothesis = candidates[i].hypothesis;
    cause.prior = candidates[i].prior;
    cause.evidence_for = candidates[i].evidence_for;
    cause.evidence_against = candidates[i].evidence_against;
    const Outcome& o = outcomes[i];
    cause.ran = o.ok;
    cause.error = o.error;
    cause.sim_wall_s = o.wall_s;
    if (o.ok) {
      sims[i] = o.sig;
      cause.matches = Compare(ev, o.sig, observable, baseline);
      cause.score = WeightedScore(cause.matches);
      cause.reproduces = ShowsSymptom(ev, o.sig, baseline) && cause.score >= kReproduceScore;
      if (!ShowsSymptom(ev, o.sig, baseline)) {
        cause.evidence_against.push_back("simulated: the symptom does not appear (" +
                                         OutcomeLine(o.sig) + ")");
      }
    }
    result.causes.push_back(std::move(cause));
  }

  // Order before ablation so the best are ablated.
  std::vector<size_t> order(top);
  for (size_t i = 0; i < top; ++i) order[i] = i;
  auto key = [&](size_t i) {
    const Cause& c = result.causes[i];
    return (c.reproduces ? 10.0 : 0.0) + 0.8 * c.score + 0.2 * c.prior;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });

  // Ablation: each element of the best reproducing causes removed.
  std::vector<Job> ablations;
  std::vector<std::pair<size_t, size_t>> which;  // (cause, element)
  int ablated = 0;
  for (size_t i : order) {
    if (ablated == options.ablate) break;
    if (!result.causes[i].reproduces) continue;
    ++ablated;
    const auto& c = candidates[i];
    for (size_t e = 0; e < c.plan.elements.size(); ++e) {
      std::vector<bool> keep(c.plan.elements.size(), true);
      keep[e] = false;
      ablations.push_back(Job{ScenarioYaml(world, c.hypothesis, c.plan, keep),
                              "ablation " + c.hypothesis.kind, c.plan.offset_s, c.plan.swallowed});
      which.emplace_back(i, e);
    }
  }
  std::vector<Outcome> ab = RunAll(ablations, options.jobs);
  result.simulations += static_cast<int>(ablations.size());
  for (size_t k = 0; k < ab.size(); ++k) {
    auto [i, e] = which[k];
    Cause& cause = result.causes[i];
    const std::string& label = candidates[i].plan.elements[e].label;
    if (!ab[k].ok) {
      cause.ablation.push_back("without " + label + ": the run failed: " + ab[k].error);
      continue;
    }
    bool gone = !ShowsSymptom(ev, ab[k].sig, baseline);
    cause.ablation.push_back("without " + label + ": " +
                             (gone ? "the symptom disappears (" : "the symptom remains (") +
                             OutcomeLine(ab[k].sig) + ")");
    if (gone) cause.ablation_confirms = true;
  }
  auto final_key = [&](size_t i) {
    const Cause& c = result.causes[i];
    bool tried = !c.ablation.empty();
    double k = c.reproduces ? 10.0 : 0.0;
    if (c.reproduces && (!tried || c.ablation_confirms)) k += 5;
    return k + 0.8 * c.score + 0.2 * c.prior;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return final_key(a) > final_key(b); });
  std::vector<Cause> ranked;
  std::vector<size_t> ranked_index;
  for (size_t i : order) {
    ranked.push_back(std::move(result.causes[i]));
    ranked_index.push_back(i);
  }
  result.causes = std::move(ranked);
  result.found = !result.causes.empty() && result.causes[0].reproduces;

  // Scenario files, and the suspects to highlight.
  if (!options.scenario_out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.scenario_out, ec);
  }
  for (size_t r = 0; r < result.causes.size(); ++r) {
    Cause& c = result.causes[r];
    size_t i = ranked_index[r];
    if (c.reproduces) {
      // The reproducing scenario pins the simulated outcome: a regression test.
      c.hypothesis.scenario_yaml =
          ScenarioYaml(world, c.hypothesis, candidates[i].plan, {}, ExpectBlock(sims[i]));
    }
    if (!options.scenario_out.empty()) {
      std::string file =
          options.scenario_out + "/" + std::to_string(r + 1) + "-" + c.hypothesis.kind + ".yaml";
      WriteFile(file, c.hypothesis.scenario_yaml);
      c.scenario_path = file;
    }
    if (c.reproduces) {
      double weight = r == 0 ? c.score : 0.5 * c.score;
      auto links = world.topology.SelectLinks(c.hypothesis.target);
      if (links.ok() && links->size() <= 64) {
        for (int32_t l : *links) {
          auto& s = result.suspects[world.topology.link(l).name];
          s = std::max(s, weight);
        }
      } else {
        auto& s = result.suspects[c.hypothesis.target];
        s = std::max(s, weight);
      }
    }
  }
  if (result.found) {
    const Cause& best = result.causes[0];
    result.scenario_path = best.scenario_path;
    result.verdict = "Cause found: " + best.hypothesis.summary + " (score " +
                     Fmt("%.2f", best.score) +
                     (best.ablation_confirms ? ", confirmed by ablation" : "") + ").";
  } else {
    result.verdict = "None of the " + std::to_string(top) +
                     " hypotheses simulated reproduces the symptom: the cause is not one fathom "
                     "can name from this evidence.";
  }
  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

int ExitCode(const ReplayResult& result) { return result.found ? kExitCauseFound : kExitNoCause; }

}  // namespace fathom::replay
