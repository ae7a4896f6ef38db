#include "transport/collectives/trace.h"

#include <charconv>
#include <cstdio>
#include <set>
#include <utility>

#include "base/json.h"

namespace fathom::transport::coll {
namespace {

constexpr std::string_view kMagic = "fathom-trace";
constexpr int kVersion = 1;

// Tabs separate fields and newlines end events: neither may appear inside one.
std::string Field(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c == '\t' || c == '\n') c = ' ';
  }
  return out;
}

std::vector<std::string_view> Split(std::string_view line, size_t max_fields) {
  std::vector<std::string_view> f;
  while (f.size() + 1 < max_fields) {
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) break;
    f.push_back(line.substr(0, tab));
    line.remove_prefix(tab + 1);
  }
  f.push_back(line);
  return f;
}

template <typename T>
bool ParseInt(std::string_view s, T* v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string Trace::ToJson() const {
  std::string s = "{\"traceEvents\":[";
  char buf[256];
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    std::snprintf(buf, sizeof(buf), "%s{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%.6f,\"dur\":%.6f,",
                  i == 0 ? "" : ",\n", e.name.c_str(), e.start.us(), e.duration.us());
    s += buf;
    std::snprintf(buf, sizeof(buf), "\"pid\":%d,\"tid\":%d,\"args\":{", e.rank, e.stream);
    s += buf;
    s += e.args;
    s += "}}";
  }
  s += "]}\n";
  return s;
}

std::string EncodeRankTrace(const RankTrace& trace, size_t max_bytes, size_t* kept) {
  std::string body;
  size_t n = 0;
  // The header's KEPT field is only known at the end; reserve its room by
  // counting the header at its longest (KEPT = every event).
  const auto header = [&](size_t k) {
    return std::string(kMagic) + "\t" + std::to_string(kVersion) + "\t" +
           std::to_string(trace.rank) + "\t" + std::to_string(trace.origin.ps()) + "\t" +
           std::to_string(trace.events.size()) + "\t" + std::to_string(k) + "\n";
  };
  const size_t header_bytes = header(trace.events.size()).size();
  for (const TraceEvent& e : trace.events) {
    std::string line = Field(e.name) + "\t" + std::to_string(e.stream) + "\t" +
                       std::to_string(e.start.ps()) + "\t" + std::to_string(e.duration.ps()) +
                       "\t" + Field(e.args) + "\n";
    if (header_bytes + body.size() + line.size() > max_bytes) break;
    body += line;
    ++n;
  }
  if (kept != nullptr) *kept = n;
  return header(n) + body;
}

StatusOr<RankTrace> DecodeRankTrace(std::string_view text) {
  RankTrace t;
  size_t line_no = 0;
  size_t kept = 0;
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("DecodeRankTrace: line " + std::to_string(line_no) + ": " + why);
  };
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return bad("no newline at the end");
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (line_no == 1) {
      const auto f = Split(line, 6);
      int version = 0;
      int64_t origin = 0;
      if (f.size() != 6 || f[0] != kMagic || !ParseInt(f[1], &version) ||
          !ParseInt(f[2], &t.rank) || !ParseInt(f[3], &origin) ||
          !ParseInt(f[4], &t.total_events) || !ParseInt(f[5], &kept)) {
        return bad("expected header 'fathom-trace VERSION RANK ORIGIN_PS TOTAL KEPT', got '" +
                   std::string(line.substr(0, 80)) + "'");
      }
      if (version != kVersion) {
        return bad("version " + std::to_string(version) + ", this build reads " +
                   std::to_string(kVersion));
      }
      if (kept > t.total_events) {
        return bad("keeps " + std::to_string(kept) + " of " + std::to_string(t.total_events) +
                   " events");
      }
      t.origin = Picoseconds(origin);
      t.events.reserve(kept);
      continue;
    }
    const auto f = Split(line, 5);
    TraceEvent e;
    int64_t start = 0, duration = 0;
    if (f.size() != 5 || f[0].empty() || !ParseInt(f[1], &e.stream) || !ParseInt(f[2], &start) ||
        !ParseInt(f[3], &duration)) {
      return bad("expected 'NAME STREAM START_PS DURATION_PS ARGS', got '" +
                 std::string(line.substr(0, 80)) + "'");
    }
    e.name = std::string(f[0]);
    e.rank = t.rank;
    e.start = Picoseconds(start);
    e.duration = Picoseconds(duration);
    e.args = std::string(f[4]);
    t.events.push_back(std::move(e));
  }
  if (line_no == 0) return bad("empty (no header)");
  if (t.events.size() != kept) {
    return bad("header says " + std::to_string(kept) + " events, found " +
               std::to_string(t.events.size()));
  }
  return t;
}

std::string MergedTraceJson(const std::vector<RankTrace>& ranks,
                            const std::vector<std::string>& notes) {
  std::string s = "{\"traceEvents\":[";
  bool first = true;
  const auto sep = [&] {
    s += first ? "\n" : ",\n";
    first = false;
  };
  char buf[256];
  for (const RankTrace& r : ranks) {
    sep();
    std::snprintf(buf, sizeof(buf),
                  "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank "
                  "%d\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{"
                  "\"sort_index\":%d}}",
                  r.rank, r.rank, r.rank, r.rank);
    s += buf;
    std::set<int> streams;
    for (const TraceEvent& e : r.events) streams.insert(e.stream);
    for (int st : streams) {
      std::snprintf(buf, sizeof(buf),
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{"
                    "\"name\":\"stream %d\"}}",
                    r.rank, st, st);
      s += buf;
    }
    for (const TraceEvent& e : r.events) {
      sep();
      s += "{\"name\":" + JsonString(e.name);
      std::snprintf(buf, sizeof(buf),
                    ",\"ph\":\"X\",\"ts\":%.6f,\"dur\":%.6f,\"pid\":%d,\"tid\":%d",
                    (e.start - r.origin).us(), e.duration.us(), r.rank, e.stream);
      s += buf;
      s += ",\"args\":{" + e.args + "}}";
    }
  }
  s += "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{";
  for (size_t i = 0; i < notes.size(); ++i) {
    s += (i == 0 ? "" : ",") + JsonString("note" + std::to_string(i)) + ":" + JsonString(notes[i]);
  }
  s += "}}\n";
  return s;
}

}  // namespace fathom::transport::coll
