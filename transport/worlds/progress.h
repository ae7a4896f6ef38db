// Progress: the one status line a collective sweep keeps on stderr while it
// runs on a terminal (never in pipes or tests), at most 5 times a second,
// like `fathom sim`'s. RunSweep owns one; a Backend may tick it from inside
// one long collective (Backend::WatchProgress). One thread uses it.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace fathom::transport::worlds {

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled) {}
  ~Progress() { Clear(); }
  bool enabled() const { return enabled_; }
  void Update(const std::string& text) {
    if (!enabled_) return;
    text_ = text;
    Show(text, false);
  }
  // Within one long collective (the sim's events): the last text and where
  // the collective stands.
  void Tick(const std::string& suffix) { Show(text_ + suffix, true); }
  // Before a line goes to stdout (often the same terminal).
  void Clear() {
    if (!shown_) return;
    std::fprintf(stderr, "\r%78s\r", "");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  void Show(const std::string& line, bool throttle_first) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if ((shown_ || throttle_first) && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    std::fprintf(stderr, "\r[coll] %-70.70s", line.c_str());
    std::fflush(stderr);
    shown_ = true;
  }

  bool enabled_;
  bool shown_ = false;
  std::string text_;
  std::chrono::steady_clock::time_point last_;
};
}  // namespace fathom::transport::worlds
