// The two sides of a `fathom perf` run and their handshake: the Session (the
// device, the bootstrap root and rank, the buffers and MRs, the CQ and QPs,
// the peer's buffer) and Setup, which opens the device, meets the peer over
// the TCP bootstrap, checks that both sides run the same test shape,
// and exchanges and connects the QPs. Also what both test loops share: the
// work requests, the receives, the data pattern and the done marker.
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tools/perf_flags.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/endpoints.h"
#include "transport/verbs/verbs_device.h"
#include "transport/wait.h"

namespace fathom::tools::perf {

namespace tv = transport::verbs;
namespace tb = transport::bootstrap;
using transport::Completion;
using transport::CompletionQueue;
using transport::QueuePair;

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

// The immediate data of the send that tells the receiver the sender is done.
constexpr uint32_t kDoneImm = 0xfffffffe;

inline uint64_t Addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

// The bytes a message carries (a function of its size and offset), so the
// receiving side can check what landed (--verify).
void FillPattern(uint8_t* p, uint64_t size);
Status CheckPattern(const uint8_t* p, uint64_t size, uint64_t check_bytes, const char* where);

// One WR of `op` from QP q's region of `src` to the peer's region q.
transport::SendWr MakeWr(Session& s, int q, WrOpcode op, uint64_t size);
// Posts `count` receives into QP q's region of `local`.
Status PostRecvs(Session& s, int q, uint64_t size, int count);

// Set by SIGINT under --run_infinitely: the current -D window ends early and
// is the last one (both sides learn it when they meet after the window).
extern volatile std::sig_atomic_t g_interrupted;

// Opens the device, meets the peer (the server hosts the bootstrap root),
// creates and connects the QPs with buffers for messages up to `max_size`,
// and prints perftest's banner (PrintBanner) unless --json.
Status Setup(Session& s, const PerfFlags& f, uint64_t max_size);

}  // namespace fathom::tools::perf
