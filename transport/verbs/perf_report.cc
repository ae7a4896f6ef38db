#include "transport/verbs/perf_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fathom::transport::verbs {
namespace {

// perftest's MB is 2^20 bytes; its Gb is 1e9 bits.
double Rate(double bytes_per_second, bool gbits) {
  return gbits ? bytes_per_second * 8 / 1e9 : bytes_per_second / 1048576.0;
}

// The value at quantile q of sorted samples (nearest rank, as perftest).
double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto n = sorted.size();
  auto idx = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  idx = idx == 0 ? 0 : idx - 1;
  return sorted[std::min(idx, n - 1)];
}

std::string Fmt(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

}  // namespace

BwResult ComputeBw(uint64_t bytes, uint64_t iterations, double seconds, double peak_seconds_per_msg,
                   bool gbits) {
  BwResult r;
  r.bytes = bytes;
  r.iterations = iterations;
  if (seconds <= 0 || iterations == 0) return r;
  const double total = static_cast<double>(bytes) * static_cast<double>(iterations);
  r.average = Rate(total / seconds, gbits);
  const double per_msg =
      peak_seconds_per_msg > 0
          ? std::min(peak_seconds_per_msg, seconds / static_cast<double>(iterations))
          : seconds / static_cast<double>(iterations);
  r.peak = Rate(static_cast<double>(bytes) / per_msg, gbits);
  r.msg_rate_mpps = static_cast<double>(iterations) / seconds / 1e6;
  return r;
}

LatResult ComputeLat(uint64_t bytes, std::vector<double> s) {
  LatResult r;
  r.bytes = bytes;
  r.iterations = s.size();
  if (s.empty()) return r;
  std::sort(s.begin(), s.end());
  r.t_min = s.front();
  r.t_max = s.back();
  r.t_typical = s[s.size() / 2];
  double sum = 0;
  for (double v : s) sum += v;
  r.t_avg = sum / static_cast<double>(s.size());
  double var = 0;
  for (double v : s) var += (v - r.t_avg) * (v - r.t_avg);
  r.t_stdev = std::sqrt(var / static_cast<double>(s.size()));
  r.p99 = Quantile(s, 0.99);
  r.p999 = Quantile(s, 0.999);
  return r;
}

std::string Rule() {
  return "---------------------------------------------------------------------------------------"
         "\n";
}

std::string BwHeader(bool gbits) {
  return gbits
             ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
             : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n";
}

std::string BwLine(const BwResult& r) {
  return Fmt(" %-10llu %-10llu     %-10.2f         %-10.2f           %-.6f\n",
             static_cast<unsigned long long>(r.bytes),
             static_cast<unsigned long long>(r.iterations), r.peak, r.average, r.msg_rate_mpps);
}

std::string LatHeader() {
  return " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
         "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n";
}

std::string LatLine(const LatResult& r) {
  return Fmt(
      " %-7llu %-10llu     %-7.2f        %-7.2f      %-7.2f            %-7.2f        "
      "%-7.2f         %-7.2f                %-7.2f\n",
      static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.iterations),
      r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999);
}

std::string BwJson(const std::string& test, const std::vector<BwResult>& results, bool gbits) {
  std::string out =
      "{\"test\":\"" + test + "\",\"unit\":\"" + (gbits ? "Gb/sec" : "MB/sec") + "\",\"results\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    const BwResult& r = results[i];
    out +=
        Fmt("%s{\"bytes\":%llu,\"iterations\":%llu,\"bw_peak\":%.4f,\"bw_average\":%.4f,"
            "\"msg_rate_mpps\":%.6f}",
            i ? "," : "", static_cast<unsigned long long>(r.bytes),
            static_cast<unsigned long long>(r.iterations), r.peak, r.average, r.msg_rate_mpps);
  }
  return out + "]}\n";
}

std::string LatJson(const std::string& test, const std::vector<LatResult>& results) {
  std::string out = "{\"test\":\"" + test + "\",\"unit\":\"usec\",\"results\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    const LatResult& r = results[i];
    out +=
        Fmt("%s{\"bytes\":%llu,\"iterations\":%llu,\"t_min\":%.3f,\"t_max\":%.3f,"
            "\"t_typical\":%.3f,\"t_avg\":%.3f,\"t_stdev\":%.3f,\"p99\":%.3f,\"p999\":%.3f}",
            i ? "," : "", static_cast<unsigned long long>(r.bytes),
            static_cast<unsigned long long>(r.iterations), r.t_min, r.t_max, r.t_typical, r.t_avg,
            r.t_stdev, r.p99, r.p999);
  }
  return out + "]}\n";
}

}  // namespace fathom::transport::verbs
