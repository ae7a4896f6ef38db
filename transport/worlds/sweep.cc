#include "transport/worlds/sweep.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>

#include "base/json.h"
#include "transport/collectives/nccl_tests.h"
#include "transport/collectives/report.h"

namespace fathom::transport::worlds {

using namespace fathom::transport::coll;  // NOLINT: the sweep runs the collectives

namespace {

std::string SizeText(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 30) && bytes % (uint64_t{1} << 30) == 0) {
    std::snprintf(buf, sizeof(buf), "%lluG", static_cast<unsigned long long>(bytes >> 30));
  } else if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%lluM", static_cast<unsigned long long>(bytes >> 20));
  } else if (bytes >= 1024 && bytes % 1024 == 0) {
    std::snprintf(buf, sizeof(buf), "%lluK", static_cast<unsigned long long>(bytes >> 10));
  } else {
    std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

// "#  counters: drops_tail_drop 12, retransmitted_packets 40" (the ones
// that moved), or "#  counters: none moved".
std::string CountersLine(const Backend::Counters& c) {
  std::string s;
  for (const auto& [name, v] : c) {
    if (v == 0) continue;
    s += (s.empty() ? "" : ", ") + name + " " + std::to_string(v);
  }
  return "#  counters: " + (s.empty() ? std::string("none moved") : s) + "\n";
}

// The JSON members of a failure: when (virtual time) and the counters of
// the failed size; nothing when the run did not fail on the sim.
std::string ErrorJson(double time_us, const Backend::Counters& c) {
  if (time_us < 0) return "";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "\"error_time_us\":%.3f,", time_us);
  std::string s = buf;
  s += "\"error_counters\":{";
  for (size_t i = 0; i < c.size(); ++i) {
    s += (i ? ",\"" : "\"") + c[i].first + "\":" + std::to_string(c[i].second);
  }
  return s + "},";
}

double GiB(uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(1u << 30); }

}  // namespace

std::string ErrorStatusIn(const std::string& message) {
  // Communicator::Poll names the status as verbs spells it; the driver puts
  // a non-flush error first when a rank saw one (driver.cc).
  const size_t at = message.find("IBV_WC_");
  if (at == std::string::npos) return "";
  size_t end = at;
  while (end < message.size() &&
         (std::isupper(static_cast<unsigned char>(message[end])) ||
          std::isdigit(static_cast<unsigned char>(message[end])) || message[end] == '_')) {
    ++end;
  }
  return message.substr(at, end - at);
}

SweepResult RunSweep(const SweepOptions& opt, Backend& backend, const CommOptions& comm) {
  const int n = backend.nranks();
  const std::vector<int> local = backend.local_ranks();
  const AlphaBeta model = backend.AlgoModel();
  const int checks = opt.modelled ? 0 : opt.check;
  const bool rooted = opt.kind == CollKind::kBroadcast || opt.kind == CollKind::kReduce ||
                      opt.kind == CollKind::kGather || opt.kind == CollKind::kScatter;
  const bool reduces = opt.kind == CollKind::kAllReduce || opt.kind == CollKind::kReduceScatter ||
                       opt.kind == CollKind::kReduce;
  const bool print = backend.prints();
  // One set of buffers for every type: sizes are bytes, so buffers built for
  // the smallest element hold every type's count.
  DataType smallest = opt.combos.front().first;
  for (const auto& c : opt.combos) {
    if (DataTypeSize(c.first) < DataTypeSize(smallest)) smallest = c.first;
  }
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  if (!opt.modelled) {
    const uint64_t unit = CountUnitBytes(opt.kind, n, smallest);
    uint64_t max_count = opt.sizes.empty() ? 0 : opt.sizes.back() / unit;
    if (opt.kind == CollKind::kAllToAllV) {
      max_count = 0;
      for (const auto& m : opt.matrices) {
        max_count = std::max(max_count, m->MaxRowOrColBytes() / DataTypeSize(smallest));
      }
    }
    const uint64_t need = static_cast<uint64_t>(local.size()) *
                          RankBuffers::BytesFor(opt.kind, n, smallest, max_count);
    const uint64_t avail = AvailableMemoryBytes();
    if (avail > 0 && need > avail) {
      std::fprintf(
          stderr,
          "fathom coll: -e %s: the buffers of the %zu rank(s) in this process need %.1f "
          "GiB, more than the %.1f GiB of memory available here (MemAvailable); lower "
          "-e%s\n",
          SizeText(opt.sizes.back()).c_str(), local.size(), GiB(need), GiB(avail),
          std::string(backend.name()) == "sim" ? ", or add --modelled (timing only, no data)" : "");
      return SweepResult::kUsage;
    }
    for (int r : local) {
      bufs.push_back(std::make_unique<RankBuffers>(opt.kind, n, r, smallest, max_count));
      bufs.back()->set_gpus_per_server(comm.gpus_per_server);
    }
  }
  // The algorithm a size runs (--algo auto: the model's choice; the kinds
  // other than allreduce run their ring or fixed schedule).
  auto algorithm_for = [&](uint64_t bytes) {
    if (opt.kind != CollKind::kAllReduce) return Algorithm::kRing;
    return opt.algo == Algorithm::kAuto
               ? ChooseAlgorithm(opt.kind, bytes, n, model, comm.chunk_bytes)
               : opt.algo;
  };
  // Whether every size can run here (DistSimBackend: a profile with no post
  // delay across processes refuses a collective whose posts would cross),
  // before anything is printed. The data QPs a collective uses depend on
  // its kind and algorithm, not its size or counts (DataPeers).
  std::vector<Algorithm> admitted;
  for (size_t si = 0; si < opt.sizes.size() && !opt.combos.empty(); ++si) {
    const uint64_t unit = CountUnitBytes(opt.kind, n, opt.combos.front().first);
    CollSpec spec;
    spec.kind = opt.kind;
    spec.nranks = n;
    spec.count = opt.sizes[si] / unit;
    spec.root = opt.root;
    spec.algorithm = algorithm_for(spec.count * unit);
    if (std::find(admitted.begin(), admitted.end(), spec.algorithm) != admitted.end()) continue;
    admitted.push_back(spec.algorithm);
    if (Status s = backend.Admit(spec); !s.ok()) {
      if (print) {
        std::fprintf(stderr, "fathom coll: -b/-e %s, algorithm %s: %s\n",
                     SizeText(opt.sizes[si]).c_str(),
                     std::string(AlgorithmName(spec.algorithm)).c_str(), s.message().c_str());
      }
      return SweepResult::kUsage;
    }
  }
  Progress progress(!opt.json && isatty(STDERR_FILENO) != 0);
  backend.WatchProgress(&progress);
  Trace trace;
  std::vector<ReportRow> rows;
  if (!opt.json) {
    const std::vector<std::string> devices = backend.DeviceLines();  // every rank takes part
    if (print) {
      SweepParams sp;
      sp.nthreads = opt.nthreads;
      sp.ngpus = opt.ngpus;
      sp.min_bytes = opt.min_bytes;
      sp.max_bytes = opt.max_bytes;
      sp.step_bytes = opt.step_bytes;
      sp.step_factor = opt.step_factor;
      sp.warmup_iters = opt.warmup;
      sp.iters = opt.iters;
      sp.agg_iters = opt.agg_iters;
      sp.check = checks;
      sp.graph = 0;
      std::printf("%s#\n# Using devices\n", ParamsLine(sp).c_str());
      for (const std::string& d : devices) std::printf("%s", d.c_str());
      std::printf("#\n");
      std::string types;
      for (const auto& c : opt.combos) {
        const std::string t(DataTypeName(c.first));
        if (types.find(t) == std::string::npos) types += (types.empty() ? "" : ",") + t;
      }
      std::printf("# fathom coll %s: backend %s, %s, %s, channels %d, chunk %llu B%s\n",
                  std::string(CollKindName(opt.kind)).c_str(), backend.name(),
                  backend.Where().c_str(), types.c_str(), comm.channels,
                  static_cast<unsigned long long>(comm.chunk_bytes),
                  opt.modelled ? ", modelled bytes (no data, no check)" : "");
      if (opt.algo == Algorithm::kAuto && opt.kind == CollKind::kAllReduce) {
        std::printf(
            "# --algo auto: alpha %.3f us per message, %.2f GB/s payload bandwidth "
            "(%d hops)\n",
            model.alpha.us(), model.payload_bytes_per_s / 1e9, model.hops);
      }
      if (opt.kind == CollKind::kAllToAllV && !opt.matrices.empty()) {
        std::printf(
            "#\n# alltoallv: %s (rows = senders); size = the mean row (bytes a rank sends, "
            "its own block included); busbw = the busiest rank's bytes to or from the others "
            "/ time; both columns run out of place\n",
            opt.matrices.front()->source.c_str());
      }
      std::printf("#\n%s", TableHeader().c_str());
      std::fflush(stdout);
    }
  }
  SweepResult result = SweepResult::kOk;
  std::string failure;
  // Virtual time of the error that stopped the run (sim), -1: none.
  double error_time_us = -1;
  Backend::Counters error_counters;  // what moved during the failed size
  auto counter_deltas = [](const Backend::Counters& before, const Backend::Counters& after) {
    Backend::Counters d = after;
    for (size_t i = 0; i < d.size() && i < before.size(); ++i) d[i].second -= before[i].second;
    return d;
  };
  for (int cycle = 0; failure.empty() && (opt.run_cycles == 0 || cycle < opt.run_cycles); ++cycle) {
    for (const auto& [type, op] : opt.combos) {
      if (!failure.empty()) break;
      for (auto& b : bufs) b->SetType(type);
      const uint64_t unit = CountUnitBytes(opt.kind, n, type);
      for (size_t si = 0; si < opt.sizes.size() && failure.empty(); ++si) {
        const uint64_t size = opt.sizes[si];
        uint64_t count = size / unit;
        // alltoallv: this size's matrix in whole elements of the type.
        std::shared_ptr<const std::vector<uint64_t>> counts;
        SizeMatrix matrix;
        if (opt.kind == CollKind::kAllToAllV) {
          matrix = *opt.matrices[si];
          const uint64_t es = DataTypeSize(type);
          counts = std::make_shared<const std::vector<uint64_t>>(matrix.Elements(es));
          for (size_t i = 0; i < matrix.bytes.size(); ++i) matrix.bytes[i] = (*counts)[i] * es;
          count = matrix.MeanRowBytes() / es;
          for (auto& b : bufs) b->set_counts(counts);
        }
        ReportRow row;
        row.size_bytes = count * unit;
        row.count = count;
        row.type = type;
        row.redop = reduces ? std::string(RedOpName(op)) : "none";
        row.root = rooted ? opt.root : -1;
        CollSpec spec;
        spec.kind = opt.kind;
        spec.nranks = n;
        spec.count = count;
        spec.root = opt.root;
        spec.counts = counts;
        spec.algorithm = algorithm_for(row.size_bytes);
        // What ran: BuildPlan runs a barrier as a tree, a broadcast as a chain.
        row.algo = opt.kind == CollKind::kBarrier                                      ? "tree"
                   : opt.kind == CollKind::kBroadcast || opt.kind == CollKind::kReduce ? "chain"
                   : NeedsAllPairs(opt.kind) || opt.kind == CollKind::kSendRecv
                       ? "p2p"
                       : std::string(AlgorithmName(spec.algorithm));
        const Backend::Counters counters_before = backend.FabricCounters();
        backend.MarkLinks();
        for (int place = 0; place < 2 && failure.empty(); ++place) {
          std::vector<const void*> in(local.size(), nullptr);
          std::vector<void*> out(local.size(), nullptr);
          auto fill = [&] {
            for (size_t i = 0; i < bufs.size(); ++i) {
              bufs[i]->Fill(count, place == 1);
              in[i] = bufs[i]->in();
              out[i] = bufs[i]->out();
            }
          };
          fill();
          if (Status s = backend.Barrier(); !s.ok()) {
            failure = s.message() + "\n";
            break;
          }
          const int timed = opt.iters * opt.agg_iters;
          const int total = opt.warmup + timed + checks;
          double total_us = 0;
          int64_t wrong = checks > 0 ? 0 : -1;
          for (int it = 0; it < total; ++it) {
            const bool checking = it >= opt.warmup + timed;
            if (checking) fill();
            char what[160];
            std::snprintf(what, sizeof(what), "%s %s %s %s (%zu/%zu) %s %s %d/%d",
                          std::string(CollKindName(opt.kind)).c_str(),
                          std::string(DataTypeName(type)).c_str(), row.redop.c_str(),
                          SizeText(size).c_str(), si + 1, opt.sizes.size(),
                          place == 0 ? "out-of-place" : "in-place",
                          it < opt.warmup ? "warmup"
                          : checking      ? "check"
                                          : "iter",
                          it < opt.warmup ? it + 1
                          : checking      ? it - opt.warmup - timed + 1
                                          : it - opt.warmup + 1,
                          it < opt.warmup ? opt.warmup
                          : checking      ? checks
                                          : timed);
            progress.Update(what);
            Trace* t =
                (!opt.trace_path.empty() && place == 0 && it == opt.warmup) ? &trace : nullptr;
            RunOutcome res = backend.Run(spec, type, op, in, out, t);
            if (!res.status.ok()) {
              failure = res.report.empty() ? res.status.message() + "\n" : res.report;
              if (std::string(backend.name()) == "sim") error_time_us = res.end.us();
              if (opt.outcome != nullptr) {
                opt.outcome->failed = true;
                opt.outcome->hung = res.hung;
                opt.outcome->stuck_ranks = res.stuck_ranks;
                opt.outcome->error_status = res.hung ? "" : ErrorStatusIn(res.status.message());
                opt.outcome->error_time_us = error_time_us;
              }
              break;
            }
            if (it >= opt.warmup && !checking) total_us += (res.end - res.start).us();
            if (checking) {
              for (const auto& b : bufs) wrong += b->CountWrong(count, op, opt.root);
            }
          }
          if (!failure.empty()) break;
          double time_us = total_us / timed;
          if (Status s = backend.Combine(&time_us, &wrong); !s.ok()) {
            failure = s.message() + "\n";
            break;
          }
          if (wrong > 0) result = SweepResult::kFailure;
          Measurement& cell = place == 0 ? row.out_of_place : row.in_place;
          cell = Measure(opt.kind, n, row.size_bytes, time_us, wrong);
          if (opt.kind == CollKind::kAllToAllV) {
            cell.busbw_gbs =
                time_us > 0 ? static_cast<double>(matrix.BusiestRankBytes()) / (time_us * 1e3) : 0;
          }
        }
        row.counters = counter_deltas(counters_before, backend.FabricCounters());
        row.has_hot_links = backend.has_links();
        if (row.has_hot_links) row.hot_links = backend.HotLinksSinceMark();
        if (!failure.empty()) {
          error_counters = row.counters;
          break;
        }
        rows.push_back(row);
        if (print && !opt.json) {
          progress.Clear();
          std::printf("%s%s", TableRow(row).c_str(), HotLinksLine(row).c_str());
          if (opt.counters && !row.counters.empty())
            std::printf("%s", CountersLine(row.counters).c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  backend.WatchProgress(nullptr);
  progress.Clear();
  if (opt.outcome != nullptr) opt.outcome->rows = rows;
  if (!failure.empty()) result = SweepResult::kFailure;
  if (!opt.trace_path.empty()) {
    if (!backend.WriteTrace(opt.trace_path, trace, !failure.empty())) return SweepResult::kUsage;
  }
  if (opt.json && (print || !failure.empty())) {
    std::printf(
        "{\"op\":\"%s\",\"backend\":\"%s\",\"nranks\":%d,%s,\"alpha_us\":%g,"
        "\"bandwidth_gbs\":%g,\"rows\":%s,"
        "\"avg_busbw_gbs\":%g,\"status\":\"%s\",%s\"report\":\"%s\"}\n",
        std::string(CollKindName(opt.kind)).c_str(), backend.name(), n, backend.WhereJson().c_str(),
        model.alpha.us(), model.payload_bytes_per_s / 1e9, RowsToJson(rows).c_str(),
        AverageBusBw(rows),
        failure.empty() ? (result == SweepResult::kOk ? "ok" : "wrong") : "failed",
        ErrorJson(error_time_us, error_counters).c_str(), JsonEscape(failure).c_str());
  } else if (print && !opt.json) {
    std::printf("%s", TableFooter(rows).c_str());
    if (!failure.empty()) {
      if (error_time_us >= 0) {
        std::printf("# FAILED: run stopped; error at t=%.3f us (virtual)\n", error_time_us);
        if (opt.counters && !error_counters.empty()) {
          std::printf("%s", CountersLine(error_counters).c_str());
        }
      } else {
        std::printf("# %s: run stopped\n", "FAILED");
      }
    }
  }
  if (!failure.empty()) std::fprintf(stderr, "%s", failure.c_str());
  return result;
}

}  // namespace fathom::transport::worlds
