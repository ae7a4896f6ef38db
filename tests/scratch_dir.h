// A directory of one test's own for the files it writes: made fresh under
// $TMPDIR (MakeTempDir: mkdtemp, so two runs of the suite at once never share a name) and
// removed with everything in it when the ScratchDir goes out of scope. Every
// test that writes a file puts it here, so a run leaves nothing behind;
// scripts/test.sh checks that by running ctest with TMPDIR set to an empty
// directory and failing when something is left in it.
//
// No gtest here: the libFuzzer targets use it too.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "base/temp_dir.h"

namespace fathom::test_util {

class ScratchDir {
 public:
  ScratchDir() {
    StatusOr<std::string> dir = MakeTempDir("fathom-test");
    if (!dir.ok()) {
      // Nothing a test could do without it; say where and why.
      std::fprintf(stderr, "ScratchDir: %s\n", dir.status().ToString().c_str());
      std::abort();
    }
    path_ = std::move(dir).value();
  }
  ~ScratchDir() {
    if (keep_) {
      std::fprintf(stderr, "ScratchDir: kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // The directory, without a trailing '/'.
  const std::string& path() const { return path_; }
  // The path of `name` in it (nothing is created).
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to `name` in it; returns the file's path.
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string p = File(name);
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  // Leaves the directory in place (and names it on stderr) at the end: for
  // a failed test whose files are the evidence.
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

}  // namespace fathom::test_util
