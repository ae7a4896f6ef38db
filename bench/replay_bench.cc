// Replay accuracy on a seeded synthetic corpus (issue 28): bundles written
// from simulator runs with one random fault each (replay/corpus.h), replayed
// blind; prints top-1 and top-3 accuracy and the median wall time per
// replay. Measures and prints, asserts nothing.
//
//   build/bench/replay_bench [--preset medium] [--count 50] [--seed 1]
//                            [--jobs 1] [--top 8] [--dir DIR] [--keep]
//
// A truth of kind link_down whose outage is shorter than the retry budget is
// what the engine calls a link_flap (a flap shorter than the budget, which
// only costs retransmissions — CASES.md "How long things take"), and counts
// as found under either name.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "replay/corpus.h"
#include "replay/engine.h"
#include "replay/evidence.h"

namespace {

using fathom::replay::CorpusTruth;

bool Matches(const CorpusTruth& truth, const fathom::replay::Hypothesis& h, double budget_s) {
  if (h.target != truth.target) return false;
  if (h.kind == truth.kind) return true;
  if (truth.kind == "link_down" && h.kind == "link_flap") {
    auto it = truth.params.find("duration_s");
    return it != truth.params.end() && std::atof(it->second.c_str()) < budget_s;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "medium", dir;
  int count = 50, jobs = 1, top = 8;
  uint64_t seed = 1;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "replay_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--preset") {
      preset = next();
    } else if (a == "--count") {
      count = std::atoi(next().c_str());
    } else if (a == "--seed") {
      seed = std::strtoull(next().c_str(), nullptr, 10);
    } else if (a == "--jobs") {
      jobs = std::atoi(next().c_str());
    } else if (a == "--top") {
      top = std::atoi(next().c_str());
    } else if (a == "--dir") {
      dir = next();
    } else if (a == "--keep") {
      keep = true;
    } else {
      std::fprintf(stderr, "replay_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (count < 1 || jobs < 1 || top < 1) {
    std::fprintf(stderr, "replay_bench: --count, --jobs and --top must be >= 1\n");
    return 2;
  }
  if (dir.empty()) dir = "/tmp/fathom-replay-corpus-" + preset + "-" + std::to_string(seed);
  auto t0 = std::chrono::steady_clock::now();
  fathom::replay::CorpusOptions copt;
  copt.dir = dir;
  copt.count = count;
  copt.seed = seed;
  copt.preset = preset;
  auto truths = fathom::replay::MakeCorpus(copt);
  if (!truths.ok()) {
    std::fprintf(stderr, "replay_bench: %s\n", truths.status().ToString().c_str());
    return 1;
  }
  double make_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("corpus: %d bundles on %s (seed %llu) in %.1f s, in %s\n", count, preset.c_str(),
              static_cast<unsigned long long>(seed), make_s, dir.c_str());

  int top1 = 0, top3 = 0, found = 0, unusable = 0;
  std::vector<double> walls;
  std::map<std::string, std::pair<int, int>> by_kind;  // kind -> (top1, total)
  for (int i = 0; i < count; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "%03d", i);
    const std::string bundle = dir + "/" + name;
    const CorpusTruth& truth = (*truths)[static_cast<size_t>(i)];
    auto start = std::chrono::steady_clock::now();
    auto ev = fathom::replay::ReadEvidence(bundle);
    fathom::replay::ReplayOptions opt;
    opt.jobs = jobs;
    opt.top = top;
    std::string rank1 = "(unusable)";
    int rank = 0;
    if (ev.ok()) {
      auto r = fathom::replay::Replay(*ev, opt);
      if (r.ok()) {
        double budget = 4.096e-6 * std::ldexp(1.0, ev->library.ib_timeout.value_or(20)) *
                        (ev->library.ib_retry_cnt.value_or(7) + 1);
        found += r->found;
        for (size_t k = 0; k < r->causes.size(); ++k) {
          if (Matches(truth, r->causes[k].hypothesis, budget)) {
            rank = static_cast<int>(k) + 1;
            break;
          }
        }
        rank1 = r->causes.empty()
                    ? "(none)"
                    : r->causes[0].hypothesis.kind + " " + r->causes[0].hypothesis.target;
      } else {
        ++unusable;
      }
    } else {
      ++unusable;
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    walls.push_back(wall);
    top1 += rank == 1;
    top3 += rank >= 1 && rank <= 3;
    auto& k = by_kind[truth.kind];
    k.first += rank == 1;
    k.second += 1;
    std::printf("  %s truth %-15s %-10s -> rank %d, top-1 %s (%.2f s)\n", name, truth.kind.c_str(),
                truth.target.c_str(), rank, rank1.c_str(), wall);
    std::fflush(stdout);
  }
  std::sort(walls.begin(), walls.end());
  double median = walls[walls.size() / 2];
  if (walls.size() % 2 == 0) median = (walls[walls.size() / 2 - 1] + walls[walls.size() / 2]) / 2;
  std::printf("top-1 %d/%d = %.1f%%, top-3 %d/%d = %.1f%%, cause found in %d, unusable %d\n", top1,
              count, 100.0 * top1 / count, top3, count, 100.0 * top3 / count, found, unusable);
  for (const auto& [kind, n] : by_kind) {
    std::printf("  %-15s top-1 %d/%d\n", kind.c_str(), n.first, n.second);
  }
  std::printf("median wall per replay %.2f s (jobs %d, top %d), max %.2f s\n", median, jobs, top,
              walls.back());
  std::fflush(stdout);
  if (!keep) std::filesystem::remove_all(dir);
  return 0;
}
