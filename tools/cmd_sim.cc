// `fathom sim SCENARIO.yaml`: run a scenario in virtual time and summarize
// it. Exit 1 when the run found a failure: the outcome differs from the
// scenario's `expect` block, or flows failed or stalled that the block does
// not expect. Exit 2 for a bad scenario file, flag or expect item, or an
// output (--pcap, --trace, --json-out, --flows-out) that cannot be written;
// every output is opened before the run, so a bad path costs no run.
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fabric/parallel/comm.h"
#include "fabric/parallel/parallel_run.h"
#include "fabric/parallel/report_merge.h"
#include "fabric/scenario/capture.h"
#include "fabric/scenario/event_trace.h"
#include "fabric/scenario/scenario.h"
#include "faults/spec.h"
#include "tools/command.h"
#include "tools/train_run.h"
#include "transport/worlds/coll_expect.h"
#include "transport/worlds/sim_world.h"

namespace fathom::tools {
namespace {

struct SimFlags {
  std::string scenario;
  std::optional<uint64_t> seed;
  bool json = false;      // the JSON report on stdout, instead of the summary
  std::string json_out;   // the JSON report to this file
  std::string flows_out;  // the per-flow table to this file (.json or .csv)
  std::vector<std::string> pcap;
  std::string trace;
  bool quiet = false;
  std::vector<std::string> faults;  // --fault: one-off faults, scenario syntax
  std::string event_order;          // --event-order: schedule or canonical; empty: by processes
};

// Under mpirun, the processes agree before the run whether every one is
// ready (rank 0 alone opens the outputs): one that returns early says no
// on its way out, so that none waits for it in the run's collectives.
struct StartGate {
  parallel::Comm* comm = nullptr;
  bool done = false;
  bool Pass(bool ok) {
    if (comm == nullptr || comm->size() == 1 || done) return ok;
    done = true;
    std::vector<int64_t> bad{ok ? 0 : 1};
    comm->AllMax(&bad);
    return bad[0] == 0;
  }
  ~StartGate() { Pass(false); }
};

// An output file opened before the run; closed (and checked) by Close.
struct OutFile {
  std::string flag;  // "--trace out.json", for messages
  FILE* f = nullptr;
  ~OutFile() {
    if (f != nullptr) std::fclose(f);
  }
  // False (and a message) when the file cannot be created.
  bool Open(const std::string& flag_name, const std::string& path) {
    flag = flag_name + " " + path;
    f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "fathom sim: %s: cannot create the file: %s\n", flag.c_str(),
                   std::strerror(errno));
      return false;
    }
    return true;
  }
  // False when anything written did not reach the file; the message unless
  // one was printed already (`reported`).
  bool Close(bool reported = false) {
    const bool ok = std::ferror(f) == 0 && std::fclose(f) == 0;
    f = nullptr;
    if (!ok && !reported) std::fprintf(stderr, "fathom sim: %s: write failed\n", flag.c_str());
    return ok;
  }
};

// --seed as the YAML loader reads `seed:` (proto uint64): decimal or 0x hex,
// no sign, within 0..2^64-1. CLI11 alone wraps "-1" to 2^64-1 and reads
// "010" as octal; this check rewrites the value in decimal for it.
std::string CheckSeed(std::string& text) {
  std::string_view digits(text);
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (digits.empty() || text[0] == '-' || end != digits.data() + digits.size() ||
      ec != std::errc()) {
    return text + " is not a seed: expected an integer in [0, " +
           std::to_string(std::numeric_limits<uint64_t>::max()) + "] (uint64, as in the scenario)";
  }
  text = std::to_string(v);
  return "";
}

// `fathom sim` on a training scenario (issue 27): the loop on a SimWorld
// built from the scenario alone (its topology, transport, network, faults
// and verbs faults; every host a rank), reported and checked as `fathom
// coll train --scenario` does. The flow-level outputs have no flows to
// describe: those flags are refused.
int RunTrainingSim(const SimFlags& f, sim::LoadedScenario& sc, parallel::Comm* comm) {
  auto refuse = [](const std::string& flag, const std::string& why) {
    std::fprintf(stderr, "fathom sim: %s: %s\n", flag.c_str(), why.c_str());
    return kExitUsage;
  };
  const std::string flows =
      "a training scenario has no flows to report (its report is the "
      "iteration table)";
  if (!f.pcap.empty()) return refuse("--pcap", "not for a training scenario");
  if (!f.trace.empty()) return refuse("--trace", "not for a training scenario");
  if (!f.json_out.empty()) return refuse("--json-out", "use --json");
  if (!f.flows_out.empty()) return refuse("--flows-out", flows);
  if (!f.faults.empty()) return refuse("--fault", "put the fault in the scenario's faults list");
  // --seed over the scenario's, as for flows.
  if (f.seed) sc.spec.set_seed(*f.seed);
  transport::worlds::SimWorldOptions options;
  // The canonical order (--event-order canonical, or mpirun): the windowed
  // loop across the processes, and the report gives the canonical trace
  // digest (as `fathom coll train --event-order canonical`).
  options.canonical_order = comm != nullptr;
  auto world = transport::worlds::SimWorld::CreateFromScenario(sc, options);
  if (!world.ok()) {
    std::fprintf(stderr, "fathom sim: %s\n", world.status().message().c_str());
    return kExitUsage;
  }
  if (Status s = transport::worlds::CheckCollExpectFields(sc, world.value()->nranks()); !s.ok()) {
    std::fprintf(stderr, "fathom sim: %s\n", s.message().c_str());
    return kExitUsage;
  }
  const proto::ExpectSpec* expect = sc.spec.has_expect() ? &sc.spec.expect() : nullptr;
  const int code = RunTrainingScenario("fathom sim", sc, world.value().get(), f.json, expect, comm);
  return code;
}

int RunSimOn(const SimFlags& f, parallel::Comm* comm) {
  StartGate gate{comm};
  std::vector<std::pair<std::string, std::string>> pcaps;
  for (const std::string& p : f.pcap) {
    const size_t eq = p.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == p.size()) {
      std::fprintf(stderr, "fathom sim: --pcap %s: expected LINK=FILE (e.g. h0-leaf0=h0.pcap)\n",
                   p.c_str());
      return kExitUsage;
    }
    pcaps.emplace_back(p.substr(0, eq), p.substr(eq + 1));
  }
  auto loaded = sim::LoadScenario(f.scenario);
  if (!loaded.ok()) {
    std::fprintf(stderr, "fathom sim: %s\n", loaded.status().message().c_str());
    return kExitUsage;
  }
  // A training loop runs on the collectives over the same fabric, through
  // the code `fathom coll train` runs (tools/train_run.h).
  if (loaded->spec.workload().pattern() == proto::WorkloadSpec::PATTERN_TRAINING) {
    return RunTrainingSim(f, *loaded, comm);
  }
  // Verbs-level faults wrap the transport API, which `sim`'s flows do not
  // run over: refuse rather than ignore them.
  if (loaded->spec.verbs_faults_size() > 0) {
    std::fprintf(stderr, "fathom sim: %s\n",
                 loaded->map
                     .Error("verbs_faults",
                            "verbs-level faults act on the transport API: run this scenario "
                            "with `fathom coll OP --scenario`")
                     .message()
                     .c_str());
    return kExitUsage;
  }
  const int file_faults = loaded->spec.faults_size();
  if (Status s = faults::AppendFaultFlags(f.faults, loaded->spec.mutable_faults()); !s.ok()) {
    std::fprintf(stderr, "fathom sim: %s\n", s.message().c_str());
    return kExitUsage;
  }
  // An error in a flag's fault names the flag, not the scenario's last line.
  for (size_t i = 0; i < f.faults.size(); ++i) {
    loaded->map.AddOrigin("faults[" + std::to_string(file_faults + static_cast<int>(i)) + "]",
                          "--fault '" + f.faults[i] + "'");
  }

  // Every output, before the run.
  sim::RunOptions opts;
  opts.seed = f.seed;
  std::vector<std::unique_ptr<sim::PortCapture>> captures;
  // Under mpirun rank 0 writes the files (the merge: capture_merge.h).
  const bool writes_files = comm == nullptr || comm->rank() == 0;
  for (const auto& [what, path] : pcaps) {
    auto cap = sim::PortCapture::Open(loaded->topology, what, path, writes_files);
    if (!cap.ok()) {
      std::fprintf(stderr, "fathom sim: %s\n", cap.status().message().c_str());
      return kExitUsage;
    }
    opts.open_captures.push_back(cap->get());
    captures.push_back(std::move(cap).value());
  }
  if (Status s = sim::CheckDisjoint(opts.open_captures, loaded->topology); !s.ok()) {
    std::fprintf(stderr, "fathom sim: %s\n", s.message().c_str());
    return kExitUsage;
  }
  OutFile trace_file, json_file;
  std::unique_ptr<sim::EventTraceWriter> trace;
  if (!f.trace.empty() && writes_files) {
    if (!trace_file.Open("--trace", f.trace)) return kExitUsage;
    trace = std::make_unique<sim::EventTraceWriter>(trace_file.f, &loaded->topology);
    opts.trace = trace.get();
  }
  if (!f.json_out.empty() && !json_file.Open("--json-out", f.json_out)) return kExitUsage;
  OutFile flows_file;
  const auto ends_with = [](const std::string& s, const char* tail) {
    const size_t n = std::strlen(tail);
    return s.size() > n && s.compare(s.size() - n, n, tail) == 0;
  };
  const bool flows_csv = ends_with(f.flows_out, ".csv");
  if (!f.flows_out.empty()) {
    if (!flows_csv && !ends_with(f.flows_out, ".json")) {
      std::fprintf(stderr,
                   "fathom sim: --flows-out %s: the file name must end in .json or .csv (the "
                   "format)\n",
                   f.flows_out.c_str());
      return kExitUsage;
    }
    if (!flows_file.Open("--flows-out", f.flows_out)) return kExitUsage;
  }

  opts.progress = !f.quiet && isatty(STDERR_FILENO) != 0;
  // The canonical event order runs through the distributed run's hooks,
  // with one process or several (fabric/parallel/).
  const bool canonical = comm != nullptr;
  std::unique_ptr<parallel::DistributedRun> distributed;
  std::unique_ptr<parallel::OutputMerge> outputs;
  if (canonical) {
    distributed =
        std::make_unique<parallel::DistributedRun>(comm, &loaded->topology, &loaded->spec);
    opts.hooks = distributed.get();
    opts.progress = false;
    // Every process records its partition's frames and events; rank 0
    // merges them into the files (the same for any number of processes).
    if (!f.trace.empty() || !opts.open_captures.empty()) {
      outputs = std::make_unique<parallel::OutputMerge>(comm, opts.open_captures, trace.get(),
                                                        !f.trace.empty());
      opts.trace = nullptr;
      distributed->set_outputs(outputs.get());
    }
  }
  if (!gate.Pass(true)) return kExitUsage;
  auto report = sim::RunScenario(*loaded, opts);
  if (!report.ok()) {
    if (comm == nullptr || comm->rank() == 0) {
      std::fprintf(stderr, "fathom sim: %s\n", report.status().message().c_str());
    }
    return report.status().code() == StatusCode::kInvalidArgument ||
                   report.status().code() == StatusCode::kNotFound
               ? kExitUsage
               : kExitFailure;
  }
  if (canonical) {
    // Rank 0 merges every process's report (report_merge.h); the others
    // are done.
    const std::vector<std::string> all =
        comm->Gather(parallel::EncodeReport(*report, distributed->stats()));
    if (comm->rank() != 0) return kExitOk;
    std::vector<sim::RunReport> reports(all.size());
    std::vector<parallel::RunStats> stats(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      if (r == 0) {
        reports[0] = *report;
        stats[0] = distributed->stats();
        continue;
      }
      reports[r] = *report;
      if (Status s = parallel::DecodeReport(all[r], &reports[r], &stats[r]); !s.ok()) {
        std::fprintf(stderr, "fathom sim: %s\n", s.message().c_str());
        return kExitFailure;
      }
    }
    parallel::RunStats total;
    *report =
        parallel::MergeReports(reports, stats, distributed->partition(), loaded->topology, &total);
    if (!f.quiet) {
      std::fprintf(stderr,
                   "parallel   %d processes, canonical event order, window %.3f ns: %" PRIu64
                   " windows, %" PRIu64 " packets (%" PRIu64
                   " bytes) between processes, %.3f s in synchronization (slowest)\n",
                   comm->size(), distributed->window().ns(), total.windows, total.shipped,
                   total.shipped_bytes, total.sync_wall_s);
      // Each process's share of the work (how the partition balanced it).
      for (size_t r = 0; r < stats.size(); ++r) {
        std::fprintf(stderr,
                     "parallel   process %zu: %" PRIu64 " events run, %.3f s in synchronization\n",
                     r, stats[r].events, stats[r].sync_wall_s);
      }
    }
  }

  bool outputs_ok = true;
  if (trace != nullptr) {
    const Status s = trace->Finish("--trace " + f.trace);
    if (!s.ok()) std::fprintf(stderr, "fathom sim: %s\n", s.message().c_str());
    outputs_ok = trace_file.Close(/*reported=*/!s.ok()) && s.ok();
  }
  for (const auto& cap : captures) {
    if (Status s = cap->Flush(); !s.ok()) {
      std::fprintf(stderr, "fathom sim: --pcap %s: %s\n", cap->label().c_str(),
                   s.message().c_str());
      outputs_ok = false;
    }
  }
  const std::string json = f.json || json_file.f != nullptr ? sim::FormatJson(*report) : "";
  if (json_file.f != nullptr) {
    std::fwrite(json.data(), 1, json.size(), json_file.f);
    outputs_ok = json_file.Close() && outputs_ok;
  }
  if (flows_file.f != nullptr) {
    const std::string table =
        flows_csv ? sim::FormatFlowsCsv(*report) : sim::FormatFlowsJson(*report);
    std::fwrite(table.data(), 1, table.size(), flows_file.f);
    outputs_ok = flows_file.Close() && outputs_ok;
  }
  if (f.json) {
    std::fputs(json.c_str(), stdout);
  } else if (!f.quiet) {
    std::fputs(sim::FormatSummary(*report).c_str(), stdout);
  }
  std::fflush(stdout);
  // The reasons the run failed go to stderr, --quiet or not.
  // An expect item that names what this run does not have is bad input.
  const auto checked = sim::CheckExpectations(*loaded, *report);
  if (!checked.ok()) {
    std::fprintf(stderr, "fathom sim: %s\n", checked.status().message().c_str());
    return kExitUsage;
  }
  const std::vector<std::string>& failures = *checked;
  for (const std::string& m : failures) {
    std::fprintf(stderr, "fathom sim: %s: %s\n", f.scenario.c_str(), m.c_str());
  }
  if (!outputs_ok) return kExitUsage;
  return failures.empty() ? kExitOk : kExitFailure;
}

// A hash of what every process must agree on: the scenario file's bytes,
// the flags that change the run, and this binary's build.
uint64_t RunIdentity(const SimFlags& f) {
  std::ifstream in(f.scenario, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  std::string all = text.str() + "\n--seed " + (f.seed ? std::to_string(*f.seed) : "") +
                    "\n--event-order " + f.event_order + "\nbuild " + __DATE__ + " " + __TIME__ +
                    " " + std::to_string(sizeof(sim::RunReport));
  for (const std::string& fault : f.faults) all += "\n--fault " + fault;
  // The outputs too: every process records them (rank 0 merges).
  for (const std::string& pcap : f.pcap) all += "\n--pcap " + pcap;
  all += "\n--trace " + f.trace;
  uint64_t h = 0x51ed;
  for (char c : all) h = Mix64(h ^ static_cast<uint8_t>(c));
  return h;
}

int RunSim(const SimFlags& given) {
  // Under an MPI launcher the processes share the run (issue 30); without
  // one, MPI is never touched.
  std::unique_ptr<parallel::Comm> comm;
  if (parallel::LaunchedByMpi()) {
    auto joined = parallel::JoinMpi();
    if (!joined.ok()) {
      std::fprintf(stderr, "fathom sim: started by an MPI launcher: %s\n",
                   joined.status().message().c_str());
      return kExitUsage;
    }
    comm = std::move(joined).value();
  }
  const int32_t procs = comm != nullptr ? comm->size() : 1;
  const bool rank0 = comm == nullptr || comm->rank() == 0;
  // Rank 0 speaks for the run: the others would repeat its messages (every
  // process loads and checks the same scenario).
  if (!rank0 && std::freopen("/dev/null", "w", stderr) == nullptr) return kExitFailure;
  std::string refusal;
  if (given.event_order == "schedule" && procs > 1) {
    refusal = "--event-order schedule: the schedule order needs one process (" +
              std::to_string(procs) + " were started): use canonical";
  }
  if (comm != nullptr && procs > 1) {
    // Same scenario, flags and binary everywhere, or rank 0 says which not.
    const int64_t id = static_cast<int64_t>(RunIdentity(given) >> 1);
    std::vector<int64_t> lo{id}, hi{id};
    comm->AllMin(&lo);
    comm->AllMax(&hi);
    if (lo[0] != hi[0]) {
      refusal = "the " + std::to_string(procs) + " processes disagree on the run (scenario file " +
                given.scenario + ", flags or fathom binary): each must run the same";
    }
  }
  if (!refusal.empty()) {
    if (rank0) std::fprintf(stderr, "fathom sim: %s\n", refusal.c_str());
    return kExitUsage;
  }
  if (comm == nullptr && given.event_order == "canonical") {
    comm = std::make_unique<parallel::LocalComm>();
  }
  if (comm != nullptr && comm->size() == 1 && given.event_order != "canonical") {
    comm.reset();  // one process under mpirun: as without it
  }
  SimFlags f = given;
  if (!rank0) {
    // Rank 0 writes every output.
    f.json = false;
    f.json_out.clear();
    f.flows_out.clear();
    f.quiet = true;
  }
  const int code = RunSimOn(f, comm.get());
  if (comm == nullptr || comm->size() == 1) return code;
  std::vector<int64_t> agreed{code};
  comm->AllMax(&agreed);
  return static_cast<int>(agreed[0]);
}

}  // namespace

FATHOM_REGISTER_COMMAND(
    sim,
    Command{"sim", "Run a scenario in the fabric simulator (virtual time) and summarize it",
            [](CLI::App* sub) -> std::function<int()> {
              auto flags = std::make_shared<SimFlags>();
              sub->add_option("scenario", flags->scenario,
                              "scenario file (YAML); a training loop (workload.pattern: "
                              "training) runs as `fathom coll train --scenario` runs it, with "
                              "the scenario's own settings, and prints its iteration report")
                  ->required();
              sub->add_option("--seed", flags->seed,
                              "override the scenario's seed (0..2^64-1, as `seed:` in the file)")
                  ->type_name("UINT64")
                  ->check(CLI::Validator(CheckSeed, "", "seed"));
              // A flag, as in decode, topo, coll, faults: `--json FILE` is
              // refused (CLI11: FILE is an unexpected argument).
              sub->add_flag("--json", flags->json,
                            "print the report as JSON on stdout instead of the summary");
              sub->add_option("--json-out", flags->json_out,
                              "also write the report as JSON to this file")
                  ->type_name("FILE");
              sub->add_option("--flows-out", flags->flows_out,
                              "write the per-flow table (src, dst, QPNs, bytes, start, end, FCT, "
                              "status, first error and its time, retransmissions) to FILE.json "
                              "or FILE.csv")
                  ->type_name("FILE");
              sub->add_option("--pcap", flags->pcap,
                              "capture as LINK=FILE, both directions: a link (h0-leaf0), a node "
                              "(leaf0 = all its links, one file), tier:N or a glob, the names "
                              "--fault link= takes; under mpirun rank 0 writes the file, the "
                              "same for any number of processes")
                  ->type_name("LINK=FILE")
                  ->expected(1)
                  ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
              sub->add_option("--trace", flags->trace,
                              "write every event to this file as Chrome trace JSON (Perfetto, "
                              "chrome://tracing): a track per port, NIC, QP timers, faults; "
                              "under mpirun rank 0 writes it, the same for any number of "
                              "processes")
                  ->type_name("FILE");
              sub->add_flag("--quiet", flags->quiet,
                            "no summary table, no progress (failures still go to stderr)");
              sub->add_option(
                     "--fault", flags->faults,
                     "add a fault, scenario syntax: kind=loss,link=leaf0-spine0,rate=0.01 or "
                     "'{kind: loss, ...}' (see `fathom faults`)")
                  ->expected(1)
                  ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
              sub->add_option("--event-order", flags->event_order,
                              "schedule: ties in time go in schedule order (one process; the "
                              "default); canonical: by kind and component, the order a run "
                              "split across MPI processes (mpirun -np N fathom sim ...) takes "
                              "and the default there: its digest and report are the same for "
                              "any number of processes (a training scenario too: its loop starts "
                              "each collective at a window boundary, docs/PARALLEL.md)")
                  ->check(CLI::IsMember({"schedule", "canonical"}));
              sub->footer(
                  "Exit codes: 0 the run met its expectations; 1 it did not (an `expect` "
                  "value differs, or flows failed or stalled that `expect` does not set: "
                  "flows_failed, flows_stalled, or flows items); 2 bad scenario (an expect "
                  "item naming a flow, counter, port or fault the run does not have, too), bad "
                  "flag, or an output that cannot be written (every output is opened before "
                  "the run).");
              return [flags] { return RunSim(*flags); };
            },
            30});

}  // namespace fathom::tools
