// PreferHugePages (base/huge_pages.h): the re-executed image puts the
// caller's environment back, the opt-outs hold, and the fathom program
// re-executes itself exactly when the kernel's THP mode is `madvise`.
#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/cli_run.h"

namespace fathom {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "<unset>" : v;
}

TEST(HugePagesTest, ReexecutedImageRestoresTheCallersTunables) {
  setenv("FATHOM_HUGE_PAGES", "applied", 1);
  setenv("FATHOM_HUGE_PAGES_SAVED_TUNABLES", "glibc.malloc.arena_max=2", 1);
  setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1", 1);
  char arg0[] = "huge_pages_test";
  char* argv[] = {arg0, nullptr};
  PreferHugePages(argv);  // returns: this is the re-executed image
  EXPECT_TRUE(HugePagesAdvised());
  EXPECT_EQ(Env("GLIBC_TUNABLES"), "glibc.malloc.arena_max=2");
  EXPECT_EQ(Env("FATHOM_HUGE_PAGES"), "<unset>");
  EXPECT_EQ(Env("FATHOM_HUGE_PAGES_SAVED_TUNABLES"), "<unset>");

  // A caller without GLIBC_TUNABLES gets none back.
  setenv("FATHOM_HUGE_PAGES", "applied", 1);
  setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
  PreferHugePages(argv);
  EXPECT_EQ(Env("GLIBC_TUNABLES"), "<unset>");
}

TEST(HugePagesTest, OptOutsReturnWithoutExec) {
  char arg0[] = "huge_pages_test";
  char* argv[] = {arg0, nullptr};
  // Each would exec this test binary again (and so never reach the EXPECT)
  // if the opt-out were ignored.
  setenv("FATHOM_HUGE_PAGES", "0", 1);
  unsetenv("GLIBC_TUNABLES");
  PreferHugePages(argv);
  EXPECT_EQ(Env("GLIBC_TUNABLES"), "<unset>");
  unsetenv("FATHOM_HUGE_PAGES");
  setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0", 1);
  PreferHugePages(argv);
  EXPECT_EQ(Env("GLIBC_TUNABLES"), "glibc.malloc.hugetlb=0");
  unsetenv("GLIBC_TUNABLES");
}

TEST(HugePagesTest, FathomAdvisesItsHeapWhenTheKernelAsksForMadvise) {
  const std::string fathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";
  const std::string cmd = fathom + " -v topo small";
  const bool expect = ThpModeIsMadvise() && !BuiltWithAddressSanitizer();
  const std::string line = "heap advised for 2 MiB pages";
  auto plain = test_util::RunCommand("env -u GLIBC_TUNABLES -u FATHOM_HUGE_PAGES " + cmd);
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(plain.out.find(line) != std::string::npos, expect) << plain.out;
  auto off = test_util::RunCommand("env -u GLIBC_TUNABLES FATHOM_HUGE_PAGES=0 " + cmd);
  ASSERT_EQ(off.exit_code, 0) << off.out;
  EXPECT_EQ(off.out.find(line), std::string::npos) << off.out;
  auto own = test_util::RunCommand("env GLIBC_TUNABLES=glibc.malloc.hugetlb=0 " + cmd);
  ASSERT_EQ(own.exit_code, 0) << own.out;
  EXPECT_EQ(own.out.find(line), std::string::npos) << own.out;
}

}  // namespace
}  // namespace fathom
