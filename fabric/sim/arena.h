// HugePageArena: memory for the simulator's long-lived hot structures
// (packets, ports and their rings) in 2 MiB blocks advised as huge pages.
// At 1024 hosts a hop touches a handful of objects spread over tens of MiB;
// with 4 KiB pages each of those is also a TLB miss, which huge pages avoid.
// Where the kernel offers no transparent huge pages the blocks are ordinary
// memory. Allocations are never freed one by one: the arena owns its blocks
// and releases them when destroyed, so what lives in it must not outlive it
// and must be destroyed (not freed) by its owner. Not thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace fathom::sim {

class HugePageArena {
 public:
  static constexpr size_t kBlockBytes = size_t{2} << 20;

  HugePageArena() = default;
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // `bytes` aligned to `align` (a power of two, at most kBlockBytes). A
  // request larger than a block gets blocks of its own. Aborts when out of
  // memory, naming the request.
  void* Allocate(size_t bytes, size_t align);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  static void* NewBlock(size_t bytes);
  std::vector<std::unique_ptr<void, Free>> blocks_;
  char* cursor_ = nullptr;  // free space of the newest block
  size_t left_ = 0;
};

}  // namespace fathom::sim
