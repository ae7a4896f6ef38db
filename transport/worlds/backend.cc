#include "transport/worlds/backend.h"

#include <cstdio>

namespace fathom::transport::worlds {

coll::AlphaBeta Backend::AlgoModel() {
  coll::AlphaBeta ab;
  ab.alpha = Picoseconds::FromMicroseconds(2);
  ab.payload_bytes_per_s = static_cast<double>(link_bandwidth().bps()) / 8.0;
  ab.hops = 1;
  return ab;
}

bool WriteTraceFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "fathom coll: --trace %s: cannot open for writing\n", path.c_str());
    return false;
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    std::fprintf(stderr, "fathom coll: --trace %s: write failed\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace fathom::transport::worlds
