// `fathom perf`: perftest's write_bw, write_lat, read_bw, read_lat, send_bw
// and send_lat on fathom's transport (verbs backend), with perftest's flags,
// tables and units (ROCEV2.md, "Tool conventions"). The server runs without
// an address and hosts the bootstrap root; the client names the server.
// Every wait has a deadline: a stalled run fails with the QP, the peer and
// the last completion instead of hanging. Exit 0 ok, 1 the run failed
// (completion error, deadline, data mismatch), 2 bad usage or no device.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "tools/command.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/endpoints.h"
#include "transport/verbs/perf_report.h"
#include "transport/verbs/verbs_device.h"
#include "transport/wait.h"

namespace fathom::tools {
namespace {

namespace tv = transport::verbs;
namespace tb = transport::bootstrap;
using transport::Completion;
using transport::CompletionQueue;
using transport::QueuePair;

struct PerfFlags {
  std::string test;
  std::string server;  // empty = server side
  std::string device;
  int ib_port = 0;
  int gid_index = -1;
  bool gid_ipv6 = false;
  uint64_t size = 0;  // 0 = the test's default
  bool all_sizes = false;
  uint64_t iters = 0;  // 0 = the test's default
  double duration = 0;
  int qps = 1;
  int mtu = 0;
  int timeout = 14;
  int retry_cnt = 7;  // rxe treats 7 as infinite (ROCEV2.md)
  bool events = false;
  int tcp_port = tb::kDefaultPort;
  std::string bind = "0.0.0.0";
  bool gbits = false;
  bool json = false;
  bool verify = false;
  int tx_depth = 128;
  double stall_s = 30;
  // perftest's flags beyond the basics (perftest_parameters.c's usage text).
  bool cpu_freq_f = false;     // -F: accepted, nothing to silence (kIgnoredHelp)
  bool bidirectional = false;  // -b: both sides send; the figures are the sum
  std::string connection;      // -c: RC only
  int cq_mod = 0;              // -Q: signal one WR in this many (0 = default)
  int inline_size = -1;        // -I: max bytes posted inline (-1 = device default 128)
  int post_list = 1;           // -l: WRs chained into one ibv_post_send
  int sl = 0;                  // -S: service level
  int tos = -1;                // -T: ToS, which is the GRH traffic class (-1 = unset)
  int tclass = -1;             // --tclass: GRH traffic class (-1 = unset)
  bool rdma_cm = false;        // -R: not supported (rejected)
  std::string counters;        // -W: sysfs counters to report the change of
  bool out_json = false;       // --out_json: the report also into out_json_file
  std::string out_json_file = "perftest_out.json";
  bool run_infinitely = false;  // --run_infinitely: -D windows until SIGINT
};

struct Session {
  std::unique_ptr<tb::Root> root;
  std::unique_ptr<tb::Rank> rank;
  std::unique_ptr<transport::Device> device;
  std::vector<uint8_t> local;  // peer writes/sends land here; region i per QP
  std::vector<uint8_t> src;    // what we send/write from; read results land here
  std::unique_ptr<transport::MemoryRegion> local_mr, src_mr;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::map<uint32_t, int> qp_index;
  transport::RemoteBuffer remote;  // the peer's `local`
  uint64_t region = 0;             // bytes per QP region
  bool client = false;
  bool events = false;  // -e: sleep on the completion channel
  transport::WallClock clock;
};

constexpr uint32_t kDoneImm = 0xfffffffe;

bool IsBw(const std::string& t) { return t.ends_with("_bw"); }

// The bandwidth sender signals one WR in this many (perftest's CQ moderation,
// -Q). By default 100, at most half the TX depth so the queue never runs dry
// while a signaled completion is on its way; with -l and no -Q, one per post
// list (perftest's rule). A -Q is capped at the TX depth, as perftest does.
int CqModeration(const PerfFlags& f) {
  if (f.cq_mod > 0) return std::min(f.cq_mod, f.tx_depth);
  if (f.post_list > 1) return std::min(f.post_list, f.tx_depth);
  return std::max(1, std::min(100, f.tx_depth / 2));
}

uint8_t PatternByte(uint64_t size, uint64_t i) {
  return static_cast<uint8_t>((i * 131 + size * 7 + (i >> 9)) & 0xff);
}
void FillPattern(uint8_t* p, uint64_t size) {
  for (uint64_t i = 0; i < size; ++i) p[i] = PatternByte(size, i);
}
Status CheckPattern(const uint8_t* p, uint64_t size, uint64_t check_bytes, const char* where) {
  for (uint64_t i = 0; i < check_bytes; ++i) {
    if (p[i] != PatternByte(size, i)) {
      char buf[200];
      std::snprintf(buf, sizeof(buf),
                    "data mismatch in %s: byte %llu of a %llu-byte message is 0x%02x, expected "
                    "0x%02x",
                    where, static_cast<unsigned long long>(i),
                    static_cast<unsigned long long>(size), p[i], PatternByte(size, i));
      return Aborted(buf);
    }
  }
  return Status::Ok();
}

uint64_t Addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

// The CPU's cycle counter (x86 TSC, arm64 CNTVCT; the monotonic clock in ns
// elsewhere): what the latency loops and the pollers stamp progress with.
// perftest reads it too (get_cycles). The monotonic clock is not always that
// cheap: where the kernel's clocksource has no vDSO path (a TCG guest whose
// TSC the clocksource watchdog marked unstable runs on hpet or acpi_pm),
// every clock_gettime is a system call and an emulated device read, which in
// qemu takes the lock the I/O thread holds while it delivers a packet.
uint64_t CycleCount() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
#endif
}

// Converts cycle counts to time by reading the monotonic clock at both ends
// of a span: exact on average over the span, two clock reads in all.
class CycleSpan {
 public:
  explicit CycleSpan(transport::Clock& clock)
      : clock_(clock), wall0_(clock.Now()), cycles0_(CycleCount()) {}
  // Cycles per microsecond from the start until now (one clock read).
  double CyclesPerUs() {
    const double us = (clock_.Now() - wall0_).us();
    const double cycles = static_cast<double>(CycleCount() - cycles0_);
    return us > 0 && cycles > 0 ? cycles / us : 1;
  }

 private:
  transport::Clock& clock_;
  Picoseconds wall0_;
  uint64_t cycles0_;
};

// Polls the CQ once; on no progress for the stall deadline, fails naming the QP.
// Progress is stamped with the cycle counter and the clock is read only every
// `idle_check` empty polls (a power of two), so a latency loop that finds a
// completion on each pass makes no clock call at all.
// In event mode (-e) an empty poll sleeps on the completion channel instead
// of spinning (perftest's -e): the CQ is armed at creation and re-armed by
// HandleEvents() before the next poll, so no completion is missed.
class Poller {
 public:
  Poller(Session& s, double stall_s, uint64_t idle_check = 1024)
      : s_(s),
        stall_(Picoseconds::FromSeconds(stall_s)),
        span_(s.clock),
        idle_mask_(idle_check - 1),
        last_progress_(CycleCount()) {
    if (s_.events) events_cq_ = dynamic_cast<tv::VerbsCompletionQueue*>(s_.cq.get());
  }
  // Returns completions (0..16) or an error for a failed completion / stall.
  // A failed completion's error says how long after the last progress it
  // came: with a dead peer that is the QP's retry budget (timeout, retry_cnt).
  StatusOr<int> Poll(std::array<Completion, 16>& out) {
    const int n = s_.cq->Poll(out);
    if (n > 0) {
      for (int i = 0; i < n; ++i) {
        last_ = out[static_cast<size_t>(i)];
        const Status st = transport::CompletionStatus(last_);
        if (!st.ok()) {
          char buf[96];
          std::snprintf(buf, sizeof(buf), " (%.3f s after the last progress)",
                        SecondsSinceProgress());
          return Status(st.code(), st.message() + buf);
        }
      }
      last_progress_ = CycleCount();
      return n;
    }
    if (events_cq_ != nullptr) {
      // DEADLINE_EXCEEDED only says that no event came in this slice.
      const Status st = events_cq_->WaitForEvent(Picoseconds::FromSeconds(0.1));
      if (!st.ok() && st.code() != StatusCode::kDeadlineExceeded) return st;
      FATHOM_RETURN_IF_ERROR(CheckStall());
      return 0;
    }
    if ((++idle_ & idle_mask_) == 0) FATHOM_RETURN_IF_ERROR(CheckStall());
    return 0;
  }
  // Marks progress that came another way (write_lat's memory polling).
  void Progressed() { last_progress_ = CycleCount(); }
  Status CheckStall() {
    const double since = SecondsSinceProgress();
    if (since < stall_.seconds()) return Status::Ok();
    const QueuePair& qp = *s_.qps[0];
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  ": no progress for %.1f s (outstanding %d send WRs, %d recv WRs; QP state %s); "
                  "last completion: ",
                  since, qp.outstanding_sends(), qp.outstanding_recvs(),
                  std::string(QpStateName(qp.state())).c_str());
    return DeadlineExceeded("perf " + transport::DescribeQp(qp) + buf +
                            (last_.qp_num ? transport::DescribeCompletion(last_) : "none"));
  }

 private:
  double SecondsSinceProgress() {
    const double per_us = span_.CyclesPerUs();
    return static_cast<double>(CycleCount() - last_progress_) / per_us / 1e6;
  }

  Session& s_;
  Picoseconds stall_;
  CycleSpan span_;
  uint64_t idle_mask_;
  uint64_t last_progress_;  // cycle count
  Completion last_;
  uint64_t idle_ = 0;
  tv::VerbsCompletionQueue* events_cq_ = nullptr;  // event mode only
};

transport::SendWr MakeWr(Session& s, int q, WrOpcode op, uint64_t size) {
  transport::SendWr wr;
  wr.opcode = op;
  const uint64_t off = static_cast<uint64_t>(q) * s.region;
  if (op == WrOpcode::kRdmaRead) {
    wr.sge = {Addr(s.src.data() + off), static_cast<uint32_t>(size), s.src_mr->lkey()};
  } else {
    wr.sge = {Addr(s.src.data() + off), static_cast<uint32_t>(size), s.src_mr->lkey()};
  }
  wr.remote_addr = s.remote.addr + off;
  wr.rkey = s.remote.rkey;
  return wr;
}

Status PostRecvs(Session& s, int q, uint64_t size, int count) {
  const uint64_t off = static_cast<uint64_t>(q) * s.region;
  for (int i = 0; i < count; ++i) {
    FATHOM_RETURN_IF_ERROR(s.qps[static_cast<size_t>(q)]->PostRecv(
        {static_cast<uint64_t>(q),
         {Addr(s.local.data() + off), static_cast<uint32_t>(size), s.local_mr->lkey()}}));
  }
  return Status::Ok();
}

// Set by SIGINT under --run_infinitely: the current -D window ends early and
// is the last one (both sides learn it when they meet after the window).
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void OnSigint(int) { g_interrupted = 1; }

// The bandwidth sender: keeps tx_depth WRs in flight per QP, one signaled
// every cq_mod (perftest's scheme), posted post_list at a time (-l), for
// `iters` per QP or `duration` seconds. With `receive` (send_bw -b) it also
// reposts the peer's sends as they land, and finishes only once the peer's
// done marker has come too.
StatusOr<tv::BwResult> RunBw(Session& s, const PerfFlags& f, uint64_t size, bool receive) {
  const WrOpcode op = f.test == "write_bw"  ? WrOpcode::kRdmaWrite
                      : f.test == "read_bw" ? WrOpcode::kRdmaRead
                                            : WrOpcode::kSend;
  const int depth = f.tx_depth;
  const int cq_mod = CqModeration(f);
  const uint64_t list = static_cast<uint64_t>(f.post_list);
  const size_t nq = s.qps.size();
  std::vector<uint64_t> posted(nq, 0), done(nq, 0);
  std::vector<int> unsignaled(nq, 0);
  const bool timed = f.duration > 0;
  const uint64_t iters = timed ? UINT64_MAX : f.iters;
  Poller poller(s, f.stall_s);
  std::array<Completion, 16> wcs;
  const auto start = s.clock.Now();
  const auto end = start + Picoseconds::FromSeconds(timed ? f.duration : 1e6);
  double peak = 0;
  auto last_t = start;
  bool stop = false, peer_done = false;
  uint64_t total_done = 0;
  std::vector<transport::SendWr> wrs;  // one post list
  wrs.reserve(list);
  // A receive completion: the peer's done marker, or a message to repost for.
  auto on_recv = [&](const Completion& c) -> Status {
    if (c.has_imm && c.imm_data == kDoneImm) {
      peer_done = true;
      return Status::Ok();
    }
    return PostRecvs(s, s.qp_index[c.qp_num], size, 1);
  };
  for (;;) {
    if (timed && !stop && (g_interrupted || s.clock.Now() >= end)) stop = true;
    bool all_posted = true;
    for (size_t q = 0; q < nq; ++q) {
      // A whole post list at a time, one ibv_post_send (the last list may be
      // shorter).
      for (;;) {
        const uint64_t batch = std::min(list, iters - posted[q]);
        if (stop || batch == 0 || posted[q] - done[q] + batch > static_cast<uint64_t>(depth)) break;
        wrs.clear();
        for (uint64_t k = 0; k < batch; ++k) {
          transport::SendWr wr = MakeWr(s, static_cast<int>(q), op, size);
          ++unsignaled[q];
          const uint64_t n = posted[q] + k;  // WRs posted before this one
          const bool last = !timed && n + 1 == iters;
          wr.signaled =
              unsignaled[q] >= cq_mod || last || n + 1 - done[q] >= static_cast<uint64_t>(depth);
          if (wr.signaled) {
            wr.wr_id = static_cast<uint64_t>(unsignaled[q]);  // WRs this completion covers
            unsignaled[q] = 0;
          }
          wrs.push_back(wr);
        }
        FATHOM_RETURN_IF_ERROR(batch == 1 ? s.qps[q]->PostSend(wrs[0])
                                          : s.qps[q]->PostSendList(wrs));
        posted[q] += batch;
      }
      if (posted[q] < iters && !stop) all_posted = false;
    }
    bool drained = true;
    for (size_t q = 0; q < nq; ++q) drained = drained && done[q] == posted[q];
    if ((all_posted || stop) && drained) break;
    FATHOM_ASSIGN_OR_RETURN(int n, poller.Poll(wcs));
    for (int i = 0; i < n; ++i) {
      const Completion& c = wcs[static_cast<size_t>(i)];
      if (c.opcode == WcOpcode::kRecv) {
        FATHOM_RETURN_IF_ERROR(on_recv(c));
        continue;
      }
      const size_t q = static_cast<size_t>(s.qp_index[c.qp_num]);
      done[q] += c.wr_id;
      total_done += c.wr_id;
      const auto now = s.clock.Now();
      const double per_msg = (now - last_t).seconds() / static_cast<double>(c.wr_id);
      if (per_msg > 0 && (peak == 0 || per_msg < peak)) peak = per_msg;
      last_t = now;
    }
  }
  const double secs = (s.clock.Now() - start).seconds();
  if (op == WrOpcode::kSend) {
    // Tell the receiver we are done (it cannot know the count in -D mode).
    transport::SendWr wr = MakeWr(s, 0, WrOpcode::kSendWithImm, 0);
    wr.sge.length = 0;
    wr.imm_data = kDoneImm;
    wr.wr_id = 0;
    wr.signaled = true;
    FATHOM_RETURN_IF_ERROR(s.qps[0]->PostSend(wr));
    bool marker_done = false;
    while (!marker_done || (receive && !peer_done)) {
      FATHOM_ASSIGN_OR_RETURN(int n, poller.Poll(wcs));
      for (int i = 0; i < n; ++i) {
        const Completion& c = wcs[static_cast<size_t>(i)];
        if (c.opcode == WcOpcode::kRecv) {
          FATHOM_RETURN_IF_ERROR(on_recv(c));
        } else {
          marker_done = true;  // every other send was drained above
        }
      }
    }
  }
  return tv::ComputeBw(size, total_done, secs, peak, f.gbits);
}

// The send_bw server: reposts receives until the client's done marker.
Status RunSendBwServer(Session& s, const PerfFlags& f, uint64_t size) {
  Poller poller(s, f.stall_s + f.duration);
  std::array<Completion, 16> wcs;
  for (;;) {
    FATHOM_ASSIGN_OR_RETURN(int n, poller.Poll(wcs));
    for (int i = 0; i < n; ++i) {
      const Completion& c = wcs[static_cast<size_t>(i)];
      if (c.has_imm && c.imm_data == kDoneImm) return Status::Ok();
      FATHOM_RETURN_IF_ERROR(PostRecvs(s, s.qp_index[c.qp_num], size, 1));
    }
  }
}

// Empty polls (or memory spins) between two reads of the clock in the
// latency loops: the deadline is 30 s, so a check every few milliseconds of
// spinning is plenty, and a normal iteration reads no clock at all.
constexpr uint64_t kLatIdleCheck = uint64_t{1} << 18;

// Spins until the last byte of our landing region holds `value` (write_lat:
// the peer's RDMA WRITE is seen in memory, not in the CQ). Every
// kLatIdleCheck spins it checks the stall deadline.
Status WaitForByte(Session& s, Poller& poller, uint64_t size, uint8_t value) {
  volatile uint8_t* p = s.local.data() + size - 1;
  uint64_t spins = 0;
  while (*p != value) {
    if ((++spins & (kLatIdleCheck - 1)) == 0) FATHOM_RETURN_IF_ERROR(poller.CheckStall());
  }
  poller.Progressed();
  return Status::Ok();
}

// Ping-pong latency (write_lat, send_lat) and read_lat; both sides run it.
// The loop is perftest's (run_iter_lat_write and friends): every WR is
// signaled and its completion polled before the next step, one cycle-counter
// stamp per iteration (no clock call inside the loop), and a sample is the
// time from one iteration's post to the next one's (halved for ping-pong).
StatusOr<tv::LatResult> RunLat(Session& s, const PerfFlags& f, uint64_t size) {
  QueuePair& qp = *s.qps[0];
  Poller poller(s, f.stall_s, kLatIdleCheck);
  std::array<Completion, 16> wcs;
  const bool is_write = f.test == "write_lat";
  const bool is_read = f.test == "read_lat";
  if (is_read && !s.client) return tv::LatResult{};
  std::vector<uint64_t> stamps;  // cycle count at each iteration's post, then at the end
  stamps.reserve(f.iters + 1);
  // Polls until `sends` send completions and `recvs` receive completions have
  // come (errors and the stall deadline end it); receives are reposted. One
  // that comes early (the peer's next send before our send's completion) is
  // kept for the next call.
  int sends_seen = 0, recvs_seen = 0;
  auto complete = [&](int sends, int recvs) -> Status {
    while (sends_seen < sends || recvs_seen < recvs) {
      FATHOM_ASSIGN_OR_RETURN(int n, poller.Poll(wcs));
      for (int k = 0; k < n; ++k) {
        if (wcs[static_cast<size_t>(k)].opcode == WcOpcode::kRecv) {
          ++recvs_seen;
          FATHOM_RETURN_IF_ERROR(PostRecvs(s, 0, size, 1));
        } else {
          ++sends_seen;
        }
      }
    }
    sends_seen -= sends;
    recvs_seen -= recvs;
    return Status::Ok();
  };
  auto post = [&](uint64_t i) -> Status {
    const WrOpcode op =
        is_read ? WrOpcode::kRdmaRead : (is_write ? WrOpcode::kRdmaWrite : WrOpcode::kSend);
    transport::SendWr wr = MakeWr(s, 0, op, size);
    if (is_write) s.src[size - 1] = static_cast<uint8_t>(i % 255 + 1);
    wr.signaled = true;
    if (s.client) stamps.push_back(CycleCount());
    return qp.PostSend(wr);
  };
  CycleSpan span(s.clock);
  for (uint64_t i = 0; i < f.iters; ++i) {
    if (is_read) {
      FATHOM_RETURN_IF_ERROR(post(i));
      FATHOM_RETURN_IF_ERROR(complete(1, 0));
    } else if (is_write) {
      // The server answers each of the client's writes; the client starts.
      if (!s.client) {
        FATHOM_RETURN_IF_ERROR(WaitForByte(s, poller, size, static_cast<uint8_t>(i % 255 + 1)));
      }
      FATHOM_RETURN_IF_ERROR(post(i));
      FATHOM_RETURN_IF_ERROR(complete(1, 0));
      if (s.client) {
        FATHOM_RETURN_IF_ERROR(WaitForByte(s, poller, size, static_cast<uint8_t>(i % 255 + 1)));
      }
    } else if (s.client) {
      FATHOM_RETURN_IF_ERROR(post(i));
      FATHOM_RETURN_IF_ERROR(complete(1, 1));
    } else {
      FATHOM_RETURN_IF_ERROR(complete(0, 1));
      FATHOM_RETURN_IF_ERROR(post(i));
      FATHOM_RETURN_IF_ERROR(complete(1, 0));
    }
  }
  if (!s.client) return tv::LatResult{};
  stamps.push_back(CycleCount());
  const double per_us = span.CyclesPerUs() * (is_read ? 1 : 2);  // one-way, as perftest
  std::vector<double> samples;
  samples.reserve(f.iters);
  for (size_t i = 0; i + 1 < stamps.size(); ++i) {
    samples.push_back(static_cast<double>(stamps[i + 1] - stamps[i]) / per_us);
  }
  return tv::ComputeLat(size, samples);
}

Status Setup(Session& s, const PerfFlags& f, uint64_t max_size) {
  s.client = !f.server.empty();
  s.events = f.events;
  tv::DeviceOptions d;
  d.cq_mode = f.events ? tv::CqMode::kEvents : tv::CqMode::kBusyPoll;
  d.name = f.device;
  d.port = f.ib_port;
  d.rank = s.client ? 1 : 0;
  if (f.gid_index >= 0)
    d.gid = {tv::GidMode::kIndex, f.gid_index};
  else if (f.gid_ipv6)
    d.gid = {tv::GidMode::kRoceV2Ipv6, -1};
  FATHOM_ASSIGN_OR_RETURN(s.device, tv::OpenDevice(d));
  const Picoseconds op_timeout = Picoseconds::FromSeconds(600 + f.duration * 40);
  if (!s.client) {
    tb::RootOptions ro;
    ro.bind_address = f.bind;
    ro.port = static_cast<uint16_t>(f.tcp_port);
    ro.world_size = 2;
    ro.accept_timeout = Picoseconds::FromSeconds(600);
    FATHOM_ASSIGN_OR_RETURN(s.root, tb::Root::Start(ro));
  }
  tb::RankOptions r;
  r.root_address = s.client ? f.server : "127.0.0.1";
  if (!s.client && f.bind != "0.0.0.0") r.root_address = f.bind;
  r.root_port = static_cast<uint16_t>(f.tcp_port);
  r.rank = s.client ? 1 : 0;
  r.world_size = 2;
  r.connect_timeout = Picoseconds::FromSeconds(s.client ? 30 : 600);
  r.op_timeout = op_timeout;
  FATHOM_ASSIGN_OR_RETURN(s.rank, tb::Rank::Connect(r));
  // The flags both sides must share (perftest's SYMMETRIC ones): with a -b or
  // --run_infinitely on one side only, the other would wait for traffic or a
  // window that never comes. Checked once, before any QP is connected.
  char shape[160];
  std::snprintf(shape, sizeof(shape), "%s -s %llu%s -n %llu -D %g -q %d%s%s", f.test.c_str(),
                static_cast<unsigned long long>(f.size), f.all_sizes ? " -a" : "",
                static_cast<unsigned long long>(f.iters), f.duration, f.qps,
                f.bidirectional ? " -b" : "", f.run_infinitely ? " --run_infinitely" : "");
  FATHOM_ASSIGN_OR_RETURN(auto shapes, s.rank->AllGather(shape));
  if (shapes.size() == 2 && shapes[0] != shapes[1]) {
    return InvalidArgument("the two sides disagree: server \"" + shapes[0] + "\", client \"" +
                           shapes[1] +
                           "\" (the test, -s, -a, -n, -D, -q, -b and --run_infinitely must be "
                           "the same on both sides)");
  }

  s.region = max_size;
  const uint64_t bytes = max_size * static_cast<uint64_t>(f.qps);
  s.local.assign(bytes, 0);
  s.src.assign(bytes, 0);
  FATHOM_ASSIGN_OR_RETURN(s.local_mr,
                          s.device->RegisterMemory(s.local.data(), bytes, transport::kAccessAll));
  FATHOM_ASSIGN_OR_RETURN(s.src_mr,
                          s.device->RegisterMemory(s.src.data(), bytes, transport::kAccessAll));
  const int rx_depth = 512;
  FATHOM_ASSIGN_OR_RETURN(s.cq, s.device->CreateCq((f.tx_depth + rx_depth + 8) * f.qps));
  transport::QpOptions qo;
  qo.max_send_wr = f.tx_depth + 2;
  qo.max_recv_wr = rx_depth;
  qo.timeout = f.timeout;
  qo.retry_cnt = f.retry_cnt;
  qo.path_mtu = f.mtu;
  qo.service_level = f.sl;
  if (f.tclass >= 0) qo.traffic_class = f.tclass;
  if (f.inline_size >= 0 && !f.test.starts_with("read")) qo.max_inline_data = f.inline_size;
  const int peer = s.client ? 0 : 1;
  for (int q = 0; q < f.qps; ++q) {
    FATHOM_ASSIGN_OR_RETURN(auto qp, s.device->CreateQp(peer, qo, s.cq.get()));
    s.qp_index[qp->qp_num()] = q;
    s.qps.push_back(std::move(qp));
  }
  proto::EndpointRecord mine = tb::MakeEndpointRecord(s.qps[0]->LocalInfo());
  for (auto& qp : s.qps) tb::AddQp(&mine, peer, qp->LocalInfo());
  tb::AddBuffer(&mine, *s.local_mr);
  FATHOM_ASSIGN_OR_RETURN(auto all, s.rank->ExchangeEndpoints(mine));
  const auto& theirs = all[static_cast<size_t>(peer)];
  FATHOM_ASSIGN_OR_RETURN(s.remote, tb::RemoteBufferOf(theirs, 0));
  for (int q = 0; q < f.qps; ++q) {
    FATHOM_ASSIGN_OR_RETURN(auto remote, tb::RemoteEndpoint(theirs, d.rank, q));
    FATHOM_RETURN_IF_ERROR(s.qps[static_cast<size_t>(q)]->Connect(remote));
  }
  if (!f.json) {
    const auto& i = s.device->info();
    std::printf("%s", tv::Rule().c_str());
    std::printf("                    fathom perf %s (%s)\n", f.test.c_str(),
                s.client ? "client" : "server");
    std::printf(" Device         : %s\n Number of qps  : %d\t\tTransport type : IB\n",
                i.name.c_str(), f.qps);
    std::printf(" Connection type : RC\n Mtu            : %d[B]\n Link type      : %s\n",
                s.qps[0]->path_mtu(), i.link_layer.c_str());
    std::printf(" GID index      : %d (%s) %s\n", i.gid_index, i.gid_type.c_str(), i.gid.c_str());
    std::printf(" Completions    : %s\n", f.events ? "events (completion channel)" : "polling");
    if (IsBw(f.test) && (s.client || f.bidirectional)) {
      std::printf(" TX depth       : %d\n CQ Moderation  : %d\n", f.tx_depth, CqModeration(f));
      if (f.post_list > 1) std::printf(" Post List      : %d\n", f.post_list);
    }
    if (f.bidirectional)
      std::printf(" Direction      : bidirectional (figures: both sides' sum)\n");
    if (f.sl != 0 || f.tclass >= 0) {
      std::printf(" SL             : %d\t\tTraffic class : %d\n", f.sl, std::max(0, f.tclass));
    }
    if (f.inline_size >= 0) std::printf(" Max inline data : %d[B]\n", f.inline_size);
    for (int q = 0; q < f.qps; ++q) {
      const auto l = s.qps[static_cast<size_t>(q)]->LocalInfo();
      std::printf(" local address: LID %#06x QPN %#06x PSN %#08x RKey %#08x VAddr %#016llx\n",
                  l.lid, l.qpn, l.psn, s.local_mr->rkey(),
                  static_cast<unsigned long long>(Addr(s.local.data())));
    }
    std::printf("%s", tv::Rule().c_str());
    std::fflush(stdout);
  }
  return Status::Ok();
}

// One size: both sides prepare, meet at a barrier, run, meet again, verify,
// and agree on the outcome (the client's figures, or with -b the sum of both
// sides', as perftest reports; any side's error). `*interrupted` is set when
// either side had a SIGINT (--run_infinitely): this was the last window.
StatusOr<std::string> RunSize(Session& s, const PerfFlags& f, uint64_t size, bool* interrupted) {
  const bool bw = IsBw(f.test);
  const bool bidir = f.bidirectional;
  // Writes and sends carry the pattern from `src` into the peer's `local`;
  // reads fetch the server's `local` into the client's cleared `src` (with
  // -b, both ways).
  const bool reads = f.test.starts_with("read");
  std::fill(s.local.begin(), s.local.end(), 0);
  std::fill(s.src.begin(), s.src.end(), 0);
  std::vector<uint8_t>& origin = reads ? s.local : s.src;
  if (!reads || !s.client || bidir) {
    for (int q = 0; q < f.qps; ++q) {
      FillPattern(origin.data() + static_cast<uint64_t>(q) * s.region, size);
    }
  }
  const bool needs_recvs = f.test == "send_lat" || (f.test == "send_bw" && (!s.client || bidir));
  if (needs_recvs) {
    for (int q = 0; q < (f.test == "send_lat" ? 1 : f.qps); ++q) {
      FATHOM_RETURN_IF_ERROR(PostRecvs(s, q, size, f.test == "send_lat" ? 64 : 500));
    }
  }
  FATHOM_RETURN_IF_ERROR(s.rank->Barrier());
  std::string result;
  Status run;
  if (bw) {
    if (s.client || bidir) {
      auto r = RunBw(s, f, size, /*receive=*/bidir && f.test == "send_bw");
      if (r.ok()) result.assign(reinterpret_cast<const char*>(&*r), sizeof(tv::BwResult));
      run = r.status();
    } else if (f.test == "send_bw") {
      run = RunSendBwServer(s, f, size);
    }
  } else {
    auto r = RunLat(s, f, size);
    if (r.ok() && s.client)
      result.assign(reinterpret_cast<const char*>(&*r), sizeof(tv::LatResult));
    run = r.status();
  }
  // A local failure (a completion error, the stall deadline) is returned at
  // once and RunPerf aborts the bootstrap with it, so the peer learns the
  // reason from the root; meeting at a barrier instead would wait on a peer
  // that may be gone with its whole host (the bootstrap root too).
  if (!run.ok()) return run;
  // Meet again before verifying: a write_bw server takes no part in the run,
  // so only the client's completions (RC ACKs: the data is placed) tell it
  // that everything has landed.
  run = s.rank->Barrier();
  if (run.ok() && f.verify) {
    // The receiving side checks what landed: the server for writes and sends,
    // the client for reads, both with -b. write_lat's last byte carries the
    // iteration count.
    const uint64_t check = f.test == "write_lat" ? size - 1 : size;
    if (bidir || reads == s.client)
      run = CheckPattern(reads ? s.src.data() : s.local.data(), size, check,
                         reads ? "read buffer" : "receive buffer");
  }
  // Everyone learns every side's outcome: "E<error>", or "R<result bytes>"
  // ("S<result bytes>" after a SIGINT).
  const char tag = g_interrupted ? 'S' : 'R';
  auto gathered = s.rank->AllGather(run.ok() ? tag + result : "E" + run.ToString());
  // A local failure (say, a completion error after the peer died) is the
  // news; losing the bootstrap on the way out is only its echo.
  if (!gathered.ok()) return run.ok() ? gathered.status() : run;
  const std::vector<std::string>& all = *gathered;
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty() && all[r][0] == 'E') {
      return Aborted((r == static_cast<size_t>(s.client ? 1 : 0) ? "" : std::string("peer: ")) +
                     all[r].substr(1));
    }
    if (!all[r].empty() && all[r][0] == 'S') *interrupted = true;
  }
  if (bw && bidir && all[0].size() == 1 + sizeof(tv::BwResult) &&
      all[1].size() == 1 + sizeof(tv::BwResult)) {
    tv::BwResult sum, other;
    std::memcpy(&sum, all[0].data() + 1, sizeof(sum));
    std::memcpy(&other, all[1].data() + 1, sizeof(other));
    sum.iterations += other.iterations;
    sum.peak += other.peak;
    sum.average += other.average;
    sum.msg_rate_mpps += other.msg_rate_mpps;
    return std::string(reinterpret_cast<const char*>(&sum), sizeof(sum));
  }
  return all[1].substr(1);  // the client's figures
}

// perftest flags that fathom accepts and ignores, and why (stderr and --help).
constexpr const char* kIgnoredHelp =
    "perftest flags accepted and ignored: -F (fathom times with the cycle counter scaled by the "
    "monotonic clock, not /proc/cpuinfo's cpu MHz, so there is no CPU-frequency warning to "
    "silence); -Q and -l in the _lat tests (they signal and post every WR alone, as perftest's "
    "do); -I in read tests (an RDMA READ carries no inline data). Rejected with exit 2: -c other "
    "than RC, -R (rdma_cm).";

// Checks the flags that only make sense together and fills the defaults that
// depend on the test. Returns kExitUsage after printing why, or -1 to go on.
// Flags accepted but ignored get one line each on stderr.
int CheckFlags(PerfFlags& f) {
  const bool bw = IsBw(f.test);
  auto usage = [](const std::string& why) {
    std::fprintf(stderr, "fathom perf: %s\n", why.c_str());
    return kExitUsage;
  };
  auto note = [](const std::string& line) {
    std::fprintf(stderr, "fathom perf: %s\n", line.c_str());
  };
  if (f.size == 0) f.size = bw ? 65536 : 2;
  if (f.iters == 0) f.iters = bw ? 5000 : 1000;
  if (!f.connection.empty() && f.connection != "RC") {
    return usage("-c " + f.connection +
                 ": fathom perf runs RC queue pairs only (its transport has no UC, UD, XRC, DC "
                 "or SRD); use -c RC or leave -c out");
  }
  if (f.rdma_cm) {
    return usage(
        "-R (rdma_cm) is not supported: fathom exchanges QP numbers, GIDs and keys over its own "
        "TCP bootstrap (-p PORT) and connects the QPs with ibv_modify_qp; leave -R out on both "
        "sides");
  }
  if (f.events && f.test == "write_lat") {
    return usage(
        "-e does not apply to write_lat (it polls memory for the peer's write, not the CQ)");
  }
  if (f.duration > 0 && !bw) return usage("-D is supported by the _bw tests only");
  if (f.bidirectional && !bw) {
    return usage("-b (bidirectional) is for the _bw tests only, as in perftest");
  }
  if (f.run_infinitely) {
    if (!bw) return usage("--run_infinitely is for the _bw tests only, as in perftest");
    if (f.events) return usage("--run_infinitely does not support -e, as in perftest");
    if (f.bidirectional && f.test == "send_bw") {
      return usage("--run_infinitely does not support send_bw -b, as in perftest");
    }
    if (f.all_sizes) return usage("--run_infinitely runs one size; leave -a out");
    if (f.duration <= 0) f.duration = 5;  // perftest's default window
  }
  if (f.tos >= 0 && f.tclass >= 0 && f.tos != f.tclass) {
    return usage("-T " + std::to_string(f.tos) + " and --tclass " + std::to_string(f.tclass) +
                 " disagree: both set the GRH traffic class");
  }
  if (f.post_list > f.tx_depth) {
    return usage("-l " + std::to_string(f.post_list) + " is larger than the TX depth (-t " +
                 std::to_string(f.tx_depth) + ")");
  }
  if (f.size > (1u << 30) || (f.test == "write_lat" && f.size < 1)) {
    return usage("-s " + std::to_string(f.size) + " is outside 1..1073741824");
  }
  if (f.cpu_freq_f) {
    note(
        "-F accepted and ignored: fathom times with the cycle counter scaled by the monotonic "
        "clock, not with /proc/cpuinfo's cpu MHz, so there is no CPU-frequency warning to silence");
  }
  if (!bw && f.cq_mod > 0) {
    note("-Q accepted and ignored: the _lat tests signal every WR, as perftest's do");
  }
  if (!bw && f.post_list > 1) {
    note("-l accepted and ignored: the _lat tests post one WR at a time, as perftest's do");
  }
  if (f.test.starts_with("read") && f.inline_size >= 0) {
    note("-I accepted and ignored: an RDMA READ carries no inline data");
  }
  if (f.tos >= 0 && f.tclass < 0) {
    note("-T " + std::to_string(f.tos) +
         ": without rdma_cm the ToS goes straight into the GRH traffic class (as --tclass)");
  }
  if (f.tos >= 0) f.tclass = f.tos;
  return -1;
}

// -W: the counters to watch, relative to /sys/class/infiniband/DEV/ports/PORT/
// ("counters/port_xmit_data,hw_counters/out_of_buffer", as perftest).
struct Counter {
  std::string name, path;
  uint64_t before = 0;
};

StatusOr<uint64_t> ReadCounter(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  uint64_t v = 0;
  if (!(in >> v)) {
    return InvalidArgument("-W " + name + ": cannot read a counter at " + path);
  }
  return v;
}

StatusOr<std::vector<Counter>> OpenCounters(const std::string& list,
                                            const transport::DeviceInfo& info) {
  std::vector<Counter> out;
  size_t pos = 0;
  while (pos <= list.size() && !list.empty()) {
    const size_t comma = list.find(',', pos);
    const std::string name =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (name.empty()) continue;
    if (name.find("..") != std::string::npos || name.front() == '/') {
      return InvalidArgument("-W " + name + ": a counter is a path under the port's sysfs folder");
    }
    Counter c;
    c.name = name;
    c.path =
        "/sys/class/infiniband/" + info.name + "/ports/" + std::to_string(info.port) + "/" + name;
    FATHOM_ASSIGN_OR_RETURN(c.before, ReadCounter(c.path, name));
    out.push_back(std::move(c));
  }
  return out;
}

int RunPerf(const PerfFlags& in) {
  PerfFlags f = in;
  if (const int rc = CheckFlags(f); rc >= 0) return rc;
  const bool bw = IsBw(f.test);
  std::vector<uint64_t> sizes;
  if (f.all_sizes) {
    for (uint64_t sz = 2; sz <= (8u << 20); sz *= 2) sizes.push_back(sz);
  } else {
    sizes.push_back(f.size);
  }
  Session s;
  const Status setup = Setup(s, f, *std::max_element(sizes.begin(), sizes.end()));
  if (!setup.ok()) {
    // No device (or no such device, port or GID) is bad input: exit 2, as
    // doctor does; the message names the device asked for.
    const bool usage_error =
        setup.code() == StatusCode::kNotFound || setup.code() == StatusCode::kInvalidArgument;
    const std::string which = setup.code() != StatusCode::kNotFound ? ""
                              : f.device.empty()                    ? "device (first ACTIVE): "
                                                 : "device \"" + f.device + "\": ";
    std::fprintf(stderr, "fathom perf: %s%s\n", which.c_str(), setup.ToString().c_str());
    return usage_error ? kExitUsage : kExitFailure;
  }
  std::vector<Counter> counters;
  if (!f.counters.empty()) {
    auto c = OpenCounters(f.counters, s.device->info());
    if (!c.ok()) {
      std::fprintf(stderr, "fathom perf: %s\n", c.status().ToString().c_str());
      if (s.rank) (void)s.rank->Abort(c.status().message());
      return kExitUsage;
    }
    counters = std::move(*c);
  }
  // --out_json: the file is opened before the run, so a bad path costs no run.
  std::ofstream json_file;
  if (f.out_json) {
    json_file.open(f.out_json_file, std::ios::trunc);
    if (!json_file) {
      const std::string why = "--out_json_file " + f.out_json_file +
                              ": cannot open it for writing: " + std::strerror(errno);
      std::fprintf(stderr, "fathom perf: %s\n", why.c_str());
      if (s.rank) (void)s.rank->Abort(why);
      return kExitUsage;
    }
  }
  if (f.run_infinitely) {
    // The first Ctrl-C ends the current window and the run (both sides, after
    // the window); a second one kills as usual (SA_RESETHAND).
    struct sigaction sa {};
    sa.sa_handler = OnSigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
  }
  std::vector<tv::BwResult> bws;
  std::vector<tv::LatResult> lats;
  if (!f.json) {
    std::printf("%s", bw ? tv::BwHeader(f.gbits).c_str() : tv::LatHeader().c_str());
    std::fflush(stdout);  // a watcher of a redirected output sees the run start
  }
  bool interrupted = false;
  uint64_t windows = 0;
  for (size_t i = 0; i < sizes.size() && !interrupted; ++i) {
    const uint64_t size = sizes[i];
    auto r = RunSize(s, f, size, &interrupted);
    if (!r.ok()) {
      std::fprintf(stderr, "fathom perf %s size %llu: %s\n", f.test.c_str(),
                   static_cast<unsigned long long>(size), r.status().ToString().c_str());
      for (const auto& e : s.device->TakeAsyncEvents()) {
        std::fprintf(stderr, "fathom perf: async event %s on %s\n", e.type.c_str(),
                     e.detail.c_str());
      }
      if (s.rank) (void)s.rank->Abort(r.status().message());
      return kExitFailure;
    }
    ++windows;
    if (bw && r->size() == sizeof(tv::BwResult)) {
      tv::BwResult b;
      std::memcpy(&b, r->data(), sizeof(b));
      bws.push_back(b);
      if (!f.json) std::printf("%s", tv::BwLine(b).c_str());
    } else if (!bw && r->size() == sizeof(tv::LatResult)) {
      tv::LatResult l;
      std::memcpy(&l, r->data(), sizeof(l));
      lats.push_back(l);
      if (!f.json) std::printf("%s", tv::LatLine(l).c_str());
    }
    std::fflush(stdout);
    // --run_infinitely: the same size again, one -D window after another.
    if (f.run_infinitely && !interrupted) --i;
  }
  if (interrupted) {
    std::fprintf(stderr, "fathom perf: interrupted (SIGINT) after %llu window(s) of %.1f s\n",
                 static_cast<unsigned long long>(windows), f.duration);
  }
  const std::string json = bw ? tv::BwJson(f.test, bws, f.gbits) : tv::LatJson(f.test, lats);
  if (f.json) {
    std::printf("%s", json.c_str());
  } else {
    std::printf("%s", tv::Rule().c_str());
    if (auto* vcq = dynamic_cast<tv::VerbsCompletionQueue*>(s.cq.get()); vcq && f.events) {
      std::printf(" Completion events: %llu\n", static_cast<unsigned long long>(vcq->events()));
    }
  }
  for (const Counter& c : counters) {
    auto after = ReadCounter(c.path, c.name);
    std::fprintf(
        f.json ? stderr : stdout, " %s: %s\n", c.name.c_str(),
        after.ok() ? std::to_string(*after - c.before).c_str() : after.status().message().c_str());
  }
  if (f.out_json) {
    json_file << json;
    json_file.close();
    if (!json_file) {
      std::fprintf(stderr, "fathom perf: --out_json_file %s: write failed\n",
                   f.out_json_file.c_str());
      return kExitFailure;
    }
  }
  for (const auto& e : s.device->TakeAsyncEvents()) {
    std::fprintf(stderr, "fathom perf: async event %s on %s\n", e.type.c_str(), e.detail.c_str());
  }
  // Tear down in the verbs order: QPs, CQ, MRs, then the device (and last the root).
  s.qps.clear();
  s.cq.reset();
  s.local_mr.reset();
  s.src_mr.reset();
  s.rank.reset();
  if (s.root) (void)s.root->Wait(Picoseconds::FromSeconds(10));
  return kExitOk;
}

FATHOM_REGISTER_COMMAND(
    perf,
    Command{
        "perf",
        "perftest's tests on fathom's transport: write_bw|write_lat|read_bw|read_lat|"
        "send_bw|send_lat [SERVER]",
        [](CLI::App* sub) -> std::function<int()> {
          auto f = std::make_shared<PerfFlags>();
          sub->footer(kIgnoredHelp);
          // perftest's -V: the version, then exit (before the test is required).
          sub->add_flag_callback(
              "-V,--version",
              [] {
                throw CLI::CallForVersion("fathom perf 0.1.0 (perftest's flags and tables)", 0);
              },
              "print the version and exit");
          sub->add_option("test", f->test, "write_bw|write_lat|read_bw|read_lat|send_bw|send_lat")
              ->required()
              ->check(CLI::IsMember(
                  {"write_bw", "write_lat", "read_bw", "read_lat", "send_bw", "send_lat"}));
          sub->add_option("server", f->server, "server address (client side); omit on the server");
          sub->add_option("-d,--ib-dev", f->device, "RDMA device (default: first ACTIVE)");
          sub->add_option("-i,--ib-port", f->ib_port, "device port (default: first ACTIVE)");
          sub->add_option("-x,--gid-index", f->gid_index, "GID index (default: RoCE v2 IPv4)");
          sub->add_flag("--ipv6", f->gid_ipv6, "use a RoCE v2 IPv6 GID");
          sub->add_option("-s,--size", f->size, "message size (default 65536 bw, 2 lat)");
          sub->add_flag("-a,--all", f->all_sizes, "all sizes 2 .. 2^23");
          sub->add_option("-n,--iters", f->iters, "iterations (default 5000 bw, 1000 lat)");
          sub->add_option("-D,--duration", f->duration, "run for seconds (bw tests)");
          sub->add_option("-q,--qp", f->qps, "QPs (bw tests)")->check(CLI::Range(1, 64));
          sub->add_option("-m,--mtu", f->mtu, "force the path MTU (256..4096)")
              ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}));
          sub->add_option("-u,--qp-timeout", f->timeout, "QP timeout (4.096 us * 2^u)")
              ->check(CLI::Range(0, 31));
          sub->add_option("--retry-cnt,--retry_count", f->retry_cnt,
                          "QP retry_cnt (7; rxe: 7 = forever); --retry_count is perftest's "
                          "rdma_cm name for the same QP attribute")
              ->check(CLI::Range(0, 7));
          sub->add_flag("-e,--events", f->events, "sleep on CQ events instead of polling");
          sub->add_option("-p,--port", f->tcp_port, "bootstrap TCP port (18515)")
              ->check(CLI::Range(1, 65535));
          sub->add_option("--bind", f->bind, "server: address to listen on (0.0.0.0)");
          sub->add_option("-t,--tx-depth", f->tx_depth, "WRs in flight per QP (128)")
              ->check(CLI::Range(1, 4096));
          sub->add_option("--stall-timeout", f->stall_s, "seconds without progress = failure (30)");
          sub->add_flag("--report_gbits", f->gbits, "report Gb/sec instead of MB/sec");
          sub->add_flag("--json", f->json, "JSON output");
          sub->add_flag("--verify", f->verify, "verify the data that landed");
          sub->add_flag("-b,--bidirectional", f->bidirectional,
                        "bw tests: both sides send at once; the figures are the sum of both "
                        "directions (both sides)");
          sub->add_option("-c,--connection", f->connection, "connection type: RC (the only one)")
              ->check(CLI::IsMember({"RC", "XRC", "UC", "UD", "DC", "SRD"}));
          sub->add_option("-Q,--cq-mod", f->cq_mod,
                          "bw tests: signal one WR in this many (default 100, at most half the "
                          "TX depth; capped at the TX depth)")
              ->check(CLI::Range(1, 1024));
          sub->add_option("-I,--inline_size", f->inline_size,
                          "max message size posted inline (default 128)")
              ->check(CLI::Range(0, 1024));
          sub->add_option("-l,--post_list", f->post_list,
                          "bw tests: post WRs in chained lists of this many (one ibv_post_send "
                          "each)")
              ->check(CLI::Range(1, 4096));
          sub->add_option("-S,--sl", f->sl, "service level (0)")->check(CLI::Range(0, 15));
          sub->add_option("-T,--tos", f->tos,
                          "type of service; without rdma_cm it is the GRH traffic class")
              ->check(CLI::Range(0, 255));
          sub->add_option("--tclass", f->tclass, "GRH traffic class (0)")
              ->check(CLI::Range(0, 255));
          sub->add_flag("-R,--rdma_cm", f->rdma_cm, "not supported: rejected (see below)");
          sub->add_option("-W,--report-counters", f->counters,
                          "port counters to report the change of, e.g. "
                          "counters/port_xmit_data,hw_counters/out_of_buffer");
          sub->add_flag("-F,--CPU-freq", f->cpu_freq_f, "accepted and ignored (see below)");
          sub->add_flag("--out_json", f->out_json, "also write the JSON report to a file");
          sub->add_option("--out_json_file", f->out_json_file,
                          "the file of --out_json (perftest_out.json)");
          sub->add_flag("--run_infinitely", f->run_infinitely,
                        "bw tests: one -D window (default 5 s) after another until Ctrl-C, a "
                        "line each (both sides)");
          return [f] { return RunPerf(*f); };
        },
        40});

}  // namespace
}  // namespace fathom::tools
