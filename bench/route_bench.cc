// The cost of a switch's next-hop lookup, computed (up/down routing from the
// destination's place) against the routing tables it replaced (issue 30), in
// one run: the same fat-tree routed both ways, a simulated Network on each,
// and the same random host pairs and flow hashes walked hop by hop through
// Switch::Route (Network::PathOf). Prints ns per hop for each and their
// ratio, and checks that both walks took the same ports. A plain main: it
// measures and prints, it asserts nothing but that agreement.
//
//   route_bench [K [PATHS]]     fat-tree k=K (default 16), PATHS walks (default 2M)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fabric/sim/engine.h"
#include "fabric/sim/network.h"
#include "fabric/sim/packet.h"
#include "topologies/builders.h"

namespace fathom::sim {
namespace {

struct Walk {
  int32_t src, dst;
  uint32_t hash;
};

// Walks every pair once; returns ns per hop and fills `sum` (ports taken,
// summed by node and index) so the two routings can be compared.
double Time(const Network& net, const std::vector<Walk>& walks, uint64_t* sum, uint64_t* hops) {
  Port* path[kPathMax];
  uint64_t s = 0, h = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Walk& w : walks) {
    net.PathOf(w.src, w.dst, w.hash, path);
    for (size_t i = 0; i < kPathMax && path[i] != nullptr; ++i) {
      s += static_cast<uint64_t>(path[i]->config().node) * 131 +
           static_cast<uint64_t>(path[i]->config().index);
      ++h;
    }
  }
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  *sum = s;
  *hops = h;
  return h > 0 ? ns / static_cast<double>(h) : 0;
}

int Main(int k, int64_t paths) {
  topo::FatTreeOptions o;
  o.k = k;
  auto computed = topo::BuildFatTree(o);
  if (!computed.ok()) {
    std::fprintf(stderr, "route_bench: %s\n", computed.status().ToString().c_str());
    return 2;
  }
  topo::Topology table = *computed;
  if (Status s = table.UseRouteTables(); !s.ok()) {
    std::fprintf(stderr, "route_bench: %s\n", s.ToString().c_str());
    return 2;
  }
  Engine e1(1), e2(1);
  NetworkConfig nc;
  Network by_computation(&e1, &*computed, nc);
  Network by_table(&e2, &table, nc);
  const auto& hosts = computed->hosts();
  std::vector<Walk> walks(static_cast<size_t>(paths));
  uint64_t x = 88172645463325252ull;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (Walk& w : walks) {
    w.src = hosts[next() % hosts.size()];
    do {
      w.dst = hosts[next() % hosts.size()];
    } while (w.dst == w.src);
    w.hash = FlowHash(w.src, w.dst, static_cast<uint32_t>(49152 + next() % 16384));
  }
  // Alternate the two, twice each, and keep each one's best: a shared
  // machine's noise is several percent.
  double best_c = 1e30, best_t = 1e30;
  uint64_t sum_c = 0, sum_t = 0, hops_c = 0, hops_t = 0;
  for (int round = 0; round < 2; ++round) {
    best_t = std::min(best_t, Time(by_table, walks, &sum_t, &hops_t));
    best_c = std::min(best_c, Time(by_computation, walks, &sum_c, &hops_c));
  }
  std::printf(
      "fat-tree k=%d, %lld paths, %llu hops: table %.2f ns/hop, computed %.2f ns/hop "
      "(computed / table = %.1f%%); routes %s\n",
      k, static_cast<long long>(paths), static_cast<unsigned long long>(hops_c), best_t, best_c,
      100 * best_c / best_t, sum_c == sum_t && hops_c == hops_t ? "identical" : "DIFFER");
  return sum_c == sum_t && hops_c == hops_t ? 0 : 1;
}

}  // namespace
}  // namespace fathom::sim

int main(int argc, char** argv) {
  const int k = argc >= 2 ? std::atoi(argv[1]) : 16;
  const long long paths = argc >= 3 ? std::atoll(argv[2]) : 2000000;
  if (k < 2 || k > 32 || k % 2 != 0 || paths < 1 || paths > 100000000) {
    std::fprintf(stderr,
                 "route_bench: K must be even in 2..32 (tables above that need GBs), "
                 "PATHS in 1..1e8\n");
    return 2;
  }
  return fathom::sim::Main(k, paths);
}
