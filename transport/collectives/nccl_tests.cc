#include "transport/collectives/nccl_tests.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fathom::transport::coll {
namespace {

// Half-precision types round each partial sum; allow a few ulps per rank
// and step. avg scales each input by a rounded 1/n first, so float and
// double round too.
double Tolerance(DataType t, int n, RedOp op) {
  double eps = t == DataType::kFloat16 ? 0x1.0p-10 : t == DataType::kBfloat16 ? 0x1.0p-7 : 0;
  if (op == RedOp::kAvg && eps == 0) {
    eps = t == DataType::kFloat32 ? 0x1.0p-23 : t == DataType::kFloat64 ? 0x1.0p-52 : 0;
  }
  return eps * 3.0 * n * n;
}

// The rank inputs' reduction for an integer type, exactly: sums and
// products modulo 2^64 (the type keeps the low bits, as its wrap does),
// minima and maxima in the type's own order.
uint64_t IntegerReference(DataType t, RedOp op, int n, uint64_t j) {
  uint8_t tmp[8];
  auto value = [&](int q) {
    StoreElement(tmp, 0, t, InputValue(q, j));
    return LoadInteger(tmp, 0, t);
  };
  const bool is_signed = IsSignedInteger(t);
  uint64_t acc = value(0);
  for (int q = 1; q < n; ++q) {
    const uint64_t v = value(q);
    const bool less = is_signed ? static_cast<int64_t>(v) < static_cast<int64_t>(acc) : v < acc;
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg:
        acc += v;
        break;
      case RedOp::kProd:
        acc *= v;
        break;
      case RedOp::kMin:
        if (less) acc = v;
        break;
      case RedOp::kMax:
        if (!less && v != acc) acc = v;
        break;
    }
  }
  StoreInteger(tmp, 0, t, acc);
  acc = LoadInteger(tmp, 0, t);
  if (op == RedOp::kAvg) {
    // NCCL's integer avg: the sum in the type, then divided (truncated).
    acc = is_signed ? static_cast<uint64_t>(static_cast<int64_t>(acc) / n)
                    : acc / static_cast<uint64_t>(n);
    StoreInteger(tmp, 0, t, acc);
    acc = LoadInteger(tmp, 0, t);
  }
  return acc;
}

}  // namespace

uint64_t AvailableMemoryBytes() {
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        found = true;
        break;
      }
    }
    std::fclose(f);
    if (found) return static_cast<uint64_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

StatusOr<uint64_t> ParseBytes(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  uint64_t mult = 1;
  if (end != nullptr && *end != '\0') {
    const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(*end)));
    mult = c == 'K' ? 1024 : c == 'M' ? 1u << 20 : c == 'G' ? 1u << 30 : 0;
    if (mult == 0 || end[1] != '\0') {
      return InvalidArgument(flag + " '" + text + "': expected a size like 8, 64K, 32M, 1G");
    }
  }
  if (end == text.c_str() || !(v >= 0)) {
    return InvalidArgument(flag + " '" + text + "': expected a size like 8, 64K, 32M, 1G");
  }
  const double bytes = v * static_cast<double>(mult);
  if (bytes > static_cast<double>(kMaxSweepBytes)) {
    return InvalidArgument(flag + " '" + text +
                           "': larger than the 1P (2^50 bytes) this tool takes");
  }
  return static_cast<uint64_t>(bytes);
}

std::vector<uint64_t> SizeSweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_bytes,
                                double factor) {
  std::vector<uint64_t> sizes;
  for (uint64_t size = min_bytes; size <= max_bytes;
       size = factor > 1 ? static_cast<uint64_t>(std::max<double>(static_cast<double>(size + 1),
                                                                  std::floor(size * factor)))
                         : size + step_bytes) {
    sizes.push_back(size);
    if (size == max_bytes || (factor <= 1 && step_bytes == 0)) break;
  }
  return sizes;
}

namespace {

// Elements of the input and output buffers for `count` (CollSpec::count).
uint64_t InCount(CollKind kind, uint64_t n, uint64_t count) {
  if (kind == CollKind::kAllToAllV) return count;  // the largest row or column
  return kind == CollKind::kReduceScatter || kind == CollKind::kScatter ||
                 kind == CollKind::kAllToAll
             ? count * n
             : count;
}
uint64_t OutCount(CollKind kind, uint64_t n, uint64_t count) {
  if (kind == CollKind::kAllToAllV) return count;
  return kind == CollKind::kAllGather || kind == CollKind::kGather || kind == CollKind::kAllToAll
             ? count * n
             : count;
}

}  // namespace

uint64_t CountUnitBytes(CollKind kind, int nranks, DataType type) {
  const bool total = kind == CollKind::kAllGather || kind == CollKind::kReduceScatter ||
                     kind == CollKind::kAllToAll || kind == CollKind::kGather ||
                     kind == CollKind::kScatter;
  return DataTypeSize(type) * (total ? static_cast<uint64_t>(nranks) : 1);
}

double InputValue(int rank, uint64_t i) {
  static_assert(kInputPeriod == 7);
  return static_cast<double>(static_cast<int64_t>((rank * 3 + i * 5) % 7) - 3);
}

uint64_t RankBuffers::BytesFor(CollKind kind, int nranks, DataType type, uint64_t max_count) {
  const uint64_t es = DataTypeSize(type);
  const uint64_t n = static_cast<uint64_t>(nranks);
  const uint64_t in_count = InCount(kind, n, max_count);
  const uint64_t out_count = OutCount(kind, n, max_count);
  return std::max(in_count, out_count) * es + 8 + out_count * es + 8;
}

RankBuffers::RankBuffers(CollKind kind, int nranks, int rank, DataType type, uint64_t max_count)
    : kind_(kind), nranks_(nranks), rank_(rank), type_(type) {
  const size_t es = DataTypeSize(type);
  const uint64_t n = static_cast<uint64_t>(nranks);
  const uint64_t in_count = InCount(kind, n, max_count);
  const uint64_t out_count = OutCount(kind, n, max_count);
  // +8: a zero count still has an address to register and compare.
  mem_.assign(std::max(in_count, out_count) * es + 8, 0);
  out_mem_.assign(out_count * es + 8, 0);
}

void RankBuffers::Fill(uint64_t count, bool in_place) {
  if (kind_ == CollKind::kAllToAllV) {
    const uint64_t n = static_cast<uint64_t>(nranks_), r = static_cast<uint64_t>(rank_);
    const size_t es = DataTypeSize(type_);
    uint64_t in_count = 0, out_count = 0;
    for (uint64_t j = 0; counts_ != nullptr && j < n; ++j) {
      in_count += (*counts_)[r * n + j];
      out_count += (*counts_)[j * n + r];
    }
    if (counts_ == nullptr || in_count * es + 8 > mem_.size() ||
        out_count * es + 8 > out_mem_.size()) {
      std::fprintf(stderr, "RankBuffers::Fill: alltoallv matrix beyond the buffers\n");
      std::abort();
    }
    for (uint64_t i = 0; i < in_count; ++i)
      StoreElement(mem_.data(), i, type_, InputValue(rank_, i));
    std::memset(out_mem_.data(), 0, out_count * es);
    in_ = mem_.data();
    out_ = out_mem_.data();
    return;
  }
  // In place, one buffer as nccl-tests lays it out: allgather and gather
  // read their input from the rank's slice of the output, reduce-scatter
  // and scatter write their output into the rank's slice of the input, the
  // other kinds use it whole.
  const size_t es = DataTypeSize(type_);
  const uint64_t n = static_cast<uint64_t>(nranks_);
  const uint64_t r = static_cast<uint64_t>(rank_);
  const bool gather = kind_ == CollKind::kAllGather || kind_ == CollKind::kGather;
  const bool scatter = kind_ == CollKind::kReduceScatter || kind_ == CollKind::kScatter;
  const uint64_t in_count = InCount(kind_, n, count);
  const uint64_t out_count = OutCount(kind_, n, count);
  if (std::max(in_count, out_count) * es + 8 > mem_.size() ||
      out_count * es + 8 > out_mem_.size()) {
    std::fprintf(stderr, "RankBuffers::Fill: count %llu of %s is beyond the buffers\n",
                 static_cast<unsigned long long>(count), std::string(DataTypeName(type_)).c_str());
    std::abort();
  }
  std::memset(mem_.data(), 0, std::max(in_count, out_count) * es);
  uint8_t* in = mem_.data() + (gather && in_place ? r * count * es : 0);
  for (uint64_t i = 0; i < in_count; ++i) StoreElement(in, i, type_, InputValue(rank_, i));
  in_ = in;
  if (in_place) {
    out_ = mem_.data() + (scatter ? r * count * es : 0);
  } else {
    std::memset(out_mem_.data(), 0, out_count * es);
    out_ = out_mem_.data();
  }
}

int64_t RankBuffers::CountWrong(uint64_t count, RedOp op, int root) const {
  if (kind_ == CollKind::kBarrier) return 0;
  int64_t wrong = 0;
  if (kind_ == CollKind::kAllToAllV) {
    // Block from rank i: its elements at the offset of our block in its row.
    const uint64_t n = static_cast<uint64_t>(nranks_), r = static_cast<uint64_t>(rank_);
    const std::vector<uint64_t>& m = *counts_;
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t from = 0;
      for (uint64_t j = 0; j < r; ++j) from += m[i * n + j];
      for (uint64_t k = 0; k < m[i * n + r]; ++k, ++at) {
        uint8_t tmp[8];
        StoreElement(tmp, 0, type_, InputValue(static_cast<int>(i), from + k));
        const bool same = IsFloatingType(type_)
                              ? LoadElement(out_, at, type_) == LoadElement(tmp, 0, type_)
                              : LoadInteger(out_, at, type_) == LoadInteger(tmp, 0, type_);
        if (!same) ++wrong;
      }
    }
    return wrong;
  }
  const int n = nranks_;
  const double tol = Tolerance(type_, n, op);
  const bool integer = !IsFloatingType(type_);
  const uint64_t out_count = OutCount(kind_, static_cast<uint64_t>(n), count);
  // Rooted kinds: only the root's output is defined (reduce, gather), as
  // nccl-tests checks.
  if ((kind_ == CollKind::kReduce || kind_ == CollKind::kGather) && rank_ != root) return 0;
  const uint64_t ur = static_cast<uint64_t>(rank_);
  int sendrecv_src = 0;
  if (kind_ == CollKind::kSendRecv) {
    const RingOrder order(n, gpus_per_server_, 0);
    sendrecv_src = order.RankAt(order.PosOf(rank_) - 1);
  }
  const bool reduces = kind_ == CollKind::kAllReduce || kind_ == CollKind::kReduceScatter ||
                       kind_ == CollKind::kReduce;
  // A reduction's reference, computed not replayed (issue 30): every rank's
  // input element j depends on j only through j % kInputPeriod (InputValue),
  // so the reduction over the ranks does too. kInputPeriod references of
  // O(ranks) each, then O(1) per element: a 1024-rank check costs about what
  // reading the output does, instead of ranks x elements per rank.
  uint64_t int_ref[kInputPeriod] = {};
  double float_ref[kInputPeriod] = {};
  if (reduces) {
    for (uint64_t m = 0; m < kInputPeriod; ++m) {
      if (integer) {
        int_ref[m] = IntegerReference(type_, op, n, m);
        continue;
      }
      double want = InputValue(0, m);
      for (int q = 1; q < n; ++q) {
        const double v = InputValue(q, m);
        want = op == RedOp::kSum || op == RedOp::kAvg ? want + v
               : op == RedOp::kProd                   ? want * v
               : op == RedOp::kMin                    ? std::min(want, v)
                                                      : std::max(want, v);
      }
      if (op == RedOp::kAvg) want /= n;
      // Through the type too (half-precision rounding).
      uint8_t tmp[8];
      StoreElement(tmp, 0, type_, want);
      float_ref[m] = LoadElement(tmp, 0, type_);
    }
  }
  for (uint64_t i = 0; i < out_count; ++i) {
    double want = 0;
    if (reduces) {
      const uint64_t j =
          kind_ == CollKind::kReduceScatter ? static_cast<uint64_t>(rank_) * count + i : i;
      const uint64_t m = j % kInputPeriod;
      if (integer) {
        if (LoadInteger(out_, i, type_) != int_ref[m]) ++wrong;
        continue;
      }
      const double got = LoadElement(out_, i, type_);
      const double ref = float_ref[m];
      if (!(std::fabs(got - ref) <= tol * std::max(1.0, std::fabs(ref)))) ++wrong;
      continue;
    } else if (kind_ == CollKind::kAllToAll) {
      want = InputValue(static_cast<int>(i / count), ur * count + i % count);
    } else if (kind_ == CollKind::kSendRecv) {
      want = InputValue(sendrecv_src, i);
    } else if (kind_ == CollKind::kGather || kind_ == CollKind::kAllGather) {
      want = InputValue(static_cast<int>(i / count), i % count);
    } else if (kind_ == CollKind::kScatter) {
      want = InputValue(root, ur * count + i);
    } else {
      want = InputValue(root, i);
    }
    // The reference goes through the type too (half-precision rounding,
    // integer wrap).
    uint8_t tmp[8];
    StoreElement(tmp, 0, type_, want);
    if (integer) {
      if (LoadInteger(out_, i, type_) != LoadInteger(tmp, 0, type_)) ++wrong;
      continue;
    }
    const double got = LoadElement(out_, i, type_);
    const double ref = LoadElement(tmp, 0, type_);
    if (!(std::fabs(got - ref) <= tol * std::max(1.0, std::fabs(ref)))) ++wrong;
  }
  return wrong;
}

}  // namespace fathom::transport::coll
