#include "transport/collectives/size_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>

namespace fathom::transport::coll {

uint64_t SizeMatrix::RowBytes(int i) const {
  uint64_t s = 0;
  for (int j = 0; j < n; ++j) s += At(i, j);
  return s;
}

uint64_t SizeMatrix::ColBytes(int j) const {
  uint64_t s = 0;
  for (int i = 0; i < n; ++i) s += At(i, j);
  return s;
}

uint64_t SizeMatrix::BusiestRankBytes() const {
  uint64_t most = 0;
  for (int r = 0; r < n; ++r) {
    most = std::max({most, RowBytes(r) - At(r, r), ColBytes(r) - At(r, r)});
  }
  return most;
}

uint64_t SizeMatrix::MeanRowBytes() const {
  uint64_t s = 0;
  for (uint64_t b : bytes) s += b;
  return n == 0 ? 0 : s / static_cast<uint64_t>(n);
}

uint64_t SizeMatrix::MaxRowOrColBytes() const {
  uint64_t most = 0;
  for (int r = 0; r < n; ++r) most = std::max({most, RowBytes(r), ColBytes(r)});
  return most;
}

std::vector<uint64_t> SizeMatrix::Elements(uint64_t elem_bytes) const {
  std::vector<uint64_t> e(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) e[i] = bytes[i] / std::max<uint64_t>(1, elem_bytes);
  return e;
}

namespace {

// "8", "64K", "1.5M", "1G" (K = 1024); false when it is not one.
bool ParseSize(const std::string& text, double* out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return false;
  double mult = 1;
  if (*end != '\0') {
    const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(*end)));
    mult = c == 'K' ? 1024.0 : c == 'M' ? 1048576.0 : c == 'G' ? 1073741824.0 : 0;
    if (mult == 0 || end[1] != '\0') return false;
  }
  *out = v * mult;
  return std::isfinite(*out);
}

}  // namespace

StatusOr<SizeMatrix> LoadSizeMatrix(const std::string& path, int nranks) {
  std::ifstream f(path);
  if (!f) return InvalidArgument("--matrix " + path + ": cannot open it");
  SizeMatrix m;
  m.n = nranks;
  m.source = path;
  m.bytes.reserve(static_cast<size_t>(nranks) * static_cast<size_t>(nranks));
  std::string line;
  int lineno = 0, rows = 0, last_row_line = 0;
  const std::string want = std::to_string(nranks);
  while (std::getline(f, line)) {
    ++lineno;
    const std::string where = path + ":" + std::to_string(lineno) + ": ";
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    for (char& c : line) {
      if (c == ',' || c == '\t' || c == '\r') c = ' ';
    }
    std::vector<std::string> items;
    size_t at = 0;
    while (at < line.size()) {
      const size_t start = line.find_first_not_of(' ', at);
      if (start == std::string::npos) break;
      const size_t stop = line.find(' ', start);
      items.push_back(
          line.substr(start, stop == std::string::npos ? std::string::npos : stop - start));
      at = stop == std::string::npos ? line.size() : stop;
    }
    if (items.empty()) continue;
    if (rows == nranks) {
      return InvalidArgument(where + "row " + std::to_string(rows + 1) +
                             " is one too many: " + want + " ranks, one row per sender");
    }
    if (items.size() != static_cast<size_t>(nranks)) {
      return InvalidArgument(where + "row " + std::to_string(rows + 1) + " (sender rank " +
                             std::to_string(rows) + ") has " + std::to_string(items.size()) +
                             " entries, expected " + want + " (one per receiving rank)");
    }
    for (size_t j = 0; j < items.size(); ++j) {
      double v = 0;
      if (!ParseSize(items[j], &v)) {
        return InvalidArgument(where + "entry " + std::to_string(j + 1) + " '" + items[j] +
                               "' is not a size (bytes: 8, 64K, 1M, 1G)");
      }
      if (v < 0) {
        return InvalidArgument(where + "entry " + std::to_string(j + 1) + " '" + items[j] +
                               "' is negative");
      }
      if (v > 1e15) {
        return InvalidArgument(where + "entry " + std::to_string(j + 1) + " '" + items[j] +
                               "' is larger than the 1P this tool takes");
      }
      m.bytes.push_back(static_cast<uint64_t>(v));
    }
    ++rows;
    last_row_line = lineno;
  }
  if (rows != nranks) {
    return InvalidArgument(
        path + ":" + std::to_string(std::max(lineno, 1)) + ": " + std::to_string(rows) +
        " rows, expected " + want + " (one per sending rank)" +
        (last_row_line > 0 ? "; the last is line " + std::to_string(last_row_line)
                           : std::string()));
  }
  return m;
}

SizeMatrix SkewMatrix(int nranks, uint64_t row_bytes, uint64_t seed, double zipf,
                      uint64_t granule) {
  SizeMatrix m;
  m.n = nranks;
  char src[96];
  std::snprintf(src, sizeof(src), "skew seed %llu zipf %g", static_cast<unsigned long long>(seed),
                zipf);
  m.source = src;
  const size_t n = static_cast<size_t>(nranks);
  m.bytes.assign(n * n, 0);
  granule = std::max<uint64_t>(1, granule);
  std::mt19937_64 rng(seed);
  std::vector<int> popularity(n);
  std::iota(popularity.begin(), popularity.end(), 0);
  std::shuffle(popularity.begin(), popularity.end(), rng);  // popularity[j]: expert j's place
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  const uint64_t granules = row_bytes / granule;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> w(n);
    double sum = 0;
    size_t hottest = 0;
    for (size_t j = 0; j < n; ++j) {
      w[j] = jitter(rng) / std::pow(static_cast<double>(popularity[j] + 1), zipf);
      sum += w[j];
      if (w[j] > w[hottest]) hottest = j;
    }
    uint64_t given = 0;
    for (size_t j = 0; j < n; ++j) {
      const uint64_t g =
          static_cast<uint64_t>(std::floor(static_cast<double>(granules) * w[j] / sum));
      m.bytes[i * n + j] = g * granule;
      given += g;
    }
    m.bytes[i * n + hottest] += (granules - std::min(granules, given)) * granule;
  }
  return m;
}

}  // namespace fathom::transport::coll
