// libFuzzer target for the bootstrap root (transport/bootstrap/
// root_protocol.h) without sockets: the input is a script of what up to four
// connections do — deliver raw bytes in pieces of any size (frame headers
// and bodies: the FrameReader), send well-formed Hello/Gather/Goodbye/Abort/
// Report frames so that scripts get past registration, disconnect, or hit
// the Hello and registration deadlines. A connection the root rejects is
// closed and replaced by a fresh one, as the server does.
//
// Beyond "no crash, no sanitizer report", it checks the root's invariants;
// a violation aborts, which libFuzzer reports as a crash:
//   - every frame the root sends decodes as one Envelope;
//   - a GatherResult carries world_size payloads, in round order;
//   - registered ranks never exceed world_size, one connection per rank;
//   - the counts of open and unauthenticated connections and of buffered
//     bytes match the connections; when all are closed, nothing is held;
//   - before its Hello a connection holds at most max_hello_bytes (+ chunk).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transport/bootstrap/root_protocol.h"

namespace {

using namespace fathom::transport::bootstrap;
namespace proto = fathom::proto;

constexpr int kPeers = 4;
constexpr uint32_t kMaxHelloBytes = 256;
constexpr uint32_t kMaxMessageBytes = 4096;
constexpr size_t kChunkBytes = 64;

void Check(bool ok) {
  if (!ok) std::abort();
}

class Script {
 public:
  Script(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t Byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::string Bytes(size_t n) {
    n = std::min(n, size_ - at_);
    std::string s(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

class FuzzRoot final : public RootProtocol {
 public:
  explicit FuzzRoot(const RootOptions& o) : RootProtocol(o) {}

  void Send(const PeerPtr& p, const proto::Envelope& env) override {
    Check(!p->closed);
    // What goes on the wire must come back as the same message.
    FrameReader back(1u << 30);
    const std::string frame = EncodeFrame(env);
    size_t at = 0;
    std::optional<fathom::StatusOr<proto::Envelope>> got;
    while (at < frame.size()) {
      auto into = back.Prepare(frame.size());
      Check(!into.empty());
      const size_t n = std::min(into.size(), frame.size() - at);
      std::copy_n(frame.data() + at, n, into.data());
      at += n;
      Check(back.Commit(n).ok());
      if (!got) got = back.TakeFrame();
    }
    Check(got.has_value() && got->ok() && (*got)->SerializeAsString() == env.SerializeAsString());
    if (env.has_gather_result()) {
      Check(env.gather_result().payloads_size() == options_.world_size);
      Check(static_cast<int64_t>(env.gather_result().seq()) >= last_result_seq_);
      last_result_seq_ = static_cast<int64_t>(env.gather_result().seq());
    }
  }

  void OnRegistered(const PeerPtr& p) override {
    Check(p->rank >= 0 && p->rank < options_.world_size);
    ++registrations_;
    Check(registrations_ <= options_.world_size);
  }

  using RootProtocol::CountAccept;

 private:
  int registrations_ = 0;
  int64_t last_result_seq_ = -1;
};

// Delivers `bytes` to `p` in pieces of at most `piece` bytes, through the
// reader as the server does; stops when the root closes the connection.
void Deliver(FuzzRoot& root, const PeerPtr& p, const std::string& bytes, size_t piece) {
  size_t at = 0;
  while (at < bytes.size() && !p->closing && !p->closed) {
    auto into = p->reader.Prepare(kChunkBytes);
    Check(!into.empty());
    const size_t n = std::min({into.size(), piece, bytes.size() - at});
    std::copy_n(bytes.data() + at, n, into.data());
    at += n;
    root.OnReceived(p, n);
    if (p->rank < 0 && !p->closed) {
      // Vector growth may double the capacity once past the limit.
      Check(p->reader.buffered_bytes() <= 2 * kMaxHelloBytes + kChunkBytes);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Script in(data, size);
  RootOptions o;
  o.world_size = 1 + in.Byte() % 4;
  o.token = (in.Byte() & 1) ? "t0k" : "";
  o.max_hello_bytes = kMaxHelloBytes;
  o.max_message_bytes = kMaxMessageBytes;
  FuzzRoot root(o);

  std::vector<PeerPtr> peers;
  int next_port = 1;
  auto open_peer = [&] {
    auto p = std::make_shared<Peer>("peer:" + std::to_string(next_port++), kMaxHelloBytes);
    root.CountAccept();
    root.OnOpen(p);
    return p;
  };
  for (int i = 0; i < kPeers; ++i) peers.push_back(open_peer());

  while (!in.done()) {
    const uint8_t op = in.Byte();
    PeerPtr& p = peers[op % kPeers];
    proto::Envelope env;
    switch ((op / kPeers) % 8) {
      case 0:  // raw bytes, in pieces of 1..16
      case 1: {
        const size_t piece = 1 + in.Byte() % 16;
        Deliver(root, p, in.Bytes(in.Byte()), piece);
        break;
      }
      case 2: {  // a Hello, mostly right
        const uint8_t b = in.Byte();
        auto* h = env.mutable_hello();
        h->set_version(b & 0x80 ? kProtocolVersion + 1 : kProtocolVersion);
        h->set_rank(static_cast<int>(b % 6) - 1);
        h->set_world_size(b & 0x40 ? o.world_size + 1 : o.world_size);
        h->set_token(b & 0x20 ? "wrong" : o.token);
        Deliver(root, p, EncodeFrame(env), kChunkBytes);
        break;
      }
      case 3: {  // a Gather of some round, with a payload that may be large
        const uint8_t b = in.Byte();
        env.mutable_gather()->set_seq(b % 4);
        env.mutable_gather()->set_payload(
            std::string(size_t{in.Byte()} * (b & 0x80 ? 32 : 1), 'g'));
        Deliver(root, p, EncodeFrame(env), 1 + b % 97);
        break;
      }
      case 4: {  // Goodbye, Abort, Report, or a message only the root sends
        const uint8_t b = in.Byte();
        switch (b % 5) {
          case 0:
            env.mutable_goodbye();
            break;
          case 1:
            env.mutable_abort()->set_reason(in.Bytes(b / 5));
            break;
          case 2:
            env.mutable_report()->set_text(in.Bytes(b / 5));
            env.mutable_report()->set_rank(b);
            break;
          case 3:
            env.mutable_welcome()->set_world_size(b);
            break;
          default:
            env.mutable_gather_result()->set_seq(b);
            break;
        }
        Deliver(root, p, EncodeFrame(env), kChunkBytes);
        break;
      }
      case 5:  // the peer goes away
        root.OnDisconnect(p, "End of file");
        break;
      case 6:  // its Hello deadline passes
        if (p->rank < 0) root.Reject(p, "no Hello within 5 s");
        break;
      default:  // the registration deadline passes
        root.OnAcceptTimeout();
        break;
    }
    // The server closes a rejected connection once its Error is written,
    // and a closed one makes room for the next.
    for (PeerPtr& q : peers) {
      if (q->closing || q->closed) {
        root.MarkClosed(q);
        q = open_peer();
      }
    }
    const RootStats st = root.SharedStats();
    Check(st.open == kPeers);
    int unauth = 0;
    uint64_t held = 0;
    for (const PeerPtr& q : peers) {
      unauth += q->rank < 0 ? 1 : 0;
      held += q->reader.buffered_bytes();
    }
    Check(st.unauthenticated == unauth && root.unauthenticated() == unauth);
    Check(st.buffered_bytes == held);
    Check(root.SharedRegistered() <= o.world_size);
  }
  for (PeerPtr& q : peers) root.MarkClosed(q);
  const RootStats st = root.SharedStats();
  Check(st.open == 0 && st.unauthenticated == 0 && st.buffered_bytes == 0);
  return 0;
}
