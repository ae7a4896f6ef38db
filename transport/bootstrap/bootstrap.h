// Out-of-band rendezvous of N ranks over TCP (Boost.Asio; messages in
// proto/bootstrap.proto, framed by framing.h): the ranks find a root by
// address:port, register, then run all-gather rounds (endpoint exchange,
// barriers) and propagate an abort with its reason to every rank.
//
// The root is a server that survives hostile input: a connection that sends
// garbage, an oversized length prefix, a malformed message, the wrong
// protocol version, the wrong token or a rank that is already registered is
// answered with an Error naming the problem, closed and logged — the real
// ranks are served on. Strangers are bounded: a connection holds only the
// bytes that arrived, at most max_hello_bytes until its Hello is verified,
// for at most hello_timeout, and at most max_unauthenticated of them at once;
// running out of file descriptors pauses accepting, not serving. A
// registered rank that disappears without Goodbye (killed, crashed) aborts
// the run for everyone, with that reason.
//
// Ownership and threading: Root runs its own I/O thread, started by Start()
// and joined by the destructor. Rank is synchronous and used by one thread;
// each call blocks at most for its deadline. Both are move-free objects held
// by unique_ptr.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "proto/bootstrap.pb.h"

namespace fathom::transport::bootstrap {

inline constexpr uint32_t kProtocolVersion = 2;  // 2: Report
inline constexpr uint32_t kDefaultMaxMessageBytes = 1u << 20;
inline constexpr uint16_t kDefaultPort = 18515;  // perftest's OOB port
inline constexpr size_t kMaxRejectionsKept = 1000;

struct RootOptions {
  std::string bind_address = "127.0.0.1";  // loopback unless told otherwise
  uint16_t port = kDefaultPort;            // 0 = any free port (see Root::port())
  int world_size = 2;
  std::string token;  // when set, a Hello must carry the same token
  uint32_t max_message_bytes = kDefaultMaxMessageBytes;
  // Every rank must have registered this long after Start(), else the
  // registered ones are aborted with the names of the missing ranks.
  Picoseconds accept_timeout = Picoseconds::FromSeconds(60);
  // A new connection must complete its Hello within this.
  Picoseconds hello_timeout = Picoseconds::FromSeconds(5);
  // Until its Hello is verified a connection's frames may be at most this
  // long (a Hello is a few dozen bytes plus the token): a stranger's length
  // prefix cannot make the root buffer max_message_bytes.
  uint32_t max_hello_bytes = 4096;
  // At most this many connections may be open without a verified Hello; one
  // more evicts the oldest of them (rejected with an Error), so a flood of
  // idle strangers cannot lock out the real ranks or pile up memory. Raised
  // to world_size when below it, so that all ranks may connect at once.
  int max_unauthenticated = 64;
  // After a failed accept (out of file descriptors, EMFILE/ENFILE, or
  // memory), the root waits this long before accepting again instead of
  // spinning; the connected ranks are served meanwhile.
  Picoseconds accept_backoff = Picoseconds::FromMilliseconds(50);
};

// What the root holds and has seen, for monitoring and tests.
struct RootStats {
  uint64_t accepted = 0;        // connections accepted since Start()
  int open = 0;                 // connections open now
  int unauthenticated = 0;      // open connections without a verified Hello
  uint64_t buffered_bytes = 0;  // bytes held for frames being read, all connections
  uint64_t rejected = 0;        // rejections since Start() (Rejections() keeps the first 1000)
  uint64_t evicted = 0;         // unauthenticated connections closed for a newer one
  uint64_t accept_errors = 0;   // failed accepts, each followed by accept_backoff
};

class Root {
 public:
  // Binds and listens (errors name the address and port), then serves on its
  // own thread.
  static StatusOr<std::unique_ptr<Root>> Start(const RootOptions& options);
  virtual ~Root() = default;

  // The port actually bound.
  virtual uint16_t port() const = 0;
  // Waits until every rank has said Goodbye, or the run was aborted (returns
  // the abort as ABORTED), or `timeout` passed (DEADLINE_EXCEEDED).
  virtual Status Wait(Picoseconds timeout) = 0;
  // Every rejected connection so far, one line each ("127.0.0.1:40122:
  // oversized message: ..."), up to the first kMaxRejectionsKept (the rest
  // are counted in stats().rejected). Thread-safe.
  virtual std::vector<std::string> Rejections() const = 0;
  // Ranks registered so far. Thread-safe.
  virtual int registered() const = 0;
  // Counters and current holdings (RootStats). Thread-safe.
  virtual RootStats stats() const = 0;
  // The Reports ranks sent (Rank::Report), by rank, once `count` ranks have
  // reported or `timeout` passed (then only those that did). Thread-safe.
  virtual std::vector<proto::Report> WaitReports(int count, Picoseconds timeout) = 0;
};

struct RankOptions {
  std::string root_address = "127.0.0.1";
  uint16_t root_port = kDefaultPort;
  int rank = 0;
  int world_size = 2;
  std::string token;
  uint32_t max_message_bytes = kDefaultMaxMessageBytes;
  // Connection attempts are retried (the root may not be up yet) until this
  // much time has passed since Connect() began; it bounds the Hello too.
  Picoseconds connect_timeout = Picoseconds::FromSeconds(30);
  // Each AllGather/Barrier waits at most this long for the other ranks.
  Picoseconds op_timeout = Picoseconds::FromSeconds(60);
};

class Rank {
 public:
  // Connects (retrying while the root is not up), says Hello and waits for
  // Welcome. A rejection returns the root's reason.
  static StatusOr<std::unique_ptr<Rank>> Connect(const RankOptions& options);
  // Says Goodbye unless the run was aborted.
  virtual ~Rank() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // The largest frame body this rank reads (RankOptions::max_message_bytes):
  // a round's GatherResult, every rank's payload together, must fit in it.
  virtual uint32_t max_message_bytes() const = 0;
  // Every rank's payload, indexed by rank. ABORTED (naming who and why) when
  // any rank aborted; DEADLINE_EXCEEDED after op_timeout.
  virtual StatusOr<std::vector<std::string>> AllGather(const std::string& payload) = 0;
  virtual Status Barrier() = 0;
  // AllGather of EndpointRecords.
  virtual StatusOr<std::vector<proto::EndpointRecord>> ExchangeEndpoints(
      const proto::EndpointRecord& mine) = 0;
  // Tells every rank (through the root) that this rank gives up, and why.
  virtual Status Abort(const std::string& reason) = 0;
  // Sends the root what this rank saw when the run stopped (also after an
  // abort), and optionally its trace; the root keeps the latest per rank
  // (Root::WaitReports). Both must fit the root's max_message_bytes.
  virtual Status Report(const std::string& text, const std::string& trace = "") = 0;
  // Non-blocking: ABORTED (naming who and why) when the root has told us of
  // an abort, UNAVAILABLE when the root is gone, OK otherwise. For a rank
  // that is busy polling its NIC between rounds (a collective's driver), so
  // that one rank's completion error stops every rank, as NCCL does. Call
  // it only between rounds: it consumes the message it finds.
  virtual Status PollAbort() = 0;
};

// AllGather for payloads that may not fit in one round: a round of sizes,
// then as many rounds as the largest payload needs, each carrying one slice
// of every non-empty payload, sized so that the round's GatherResult fits in
// rank.max_message_bytes(). Every rank must call it at the same point (it
// is a sequence of rounds). Every round goes to every rank (the bootstrap
// has no gather-to-one), so the caller bounds the total. Errors are
// AllGather's, or INVALID_ARGUMENT when a peer's sizes do not add up.
StatusOr<std::vector<std::string>> AllGatherChunked(Rank& rank, const std::string& payload);

}  // namespace fathom::transport::bootstrap
