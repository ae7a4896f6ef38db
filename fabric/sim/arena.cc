#include "fabric/sim/arena.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace fathom::sim {

void HugePageArena::Free::operator()(void* p) const { std::free(p); }

void* HugePageArena::NewBlock(size_t bytes) {
  void* mem = std::aligned_alloc(kBlockBytes, bytes);
  if (mem == nullptr) {
    std::fprintf(stderr, "fathom sim: out of memory allocating %zu bytes\n", bytes);
    std::abort();
  }
  // Only a hint: without transparent huge pages this is ordinary memory.
  madvise(mem, bytes, MADV_HUGEPAGE);
  return mem;
}

void* HugePageArena::Allocate(size_t bytes, size_t align) {
  if (bytes > kBlockBytes / 2) {
    const size_t rounded = (bytes + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
    blocks_.emplace_back(NewBlock(rounded));
    return blocks_.back().get();
  }
  const uintptr_t at = reinterpret_cast<uintptr_t>(cursor_);
  const size_t pad = (align - (at & (align - 1))) & (align - 1);
  if (cursor_ == nullptr || pad + bytes > left_) {
    blocks_.emplace_back(NewBlock(kBlockBytes));
    cursor_ = static_cast<char*>(blocks_.back().get());
    left_ = kBlockBytes;
    return Allocate(bytes, align);
  }
  void* out = cursor_ + pad;
  cursor_ += pad + bytes;
  left_ -= pad + bytes;
  return out;
}

}  // namespace fathom::sim
