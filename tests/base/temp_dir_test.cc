#include "base/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/scratch_dir.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;

TEST(MakeTempDirTest, MakesANewDirectoryUnderTheRootEachCall) {
  test_util::ScratchDir root;
  auto a = MakeTempDir("fathom-x", root.path());
  auto b = MakeTempDir("fathom-x", root.path());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(a.value(), b.value());
  for (const std::string& d : {a.value(), b.value()}) {
    EXPECT_TRUE(fs::is_directory(d)) << d;
    EXPECT_EQ(fs::path(d).parent_path(), fs::path(root.path()));
    EXPECT_EQ(fs::path(d).filename().string().rfind("fathom-x-", 0), 0u) << d;
  }
}

TEST(MakeTempDirTest, WithoutARootUsesTmpdir) {
  test_util::ScratchDir root;
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("TMPDIR", root.path().c_str(), 1);
  auto d = MakeTempDir("fathom-y");
  if (old != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(fs::path(d.value()).parent_path(), fs::path(root.path()));
}

TEST(MakeTempDirTest, AMissingRootIsAnIoErrorNamingTheTemplate) {
  test_util::ScratchDir root;
  auto d = MakeTempDir("fathom-z", root.File("missing"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kIoError);
  EXPECT_NE(d.status().message().find(root.File("missing") + "/fathom-z-XXXXXX"), std::string::npos)
      << d.status().message();
}

}  // namespace
}  // namespace fathom
