// Helpers of the replay tests: a temporary bundle directory made from the
// fixture bundle (testdata/replay/field) plus test-specific files, removed
// on destruction.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "replay/evidence.h"
#include "tests/scratch_dir.h"

namespace fathom::replay::testing {

class TempBundle {
 public:
  const std::string& dir() const { return dir_; }
  void CopyFixture() {
    std::filesystem::copy(std::string(FATHOM_TESTDATA_DIR) + "/replay/field", dir_,
                          std::filesystem::copy_options::recursive);
  }
  void Write(const std::string& rel, const std::string& text) {
    const std::filesystem::path p = std::filesystem::path(dir_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }

 private:
  test_util::ScratchDir scratch_;
  const std::string dir_ = scratch_.path();
};

inline const SourceReport* Source(const Evidence& ev, const std::string& rel) {
  for (const SourceReport& s : ev.sources) {
    if (s.path == rel) return &s;
  }
  return nullptr;
}

}  // namespace fathom::replay::testing
