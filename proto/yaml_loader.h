// YAML -> Protobuf loader for scenario and topology files. Generic: it walks
// any message's descriptor by reflection, so every schema in proto/ gets the
// same strict checking and the same error format:
//   "scenario.yaml:12:5: topology.fat_tree.k: expected an integer, got 'eight'"
// (file:line:column, 1-based, then the field path from the root message).
//
// Accepted: nested messages (YAML maps), repeated fields (YAML sequences;
// `key:` with no value is an empty list), map<> fields (YAML maps), enums by
// value name, case-insensitive, with or without the enum's UPPER_SNAKE name
// as prefix (so `copper_cable_direct` matches CONNECTION_COPPER_CABLE_DIRECT
// of enum Connection), bools (true/false), strings, integers (decimal or 0x
// hex, range-checked for the field's type), doubles/floats (also .inf/.nan).
// Rejected, each naming file:line:col and field path: unknown keys (with the
// known ones listed), duplicate keys, two members of one oneof, wrong YAML
// kinds, quoted numbers or bools, out-of-range integers, unknown enum names,
// missing keys marked [(fathom.proto.yaml_required) = true] (proto/options.proto),
// and any error a caller's validator returns.
//
// Field paths: "fat_tree.k", "cluster_network.scale_levels[2].servers",
// "labels[rack1]" for a map entry; the root message is "" (written "<root>").
//
// Input limits (checked before parsing): at most kMaxYamlBytes of text;
// text only (a NUL byte or invalid UTF-8 is refused with its byte offset,
// never echoed); YAML nested deeper than yaml-cpp's recursion guard is
// refused with its line. Errors never echo control characters: scalars and
// keys quoted in messages pass through EscapeForTerminal.
//
// Ownership: the loader fills the caller's message; the SourceMap is a value
// the caller keeps to place later semantic errors ("k must be even") on the
// line that set the field. Thread-compatible; no global state.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace google::protobuf {
class Message;
}

namespace fathom::config {

struct SourceLocation {
  int line = 0;    // 1-based
  int column = 0;  // 1-based
};

// Field path -> where its value is written in the file.
class SourceMap {
 public:
  SourceMap() = default;
  explicit SourceMap(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  void Add(std::string path, SourceLocation location) { where_[std::move(path)] = location; }
  // Errors at `path` or below come from `origin` (e.g. a command-line flag
  // appended to the file's list), not from a line of the file.
  void AddOrigin(std::string path, std::string origin) {
    origins_[std::move(path)] = std::move(origin);
  }
  // Exact path, if the file wrote it.
  std::optional<SourceLocation> Find(std::string_view path) const;
  // "file:line:col" of the path or of its nearest written ancestor
  // ("a.b[2].c" -> "a.b[2]" -> "a.b" -> "a" -> root), or "file" alone.
  std::string Where(std::string_view path) const;
  // InvalidArgument("file:line:col: path: message").
  Status Error(std::string_view path, std::string_view message) const;
  size_t size() const { return where_.size(); }

 private:
  std::string file_;
  std::map<std::string, SourceLocation, std::less<>> where_;
  std::map<std::string, std::string, std::less<>> origins_;
};

// Called once per loaded message, innermost first, with its field path; a
// non-OK return fails the load (use `map.Error(path + ".field", ...)`).
using YamlValidator = std::function<Status(const google::protobuf::Message& message,
                                           const std::string& path, const SourceMap& map)>;

struct YamlLoadOptions {
  // Where to put the source locations; may be null.
  SourceMap* source_map = nullptr;
  YamlValidator validator;
};

// Largest YAML input accepted: scenario and topology files are a few KiB;
// 16 MiB leaves room for long generated flow lists while keeping a mistaken
// argument (a disk image, /dev/zero) from being read whole.
inline constexpr size_t kMaxYamlBytes = size_t{16} << 20;

// Parses the YAML file at `path` into `out` (cleared first). Regular files,
// FIFOs and "/dev/stdin" are read, through a bound of kMaxYamlBytes + 1;
// a directory, device or socket is refused without reading. Errors: a file
// that cannot be read (IoError/NotFound naming the path), not a regular file
// or too large, not text, YAML syntax, schema mismatches as above
// (InvalidArgument).
Status LoadYamlFile(const std::string& path, google::protobuf::Message* out,
                    const YamlLoadOptions& options = {});
// The same for text in memory; `name_for_errors` stands for the file name.
Status LoadYamlString(std::string_view text, std::string_view name_for_errors,
                      google::protobuf::Message* out, const YamlLoadOptions& options = {});

// `text` with control characters (C0, DEL, C1) as \xNN and anything past
// `max_chars` bytes cut to "...", safe to print on a terminal.
std::string EscapeForTerminal(std::string_view text, size_t max_chars = 200);

// Joins a path prefix and a field name ("topology" + "fat_tree").
std::string JoinPath(std::string_view prefix, std::string_view field);

}  // namespace fathom::config
