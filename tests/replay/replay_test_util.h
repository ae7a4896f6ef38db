// Helpers of the replay tests: a temporary bundle directory made from the
// fixture bundle (testdata/replay/field) plus test-specific files, removed
// on destruction.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "replay/evidence.h"

namespace fathom::replay::testing {

class TempBundle {
 public:
  TempBundle() {
    char tmpl[] = "/tmp/fathom-replay-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~TempBundle() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
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
  std::string dir_;
};

inline const SourceReport* Source(const Evidence& ev, const std::string& rel) {
  for (const SourceReport& s : ev.sources) {
    if (s.path == rel) return &s;
  }
  return nullptr;
}

}  // namespace fathom::replay::testing
