// The memory this machine gives one core, as the simulator meets it: the
// latency of a dependent random read by working-set size (where the caches
// end), and with one line per 4 KiB page by the number of pages (where the
// TLB's reach ends). A plain main: it measures and prints, it asserts nothing.
//
//   mem_bench            both tables
//
// Why it is here: sim_bench at 1024 hosts touches some 9 MiB a few hundred
// nanoseconds of virtual time apart (ports, NICs, the packets in flight and
// their rings), so its packet-hops per second follow what this prints. On
// the shared VMs of this project the caches a core can keep vary with its
// neighbours, for minutes at a time: read a sim_bench figure next to a
// mem_bench taken at the same time, on the same core (taskset).
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
constexpr size_t kReads = 5'000'000;

// A cycle through `count` slots in random order, the slot of index i at
// base + offset(i); returns ns per dependent read, walking it kReads times.
template <typename Offset>
double ChaseNs(char* base, size_t count, Offset offset) {
  std::vector<size_t> order(count);
  for (size_t i = 0; i < count; ++i) order[i] = i;
  std::mt19937_64 rng(1);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < count; ++i) {
    char* from = base + offset(order[i]);
    char* to = base + offset(order[(i + 1) % count]);
    std::memcpy(from, &to, sizeof to);
  }
  char* p = base + offset(order[0]);
  auto step = [&p] { std::memcpy(&p, p, sizeof p); };
  for (size_t i = 0; i < count; ++i) step();  // warm
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < kReads; ++i) step();
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  // Keep the chase: its end depends on every read.
  if (p == nullptr) std::abort();
  return ns / kReads;
}

char* Region(size_t bytes) {
  // Page-aligned, touched before timing; huge pages asked for, as the
  // simulator's arenas do (they make no difference where the host backs the
  // VM with small pages, which the TLB table shows).
  const size_t rounded = (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  void* mem = std::aligned_alloc(2u << 20, rounded);
  if (mem == nullptr) {
    std::fprintf(stderr, "mem_bench: out of memory for %zu bytes\n", rounded);
    std::exit(1);
  }
  madvise(mem, rounded, MADV_HUGEPAGE);
  std::memset(mem, 1, rounded);
  return static_cast<char*>(mem);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    std::fprintf(stderr, "usage: %s\n(no arguments: it prints both tables)\n", argv[0]);
    return 2;
  }
  std::printf("random dependent reads, one per 64-byte line, by working set:\n");
  for (size_t kib : {256, 1024, 2048, 4096, 6144, 8192, 12288, 16384, 32768, 65536}) {
    const size_t bytes = kib << 10;
    char* mem = Region(bytes);
    const double ns = ChaseNs(mem, bytes / kLine, [](size_t i) { return i * kLine; });
    std::printf("  %6zu KiB  %6.1f ns\n", kib, ns);
    std::free(mem);
  }
  std::printf("one line per 4 KiB page (%zu KiB of lines at most), by pages:\n",
              size_t{8192} * kLine >> 10);
  for (size_t pages : {1024, 2048, 3072, 4096, 4608, 5120, 6144, 8192}) {
    char* mem = Region(pages * kPage);
    // A different line in each page, so that the lines spread over the
    // cache's sets rather than all falling in the few a page offset names.
    const double ns =
        ChaseNs(mem, pages, [](size_t i) { return i * kPage + (i * 61 % 64) * kLine; });
    std::printf("  %6zu pages (%6zu KiB)  %6.1f ns\n", pages, pages * kPage >> 10, ns);
    std::free(mem);
  }
  return 0;
}
