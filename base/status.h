// Status and StatusOr<T>: the error currency of fathom at setup, config and the
// verbs boundary (LevelDB/Abseil style). No exceptions cross module boundaries.
// A Status names the call and the values that failed, e.g.
//   "ibv_modify_qp(RTR) qpn=0x11 dest_qpn=0x12 mtu=4096: Invalid argument".
// Both types are values: cheap to move, the OK status allocates nothing.
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace fathom {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input: a file, a flag, a field, a frame
  kNotFound,            // a file, device, port, peer that does not exist
  kIoError,             // an OS or library call on the outside world failed
  kDeadlineExceeded,    // a wait whose deadline passed
  kFailedPrecondition,  // the call is not valid in the object's current state
  kUnavailable,         // a peer or device that is not (yet) reachable
  kAborted,             // the run was aborted (by a peer, a signal, a watchdog)
  kOutOfRange,          // a value outside what the format or model supports
  kInternal,            // a broken invariant: a bug in fathom
};

std::string_view StatusCodeName(StatusCode code);

// "0x1f": how messages print QPNs, keys, PSNs and flags (as verbs tools do).
// `width` pads the digits with zeros ("0x00001f" for width 6).
std::string Hex(uint64_t v, int width = 0);

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message without the code name; empty for OK.
  const std::string& message() const;
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "context: message" (for adding the outer
  // call's name on the way up). OK stays OK.
  Status WithContext(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  // Shared and immutable: copying a Status copies a pointer.
  std::shared_ptr<const Rep> rep_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Either a T or a non-OK Status. Accessing the value of an error is a bug
// (asserted in debug builds).
template <typename T>
class StatusOr {
 public:
  StatusOr(const T& value) : value_(value) {}             // NOLINT: implicit by design
  StatusOr(T&& value) : value_(std::move(value)) {}       // NOLINT
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "StatusOr built from an OK status without a value");
    if (status_.ok()) status_ = Internal("StatusOr constructed from OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::optional<T> value_;
  Status status_;  // OK when value_ holds a value
};

}  // namespace fathom

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define FATHOM_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::fathom::Status fathom_status_ = (expr);        \
    if (!fathom_status_.ok()) return fathom_status_; \
  } while (0)

#define FATHOM_CONCAT_INNER_(a, b) a##b
#define FATHOM_CONCAT_(a, b) FATHOM_CONCAT_INNER_(a, b)
// `FATHOM_ASSIGN_OR_RETURN(auto x, F());` declares x from a StatusOr, or
// returns its error.
#define FATHOM_ASSIGN_OR_RETURN(lhs, expr) \
  FATHOM_ASSIGN_OR_RETURN_IMPL_(FATHOM_CONCAT_(fathom_statusor_, __LINE__), lhs, expr)
#define FATHOM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
