// YAML -> Protobuf by reflection (see yaml_loader.h for the accepted forms).
#include "proto/yaml_loader.h"

#include <fcntl.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

#include "proto/options.pb.h"

namespace fathom::config {

namespace pb = google::protobuf;

namespace {
// Whole error messages may list every key of a message; scalars quoted in
// them are cut much shorter (KindName).
constexpr size_t kMaxMessageChars = 4096;
constexpr size_t kMaxQuotedChars = 80;
}  // namespace

std::optional<SourceLocation> SourceMap::Find(std::string_view path) const {
  auto it = where_.find(path);
  if (it == where_.end()) return std::nullopt;
  return it->second;
}

std::string SourceMap::Where(std::string_view path) const {
  std::string_view p = path;
  while (true) {
    if (auto origin = origins_.find(p); origin != origins_.end()) return origin->second;
    if (auto loc = Find(p)) {
      return file_ + ":" + std::to_string(loc->line) + ":" + std::to_string(loc->column);
    }
    if (p.empty()) return file_;
    // Drop the last component: "[i]" or ".name" or the first name.
    const size_t cut = p.find_last_of(".[");
    p = cut == std::string_view::npos ? std::string_view() : p.substr(0, cut);
  }
}

Status SourceMap::Error(std::string_view path, std::string_view message) const {
  // Paths and messages quote the file's keys and values; escape them.
  return InvalidArgument(EscapeForTerminal(Where(path) + ": " +
                                               (path.empty() ? "<root>" : std::string(path)) +
                                               ": " + std::string(message),
                                           kMaxMessageChars));
}

std::string EscapeForTerminal(std::string_view text, size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(text.size(), max_chars) + 8);
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    // C1 controls are U+0080..U+009F, in UTF-8 0xC2 0x80..0x9F.
    const bool c1 = c == 0xC2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (c < 0x20 || c == 0x7F || c1) {
      const unsigned char v = c1 ? static_cast<unsigned char>(text[++i]) : c;
      out += "\\x";
      out += kHex[v >> 4];
      out += kHex[v & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string JoinPath(std::string_view prefix, std::string_view field) {
  if (prefix.empty()) return std::string(field);
  return std::string(prefix) + "." + std::string(field);
}

namespace {

SourceLocation LocationOf(const YAML::Mark& mark) {
  if (mark.is_null()) return {1, 1};
  return {mark.line + 1, mark.column + 1};
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "CamelCase" -> "CAMEL_CASE", the conventional enum value prefix.
std::string UpperSnake(std::string_view camel) {
  std::string out;
  for (size_t i = 0; i < camel.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(camel[i]);
    if (std::isupper(c) && i > 0) out += '_';
    out += static_cast<char>(std::toupper(c));
  }
  return out;
}

std::string KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "'" + EscapeForTerminal(node.Scalar(), kMaxQuotedChars) + "'";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

bool Quoted(const YAML::Node& node) { return node.Tag() == "!"; }

class Loader {
 public:
  Loader(SourceMap* map, const YamlValidator& validator) : map_(map), validator_(validator) {}

  void set_file(std::string f) { file_ = std::move(f); }

  Status LoadMessage(const YAML::Node& node, const std::string& path, pb::Message* msg) {
    const pb::Descriptor* desc = msg->GetDescriptor();
    const pb::Reflection* refl = msg->GetReflection();
    if (node.IsNull()) return Finish(*msg, path, {});
    if (!node.IsMap()) {
      return Err(node, path,
                 "expected a map of " + desc->name() + " fields, got " + KindName(node));
    }
    std::set<std::string> seen;
    std::map<int, std::string> oneof_set;  // oneof index -> member set
    for (auto it = node.begin(); it != node.end(); ++it) {
      // Copies: the iterator's -> returns a temporary proxy.
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      if (!key.IsScalar())
        return Err(key, path, "a key must be a plain name, got " + KindName(key));
      const std::string name = key.Scalar();
      const std::string field_path = JoinPath(path, name);
      const pb::FieldDescriptor* field = desc->FindFieldByName(name);
      if (field == nullptr) {
        std::string known;
        for (int i = 0; i < desc->field_count(); ++i) {
          known += (i ? ", " : "") + desc->field(i)->name();
        }
        return Err(key, field_path, "unknown key (" + desc->name() + " has: " + known + ")");
      }
      if (!seen.insert(name).second) return Err(key, field_path, "duplicate key");
      if (const pb::OneofDescriptor* oneof = field->containing_oneof();
          oneof != nullptr && !oneof->is_synthetic()) {
        auto [o, inserted] = oneof_set.emplace(oneof->index(), name);
        if (!inserted) {
          return Err(key, field_path,
                     "'" + o->second + "' is already set; they are alternatives (oneof " +
                         oneof->name() + ")");
        }
      }
      Record(field_path, value.IsNull() || value.Mark().is_null() ? key.Mark() : value.Mark());
      FATHOM_RETURN_IF_ERROR(LoadField(value, field_path, field, msg, refl));
    }
    return Finish(*msg, path, seen);
  }

 private:
  void Record(const std::string& path, const YAML::Mark& mark) {
    if (map_ != nullptr) map_->Add(path, LocationOf(mark));
  }

  Status Err(const YAML::Node& at, const std::string& path, std::string_view message) const {
    SourceLocation loc = LocationOf(at.Mark());
    // yaml-cpp marks an empty value at the next token; its key is the better place.
    if (at.IsNull() && map_ != nullptr) {
      if (auto recorded = map_->Find(path)) loc = *recorded;
    }
    return InvalidArgument(EscapeForTerminal(
        file_name() + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": " +
            (path.empty() ? "<root>" : path) + ": " + std::string(message),
        kMaxMessageChars));
  }
  std::string file_name() const { return map_ != nullptr ? map_->file() : file_; }

  // Required keys, then the caller's validator.
  Status Finish(const pb::Message& msg, const std::string& path,
                const std::set<std::string>& seen) {
    const pb::Descriptor* desc = msg.GetDescriptor();
    for (int i = 0; i < desc->field_count(); ++i) {
      const pb::FieldDescriptor* f = desc->field(i);
      if (f->options().GetExtension(fathom::proto::yaml_required) && !seen.count(f->name())) {
        return ErrorAt(path, "missing required key '" + f->name() + "'");
      }
    }
    if (validator_) {
      const SourceMap& m = map_ != nullptr ? *map_ : empty_;
      FATHOM_RETURN_IF_ERROR(validator_(msg, path, m));
    }
    return Status::Ok();
  }

  Status ErrorAt(const std::string& path, std::string_view message) const {
    if (map_ != nullptr) return map_->Error(path, message);
    return InvalidArgument(EscapeForTerminal(
        file_ + ": " + (path.empty() ? "<root>" : path) + ": " + std::string(message),
        kMaxMessageChars));
  }

  Status LoadField(const YAML::Node& value, const std::string& path,
                   const pb::FieldDescriptor* field, pb::Message* msg, const pb::Reflection* refl) {
    if (field->is_map()) {
      if (value.IsNull()) return Status::Ok();
      if (!value.IsMap()) return Err(value, path, "expected a map, got " + KindName(value));
      const pb::Descriptor* entry = field->message_type();
      const pb::FieldDescriptor* kf = entry->FindFieldByNumber(1);
      const pb::FieldDescriptor* vf = entry->FindFieldByNumber(2);
      std::set<std::string> keys;
      for (auto it = value.begin(); it != value.end(); ++it) {
        const YAML::Node k = it->first;
        const YAML::Node v = it->second;
        if (!k.IsScalar()) {
          return Err(k, path, "a map key must be a scalar, got " + KindName(k));
        }
        const std::string entry_path = path + "[" + k.Scalar() + "]";
        if (!keys.insert(k.Scalar()).second) return Err(k, entry_path, "duplicate key");
        Record(entry_path, v.IsNull() || v.Mark().is_null() ? k.Mark() : v.Mark());
        pb::Message* e = refl->AddMessage(msg, field);
        FATHOM_RETURN_IF_ERROR(
            SetScalar(k, entry_path, kf, e, e->GetReflection(), /*repeated=*/false));
        FATHOM_RETURN_IF_ERROR(LoadSingle(v, entry_path, vf, e, e->GetReflection()));
      }
      return Status::Ok();
    }
    if (field->is_repeated()) {
      if (value.IsNull()) return Status::Ok();
      if (!value.IsSequence()) {
        return Err(value, path, "expected a list, got " + KindName(value));
      }
      size_t i = 0;
      for (auto it = value.begin(); it != value.end(); ++it, ++i) {
        const YAML::Node item = *it;
        const std::string item_path = path + "[" + std::to_string(i) + "]";
        Record(item_path, item.Mark());
        if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
          FATHOM_RETURN_IF_ERROR(LoadMessage(item, item_path, refl->AddMessage(msg, field)));
        } else {
          FATHOM_RETURN_IF_ERROR(SetScalar(item, item_path, field, msg, refl, true));
        }
      }
      return Status::Ok();
    }
    return LoadSingle(value, path, field, msg, refl);
  }

  Status LoadSingle(const YAML::Node& value, const std::string& path,
                    const pb::FieldDescriptor* field, pb::Message* msg,
                    const pb::Reflection* refl) {
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      return LoadMessage(value, path, refl->MutableMessage(msg, field));
    }
    return SetScalar(value, path, field, msg, refl, false);
  }

  template <typename T>
  StatusOr<T> ParseInt(const YAML::Node& v, const std::string& path, std::string_view type) {
    std::string s = v.Scalar();
    const bool neg = !s.empty() && s[0] == '-';
    std::string_view digits(s);
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
    int base = 10;
    if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
      base = 16;
      digits.remove_prefix(2);
    }
    unsigned long long mag = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mag, base);
    if (digits.empty() || end != digits.data() + digits.size() ||
        (ec != std::errc() && ec != std::errc::result_out_of_range)) {
      return Err(v, path, "expected an integer, got " + KindName(v));
    }
    const auto out_of_range = [&] {
      return Err(v, path,
                 s + " is out of range for " + std::string(type) + " [" +
                     std::to_string(std::numeric_limits<T>::min()) + ", " +
                     std::to_string(std::numeric_limits<T>::max()) + "]");
    };
    if (ec == std::errc::result_out_of_range) return out_of_range();
    if constexpr (std::is_signed_v<T>) {
      const unsigned long long limit =
          neg ? static_cast<unsigned long long>(std::numeric_limits<T>::max()) + 1
              : static_cast<unsigned long long>(std::numeric_limits<T>::max());
      if (mag > limit) return out_of_range();
      if (neg) return static_cast<T>(-static_cast<long long>(mag - 1) - 1);
      return static_cast<T>(mag);
    } else {
      if (neg && mag != 0) return out_of_range();
      if (mag > std::numeric_limits<T>::max()) return out_of_range();
      return static_cast<T>(mag);
    }
  }

  StatusOr<double> ParseDouble(const YAML::Node& v, const std::string& path) {
    const std::string lower = Lower(v.Scalar());
    if (lower == ".inf" || lower == "+.inf") return std::numeric_limits<double>::infinity();
    if (lower == "-.inf") return -std::numeric_limits<double>::infinity();
    if (lower == ".nan") return std::numeric_limits<double>::quiet_NaN();
    const std::string& s = v.Scalar();
    double d = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    const char* begin = s.data();
    if (!s.empty() && s[0] == '+') {
      auto r = std::from_chars(s.data() + 1, s.data() + s.size(), d);
      end = r.ptr;
      ec = r.ec;
      begin = s.data() + 1;
    }
    if (s.empty() || end != s.data() + s.size() || end == begin) {
      return Err(v, path, "expected a number, got " + KindName(v));
    }
    if (ec == std::errc::result_out_of_range) return Err(v, path, s + " is out of range");
    return d;
  }

  Status SetScalar(const YAML::Node& v, const std::string& path, const pb::FieldDescriptor* f,
                   pb::Message* msg, const pb::Reflection* refl, bool repeated) {
    using FD = pb::FieldDescriptor;
    const bool is_string = f->cpp_type() == FD::CPPTYPE_STRING;
    if (!v.IsScalar()) {
      std::string want = is_string ? "a string" : "a number";
      if (f->cpp_type() == FD::CPPTYPE_BOOL) want = "true or false";
      if (f->cpp_type() == FD::CPPTYPE_INT32 || f->cpp_type() == FD::CPPTYPE_INT64 ||
          f->cpp_type() == FD::CPPTYPE_UINT32 || f->cpp_type() == FD::CPPTYPE_UINT64) {
        want = "an integer";
      }
      if (f->cpp_type() == FD::CPPTYPE_ENUM) want = "a " + f->enum_type()->name() + " name";
      return Err(v, path, "expected " + want + ", got " + KindName(v));
    }
    if (!is_string && f->cpp_type() != FD::CPPTYPE_ENUM && Quoted(v)) {
      return Err(v, path,
                 "expected an unquoted " +
                     std::string(f->cpp_type() == FD::CPPTYPE_BOOL ? "true or false" : "number") +
                     ", got the string '" + v.Scalar() + "'");
    }
#define FATHOM_SET_(Setter, value) \
  repeated ? refl->Add##Setter(msg, f, value) : refl->Set##Setter(msg, f, value)
    switch (f->cpp_type()) {
      case FD::CPPTYPE_INT32: {
        FATHOM_ASSIGN_OR_RETURN(int32_t x, ParseInt<int32_t>(v, path, "int32"));
        FATHOM_SET_(Int32, x);
        break;
      }
      case FD::CPPTYPE_INT64: {
        FATHOM_ASSIGN_OR_RETURN(int64_t x, ParseInt<int64_t>(v, path, "int64"));
        FATHOM_SET_(Int64, x);
        break;
      }
      case FD::CPPTYPE_UINT32: {
        FATHOM_ASSIGN_OR_RETURN(uint32_t x, ParseInt<uint32_t>(v, path, "uint32"));
        FATHOM_SET_(UInt32, x);
        break;
      }
      case FD::CPPTYPE_UINT64: {
        FATHOM_ASSIGN_OR_RETURN(uint64_t x, ParseInt<uint64_t>(v, path, "uint64"));
        FATHOM_SET_(UInt64, x);
        break;
      }
      case FD::CPPTYPE_DOUBLE: {
        FATHOM_ASSIGN_OR_RETURN(double x, ParseDouble(v, path));
        FATHOM_SET_(Double, x);
        break;
      }
      case FD::CPPTYPE_FLOAT: {
        FATHOM_ASSIGN_OR_RETURN(double x, ParseDouble(v, path));
        if (std::isfinite(x) && std::fabs(x) > std::numeric_limits<float>::max()) {
          return Err(v, path, v.Scalar() + " is out of range for float");
        }
        FATHOM_SET_(Float, static_cast<float>(x));
        break;
      }
      case FD::CPPTYPE_BOOL: {
        const std::string b = Lower(v.Scalar());
        if (b != "true" && b != "false") {
          return Err(v, path, "expected true or false, got " + KindName(v));
        }
        FATHOM_SET_(Bool, b == "true");
        break;
      }
      case FD::CPPTYPE_STRING:
        FATHOM_SET_(String, v.Scalar());
        break;
      case FD::CPPTYPE_ENUM: {
        const pb::EnumDescriptor* e = f->enum_type();
        const std::string want = Lower(v.Scalar());
        const std::string prefix = Lower(UpperSnake(e->name())) + "_";
        const pb::EnumValueDescriptor* found = nullptr;
        std::string names;
        for (int i = 0; i < e->value_count(); ++i) {
          const std::string full = Lower(e->value(i)->name());
          std::string shortname = full;
          if (full.starts_with(prefix)) shortname = full.substr(prefix.size());
          if (want == full || want == shortname) found = e->value(i);
          names += (i ? ", " : "") + shortname;
        }
        if (found == nullptr || want.empty()) {
          return Err(v, path,
                     "unknown " + e->name() + " " + KindName(v) + " (one of: " + names + ")");
        }
        FATHOM_SET_(Enum, found);
        break;
      }
      case FD::CPPTYPE_MESSAGE:
        return Err(v, path, "internal: message field treated as scalar");
    }
#undef FATHOM_SET_
    return Status::Ok();
  }

  SourceMap* map_;
  const YamlValidator& validator_;
  SourceMap empty_;
  std::string file_;
};

}  // namespace

namespace {

// Offset of the first byte that makes `text` not UTF-8 text (a NUL, a bad
// or overlong sequence, a surrogate), or npos.
size_t FirstNonText(std::string_view text, bool* nul) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  *nul = false;
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c == 0) {
      *nul = true;
      return i;
    }
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// 1-based line and column of a byte offset.
SourceLocation LocationOfOffset(std::string_view text, size_t offset) {
  SourceLocation loc{1, 1};
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.column = 1;
    } else {
      ++loc.column;
    }
  }
  return loc;
}

// Where flow nesting ('[' and '{' outside quotes and comments) first goes
// past `limit` levels, or npos. Only used to place yaml-cpp's recursion
// error, whose mark is wherever its scanner had got to.
size_t FlowNestingPast(std::string_view text, int limit) {
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char prev = i == 0 ? '\n' : text[i - 1];
    if (quote != 0) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '#' && (prev == ' ' || prev == '\t' || prev == '\n')) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if ((c == '\'' || c == '"') && (prev == ' ' || prev == '\n' || prev == '[' ||
                                           prev == '{' || prev == ',' || prev == ':')) {
      quote = c;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

std::string TooLarge(std::string_view name, std::string_view size) {
  return std::string(name) + ": " + std::string(size) + " is more than the " +
         std::to_string(kMaxYamlBytes >> 20) + " MiB a YAML file may hold (kMaxYamlBytes)";
}

}  // namespace

Status LoadYamlString(std::string_view text, std::string_view name_for_errors, pb::Message* out,
                      const YamlLoadOptions& options) {
  out->Clear();
  const std::string name = EscapeForTerminal(name_for_errors, kMaxMessageChars);
  if (text.size() > kMaxYamlBytes) {
    return InvalidArgument(TooLarge(name, std::to_string(text.size()) + " bytes"));
  }
  bool nul = false;
  if (const size_t bad = FirstNonText(text, &nul); bad != std::string_view::npos) {
    const SourceLocation loc = LocationOfOffset(text, bad);
    return InvalidArgument(name + ":" + std::to_string(loc.line) + ":" +
                           std::to_string(loc.column) + ": not a text file (" +
                           (nul ? "NUL byte" : "invalid UTF-8") + " at byte " +
                           std::to_string(bad) + ")");
  }
  SourceMap local{name};
  SourceMap* map = options.source_map != nullptr ? options.source_map : &local;
  *map = SourceMap(name);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's guard says only "bad file"; say what it guards against.
    SourceLocation loc = LocationOf(e.mark);
    if (const size_t at = FlowNestingPast(text, 64); at != std::string_view::npos) {
      loc = LocationOfOffset(text, at);
    }
    return InvalidArgument(name + ":" + std::to_string(loc.line) + ":" +
                           std::to_string(loc.column) + ": YAML nested too deeply (more than " +
                           std::to_string(e.depth() - 1) +
                           " levels of maps and lists); no fathom schema nests more than a few");
  } catch (const YAML::Exception& e) {
    const SourceLocation loc = LocationOf(e.mark);
    return InvalidArgument(name + ":" + std::to_string(loc.line) + ":" +
                           std::to_string(loc.column) +
                           ": YAML syntax error: " + EscapeForTerminal(e.msg, kMaxMessageChars));
  }
  map->Add("", {1, 1});
  Loader loader(map, options.validator);
  loader.set_file(name);
  try {
    return loader.LoadMessage(root, "", out);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on malformed access; it should not happen, but no
    // exception may leave this module.
    const SourceLocation loc = LocationOf(e.mark);
    return InvalidArgument(name + ":" + std::to_string(loc.line) + ":" +
                           std::to_string(loc.column) + ": " +
                           EscapeForTerminal(e.msg, kMaxMessageChars));
  }
}

Status LoadYamlFile(const std::string& path, pb::Message* out, const YamlLoadOptions& options) {
  const std::string shown = EscapeForTerminal(path, kMaxMessageChars);
  const std::string ctx = "LoadYamlFile(" + shown + ")";
  // O_NONBLOCK: opening a FIFO with no writer must not hang before fstat
  // says what it is; it is cleared again for reading.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return IoError(ctx + ": cannot open: " + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return IoError(ctx + ": fstat: " + std::strerror(errno));
  const char* kind = nullptr;
  if (S_ISDIR(st.st_mode)) kind = "a directory";
  if (S_ISCHR(st.st_mode)) kind = "a character device";
  if (S_ISBLK(st.st_mode)) kind = "a block device";
  if (S_ISSOCK(st.st_mode)) kind = "a socket";
  // A terminal or /dev/stdin that is one is a character device too; piped
  // stdin is a FIFO and is read.
  if (kind != nullptr) {
    return InvalidArgument(shown + ": is " + kind + ", not a YAML file");
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kMaxYamlBytes) {
    return InvalidArgument(TooLarge(shown, std::to_string(st.st_size) + " bytes"));
  }
  // A named pipe keeps O_NONBLOCK and is waited on with poll(): read() on a
  // FIFO that has had no writer yet returns 0 (EOF) at once, while Linux's
  // pipe_poll reports neither data nor hang-up until a writer has come, so
  // poll() waits for the first writer. Reopening the FIFO with a blocking
  // open() instead raced with a writer that wrote and closed in between: the
  // second open then waited for a writer that never came.
  const bool fifo = S_ISFIFO(st.st_mode);
  if (!fifo) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  const auto wait_readable = [&]() -> Status {
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, -1) < 0) {
      if (errno != EINTR) return IoError(ctx + ": poll: " + std::strerror(errno));
    }
    return Status::Ok();
  };
  if (fifo) FATHOM_RETURN_IF_ERROR(wait_readable());
  // Read in chunks up to one byte past the cap: a FIFO has no size to check
  // first, and a regular file may grow while it is read.
  std::string text;
  char chunk[1 << 16];
  size_t got = 0;
  while (got <= kMaxYamlBytes) {
    const ssize_t n = ::read(fd, chunk, std::min(sizeof(chunk), kMaxYamlBytes + 1 - got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && fifo && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      FATHOM_RETURN_IF_ERROR(wait_readable());
      continue;
    }
    if (n < 0) return IoError(ctx + ": read: " + std::strerror(errno));
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
    got += static_cast<size_t>(n);
  }
  if (got > kMaxYamlBytes) return InvalidArgument(TooLarge(shown, "the input"));
  return LoadYamlString(text, path, out, options);
}

}  // namespace fathom::config
