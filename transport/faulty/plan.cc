#include "transport/faulty/plan.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace fathom::transport::faulty {
namespace {

struct KindName {
  FaultKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {FaultKind::kFailPost, "fail_post"},
    {FaultKind::kDelayCompletions, "delay_completions"},
    {FaultKind::kSwallowError, "swallow_error"},
    {FaultKind::kQpError, "qp_error"},
    {FaultKind::kAsyncEvent, "async_event"},
};

// The errnos a provider's ibv_post_send/ibv_post_recv return (rdma-core
// man ibv_post_send: "Return Value ... errno on failure"; mlx5 returns
// ENOMEM for a full queue, EINVAL for a bad WR, rxe also EFAULT/EPERM).
struct ErrnoName {
  int value;
  const char* name;
};
constexpr ErrnoName kErrnos[] = {
    {ENOMEM, "ENOMEM"}, {EAGAIN, "EAGAIN"}, {EINVAL, "EINVAL"},
    {EFAULT, "EFAULT"}, {EPERM, "EPERM"},
};

// ibv_event_type names (rdma-core verbs.h); the first three are QP errors
// that take the QP to ERR (man ibv_get_async_event).
constexpr const char* kEvents[] = {
    "IBV_EVENT_QP_FATAL",   "IBV_EVENT_QP_REQ_ERR",   "IBV_EVENT_QP_ACCESS_ERR",
    "IBV_EVENT_PORT_ERR",   "IBV_EVENT_DEVICE_FATAL", "IBV_EVENT_PORT_ACTIVE",
    "IBV_EVENT_LID_CHANGE", "IBV_EVENT_GID_CHANGE",
};

bool ParseInt(std::string_view text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty()) return false;
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 0);
  if (errno != 0 || end != s.c_str() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::string Upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  return r;
}

bool Fail(PlanError* e, std::string_view key, std::string_view token, std::string message) {
  e->key = std::string(key);
  e->token = std::string(token);
  e->message = std::move(message);
  return false;
}

std::string Duration(Picoseconds t) {
  char buf[48];
  if (t.ps() % 1000000000000LL == 0) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(t.ps() / 1000000000000LL));
  } else if (t.ps() % 1000000000LL == 0) {
    std::snprintf(buf, sizeof(buf), "%lldms", static_cast<long long>(t.ps() / 1000000000LL));
  } else if (t.ps() % 1000000LL == 0) {
    std::snprintf(buf, sizeof(buf), "%lldus", static_cast<long long>(t.ps() / 1000000LL));
  } else {
    std::snprintf(buf, sizeof(buf), "%.3fns", static_cast<double>(t.ps()) / 1000.0);
  }
  return buf;
}

}  // namespace

const char* FaultKindName(FaultKind kind) {
  for (const KindName& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  return "?";
}

bool ParseKind(std::string_view name, FaultKind* kind) {
  for (const KindName& k : kKinds) {
    if (name == k.name) {
      *kind = k.kind;
      return true;
    }
  }
  return false;
}

bool ParseDuration(std::string_view text, Picoseconds* out) {
  if (text == "0") {
    *out = Picoseconds(0);
    return true;
  }
  struct Unit {
    const char* suffix;
    double ps;
  };
  constexpr Unit kUnits[] = {{"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}, {"s", 1e12}};
  for (const Unit& u : kUnits) {
    const size_t n = std::strlen(u.suffix);
    if (text.size() <= n || text.substr(text.size() - n) != u.suffix) continue;
    const std::string num(text.substr(0, text.size() - n));
    // "5ms" also ends in "s": the number must then parse whole.
    char* end = nullptr;
    const double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size() || num.empty()) continue;
    if (!std::isfinite(v) || v < 0 || v * u.ps > 9e21) return false;
    *out = Picoseconds(static_cast<int64_t>(std::llround(v * u.ps)));
    return true;
  }
  return false;
}

bool SetKey(VerbsFault* f, std::string_view key, std::string_view value, PlanError* error) {
  const std::string token = std::string(key) + "=" + std::string(value);
  int64_t v = 0;
  if (key == "rank" || key == "qp" || key == "peer") {
    if (!ParseInt(value, 0, 1 << 24, &v)) {
      return Fail(error, key, token, "a rank or QP index is a whole number >= 0");
    }
    (key == "rank" ? f->rank : key == "qp" ? f->qp : f->peer) = static_cast<int>(v);
  } else if (key == "qpn") {
    if (!ParseInt(value, 1, 0xffffff, &v)) {
      return Fail(error, key, token, "a QP number is 1..0xffffff (24 bits)");
    }
    f->qpn = static_cast<uint32_t>(v);
  } else if (key == "after" || key == "count") {
    if (!ParseInt(value, 0, int64_t{1} << 62, &v)) {
      return Fail(error, key, token, "a count is a whole number >= 0");
    }
    (key == "after" ? f->after : f->count) = static_cast<uint64_t>(v);
  } else if (key == "at" || key == "delay") {
    Picoseconds t;
    if (!ParseDuration(value, &t)) {
      return Fail(error, key, token, "a time is a number >= 0 with its unit: ns, us, ms or s");
    }
    (key == "at" ? f->at : f->delay) = t;
    if (key == "delay" && f->kind != FaultKind::kDelayCompletions) {
      return Fail(error, key, token, "only delay_completions takes a delay");
    }
  } else if (key == "error") {
    if (f->kind != FaultKind::kFailPost) {
      return Fail(error, key, token, "only fail_post takes an error");
    }
    const std::string name = Upper(value);
    for (const ErrnoName& e : kErrnos) {
      if (name == e.name) f->error = e.value;
    }
    if (f->error == 0) return Fail(error, key, token, "one of ENOMEM EAGAIN EINVAL EFAULT EPERM");
  } else if (key == "queue") {
    if (f->kind != FaultKind::kFailPost) {
      return Fail(error, key, token, "only fail_post takes a queue");
    }
    if (value != "send" && value != "recv") return Fail(error, key, token, "send or recv");
    f->recv_queue = value == "recv";
  } else if (key == "event") {
    if (f->kind != FaultKind::kAsyncEvent) {
      return Fail(error, key, token, "only async_event takes an event");
    }
    std::string name = Upper(value);
    if (name.rfind("IBV_EVENT_", 0) != 0) name = "IBV_EVENT_" + name;
    for (const char* e : kEvents) {
      if (name == e) f->event = e;
    }
    if (f->event.empty()) {
      return Fail(error, key, token,
                  "one of QP_FATAL QP_REQ_ERR QP_ACCESS_ERR PORT_ERR DEVICE_FATAL PORT_ACTIVE "
                  "LID_CHANGE GID_CHANGE");
    }
  } else {
    return Fail(error, key, token,
                "unknown key (rank qp qpn peer at after count delay error queue event)");
  }
  return true;
}

bool Finish(VerbsFault* f, int nranks, PlanError* error) {
  if (f->rank < 0) return Fail(error, "rank", f->text, "rank=N is required");
  if (nranks > 0 && f->rank >= nranks) {
    return Fail(error, "rank", "rank=" + std::to_string(f->rank),
                "rank outside 0.." + std::to_string(nranks - 1));
  }
  if (nranks > 0 && f->peer >= nranks) {
    return Fail(error, "peer", "peer=" + std::to_string(f->peer),
                "peer outside 0.." + std::to_string(nranks - 1));
  }
  if ((f->qp >= 0) + (f->qpn != 0) + (f->peer >= 0) > 1) {
    return Fail(error, f->qp >= 0 ? "qp" : "qpn", f->text, "give one of qp, qpn and peer");
  }
  if (f->kind == FaultKind::kDelayCompletions && f->delay.ps() <= 0) {
    return Fail(error, "delay", f->text, "delay_completions needs delay=T > 0");
  }
  if (f->kind == FaultKind::kFailPost) {
    if (f->error == 0) f->error = ENOMEM;
    if (f->count == 0) f->count = 1;
  }
  if (f->kind == FaultKind::kAsyncEvent && f->event.empty()) f->event = "IBV_EVENT_QP_FATAL";
  // A QP goes to ERR once and an event is raised once.
  if (f->kind == FaultKind::kQpError || f->kind == FaultKind::kAsyncEvent) f->count = 1;
  return true;
}

StatusOr<std::vector<VerbsFault>> ParseVerbsFaults(std::string_view text) {
  std::vector<VerbsFault> out;
  auto bad = [](std::string_view token, const std::string& message) {
    return InvalidArgument("--verbs-fault: '" + std::string(token) + "': " + message);
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view one = text.substr(start, end - start);
    start = end + 1;
    if (one.empty()) {
      if (end == text.size()) break;
      continue;
    }
    VerbsFault f;
    f.text = std::string(one);
    const size_t colon = one.find(':');
    const std::string_view kind = one.substr(0, colon);
    if (!ParseKind(kind, &f.kind)) {
      return bad(kind,
                 "unknown fault (fail_post delay_completions swallow_error qp_error async_event); "
                 "the form is KIND:rank=N[,key=value...]");
    }
    if (colon == std::string_view::npos) return bad(one, "rank=N is required");
    std::string_view rest = one.substr(colon + 1);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view kv = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      const size_t eq = kv.find('=');
      if (eq == std::string_view::npos) return bad(kv, "expected key=value");
      PlanError e;
      if (!SetKey(&f, kv.substr(0, eq), kv.substr(eq + 1), &e)) return bad(e.token, e.message);
    }
    PlanError e;
    if (!Finish(&f, 0, &e)) return bad(e.token, e.message);
    out.push_back(std::move(f));
    if (end == text.size()) break;
  }
  if (out.empty()) return bad(text, "no fault given");
  return out;
}

std::string Describe(const VerbsFault& f) {
  std::string r = std::string(FaultKindName(f.kind)) + ":rank=" + std::to_string(f.rank);
  if (f.qp >= 0) r += ",qp=" + std::to_string(f.qp);
  if (f.qpn != 0) r += ",qpn=" + Hex(f.qpn);
  if (f.peer >= 0) r += ",peer=" + std::to_string(f.peer);
  if (f.at == Picoseconds::Max()) {
    r += ",at=never";  // placed at an iteration the run did not reach
  } else if (f.at.ps() > 0) {
    r += ",at=" + Duration(f.at);
  }
  if (f.after > 0) r += ",after=" + std::to_string(f.after);
  if (f.count > 0 && f.kind != FaultKind::kQpError && f.kind != FaultKind::kAsyncEvent) {
    r += ",count=" + std::to_string(f.count);
  }
  if (f.kind == FaultKind::kDelayCompletions) r += ",delay=" + Duration(f.delay);
  if (f.kind == FaultKind::kFailPost) {
    for (const ErrnoName& e : kErrnos) {
      if (e.value == f.error) r += std::string(",error=") + e.name;
    }
    if (f.recv_queue) r += ",queue=recv";
  }
  if (f.kind == FaultKind::kAsyncEvent) r += ",event=" + f.event.substr(10);
  return r;
}

}  // namespace fathom::transport::faulty
