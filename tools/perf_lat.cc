#include "tools/perf_lat.h"

#include <array>
#include <vector>

#include "tools/perf_poller.h"

namespace fathom::tools::perf {
namespace {

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

}  // namespace

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

}  // namespace fathom::tools::perf
