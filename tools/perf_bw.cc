#include "tools/perf_bw.h"

#include <algorithm>
#include <array>
#include <vector>

#include "tools/perf_poller.h"

namespace fathom::tools::perf {

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

}  // namespace fathom::tools::perf
