#include "tools/coll_alltoallv.h"

#include <algorithm>
#include <memory>

#include "transport/collectives/reduce.h"

namespace fathom::tools {

using transport::coll::CollKind;
using transport::coll::SizeMatrix;

Status CheckAllToAllVFlags(const CollOptions& o) {
  const bool v = o.op == "alltoallv";
  for (const char* f : {"--matrix", "--skew", "--zipf"}) {
    if (!v && o.given.count(f) > 0) {
      return InvalidArgument(std::string(f) + " is for alltoallv (its size matrix)");
    }
  }
  if (!o.matrix.empty() && o.given.count("--skew") > 0) {
    return InvalidArgument("--matrix and --skew: give one (a file, or a generated skew)");
  }
  if (!o.matrix.empty() && (o.given.count("-b") > 0 || o.given.count("-e") > 0)) {
    return InvalidArgument("--matrix " + o.matrix + ": the file gives the sizes; leave out -b/-e");
  }
  if (o.given.count("--skew") > 0 && o.skew < 0) {
    return InvalidArgument("--skew " + std::to_string(o.skew) + ": a seed >= 0");
  }
  if (o.given.count("--zipf") > 0 &&
      (o.given.count("--skew") == 0 || !(o.zipf >= 0) || o.zipf > 10)) {
    return InvalidArgument("--zipf " + std::to_string(o.zipf) +
                           ": an exponent in 0..10 for --skew (0 = every expert alike)");
  }
  return Status::Ok();
}

Status AllToAllVMatrices(const CollOptions& o, int nranks, transport::worlds::SweepOptions* s) {
  if (s->kind != CollKind::kAllToAllV) return Status::Ok();
  s->matrices.clear();
  if (!o.matrix.empty()) {
    auto m = transport::coll::LoadSizeMatrix(o.matrix, nranks);
    if (!m.ok()) return m.status();
    s->sizes = {m->MeanRowBytes()};
    s->min_bytes = s->max_bytes = s->sizes.front();
    s->matrices.push_back(std::make_shared<const SizeMatrix>(std::move(m).value()));
    return Status::Ok();
  }
  // Whole elements of the largest type swept, so every type gets the same
  // bytes.
  uint64_t granule = 1;
  for (const auto& c : s->combos) {
    granule = std::max<uint64_t>(granule, transport::coll::DataTypeSize(c.first));
  }
  for (uint64_t size : s->sizes) {
    SizeMatrix m;
    if (o.skew >= 0) {
      m = transport::coll::SkewMatrix(nranks, size, static_cast<uint64_t>(o.skew), o.zipf, granule);
    } else {
      m.n = nranks;
      m.source = "uniform";
      const uint64_t block = size / static_cast<uint64_t>(nranks) / granule * granule;
      m.bytes.assign(static_cast<size_t>(nranks) * static_cast<size_t>(nranks), block);
    }
    s->matrices.push_back(std::make_shared<const SizeMatrix>(std::move(m)));
  }
  return Status::Ok();
}

}  // namespace fathom::tools
