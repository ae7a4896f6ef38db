#include "transport/collectives/report.h"

#include <cmath>
#include <cstdio>

namespace fathom::transport::coll {

double BusBwFactor(CollKind kind, int nranks) {
  const double n = nranks;
  switch (kind) {
    case CollKind::kAllReduce:
      return 2 * (n - 1) / n;
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
      return (n - 1) / n;
    case CollKind::kBroadcast:
      return 1;
    case CollKind::kBarrier:
      return 0;
    // nccl-tests' alltoall.cu, gather.cu, scatter.cu: (n-1)/n of the total
    // size; sendrecv.cu and reduce.cu: 1.
    case CollKind::kAllToAll:
    case CollKind::kGather:
    case CollKind::kScatter:
      return (n - 1) / n;
    case CollKind::kSendRecv:
    case CollKind::kReduce:
      return 1;
    // alltoallv: alltoall's for a uniform matrix; a sweep states busbw from
    // the matrix's busiest rank instead (size_matrix.h).
    case CollKind::kAllToAllV:
      return (n - 1) / n;
  }
  return 0;
}

Measurement Measure(CollKind kind, int nranks, uint64_t size_bytes, double time_us, int64_t wrong) {
  Measurement m;
  m.time_us = time_us;
  m.algbw_gbs = time_us > 0 ? static_cast<double>(size_bytes) / (time_us * 1e3) : 0;
  m.busbw_gbs = m.algbw_gbs * BusBwFactor(kind, nranks);
  m.wrong = wrong;
  return m;
}

std::string ParamsLine(const SweepParams& p) {
  char buf[320];
  char step[48];
  if (p.step_factor > 1) {
    std::snprintf(step, sizeof(step), "%g(factor)", p.step_factor);
  } else {
    std::snprintf(step, sizeof(step), "%llu(bytes)", static_cast<unsigned long long>(p.step_bytes));
  }
  std::snprintf(buf, sizeof(buf),
                "# nThread %d nGpus %d minBytes %llu maxBytes %llu step: %s warmup iters: %d "
                "iters: %d agg iters: %d validation: %d graph: %d\n",
                p.nthreads, p.ngpus, static_cast<unsigned long long>(p.min_bytes),
                static_cast<unsigned long long>(p.max_bytes), step, p.warmup_iters, p.iters,
                p.agg_iters, p.check, p.graph);
  return buf;
}

std::string DeviceLine(int rank, int pid, const std::string& host, const std::string& device) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), "#  Rank %2d Group  0 Pid %6d on %10s device %s\n", rank, pid,
                host.c_str(), device.c_str());
  return buf;
}

std::string TableHeader() {
  std::string s;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "#%52s  %-30s  %-30s\n", "", "out-of-place", "in-place");
  s += buf;
  std::snprintf(buf, sizeof(buf),
                "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %5s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong", "algo");
  s += buf;
  std::snprintf(buf, sizeof(buf),
                "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %5s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "", "");
  s += buf;
  return s;
}

namespace {
std::string Cell(const Measurement& m) {
  char buf[96];
  char wrong[24];
  if (m.wrong < 0) {
    std::snprintf(wrong, sizeof(wrong), "N/A");
  } else {
    std::snprintf(wrong, sizeof(wrong), "%lld", static_cast<long long>(m.wrong));
  }
  std::snprintf(buf, sizeof(buf), "  %7.2f  %6.2f  %6.2f  %6s", m.time_us, m.algbw_gbs, m.busbw_gbs,
                wrong);
  return buf;
}
}  // namespace

std::string TableRow(const ReportRow& row) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), " %11llu  %12llu  %8s  %6s  %6d",
                static_cast<unsigned long long>(row.size_bytes),
                static_cast<unsigned long long>(row.count),
                std::string(DataTypeName(row.type)).c_str(), row.redop.c_str(), row.root);
  char algo[32];
  std::snprintf(algo, sizeof(algo), "  %5s", row.algo.empty() ? "-" : row.algo.c_str());
  return buf + Cell(row.out_of_place) + Cell(row.in_place) + algo + "\n";
}

double AverageBusBw(const std::vector<ReportRow>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const ReportRow& r : rows) sum += r.out_of_place.busbw_gbs + r.in_place.busbw_gbs;
  return sum / static_cast<double>(2 * rows.size());
}

std::string TableFooter(const std::vector<ReportRow>& rows) {
  int64_t wrong = 0;
  for (const ReportRow& r : rows) {
    wrong += std::max<int64_t>(r.out_of_place.wrong, 0) + std::max<int64_t>(r.in_place.wrong, 0);
  }
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "# Out of bounds values : %lld %s\n# Avg bus bandwidth    : %g \n",
                static_cast<long long>(wrong), wrong == 0 ? "OK" : "FAILED", AverageBusBw(rows));
  return buf;
}

std::string HotLinksLine(const ReportRow& row) {
  if (row.hot_links.empty()) return "";
  std::string s = "#  hot links (>= 1.5x the mean switch link):";
  for (size_t h = 0; h < row.hot_links.size(); ++h) {
    char b[200];
    std::snprintf(b, sizeof(b), "%s %s %.1f MB (%.1fx)", h ? "," : "",
                  row.hot_links[h].link.c_str(), static_cast<double>(row.hot_links[h].bytes) / 1e6,
                  row.hot_links[h].x_mean);
    s += b;
  }
  return s + "\n";
}

std::string RowsToJson(const std::vector<ReportRow>& rows) {
  std::string s = "[";
  char buf[512];
  auto cell = [](const Measurement& m) {
    char b[160];
    std::snprintf(b, sizeof(b),
                  "{\"time_us\":%.3f,\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f,\"wrong\":%lld}",
                  m.time_us, m.algbw_gbs, m.busbw_gbs, static_cast<long long>(m.wrong));
    return std::string(b);
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const ReportRow& r = rows[i];
    std::snprintf(buf, sizeof(buf),
                  "%s{\"size\":%llu,\"count\":%llu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,"
                  "\"algo\":\"%s\",",
                  i ? "," : "", static_cast<unsigned long long>(r.size_bytes),
                  static_cast<unsigned long long>(r.count),
                  std::string(DataTypeName(r.type)).c_str(), r.redop.c_str(), r.root,
                  r.algo.c_str());
    s += buf;
    s += "\"out_of_place\":" + cell(r.out_of_place) + ",\"in_place\":" + cell(r.in_place);
    if (r.has_hot_links) {
      s += ",\"hot_links\":[";
      for (size_t h = 0; h < r.hot_links.size(); ++h) {
        char b[256];
        std::snprintf(b, sizeof(b), "%s{\"link\":\"%s\",\"bytes\":%llu,\"x_mean\":%.3f}",
                      h ? "," : "", r.hot_links[h].link.c_str(),
                      static_cast<unsigned long long>(r.hot_links[h].bytes), r.hot_links[h].x_mean);
        s += b;
      }
      s += "]";
    }
    if (!r.counters.empty()) {
      s += ",\"counters\":{";
      for (size_t c = 0; c < r.counters.size(); ++c) {
        s +=
            (c ? ",\"" : "\"") + r.counters[c].first + "\":" + std::to_string(r.counters[c].second);
      }
      s += "}";
    }
    s += "}";
  }
  return s + "]";
}

}  // namespace fathom::transport::coll
