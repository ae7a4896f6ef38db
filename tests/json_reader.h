// A strict JSON reader for tests: it checks the syntax of a whole document
// and flattens it into path -> value, so that a test asserts on keys and
// values without a JSON library (the CLI tests' --json output, the merged
// coll trace).
#pragma once

#include <cctype>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace fathom::test_util {

// A strict JSON reader that flattens numbers and strings into paths:
// {"a":{"b":1},"c":[{"d":"x"}]} -> a.b=1, c[0].d=x. Fails on any syntax error.
class Json {
 public:
  explicit Json(const std::string& text) : s_(text) {}
  bool Parse(std::map<std::string, std::string>* out) {
    out_ = out;
    Ws();
    if (!Value("")) return false;
    Ws();
    return i_ == s_.size();
  }

 private:
  void Ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool String(std::string* v) {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (static_cast<unsigned char>(s_[i_]) < 0x20) return false;
      if (s_[i_] == '\\') {
        if (++i_ >= s_.size()) return false;
        if (s_[i_] == 'u') i_ += 4;
      }
      v->push_back(s_[i_++]);
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    return true;
  }
  bool Value(const std::string& path) {
    Ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      Ws();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      while (true) {
        Ws();
        std::string key;
        if (!String(&key)) return false;
        Ws();
        if (i_ >= s_.size() || s_[i_++] != ':') return false;
        (*out_)[(path.empty() ? "" : path + ".") + key + "?"] = "present";
        if (!Value(path.empty() ? key : path + "." + key)) return false;
        Ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
        return false;
      }
    }
    if (c == '[') {
      ++i_;
      Ws();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      for (int k = 0;; ++k) {
        if (!Value(path + "[" + std::to_string(k) + "]")) return false;
        Ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
        return false;
      }
    }
    if (c == '"') {
      std::string v;
      if (!String(&v)) return false;
      (*out_)[path] = v;
      return true;
    }
    for (const char* lit : {"true", "false", "null"}) {
      if (s_.compare(i_, std::strlen(lit), lit) == 0) {
        (*out_)[path] = lit;
        i_ += std::strlen(lit);
        return true;
      }
    }
    const size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                              s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-')) {
      ++i_;
    }
    if (i_ == start) return false;
    (*out_)[path] = s_.substr(start, i_ - start);
    return true;
  }

  const std::string& s_;
  size_t i_ = 0;
  std::map<std::string, std::string>* out_ = nullptr;
};

// The events of a parsed Chrome trace, in order: the fields of each
// "traceEvents[i]" without that prefix ("ph", "pid", "ts", "args.name", ...).
using TraceEvent = std::map<std::string, std::string>;
inline std::vector<TraceEvent> TraceEvents(const std::map<std::string, std::string>& parsed) {
  std::vector<TraceEvent> events;
  for (const auto& [path, value] : parsed) {
    if (path.rfind("traceEvents[", 0) != 0) continue;
    const size_t close = path.find(']');
    const size_t i = std::stoul(path.substr(12, close - 12));
    if (events.size() <= i) events.resize(i + 1);
    events[i][path.substr(close + 2)] = value;  // after "]."
  }
  return events;
}

// pid -> the name its "process_name" metadata event gives.
inline std::map<int, std::string> TraceProcessNames(const std::vector<TraceEvent>& events) {
  std::map<int, std::string> names;
  for (const TraceEvent& e : events) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      names[std::stoi(e.at("pid"))] = e.at("args.name");
    }
  }
  return names;
}

}  // namespace fathom::test_util
