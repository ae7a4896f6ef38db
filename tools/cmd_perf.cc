// `fathom perf`: perftest's write_bw, write_lat, read_bw, read_lat, send_bw
// and send_lat on fathom's transport (verbs backend), with perftest's flags,
// tables and units (ROCEV2.md, "Tool conventions"). The server runs without
// an address and hosts the bootstrap root; the client names the server.
// Every wait has a deadline: a stalled run fails with the QP, the peer and
// the last completion instead of hanging. Exit 0 ok, 1 the run failed
// (completion error, deadline, data mismatch), 2 bad usage or no device.
//
// The pieces: perf_flags (flags and their checks), perf_session (the
// handshake and what both sides share), perf_poller (waiting with a
// deadline), perf_bw and perf_lat (the test loops), perf_output (banner and
// -W counters); this file runs one size after another and agrees on the
// outcome with the peer.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "tools/command.h"
#include "tools/perf_bw.h"
#include "tools/perf_flags.h"
#include "tools/perf_lat.h"
#include "tools/perf_output.h"
#include "tools/perf_session.h"
#include "transport/verbs/perf_report.h"

namespace fathom::tools {
namespace {

using namespace perf;  // NOLINT: this file is the perf command

extern "C" void OnSigint(int) { g_interrupted = 1; }

// One size: both sides prepare, meet at a barrier, run, meet again, verify,
// and agree on the outcome (the client's figures, or with -b the sum of both
// sides', as perftest reports; any side's error). `*interrupted` is set when
// either side had a SIGINT (--run_infinitely): this was the last window.
StatusOr<std::string> RunSize(Session& s, const PerfFlags& f, uint64_t size, bool* interrupted) {
  const bool bw = IsBw(f.test);
  const bool bidir = f.bidirectional;
  // Writes and sends carry the pattern from `src` into the peer's `local`;
  // reads fetch the server's `local` into the client's cleared `src` (with
  // -b, both ways).
  const bool reads = f.test.starts_with("read");
  std::fill(s.local.begin(), s.local.end(), 0);
  std::fill(s.src.begin(), s.src.end(), 0);
  std::vector<uint8_t>& origin = reads ? s.local : s.src;
  if (!reads || !s.client || bidir) {
    for (int q = 0; q < f.qps; ++q) {
      FillPattern(origin.data() + static_cast<uint64_t>(q) * s.region, size);
    }
  }
  const bool needs_recvs = f.test == "send_lat" || (f.test == "send_bw" && (!s.client || bidir));
  if (needs_recvs) {
    for (int q = 0; q < (f.test == "send_lat" ? 1 : f.qps); ++q) {
      FATHOM_RETURN_IF_ERROR(PostRecvs(s, q, size, f.test == "send_lat" ? 64 : 500));
    }
  }
  FATHOM_RETURN_IF_ERROR(s.rank->Barrier());
  std::string result;
  Status run;
  if (bw) {
    if (s.client || bidir) {
      auto r = RunBw(s, f, size, /*receive=*/bidir && f.test == "send_bw");
      if (r.ok()) result.assign(reinterpret_cast<const char*>(&*r), sizeof(tv::BwResult));
      run = r.status();
    } else if (f.test == "send_bw") {
      run = RunSendBwServer(s, f, size);
    }
  } else {
    auto r = RunLat(s, f, size);
    if (r.ok() && s.client)
      result.assign(reinterpret_cast<const char*>(&*r), sizeof(tv::LatResult));
    run = r.status();
  }
  // A local failure (a completion error, the stall deadline) is returned at
  // once and RunPerf aborts the bootstrap with it, so the peer learns the
  // reason from the root; meeting at a barrier instead would wait on a peer
  // that may be gone with its whole host (the bootstrap root too).
  if (!run.ok()) return run;
  // Meet again before verifying: a write_bw server takes no part in the run,
  // so only the client's completions (RC ACKs: the data is placed) tell it
  // that everything has landed.
  run = s.rank->Barrier();
  if (run.ok() && f.verify) {
    // The receiving side checks what landed: the server for writes and sends,
    // the client for reads, both with -b. write_lat's last byte carries the
    // iteration count.
    const uint64_t check = f.test == "write_lat" ? size - 1 : size;
    if (bidir || reads == s.client)
      run = CheckPattern(reads ? s.src.data() : s.local.data(), size, check,
                         reads ? "read buffer" : "receive buffer");
  }
  // Everyone learns every side's outcome: "E<error>", or "R<result bytes>"
  // ("S<result bytes>" after a SIGINT).
  const char tag = g_interrupted ? 'S' : 'R';
  auto gathered = s.rank->AllGather(run.ok() ? tag + result : "E" + run.ToString());
  // A local failure (say, a completion error after the peer died) is the
  // news; losing the bootstrap on the way out is only its echo.
  if (!gathered.ok()) return run.ok() ? gathered.status() : run;
  const std::vector<std::string>& all = *gathered;
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty() && all[r][0] == 'E') {
      return Aborted((r == static_cast<size_t>(s.client ? 1 : 0) ? "" : std::string("peer: ")) +
                     all[r].substr(1));
    }
    if (!all[r].empty() && all[r][0] == 'S') *interrupted = true;
  }
  if (bw && bidir && all[0].size() == 1 + sizeof(tv::BwResult) &&
      all[1].size() == 1 + sizeof(tv::BwResult)) {
    tv::BwResult sum, other;
    std::memcpy(&sum, all[0].data() + 1, sizeof(sum));
    std::memcpy(&other, all[1].data() + 1, sizeof(other));
    sum.iterations += other.iterations;
    sum.peak += other.peak;
    sum.average += other.average;
    sum.msg_rate_mpps += other.msg_rate_mpps;
    return std::string(reinterpret_cast<const char*>(&sum), sizeof(sum));
  }
  return all[1].substr(1);  // the client's figures
}

int RunPerf(const PerfFlags& in) {
  PerfFlags f = in;
  if (const int rc = CheckFlags(f); rc >= 0) return rc;
  const bool bw = IsBw(f.test);
  std::vector<uint64_t> sizes;
  if (f.all_sizes) {
    for (uint64_t sz = 2; sz <= (8u << 20); sz *= 2) sizes.push_back(sz);
  } else {
    sizes.push_back(f.size);
  }
  Session s;
  const Status setup = Setup(s, f, *std::max_element(sizes.begin(), sizes.end()));
  if (!setup.ok()) {
    // No device (or no such device, port or GID) is bad input: exit 2, as
    // doctor does; the message names the device asked for.
    const bool usage_error =
        setup.code() == StatusCode::kNotFound || setup.code() == StatusCode::kInvalidArgument;
    const std::string which = setup.code() != StatusCode::kNotFound ? ""
                              : f.device.empty()                    ? "device (first ACTIVE): "
                                                 : "device \"" + f.device + "\": ";
    std::fprintf(stderr, "fathom perf: %s%s\n", which.c_str(), setup.ToString().c_str());
    return usage_error ? kExitUsage : kExitFailure;
  }
  std::vector<Counter> counters;
  if (!f.counters.empty()) {
    auto c = OpenCounters(f.counters, s.device->info());
    if (!c.ok()) {
      std::fprintf(stderr, "fathom perf: %s\n", c.status().ToString().c_str());
      if (s.rank) (void)s.rank->Abort(c.status().message());
      return kExitUsage;
    }
    counters = std::move(*c);
  }
  // --out_json: the file is opened before the run, so a bad path costs no run.
  std::ofstream json_file;
  if (f.out_json) {
    json_file.open(f.out_json_file, std::ios::trunc);
    if (!json_file) {
      const std::string why = "--out_json_file " + f.out_json_file +
                              ": cannot open it for writing: " + std::strerror(errno);
      std::fprintf(stderr, "fathom perf: %s\n", why.c_str());
      if (s.rank) (void)s.rank->Abort(why);
      return kExitUsage;
    }
  }
  if (f.run_infinitely) {
    // The first Ctrl-C ends the current window and the run (both sides, after
    // the window); a second one kills as usual (SA_RESETHAND).
    struct sigaction sa {};
    sa.sa_handler = OnSigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
  }
  std::vector<tv::BwResult> bws;
  std::vector<tv::LatResult> lats;
  if (!f.json) {
    std::printf("%s", bw ? tv::BwHeader(f.gbits).c_str() : tv::LatHeader().c_str());
    std::fflush(stdout);  // a watcher of a redirected output sees the run start
  }
  bool interrupted = false;
  uint64_t windows = 0;
  for (size_t i = 0; i < sizes.size() && !interrupted; ++i) {
    const uint64_t size = sizes[i];
    auto r = RunSize(s, f, size, &interrupted);
    if (!r.ok()) {
      std::fprintf(stderr, "fathom perf %s size %llu: %s\n", f.test.c_str(),
                   static_cast<unsigned long long>(size), r.status().ToString().c_str());
      for (const auto& e : s.device->TakeAsyncEvents()) {
        std::fprintf(stderr, "fathom perf: async event %s on %s\n", e.type.c_str(),
                     e.detail.c_str());
      }
      if (s.rank) (void)s.rank->Abort(r.status().message());
      return kExitFailure;
    }
    ++windows;
    if (bw && r->size() == sizeof(tv::BwResult)) {
      tv::BwResult b;
      std::memcpy(&b, r->data(), sizeof(b));
      bws.push_back(b);
      if (!f.json) std::printf("%s", tv::BwLine(b).c_str());
    } else if (!bw && r->size() == sizeof(tv::LatResult)) {
      tv::LatResult l;
      std::memcpy(&l, r->data(), sizeof(l));
      lats.push_back(l);
      if (!f.json) std::printf("%s", tv::LatLine(l).c_str());
    }
    std::fflush(stdout);
    // --run_infinitely: the same size again, one -D window after another.
    if (f.run_infinitely && !interrupted) --i;
  }
  if (interrupted) {
    std::fprintf(stderr, "fathom perf: interrupted (SIGINT) after %llu window(s) of %.1f s\n",
                 static_cast<unsigned long long>(windows), f.duration);
  }
  const std::string json = bw ? tv::BwJson(f.test, bws, f.gbits) : tv::LatJson(f.test, lats);
  if (f.json) {
    std::printf("%s", json.c_str());
  } else {
    std::printf("%s", tv::Rule().c_str());
    if (auto* vcq = dynamic_cast<tv::VerbsCompletionQueue*>(s.cq.get()); vcq && f.events) {
      std::printf(" Completion events: %llu\n", static_cast<unsigned long long>(vcq->events()));
    }
  }
  for (const Counter& c : counters) {
    auto after = ReadCounter(c.path, c.name);
    std::fprintf(
        f.json ? stderr : stdout, " %s: %s\n", c.name.c_str(),
        after.ok() ? std::to_string(*after - c.before).c_str() : after.status().message().c_str());
  }
  if (f.out_json) {
    json_file << json;
    json_file.close();
    if (!json_file) {
      std::fprintf(stderr, "fathom perf: --out_json_file %s: write failed\n",
                   f.out_json_file.c_str());
      return kExitFailure;
    }
  }
  for (const auto& e : s.device->TakeAsyncEvents()) {
    std::fprintf(stderr, "fathom perf: async event %s on %s\n", e.type.c_str(), e.detail.c_str());
  }
  // Tear down in the verbs order: QPs, CQ, MRs, then the device (and last the root).
  s.qps.clear();
  s.cq.reset();
  s.local_mr.reset();
  s.src_mr.reset();
  s.rank.reset();
  if (s.root) (void)s.root->Wait(Picoseconds::FromSeconds(10));
  return kExitOk;
}

FATHOM_REGISTER_COMMAND(
    perf, Command{"perf",
                  "perftest's tests on fathom's transport: write_bw|write_lat|read_bw|read_lat|"
                  "send_bw|send_lat [SERVER]",
                  [](CLI::App* sub) -> std::function<int()> {
                    auto f = std::make_shared<PerfFlags>();
                    sub->footer(kIgnoredHelp);
                    AddPerfFlags(sub, f.get());
                    return [f] { return RunPerf(*f); };
                  },
                  40});

}  // namespace
}  // namespace fathom::tools
