// The codec sits on the simulator's per-packet path: Parse, IcrcOk and Build
// must not allocate. This binary counts global operator new calls.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "fabric/wire/roce.h"
#include "tests/wire/wire_test_util.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace fathom::wire {
namespace {

TEST(AllocationTest, ParseVerifyAndBuildDoNotAllocate) {
  const auto frames = testing::ReadAll(testing::CapturePath());
  ASSERT_FALSE(frames.empty());
  std::vector<uint8_t> out(16384);
  const std::vector<uint8_t> payload(100, 7);
  const RoceFrame v6 = testing::MakeFrame(Opcode::kRdmaWriteOnlyWithImmediate, true, true, payload);
  uint64_t ok = 0;
  const uint64_t before = g_allocations.load();
  EXPECT_GT(before, 0u);  // the hook is live: ReadAll allocated
  for (const auto& f : frames) {
    const ParseResult r = Parse(f.bytes);
    if (!r.ok()) continue;
    ok += IcrcOk(r);
    RoceFrame fresh = r.frame;
    fresh.keep = RoceFrame::Keep{};
    auto n = Build(fresh, out);
    ok += n.ok();
  }
  auto n = Build(v6, out);
  ok += n.ok();
  const uint64_t after = g_allocations.load();
  EXPECT_EQ(after - before, 0u);
  EXPECT_EQ(ok, 2u * 560 + 1);
}

}  // namespace
}  // namespace fathom::wire
