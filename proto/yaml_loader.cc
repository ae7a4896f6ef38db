// YAML -> Protobuf by reflection (see yaml_loader.h for the accepted forms).
#include "proto/yaml_loader.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "proto/options.pb.h"

namespace fathom::config {

namespace pb = google::protobuf;

std::optional<SourceLocation> SourceMap::Find(std::string_view path) const {
  auto it = where_.find(path);
  if (it == where_.end()) return std::nullopt;
  return it->second;
}

std::string SourceMap::Where(std::string_view path) const {
  std::string_view p = path;
  while (true) {
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
  return InvalidArgument(Where(path) + ": " + (path.empty() ? "<root>" : std::string(path)) + ": " +
                         std::string(message));
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
      return "'" + node.Scalar() + "'";
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
    return InvalidArgument(file_name() + ":" + std::to_string(loc.line) + ":" +
                           std::to_string(loc.column) + ": " + (path.empty() ? "<root>" : path) +
                           ": " + std::string(message));
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
    return InvalidArgument(file_ + ": " + (path.empty() ? "<root>" : path) + ": " +
                           std::string(message));
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

Status LoadYamlString(std::string_view text, std::string_view name_for_errors, pb::Message* out,
                      const YamlLoadOptions& options) {
  out->Clear();
  SourceMap local{std::string(name_for_errors)};
  SourceMap* map = options.source_map != nullptr ? options.source_map : &local;
  *map = SourceMap(std::string(name_for_errors));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const SourceLocation loc = LocationOf(e.mark);
    return InvalidArgument(std::string(name_for_errors) + ":" + std::to_string(loc.line) + ":" +
                           std::to_string(loc.column) + ": YAML syntax error: " + e.msg);
  }
  map->Add("", {1, 1});
  Loader loader(map, options.validator);
  loader.set_file(std::string(name_for_errors));
  try {
    return loader.LoadMessage(root, "", out);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on malformed access; it should not happen, but no
    // exception may leave this module.
    const SourceLocation loc = LocationOf(e.mark);
    return InvalidArgument(std::string(name_for_errors) + ":" + std::to_string(loc.line) + ":" +
                           std::to_string(loc.column) + ": " + e.msg);
  }
}

Status LoadYamlFile(const std::string& path, pb::Message* out, const YamlLoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return IoError("LoadYamlFile(" + path + "): cannot open: " + std::strerror(errno));
  }
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return IoError("LoadYamlFile(" + path + "): read failed");
  return LoadYamlString(buf.str(), path, out, options);
}

}  // namespace fathom::config
