// Communication-library evidence: NCCL's NCCL_DEBUG=INFO/WARN logs, fathom
// coll's watchdog report, and `fathom sim --json` / `--flows-out` output.
//
// NCCL line formats (NVIDIA/nccl, src/debug.cc, src/transport/net_ib.cc,
// src/misc/param.cc, src/init.cc, src/graph/connect.cc):
//   [optional timestamp] HOST:PID:TID [CUDADEV] NCCL INFO|WARN <message>
//   (2.26+ prefix WARN lines with "[%F %T] " by default,
//   NCCL_DEBUG_TIMESTAMP_FORMAT / _LEVELS change it; TRACE lines carry
//   "elapsed file:line" before "NCCL")
//   NCCL version 2.18.5+cuda12.2
//   NCCL_IB_TIMEOUT set by environment to 22.
//   comm 0x55d0 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 9c000 commId 0x.. - Init COMPLETE
//   Channel 00/02 :    0   1   2   3          (older: "Channel 00 :    0   1 ...")
//   NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>
//   NET/IB : Got completion from peer 10.0.0.2<45678> with status=12 opcode=0
//     len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGids ::ffff:10.0.0.2
//     [hca mlx5_0]                                        (2.19 .. 2.26)
//   NET/IB: Got completion from peer ... with status=IBV_WC_RETRY_EXC_ERR(12)
//     opcode=IBV_WC_SEND(0) vendor_err=129 localGid ... hca mlx5_0   (newer)
//   NET/IB : Got completion from peer ... with error 12, opcode 0, len 0,
//     vendor err 129                                      (older, CASES.md 5)
//   NET/IB : [mlx5_0:1 ]Got async event : port error
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "replay/evidence_internal.h"

namespace fathom::replay::internal {
namespace {

struct NcclPrefix {
  std::string host;
  long long pid = -1;
  int dev = -1;
  std::string level;  // INFO, WARN, TRACE, ABORT
  std::string message;
};

std::optional<NcclPrefix> SplitNcclPrefix(std::string_view line) {
  static const std::regex kPrefix(
      R"(^(\S+?):(\d+):(\d+) \[(\d+)\] (?:\[[^\]]*\] )?(?:.*? )??NCCL (INFO|WARN|TRACE|ABORT) ?(.*)$)");
  std::cmatch m;
  if (!std::regex_match(line.begin(), line.end(), m, kPrefix)) return std::nullopt;
  NcclPrefix p;
  p.host = m[1].str();
  p.pid = std::stoll(m[2].str());
  p.dev = std::stoi(m[4].str());
  p.level = m[5].str();
  p.message = m[6].str();
  return p;
}

std::optional<int> Int(const std::string& s) {
  auto v = ParseInt(s);
  if (!v || *v < INT32_MIN || *v > INT32_MAX) return std::nullopt;
  return static_cast<int>(*v);
}

}  // namespace

void ParseNcclLog(const FileInput& file, Evidence* ev, SourceReport* src) {
  src->kind = "nccl_log";
  static const std::regex kEnv(R"(^(NCCL_\w+) set by environment to (\S+?)\.?$)");
  static const std::regex kVersion(R"(^NCCL version (\S+))");
  static const std::regex kComm(R"(comm 0x[0-9a-fA-F]+ rank (\d+) n[Rr]anks (\d+))");
  static const std::regex kRing(R"(^Channel (\d+)(?:/\d+)? :((?:\s+\d+)+)\s*$)");
  static const std::regex kUsing(R"(NET/IB ?: Using (.*?)(?:; OOB (\S+?):(\S+?)<\d+>)?\s*$)");
  static const std::regex kUsingDev(R"(\[\d+\]([A-Za-z0-9_]+):\d+)");
  static const std::regex kCompletion(
      R"(Got completion from peer (\S+) with status=(?:[^()=]*\()?(\d+)\)? opcode=(?:[^()=]*\()?(\d+)\)?(?: len=\d+)? vendor[ _]err[ =](\d+)(?: \((\w+)\))?(.*)$)");
  static const std::regex kCompletionOld(
      R"(Got completion (?:from peer (\S+) )?with error (\d+), opcode (\d+), len \d+, vendor err (\d+))");
  static const std::regex kGid(R"(localGid (\S+))");
  static const std::regex kRemoteGid(R"(remoteGids? (\S+))");
  static const std::regex kAsync(R"(Got async event : (.+?)\s*$)");
  static const std::regex kTrees(R"(^Trees? )");
  std::map<long long, int> pid_rank;  // within this file
  const auto lines = SplitLines(file.text);
  const bool ends_cut = !file.text.empty() && file.text.back() != '\n';
  std::string file_host = file.host;
  int n = 0;
  for (std::string_view raw : lines) {
    ++n;
    std::string_view line = Trim(raw);
    if (line.empty()) continue;
    if (n == static_cast<int>(lines.size()) && ends_cut) {
      // The last line has no newline: the writer died or the copy was cut;
      // what it holds may be a prefix of the real line, so it is not used.
      NoteProblem(src, n, "the log ends mid-line (truncated); last line not used");
      ++src->lines_ignored;
      continue;
    }
    std::optional<double> ts = TakeTimestamp(&line);
    auto p = SplitNcclPrefix(line);
    if (!p) {
      // PyTorch's collective watchdog (CASES.md, "How long things take").
      if (Contains(line, "Watchdog caught collective operation timeout")) {
        RankEvent e;
        e.host = file_host;
        e.kind = "timeout";
        e.detail = std::string(line);
        if (StartsWith(line, "[Rank ")) e.rank = std::atoi(std::string(line.substr(6)).c_str());
        e.time_s = ts.value_or(-1);
        if (ts) SeeWallTime(ev, *ts);
        ev->rank_events.push_back(e);
        ++src->lines_recognised;
        continue;
      }
      ++src->lines_ignored;
      continue;
    }
    std::string msg = p->message;
    {
      // 2.26+: the timestamp may follow the "[dev]" instead of leading.
      std::string_view mv(msg);
      if (!ts) ts = TakeTimestamp(&mv);
      msg = std::string(mv);
    }
    if (ts) SeeWallTime(ev, *ts);
    if (file_host.empty()) file_host = p->host;
    if (src->host.empty()) src->host = p->host;
    const std::string host = file.host.empty() ? p->host : file.host;
    const int rank = pid_rank.count(p->pid) ? pid_rank[p->pid] : -1;
    std::smatch m;
    bool used = true;
    if (std::regex_search(msg, m, kVersion)) {
      ev->library.library = "nccl";
      ev->library.version = m[1].str();
    } else if (std::regex_match(msg, m, kEnv)) {
      const std::string name = m[1].str();
      const std::optional<int> v = Int(m[2].str());
      if (ev->library.library.empty()) ev->library.library = "nccl";
      if (name == "NCCL_IB_TIMEOUT") {
        ev->library.ib_timeout = v;
      } else if (name == "NCCL_IB_RETRY_CNT") {
        ev->library.ib_retry_cnt = v;
      } else if (name == "NCCL_IB_GID_INDEX") {
        ev->library.ib_gid_index = v;
      } else if (name == "NCCL_IB_TC") {
        ev->library.ib_tc = v;
      } else if (name == "NCCL_IB_QPS_PER_CONNECTION") {
        ev->library.qps_per_connection = v;
      } else if (name == "NCCL_ALGO") {
        ev->library.algorithm = m[2].str();
      } else {
        used = false;  // another setting: known format, not needed
      }
      if (used && !v && name != "NCCL_ALGO") {
        NoteProblem(src, n, name + " value '" + m[2].str() + "' is not a number");
      }
    } else if (std::regex_search(msg, m, kComm)) {
      const int r = std::stoi(m[1].str());
      pid_rank[p->pid] = r;
      ev->library.nranks = std::stoi(m[2].str());
      if (ev->library.library.empty()) ev->library.library = "nccl";
      bool known = false;
      for (RankInfo& ri : ev->ranks) {
        if (ri.rank == r) {
          known = true;
          if (ri.host.empty()) ri.host = host;
        }
      }
      if (!known) {
        RankInfo ri;
        ri.rank = r;
        ri.host = host;
        ri.device = ev->hosts.count(host) ? ev->hosts[host].device : "";
        ev->ranks.push_back(ri);
      }
    } else if (std::regex_match(msg, m, kRing)) {
      if (std::stoi(m[1].str()) == 0 && ev->library.ring.empty()) {
        for (const std::string& w : SplitWords(m[2].str()))
          ev->library.ring.push_back(std::stoi(w));
        if (ev->library.algorithm.empty()) ev->library.algorithm = "ring";
      }
    } else if (std::regex_search(msg, m, kTrees)) {
      // Tree lines are known but the replay models rings.
      used = false;
    } else if (std::regex_search(msg, m, kUsing)) {
      HostState& h = Host(ev, host);
      std::smatch d;
      const std::string devs = m[1].str();
      if (std::regex_search(devs, d, kUsingDev)) {
        h.device = d[1].str();
        const std::string drv = DriverFromDevice(h.device);
        if (!drv.empty() && (h.driver.empty() || h.driver == "unknown")) h.driver = drv;
        for (RankInfo& ri : ev->ranks) {
          if (ri.host == host && ri.device.empty()) ri.device = h.device;
        }
      }
      if (m[3].matched) {
        const std::string addr = m[3].str();
        if (std::find(h.addresses.begin(), h.addresses.end(), addr) == h.addresses.end()) {
          h.addresses.push_back(addr);
        }
      }
    } else if (Contains(msg, "Got completion")) {
      CompletionError e;
      e.host = host;
      e.rank = rank;
      e.time_s = ts.value_or(-1);
      if (std::regex_search(msg, m, kCompletion)) {
        e.peer = m[1].str();
        e.status_code = std::stoi(m[2].str());
        e.opcode = m[3].str();
        e.vendor_err = std::stoi(m[4].str());
        const std::string tail = m[6].str();
        std::smatch g;
        if (std::regex_search(tail, g, kGid)) e.local_gid = g[1].str();
        if (std::regex_search(tail, g, kRemoteGid)) e.remote_gid = g[1].str();
      } else if (std::regex_search(msg, m, kCompletionOld)) {
        e.peer = m[1].matched ? m[1].str() : "";
        e.status_code = std::stoi(m[2].str());
        e.opcode = m[3].str();
        e.vendor_err = std::stoi(m[4].str());
      } else {
        NoteProblem(src, n, "completion line without status/opcode/vendor err (truncated?)");
        ++src->lines_ignored;
        continue;
      }
      e.status = WcStatusNameOf(e.status_code);
      ev->errors.push_back(e);
    } else if (std::regex_search(msg, m, kAsync)) {
      RankEvent e;
      e.host = host;
      e.rank = rank;
      e.kind = "async_event";
      e.detail = m[1].str();
      e.time_s = ts.value_or(-1);
      ev->rank_events.push_back(e);
    } else {
      used = false;
    }
    if (used) {
      ++src->lines_recognised;
    } else {
      ++src->lines_ignored;
    }
  }
}

void ParseFathomWatchdog(const FileInput& file, Evidence* ev, SourceReport* src) {
  // `fathom coll`'s output: its header, result rows, exit status and the
  // watchdog's report (transport/collectives/driver.cc's lines).
  src->kind = "fathom_watchdog";
  if (ev->library.library.empty()) ev->library.library = "fathom";
  static const std::regex kStuck(
      R"(^rank (\d+) -> rank (\d+) qpn (0x[0-9a-fA-F]+): no completion for ([0-9.]+) s .*last status (\S+)\)$)");
  static const std::regex kCulprit(
      R"(^watchdog: culprit rank (\d+) -> rank (\d+) qpn (0x[0-9a-fA-F]+))");
  static const std::regex kNoProgress(R"(^watchdog: no progress .*for ([0-9.]+) s)");
  static const std::regex kAsync(R"(^rank (\d+): async event (\S+)(?: \((.*)\))?$)");
  // `fathom coll`'s header: "# fathom coll allreduce: backend verbs, 2 ranks
  // (one per process), rank 0 on rxe0 (...)" and nccl-tests' "#  Rank  0
  // Group  0 Pid 166 on HOST device rxe0 port 1 (...)".
  static const std::regex kHeader(
      R"(^# fathom coll (\w+): backend (\w+), (\d+) ranks(?: \(one per process\), rank (\d+) on (\S+))?)");
  static const std::regex kWaiting(R"(^rank (\d+): .*waiting for .* from rank (\d+))");
  static const std::regex kRc(R"(^rc=(\d+)$)");
  static const std::regex kOwn(
      R"(^watchdog: no progress on rank (\d+) \(of (\d+), one per process\))");
  int n = 0;
  int own_rank = -1;  // the rank whose output this is (its header says)
  for (std::string_view raw : SplitLines(file.text)) {
    ++n;
    const std::string line(Trim(raw));
    if (line.empty()) continue;
    std::smatch m;
    RankEvent e;
    e.host = file.host;
    // A rank's own watchdog line (not indented: rank 0 indents what it
    // gathered from the others) says whose output this is.
    if (own_rank < 0 && !std::isspace(static_cast<unsigned char>(raw[0])) &&
        std::regex_search(line, m, kOwn)) {
      own_rank = std::stoi(m[1].str());
      ev->library.nranks = std::stoi(m[2].str());
      bool known = false;
      for (RankInfo& ri : ev->ranks) known = known || ri.rank == own_rank;
      if (!known && !file.host.empty()) ev->ranks.push_back({own_rank, file.host, "", ""});
    }
    if (std::regex_search(line, m, kHeader)) {
      ev->library.algorithm = ev->library.algorithm.empty() ? "ring" : ev->library.algorithm;
      ev->library.nranks = std::stoi(m[3].str());
      if (m[4].matched) own_rank = std::stoi(m[4].str());
      if (m[4].matched && !file.host.empty()) {
        const int r = own_rank;
        bool known = false;
        for (RankInfo& ri : ev->ranks) known = known || ri.rank == r;
        if (!known) ev->ranks.push_back({r, file.host, m[5].str(), ""});
        HostState& h = Host(ev, file.host);
        if (h.device.empty()) h.device = m[5].str();
        const std::string drv = DriverFromDevice(m[5].str());
        if (!drv.empty() && h.driver == "unknown") h.driver = drv;
      }
      ++src->lines_recognised;
      continue;
    }
    if (std::regex_match(line, m, kRc)) {
      // The run's exit status: not 0 means it failed or hung.
      if (m[1].str() != "0") {
        e.kind = "abort";
        e.detail = "fathom coll exited with " + line;
        ev->rank_events.push_back(e);
      }
      ++src->lines_recognised;
      continue;
    }
    if (std::regex_search(line, m, kWaiting)) {
      e.rank = std::stoi(m[1].str());
      e.peer = "rank " + m[2].str();
      e.kind = "stall";
      e.detail = line;
    } else if (std::regex_match(line, m, kStuck)) {
      e.rank = std::stoi(m[1].str());
      e.peer = "rank " + m[2].str();
      e.kind = "stall";
      e.detail = line;
    } else if (std::regex_search(line, m, kCulprit)) {
      e.rank = std::stoi(m[1].str());
      e.peer = "rank " + m[2].str();
      e.kind = "stall";
      e.detail = line;
    } else if (std::regex_search(line, m, kNoProgress)) {
      e.kind = "stall";
      e.detail = line;
    } else if (std::regex_match(line, m, kAsync)) {
      e.rank = std::stoi(m[1].str());
      e.kind = "async_event";
      e.detail = m[2].str();
    } else {
      ++src->lines_ignored;
      continue;
    }
    // Rank 0 gathers every rank's report: another rank's lines are that
    // rank's, whose host the rank table gives (LinkRanksAndPeers).
    if (e.rank >= 0 && own_rank >= 0 && e.rank != own_rank) e.host.clear();
    ev->rank_events.push_back(e);
    ++src->lines_recognised;
  }
}

void ParseFathomReport(const FileInput& file, Evidence* ev, SourceReport* src) {
  // `fathom sim --json` (an object with "flows") or `--flows-out` (JSON list
  // or CSV): failed flows become completion errors at their first error
  // (virtual time), stalled ones stalls.
  using Json = nlohmann::json;
  src->kind = "fathom_report";
  if (ev->library.library.empty()) ev->library.library = "fathom";
  auto add_flow = [&](const std::string& s, const std::string& d, const std::string& status,
                      const std::string& first_error, double first_error_ns, uint32_t qpn) {
    if (!first_error.empty()) {
      CompletionError e;
      e.host = s;
      e.peer = d;
      e.peer_host = d;
      e.status = first_error;
      for (int c = 0; c < 32; ++c) {
        if (WcStatusNameOf(c) == first_error) e.status_code = c;
      }
      e.qpn = qpn;
      e.time_s = first_error_ns >= 0 ? first_error_ns / 1e9 : -1;
      ev->errors.push_back(e);
    } else if (status == "stalled") {
      RankEvent e;
      e.host = s;
      e.peer = d;
      e.kind = "stall";
      e.detail = "flow " + s + " -> " + d + " stalled";
      ev->rank_events.push_back(e);
    }
    ++src->lines_recognised;
  };
  const std::string_view head = Trim(file.text);
  if (StartsWith(head, "index,src,dst")) {
    int n = 0;
    for (std::string_view l : SplitLines(file.text)) {
      if (++n == 1 || Trim(l).empty()) continue;
      const auto f = SplitFields(l, ',');
      if (f.size() < 13) {
        NoteProblem(src, n, "flow row with " + std::to_string(f.size()) + " of 13 columns");
        ++src->lines_ignored;
        continue;
      }
      const auto t = ParseDouble(f[11]);
      const auto q = ParseInt(f[3].substr(0, f[3].find(';')));
      add_flow(f[1], f[2], f[9], f[10], t.value_or(-1), q ? static_cast<uint32_t>(*q) : 0);
    }
    return;
  }
  Json j = Json::parse(file.text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    src->use = SourceReport::Use::kUnusable;
    src->reason = "not valid JSON (truncated?)";
    return;
  }
  const Json* flows = j.is_array() ? &j : (j.contains("flows") ? &j["flows"] : nullptr);
  if (flows == nullptr || !flows->is_array()) {
    src->use = SourceReport::Use::kUnusable;
    src->reason = "JSON without a flow table";
    return;
  }
  for (const Json& f : *flows) {
    if (!f.is_object() || !f.contains("src") || !f.contains("dst")) {
      ++src->lines_ignored;
      continue;
    }
    uint32_t qpn = 0;
    if (f.contains("qps") && f["qps"].is_array()) {
      for (const Json& q : f["qps"]) {
        if (q.contains("first_error") && q["first_error"].is_string() && q.contains("qpn")) {
          qpn = q["qpn"].get<uint32_t>();
          break;
        }
      }
    }
    add_flow(f["src"].get<std::string>(), f["dst"].get<std::string>(),
             f.value("status", std::string()),
             f.contains("first_error") && f["first_error"].is_string()
                 ? f["first_error"].get<std::string>()
                 : std::string(),
             f.contains("first_error_ns") && f["first_error_ns"].is_number()
                 ? f["first_error_ns"].get<double>()
                 : -1,
             qpn);
  }
}

void ParseJobTimes(const FileInput& file, Evidence* ev, SourceReport* src) {
  // "start UNIX" / "end UNIX" (testbed/collect_evidence.sh's times.txt):
  // the job's wall-clock span, which sets the time origin and last_s.
  src->kind = "job_times";
  int n = 0;
  for (std::string_view raw : SplitLines(file.text)) {
    ++n;
    const auto w = SplitWords(raw);
    if (w.empty()) continue;
    const double t = w.size() == 2 ? ParseDouble(w[1]).value_or(0) : 0;
    if ((w[0] != "start" && w[0] != "end") || t < kWallClockS) {
      NoteProblem(src, n, "'start|end UNIX-TIME' expected");
      ++src->lines_ignored;
      continue;
    }
    SeeWallTime(ev, t);
    ++src->lines_recognised;
  }
}

}  // namespace fathom::replay::internal
