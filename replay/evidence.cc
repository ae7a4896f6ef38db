// ReadEvidence: walks a bundle (a directory, or a tarball unpacked with the
// system `tar` into a temporary directory removed afterwards), classifies
// each file by its content first and its name second, hands it to its
// parser (evidence_*.cc), then ties the sources together: hosts of ranks,
// peers of errors, the time origin. Files whose name starts with '.' (the
// corpus's hidden .truth.json among them) are never opened.
#include "replay/evidence.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/temp_dir.h"
#include "replay/evidence_internal.h"

namespace fathom::replay {
namespace internal {
namespace fs = std::filesystem;

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(start, end - start);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    lines.push_back(l);
    start = end + 1;
  }
  return lines;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string> SplitFields(std::string_view line, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = line.find(sep, start);
    out.emplace_back(Trim(line.substr(start, end == std::string_view::npos ? end : end - start)));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

std::vector<std::string> SplitWords(std::string_view line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i) out.emplace_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool Contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

std::optional<long long> ParseInt(std::string_view s) {
  s = Trim(s);
  if (s.empty()) return std::nullopt;
  std::string t(s);
  char* end = nullptr;
  errno = 0;
  const int base = StartsWith(t, "0x") || StartsWith(t, "0X") ? 16 : 10;
  const long long v = std::strtoll(t.c_str(), &end, base);
  if (errno != 0 || end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

std::optional<double> ParseDouble(std::string_view s) {
  s = Trim(s);
  if (s.empty()) return std::nullopt;
  std::string t(s);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

namespace {

// "2026-12-05 11:00:00.25" or "2026-12-05T11:00:00.25Z" (UTC) -> Unix time.
std::optional<double> ParseIsoTime(std::string_view s, size_t* used) {
  int y, mo, d, h, mi, sec, n = 0;
  std::string t(s.substr(0, std::min<size_t>(s.size(), 40)));
  if (std::sscanf(t.c_str(), "%4d-%2d-%2d%*1[ T]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) !=
          6 ||
      n < 19) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  double v = static_cast<double>(timegm(&tm));
  size_t i = static_cast<size_t>(n);
  if (i < t.size() && (t[i] == '.' || t[i] == ',')) {
    size_t j = i + 1;
    double scale = 0.1;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) {
      v += (t[j] - '0') * scale;
      scale /= 10;
      ++j;
    }
    i = j;
  }
  if (i < t.size() && t[i] == 'Z') ++i;
  *used = i;
  return v;
}

}  // namespace

std::optional<double> TakeTimestamp(std::string_view* line) {
  std::string_view s = *line;
  const bool bracket = !s.empty() && s.front() == '[';
  if (bracket) s.remove_prefix(1);
  size_t used = 0;
  std::optional<double> v = ParseIsoTime(s, &used);
  if (!v) {
    // An epoch number with a fraction: "1764932400.123456".
    size_t j = 0;
    while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
    if (j >= 10) {
      v = ParseDouble(s.substr(0, j));
      if (v && *v < kWallClockS) v.reset();
      used = j;
    }
  }
  if (!v) return std::nullopt;
  s.remove_prefix(used);
  if (bracket) {
    if (s.empty() || s.front() != ']') return std::nullopt;
    s.remove_prefix(1);
  }
  if (!s.empty() && !std::isspace(static_cast<unsigned char>(s.front()))) return std::nullopt;
  *line = Trim(s);
  return v;
}

std::optional<double> ParseTimeField(std::string_view s) {
  s = Trim(s);
  size_t used = 0;
  if (auto v = ParseIsoTime(s, &used); v && used == s.size()) return v;
  return ParseDouble(s);
}

std::string HostFromPath(std::string_view rel) {
  // A file name "h3.ibv_devinfo.txt" / "h3_ethtool.txt" (a host, then a
  // tool's name); else a directory "hosts/h3/..." or "h3/...": the innermost
  // one that is not a tool's or a collection's name.
  static const char* kNotHosts[] = {
      "hosts",    "logs", "nccl",  "rdma",       "fabric",   "switch", "hw_counters",
      "ports",    "sys",  "class", "infiniband", "captures", "bundle", "evidence",
      "counters", "net",  "dumps", "sim",        "node",     "nodes",  "collect"};
  static const char* kTools[] = {"nccl", "ibv",      "ip",        "rdma",       "ethtool", "show",
                                 "gids", "topology", "neighbors", "neighbours", "switch",  "link",
                                 "hw",   "capture",  "fathom",    "watchdog",   "flows",   "sim",
                                 "coll", "times",    "devinfo",   "statistic"};
  auto not_host = [](std::string_view n) {
    for (const char* k : kNotHosts) {
      if (n == k) return true;
    }
    return n.empty() || n == "." || std::all_of(n.begin(), n.end(), [](char c) {
             return std::isdigit(static_cast<unsigned char>(c));
           });
  };
  const fs::path p(rel);
  const std::string name = p.filename().string();
  for (const char sep : {'.', '_'}) {
    const size_t cut = name.find(sep);
    if (cut == std::string::npos || cut == 0) continue;
    const std::string stem = name.substr(0, cut);
    const std::string rest = name.substr(cut + 1);
    bool stem_is_tool = false, names_tool = false;
    for (const char* t : kTools) {
      stem_is_tool = stem_is_tool || stem == t;
      names_tool = names_tool || Contains(rest, t);
    }
    if (!stem_is_tool && names_tool && !not_host(stem)) return stem;
  }
  std::vector<std::string> parts;
  for (const auto& part : p.parent_path()) parts.push_back(part.string());
  // Per-counter files under /sys/class/infiniband/DEV/ports/N/hw_counters:
  // the host is above "sys" (or the bundle's first directory).
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "sys" || parts[i] == "infiniband") {
      for (size_t k = i; k-- > 0;) {
        if (!not_host(parts[k])) return parts[k];
      }
      return "";
    }
  }
  for (size_t k = parts.size(); k-- > 0;) {
    if (!not_host(parts[k])) return parts[k];
  }
  return "";
}

void NoteProblem(SourceReport* src, int line, const std::string& why) {
  if (src->use == SourceReport::Use::kUsed) src->use = SourceReport::Use::kPartly;
  // Keep the reason readable: the first three problems, then a count.
  const int shown = static_cast<int>(std::count(src->reason.begin(), src->reason.end(), ';'));
  if (shown < 3) {
    if (!src->reason.empty()) src->reason += "; ";
    src->reason += (line > 0 ? "line " + std::to_string(line) + ": " : std::string()) + why;
  } else if (shown == 3) {
    src->reason += "; ...";
  }
}

HostState& Host(Evidence* ev, const std::string& name) {
  HostState& h = ev->hosts[name];
  if (h.host.empty()) h.host = name;
  if (h.driver.empty()) h.driver = "unknown";
  return h;
}

void SeeWallTime(Evidence* ev, double t) {
  if (t <= kWallClockS) return;
  if (ev->origin_wall_s == 0 || t < ev->origin_wall_s) ev->origin_wall_s = t;
  ev->wall_last_s = std::max(ev->wall_last_s, t);
}

std::string WcStatusNameOf(int status) {
  // ibv_wc_status (rdma-core libibverbs/verbs.h), in enum order.
  static const char* kNames[] = {"IBV_WC_SUCCESS",
                                 "IBV_WC_LOC_LEN_ERR",
                                 "IBV_WC_LOC_QP_OP_ERR",
                                 "IBV_WC_LOC_EEC_OP_ERR",
                                 "IBV_WC_LOC_PROT_ERR",
                                 "IBV_WC_WR_FLUSH_ERR",
                                 "IBV_WC_MW_BIND_ERR",
                                 "IBV_WC_BAD_RESP_ERR",
                                 "IBV_WC_LOC_ACCESS_ERR",
                                 "IBV_WC_REM_INV_REQ_ERR",
                                 "IBV_WC_REM_ACCESS_ERR",
                                 "IBV_WC_REM_OP_ERR",
                                 "IBV_WC_RETRY_EXC_ERR",
                                 "IBV_WC_RNR_RETRY_EXC_ERR",
                                 "IBV_WC_LOC_RDD_VIOL_ERR",
                                 "IBV_WC_REM_INV_RD_REQ_ERR",
                                 "IBV_WC_REM_ABORT_ERR",
                                 "IBV_WC_INV_EECN_ERR",
                                 "IBV_WC_INV_EEC_STATE_ERR",
                                 "IBV_WC_FATAL_ERR",
                                 "IBV_WC_RESP_TIMEOUT_ERR",
                                 "IBV_WC_GENERAL_ERR",
                                 "IBV_WC_TM_ERR",
                                 "IBV_WC_TM_RNDV_INCOMPLETE"};
  if (status >= 0 && status < static_cast<int>(std::size(kNames))) return kNames[status];
  return "status " + std::to_string(status);
}

std::string Classify(const FileInput& f) {
  const std::string& t = f.text;
  const std::string name = fs::path(f.rel).filename().string();
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Binary captures by their magic number (pcap both byte orders and the
  // nanosecond variant; pcapng's section header block).
  if (t.size() >= 4) {
    const uint32_t m = static_cast<uint8_t>(t[0]) | static_cast<uint8_t>(t[1]) << 8 |
                       static_cast<uint8_t>(t[2]) << 16 |
                       static_cast<uint32_t>(static_cast<uint8_t>(t[3])) << 24;
    if (m == 0xa1b2c3d4 || m == 0xd4c3b2a1 || m == 0xa1b23c4d || m == 0x4d3cb2a1 ||
        m == 0x0a0d0d0a) {
      return "capture";
    }
  }
  const std::string_view head(t.data(), std::min<size_t>(t.size(), 4096));
  // Content.
  if (Contains(head, " NCCL INFO ") || Contains(head, " NCCL WARN ") ||
      Contains(head, "NCCL INFO NCCL version") || Contains(t, " NCCL WARN ")) {
    return "nccl_log";
  }
  if (Contains(head, "watchdog: no progress") || Contains(head, "watchdog: culprit") ||
      Contains(head, "# fathom coll ")) {
    return "fathom_watchdog";
  }
  if (Contains(head, "\"trace_digest\"") || Contains(head, "\"flows_total\"") ||
      (Contains(head, "\"peer_qpns\"") && Contains(head, "\"first_error\"")) ||
      StartsWith(head, "index,src,dst,qpns,peer_qpns")) {
    return "fathom_report";
  }
  if (StartsWith(head, "link ") && Contains(head, "/")) return "rdma_statistic";
  if ((StartsWith(head, "start ") || StartsWith(head, "end ")) && SplitLines(head).size() <= 4) {
    return "job_times";
  }
  if (Contains(head, "hca_id:") && Contains(head, "port:")) return "ibv_devinfo";
  if (StartsWith(Trim(head), "NIC statistics:")) return "ethtool";
  if (Contains(head, "DEV") && Contains(head, "INDEX") && Contains(head, "GID") &&
      Contains(head, "VER")) {
    return "gids";
  }
  {
    // `ip -d link`: "2: eth0: <BROADCAST,...> mtu 9000 ...".
    const std::string_view first = Trim(head.substr(0, head.find('\n')));
    const size_t c = first.find(": ");
    if (c != std::string_view::npos && ParseInt(first.substr(0, c)) && Contains(first, " mtu ")) {
      return "ip_link";
    }
  }
  // `grep . /sys/class/infiniband/*/ports/*/hw_counters/*`: PATH:COUNT lines.
  for (std::string_view l : SplitLines(head)) {
    l = Trim(l);
    const size_t colon = l.rfind(':');
    if (StartsWith(l, "/") && Contains(l, "/hw_counters/") && colon != std::string_view::npos &&
        ParseInt(l.substr(colon + 1))) {
      return "hw_counters";
    }
  }
  const std::string first_line(Trim(head.substr(0, head.find('\n'))));
  std::string header = first_line;
  for (char& c : header) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto has_cols = [&](std::initializer_list<const char*> cols) {
    for (const char* c : cols) {
      if (!Contains(header, c)) return false;
    }
    return true;
  };
  const bool json = StartsWith(Trim(head), "[") || StartsWith(Trim(head), "{");
  if (has_cols({"host", "switch", "port"}) ||
      (json && Contains(head, "\"switch\"") && Contains(head, "\"host\""))) {
    return "neighbors";
  }
  if (has_cols({"port", "counter", "value"}) ||
      (json && Contains(head, "\"counter\"") && Contains(head, "\"port\""))) {
    return "switch_counters";
  }
  if (has_cols({"time", "link"}) ||
      (json && Contains(head, "\"link\"") && Contains(head, "\"time"))) {
    return "link_events";
  }
  if (Contains(head, "leaf_spine:") || Contains(head, "fat_tree:") ||
      Contains(head, "cluster_network:") || Contains(head, "back_to_back:") ||
      StartsWith(Trim(head), "preset:")) {
    return "topology";
  }
  // Name.
  if (Contains(lower, ".pcap") || EndsWith(lower, ".cap")) return "capture";
  if (Contains(lower, "nccl")) return "nccl_log";
  if (Contains(lower, "ibv_devinfo")) return "ibv_devinfo";
  if (Contains(lower, "ethtool")) return "ethtool";
  if (Contains(lower, "gids")) return "gids";
  if (Contains(lower, "ip_link") || Contains(lower, "ip-link") || Contains(lower, "ip_d_link")) {
    return "ip_link";
  }
  if (Contains(lower, "rdma_stat") || Contains(lower, "rdma-stat")) return "rdma_statistic";
  if (Contains(f.rel, "hw_counters")) return "hw_counters";
  if (Contains(lower, "topology") || Contains(lower, "preset")) return "topology";
  if (Contains(lower, "neighbo")) return "neighbors";
  if (Contains(lower, "switch_counters") || Contains(lower, "switch-counters")) {
    return "switch_counters";
  }
  if (Contains(lower, "link_events") || Contains(lower, "link-events")) return "link_events";
  // "name value" lines of known counter names: a hw_counters dump.
  int known = 0, lines = 0;
  for (std::string_view l : SplitLines(head)) {
    const auto w = SplitWords(l);
    if (w.empty()) continue;
    ++lines;
    std::string n = w[0];
    if (!n.empty() && n.back() == ':') n.pop_back();
    if (IsRxeCounter(n) || IsMlx5Counter(n)) ++known;
  }
  if (known > 0 && known * 2 >= lines) return "hw_counters";
  return "unknown";
}

namespace {

using Parser = void (*)(const FileInput&, Evidence*, SourceReport*);

Parser ParserFor(const std::string& kind) {
  static const std::pair<const char*, Parser> kParsers[] = {
      {"nccl_log", ParseNcclLog},
      {"fathom_watchdog", ParseFathomWatchdog},
      {"fathom_report", ParseFathomReport},
      {"job_times", ParseJobTimes},
      {"rdma_statistic", ParseRdmaStatistic},
      {"hw_counters", ParseHwCounters},
      {"ibv_devinfo", ParseIbvDevinfo},
      {"ip_link", ParseIpLink},
      {"gids", ParseGids},
      {"ethtool", ParseEthtool},
      {"topology", ParseTopology},
      {"neighbors", ParseNeighbors},
      {"switch_counters", ParseSwitchCounters},
      {"link_events", ParseLinkEvents},
      {"capture", ParseCapture},
  };
  for (const auto& [k, p] : kParsers) {
    if (kind == k) return p;
  }
  return nullptr;
}

// Runs `tar -xf ARCHIVE -C DIR` (tar detects gzip itself); a non-zero exit
// is the error.
Status Untar(const std::string& archive, const std::string& dir) {
  const pid_t pid = fork();
  if (pid < 0) return IoError("fork for tar: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    // Quiet: tar's complaints are summarized by its exit status.
    if (std::freopen("/dev/null", "w", stderr) == nullptr) _exit(126);
    execlp("tar", "tar", "-xf", archive.c_str(), "-C", dir.c_str(), "--no-same-owner",
           "--no-same-permissions", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return IoError("waitpid for tar");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return InvalidArgument(archive + ": not a readable tarball (tar -xf exit " +
                           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  }
  return Status::Ok();
}

bool IsTarball(const std::string& p) {
  return EndsWith(p, ".tar") || EndsWith(p, ".tar.gz") || EndsWith(p, ".tgz");
}

// Moves wall-clock times to the bundle's origin (the earliest wall-clock
// time any source showed) and sets last_s.
void SetTimeOrigin(Evidence* ev) {
  auto see = [&](double t) {
    if (t > kWallClockS && (ev->origin_wall_s == 0 || t < ev->origin_wall_s)) {
      ev->origin_wall_s = t;
    }
  };
  for (const auto& e : ev->errors) see(e.time_s);
  for (const auto& e : ev->rank_events) see(e.time_s);
  for (const auto& e : ev->link_events) see(e.time_s);
  for (const auto& c : ev->captures) see(c.first_s);
  const double origin = ev->origin_wall_s;
  double last = ev->wall_last_s > kWallClockS ? ev->wall_last_s - origin : -1;
  auto shift = [&](double& t) {
    if (t > kWallClockS) t -= origin;
    last = std::max(last, t);
  };
  for (auto& e : ev->errors) shift(e.time_s);
  for (auto& e : ev->rank_events) shift(e.time_s);
  for (auto& e : ev->link_events) shift(e.time_s);
  for (auto& c : ev->captures) {
    shift(c.first_s);
    shift(c.last_s);
  }
  ev->last_s = last;
  std::stable_sort(ev->errors.begin(), ev->errors.end(),
                   [](const auto& a, const auto& b) { return a.time_s < b.time_s; });
  std::stable_sort(ev->rank_events.begin(), ev->rank_events.end(),
                   [](const auto& a, const auto& b) { return a.time_s < b.time_s; });
  std::stable_sort(ev->link_events.begin(), ev->link_events.end(),
                   [](const auto& a, const auto& b) { return a.time_s < b.time_s; });
}

// Ranks' hosts fill in errors and events that name only a rank, and the
// peers of errors ("10.0.0.2<45678>") resolve to hosts through the GIDs and
// addresses the bundle shows.
void LinkRanksAndPeers(Evidence* ev) {
  std::map<int, std::string> rank_host;
  for (const RankInfo& r : ev->ranks) {
    if (r.rank >= 0 && !r.host.empty()) rank_host[r.rank] = r.host;
  }
  std::map<std::string, std::string> addr_host;  // IPv4 text or GID -> host
  for (const auto& [name, h] : ev->hosts) {
    for (const Gid& g : h.gids) {
      addr_host[g.gid] = name;
      const size_t ff = g.gid.rfind("ffff:");
      if (ff != std::string::npos && Contains(g.gid, ".")) addr_host[g.gid.substr(ff + 5)] = name;
    }
    for (const auto& a : h.addresses) addr_host[a] = name;
  }
  for (CompletionError& e : ev->errors) {
    if (e.host.empty() && rank_host.count(e.rank)) e.host = rank_host[e.rank];
    if (e.peer_host.empty()) {
      std::string addr = e.peer.substr(0, e.peer.find('<'));
      if (auto it = addr_host.find(addr); it != addr_host.end()) e.peer_host = it->second;
      if (e.peer_host.empty()) {
        if (auto it = addr_host.find(e.remote_gid); it != addr_host.end()) {
          e.peer_host = it->second;
        }
      }
      if (e.peer_host.empty() && !addr.empty() && ev->hosts.count(addr)) e.peer_host = addr;
    }
  }
  for (RankEvent& e : ev->rank_events) {
    if (e.host.empty() && rank_host.count(e.rank)) e.host = rank_host[e.rank];
  }
}

Status ReadTree(const fs::path& root, Evidence* ev) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;  // hidden: never evidence (the corpus's .truth.json)
    }
    if (it->is_regular_file()) files.push_back(it->path());
  }
  if (ec) return IoError(root.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  // Captures last: their oversize count needs the hosts' MTUs.
  std::stable_partition(files.begin(), files.end(), [](const fs::path& p) {
    const std::string n = p.filename().string();
    return !Contains(n, ".pcap") && !EndsWith(n, ".cap");
  });
  if (files.empty()) return InvalidArgument(ev->root + ": the bundle holds no file");
  for (const fs::path& p : files) {
    FileInput in;
    in.path = p.string();
    in.rel = fs::relative(p, root).string();
    in.host = HostFromPath(in.rel);
    SourceReport src;
    src.path = in.rel;
    src.host = in.host;
    std::ifstream f(p, std::ios::binary);
    if (!f) {
      src.kind = "unknown";
      src.use = SourceReport::Use::kUnusable;
      src.reason = "cannot open: " + std::string(std::strerror(errno));
      ev->sources.push_back(src);
      continue;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    in.text = ss.str();
    src.kind = Classify(in);
    if (in.text.empty()) {
      src.use = SourceReport::Use::kUnusable;
      src.reason = "empty file";
      ev->sources.push_back(src);
      continue;
    }
    Parser parse = ParserFor(src.kind);
    if (parse == nullptr) {
      src.use = SourceReport::Use::kIgnored;
      src.reason = "not a format fathom replay reads";
      src.lines_ignored = static_cast<int>(SplitLines(in.text).size());
      ev->sources.push_back(src);
      continue;
    }
    parse(in, ev, &src);
    if (src.use == SourceReport::Use::kUsed && src.lines_recognised == 0 && src.lines_ignored > 0) {
      src.use = SourceReport::Use::kUnusable;
      if (src.reason.empty()) src.reason = "no line of the expected format";
    }
    ev->sources.push_back(src);
  }
  return Status::Ok();
}

}  // namespace
}  // namespace internal

StatusOr<Evidence> ReadEvidence(const std::string& path) {
  namespace fs = std::filesystem;
  using namespace internal;
  Evidence ev;
  ev.root = path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return NotFound(path + ": no such file or directory");
  Status s;
  if (fs::is_directory(st)) {
    s = ReadTree(path, &ev);
  } else if (IsTarball(path)) {
    // Unpacked under $TMPDIR (or /tmp), removed once read.
    const StatusOr<std::string> tmp = MakeTempDir("fathom-evidence");
    if (!tmp.ok()) return IoError("ReadEvidence(" + path + "): " + tmp.status().message());
    const std::string dir = tmp.value();
    s = Untar(path, dir);
    if (s.ok()) s = ReadTree(dir, &ev);
    fs::remove_all(dir, ec);
  } else {
    return InvalidArgument(path + ": a bundle is a directory or a .tar, .tar.gz or .tgz file");
  }
  if (!s.ok()) return s;
  CheckFabricConsistency(&ev);
  LinkRanksAndPeers(&ev);
  SetTimeOrigin(&ev);
  return ev;
}

const char* UseName(SourceReport::Use use) {
  switch (use) {
    case SourceReport::Use::kUsed:
      return "used";
    case SourceReport::Use::kPartly:
      return "partly";
    case SourceReport::Use::kIgnored:
      return "ignored";
    case SourceReport::Use::kUnusable:
      return "unusable";
  }
  return "?";
}

}  // namespace fathom::replay
