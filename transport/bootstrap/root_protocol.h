// The bootstrap root's protocol, apart from its sockets: registration (Hello
// checks), all-gather rounds, abort propagation, reports and the rejection of
// hostile input, driven by the bytes each connection delivers. Root (root.cc)
// wraps it in an Asio server; tests and the fuzzer (tests/fuzz/
// bootstrap_fuzz.cc) drive it with bytes alone through a subclass that
// records what would be sent.
//
// Threading: everything but the Shared* accessors runs on one thread (the
// root's I/O thread). The Shared* accessors are safe from any thread.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/framing.h"

namespace fathom::transport::bootstrap {

// One connection's protocol state. Until its Hello is verified a peer may
// send at most RootOptions::max_hello_bytes per frame.
struct Peer {
  Peer(std::string name_in, uint32_t max_hello_bytes)
      : name(std::move(name_in)), reader(max_hello_bytes) {}
  virtual ~Peer() = default;

  std::string name;  // "127.0.0.1:40122"
  FrameReader reader;
  size_t accounted_bytes = 0;  // reader bytes counted in RootStats::buffered_bytes
  int rank = -1;               // -1 until the Hello is accepted
  bool goodbye = false;
  bool closing = false;  // close once the write queue drains; read no more
  bool closed = false;
};
using PeerPtr = std::shared_ptr<Peer>;

class RootProtocol {
 public:
  explicit RootProtocol(const RootOptions& options);
  virtual ~RootProtocol() = default;

  // A connection was accepted: counts it as unauthenticated.
  void OnOpen(const PeerPtr& p);
  // `n` bytes arrived in p->reader.Prepare()'s span: commits them and handles
  // the frame they complete, if any (a bad frame rejects the peer).
  void OnReceived(const PeerPtr& p, size_t n);
  // The connection ended (`why`: the socket's error). A registered rank that
  // did not say Goodbye aborts the run.
  void OnDisconnect(const PeerPtr& p, const std::string& why);
  // Answers with an Error, marks the peer closing and records the rejection;
  // a registered rank's rejection also aborts the run.
  void Reject(const PeerPtr& p, const std::string& reason);
  // The registration deadline passed: aborts naming the missing ranks.
  void OnAcceptTimeout();
  // Marks `p` closed and drops it from the counts (idempotent).
  void MarkClosed(const PeerPtr& p);

  bool all_registered() const { return registered_count_ == options_.world_size; }
  int unauthenticated() const { return unauthenticated_; }

  // Thread-safe views for Root's accessors.
  Status SharedWait(Picoseconds timeout);
  std::vector<std::string> SharedRejections() const;
  std::vector<proto::Report> SharedWaitReports(int count, Picoseconds timeout);
  int SharedRegistered() const;
  RootStats SharedStats() const;

 protected:
  // Queues one frame for `p` (the transport writes it in order).
  virtual void Send(const PeerPtr& p, const proto::Envelope& env) = 0;
  // Called when a peer's Hello is accepted (Root cancels its Hello timer).
  virtual void OnRegistered(const PeerPtr& p) { (void)p; }
  // Drops the protocol's references to peers (the transport's destructor
  // calls it while the sockets' io_context is still alive).
  void ReleasePeers() { slots_.clear(); }
  void CountAccept();
  void CountAcceptError();
  void CountEviction();

  const RootOptions options_;

 private:
  void OnMessage(const PeerPtr& p, const proto::Envelope& env);
  void OnHello(const PeerPtr& p, const proto::Hello& h);
  void OnGather(const PeerPtr& p, const proto::Gather& g);
  void AbortAll(int rank, const std::string& reason);
  void SendAbort(const PeerPtr& p);
  void UpdateBuffered(const PeerPtr& p);

  // Protocol-thread state.
  std::vector<PeerPtr> slots_;  // by rank
  int registered_count_ = 0;
  int unauthenticated_ = 0;
  uint64_t seq_ = 0;
  std::vector<std::optional<std::string>> payloads_;
  int gathered_ = 0;
  bool aborted_ = false;
  int abort_rank_ = -1;
  std::string abort_reason_;

  // Shared with other threads.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> rejections_;  // the first kMaxRejectionsKept
  int registered_shared_ = 0;
  int goodbyes_ = 0;
  std::string abort_text_;
  std::map<int, proto::Report> reports_;  // by rank
  RootStats stats_;
};

}  // namespace fathom::transport::bootstrap
