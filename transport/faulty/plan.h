// The plan of verbs-level faults (transport/faulty): which fault, on which
// rank and QP, from when — as `fathom coll --verbs-fault` spells it and as a
// scenario's `verbs_faults` list (proto/scenario.proto VerbsFaultSpec) gives
// it. Parsing and checking live here so that both inputs name the same
// fields with the same words; faulty.h injects what a plan says.
//
// The flag's grammar (one fault; repeat the flag or separate with ';'):
//   KIND:key=value[,key=value...]
//   KIND  fail_post | delay_completions | swallow_error | qp_error | async_event
//   rank=N   (required) the rank whose device the fault is on
//   qp=N     the N-th QP that rank's device created (0-based), or
//   qpn=0xN  the QP with that number, or
//   peer=N   the QPs to rank N; none of them: every QP of the rank
//   at=T     active from time T on (a number with ns|us|ms|s: virtual time
//            on the sim backend, time since the device opened on verbs)
//   after=N  ... and after N matching operations passed untouched (posts for
//            fail_post, qp_error, async_event; completions for the others)
//   count=N  acts at most N times (0: no limit). Default 1 for fail_post,
//            no limit for delay_completions and swallow_error
//   delay=T  delay_completions: how long (required, > 0)
//   error=E  fail_post: ENOMEM (default: queue full), EAGAIN, EINVAL, EFAULT,
//            EPERM — the errno a real ibv_post_send returns
//   queue=Q  fail_post: send (default) | recv
//   event=V  async_event: QP_FATAL (default), QP_REQ_ERR, QP_ACCESS_ERR (the
//            QP goes to ERR too, as verbs says), PORT_ERR, DEVICE_FATAL,
//            PORT_ACTIVE, LID_CHANGE, GID_CHANGE (IBV_EVENT_ prefix optional)
// e.g. --verbs-fault 'swallow_error:rank=3,qp=0,after=10'
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/units.h"

namespace fathom::transport::faulty {

enum class FaultKind {
  kFailPost,          // a post returns the error a real post returns
  kDelayCompletions,  // completions reach the caller `delay` later
  kSwallowError,      // error completions never reach the caller (CASES.md 20)
  kQpError,           // ibv_modify_qp(ERR): outstanding WRs flush
  kAsyncEvent,        // an ibv_async_event is raised
};
const char* FaultKindName(FaultKind kind);

struct VerbsFault {
  FaultKind kind = FaultKind::kFailPost;
  int rank = -1;
  int qp = -1;       // index in the rank's creation order; -1: not given
  uint32_t qpn = 0;  // 0: not given
  int peer = -1;     // -1: not given
  Picoseconds at;    // from the origin (see FaultEnv)
  uint64_t after = 0;
  uint64_t count = 0;  // 0: no limit
  Picoseconds delay;
  int error = 0;            // fail_post: errno (ENOMEM by default)
  bool recv_queue = false;  // fail_post: queue=recv
  std::string event;        // async_event: "IBV_EVENT_QP_FATAL", ...
  std::string text;         // as written (the flag's token, or the scenario's)
};

// Where a bad value is: the key ("rank", "delay", ...) or "" for the fault as
// a whole, and what is wrong. The flag parser prints `token`, the scenario
// loader places `key` at file:line.
struct PlanError {
  std::string key;
  std::string token;
  std::string message;
};

// Sets `key` of `f` from its text; false (and *error) when the key is
// unknown to f's kind or the value does not parse.
bool SetKey(VerbsFault* f, std::string_view key, std::string_view value, PlanError* error);
// The kind from its name; false when unknown.
bool ParseKind(std::string_view name, FaultKind* kind);
// Checks a fault as a whole (required keys, ranges, combinations) and fills
// defaults (count, error, event). `nranks` 0: not known yet.
bool Finish(VerbsFault* f, int nranks, PlanError* error);

// Parses one --verbs-fault value (several faults separated by ';').
// INVALID_ARGUMENT "--verbs-fault: 'TOKEN': problem" on bad input.
StatusOr<std::vector<VerbsFault>> ParseVerbsFaults(std::string_view text);

// A duration with its unit: "250us", "4.29s", "0". False when it has no unit
// (other than a bare 0), is negative or not a number.
bool ParseDuration(std::string_view text, Picoseconds* out);

// The fault in the flag's grammar (for reports).
std::string Describe(const VerbsFault& f);

}  // namespace fathom::transport::faulty
