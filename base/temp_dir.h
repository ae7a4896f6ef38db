// A new, private directory for a run's temporary files: NAME-XXXXXX made by
// mkdtemp (so two runs at once never share it) under $TMPDIR, or /tmp when
// TMPDIR is unset, or under a root the caller names. The caller owns the
// directory and removes it (or hands it to the user) when done.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace fathom {

// The directory's path, or IO_ERROR naming the template and the errno text.
// `root` empty: $TMPDIR, else /tmp (std::filesystem::temp_directory_path).
StatusOr<std::string> MakeTempDir(std::string_view name, std::string_view root = {});

}  // namespace fathom
