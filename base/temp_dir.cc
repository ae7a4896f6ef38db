#include "base/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace fathom {

StatusOr<std::string> MakeTempDir(std::string_view name, std::string_view root) {
  std::string base(root);
  if (base.empty()) {
    std::error_code ec;
    base = std::filesystem::temp_directory_path(ec).string();
    if (ec) {
      return IoError("MakeTempDir(" + std::string(name) +
                     "): no temporary directory ($TMPDIR): " + ec.message());
    }
  }
  const std::string tmpl = base + "/" + std::string(name) + "-XXXXXX";
  std::string dir = tmpl;  // mkdtemp rewrites the X's, even when it fails
  if (::mkdtemp(dir.data()) == nullptr) {
    return IoError("mkdtemp(" + tmpl + "): " + std::strerror(errno));
  }
  return dir;
}

}  // namespace fathom
