#include "transport/worlds/coll_expect.h"

#include <algorithm>
#include <cstdio>

#include "fabric/scenario/expect.h"
#include "fabric/scenario/training_spec.h"

namespace fathom::transport::worlds {
namespace {

std::string Gbs(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

std::string RankList(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace

Status CheckCollExpectFields(const sim::LoadedScenario& scenario, int nranks) {
  const proto::ExpectSpec& e = scenario.spec.expect();
  if (const std::string f = sim::SimOnlyExpectField(e); !f.empty()) {
    return scenario.map.Error(
        f,
        "is checked by fathom sim (flows and their QPs); fathom coll --scenario checks "
        "coll_sizes, stalled_ranks, coll_error, coll_hang, first_error_us, "
        "no_error_surfaced and the training items");
  }
  for (int i = 0; i < e.stalled_ranks_size(); ++i) {
    if (e.stalled_ranks(i) >= nranks) {
      return scenario.map.Error("expect.stalled_ranks[" + std::to_string(i) + "]",
                                "rank " + std::to_string(e.stalled_ranks(i)) +
                                    ", but the run has " + std::to_string(nranks) + " ranks");
    }
  }
  return Status::Ok();
}

bool ExpectsFailure(const proto::ExpectSpec& e) {
  return (!e.coll_error().empty() && e.coll_error() != "none") ||
         (e.has_coll_hang() && e.coll_hang()) || e.stalled_ranks_size() > 0 ||
         (e.has_first_failed_iteration() && e.first_failed_iteration() >= 0) ||
         (e.has_no_error_surfaced() && !e.no_error_surfaced()) || e.first_error_us().has_value();
}

std::vector<std::string> CheckCollExpect(const proto::ExpectSpec& e, const CollFacts& f) {
  std::vector<std::string> out;
  auto miss = [&](const std::string& what, const std::string& text) {
    if (!text.empty()) out.push_back("expectation not met: " + what + ": " + text);
  };
  for (const proto::CollSizeExpect& s : e.coll_sizes()) {
    const std::string what = "coll_sizes " + std::to_string(s.bytes()) + " B";
    const coll::ReportRow* row = nullptr;
    for (const coll::ReportRow& r : f.rows) {
      if (r.size_bytes == s.bytes()) row = &r;
    }
    if (row == nullptr) {
      miss(what,
           "expected a row of that size, got none (the run stopped before it, or the "
           "sweep has no such size)");
      continue;
    }
    for (const auto& [place, m] :
         {std::pair{"out-of-place", &row->out_of_place}, std::pair{"in-place", &row->in_place}}) {
      const std::string w = what + " " + place;
      if (s.has_busbw_at_least_gbs() && m->busbw_gbs < s.busbw_at_least_gbs()) {
        miss(w + " busbw", "expected at least " + Gbs(s.busbw_at_least_gbs()) + " GB/s, got " +
                               Gbs(m->busbw_gbs) + " GB/s");
      }
      if (s.has_busbw_at_most_gbs() && m->busbw_gbs > s.busbw_at_most_gbs()) {
        miss(w + " busbw", "expected at most " + Gbs(s.busbw_at_most_gbs()) + " GB/s, got " +
                               Gbs(m->busbw_gbs) + " GB/s");
      }
      if (s.has_time_at_least_us() && m->time_us < s.time_at_least_us()) {
        miss(w + " time", "expected at least " + sim::UsText(s.time_at_least_us()) + " us, got " +
                              sim::UsText(m->time_us) + " us");
      }
      if (s.has_time_at_most_us() && m->time_us > s.time_at_most_us()) {
        miss(w + " time", "expected at most " + sim::UsText(s.time_at_most_us()) + " us, got " +
                              sim::UsText(m->time_us) + " us");
      }
    }
  }
  if (e.stalled_ranks_size() > 0) {
    std::vector<int> want(e.stalled_ranks().begin(), e.stalled_ranks().end());
    std::sort(want.begin(), want.end());
    std::vector<int> got = f.stalled_ranks;
    std::sort(got.begin(), got.end());
    if (want != got) {
      miss("stalled_ranks", "expected " + RankList(want) + ", got " + RankList(got) +
                                (f.hung ? "" : " (the watchdog did not fire)"));
    }
  }
  const std::string got_error = f.error_status.empty() ? "none" : f.error_status;
  if (!e.coll_error().empty() && e.coll_error() != got_error) {
    miss("coll_error", "expected " + e.coll_error() + ", got " + got_error);
  }
  if (e.has_coll_hang() && e.coll_hang() != f.hung) {
    miss("coll_hang", std::string("expected ") + (e.coll_hang() ? "true" : "false") + ", got " +
                          (f.hung ? "true" : "false"));
  }
  if (e.has_no_error_surfaced()) {
    const bool none = f.error_status.empty();
    if (none != e.no_error_surfaced()) {
      miss("no_error_surfaced", std::string("expected ") +
                                    (e.no_error_surfaced() ? "true" : "false") + ", got " +
                                    (none ? "true" : "false (" + f.error_status + ")"));
    }
  }
  miss("first_error_us",
       sim::MissTimeUs(e.first_error_us(), f.error_status.empty() ? -1 : f.error_time_us));
  if (f.training) {
    if (e.has_first_failed_iteration() && e.first_failed_iteration() != f.first_failed_iteration) {
      miss("first_failed_iteration", "expected " + std::to_string(e.first_failed_iteration()) +
                                         ", got " + std::to_string(f.first_failed_iteration));
    }
    if (e.has_iterations_completed() && e.iterations_completed() != f.iterations_completed) {
      miss("iterations_completed", "expected " + std::to_string(e.iterations_completed()) +
                                       ", got " + std::to_string(f.iterations_completed));
    }
    miss("iteration_p50_us", sim::MissTimeUs(e.iteration_p50_us(),
                                             f.iterations_completed > 0 ? f.iteration_p50_us : -1));
    if (e.has_iteration_p99_at_most_us() && f.iteration_p99_us > e.iteration_p99_at_most_us()) {
      miss("iteration_p99_at_most_us", "expected at most " +
                                           sim::UsText(e.iteration_p99_at_most_us()) + " us, got " +
                                           sim::UsText(f.iteration_p99_us) + " us");
    }
    if (e.has_iteration_max_at_most_us() && f.iteration_max_us > e.iteration_max_at_most_us()) {
      miss("iteration_max_at_most_us", "expected at most " +
                                           sim::UsText(e.iteration_max_at_most_us()) + " us, got " +
                                           sim::UsText(f.iteration_max_us) + " us");
    }
  }
  return out;
}

}  // namespace fathom::transport::worlds
