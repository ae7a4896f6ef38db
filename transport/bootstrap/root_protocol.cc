#include "transport/bootstrap/root_protocol.h"

#include <chrono>

#include "base/log.h"

namespace fathom::transport::bootstrap {
namespace {

std::chrono::nanoseconds ToChrono(Picoseconds t) { return std::chrono::nanoseconds(t.ps() / 1000); }

}  // namespace

RootProtocol::RootProtocol(const RootOptions& options)
    : options_(options), slots_(static_cast<size_t>(std::max(options.world_size, 0))) {}

void RootProtocol::OnOpen(const PeerPtr& p) {
  ++unauthenticated_;
  std::lock_guard lock(mu_);
  ++stats_.open;
  stats_.unauthenticated = unauthenticated_;
  (void)p;
}

void RootProtocol::MarkClosed(const PeerPtr& p) {
  if (p->closed) return;
  p->closed = true;
  p->closing = true;
  if (p->rank < 0) --unauthenticated_;
  // The buffer of a closed peer is released now, whoever still holds it.
  p->reader = FrameReader(0);
  UpdateBuffered(p);
  std::lock_guard lock(mu_);
  --stats_.open;
  stats_.unauthenticated = unauthenticated_;
}

void RootProtocol::UpdateBuffered(const PeerPtr& p) {
  const size_t now = p->reader.buffered_bytes();
  if (now == p->accounted_bytes) return;
  std::lock_guard lock(mu_);
  stats_.buffered_bytes = stats_.buffered_bytes + now - p->accounted_bytes;
  p->accounted_bytes = now;
}

void RootProtocol::CountAccept() {
  std::lock_guard lock(mu_);
  ++stats_.accepted;
}
void RootProtocol::CountAcceptError() {
  std::lock_guard lock(mu_);
  ++stats_.accept_errors;
}
void RootProtocol::CountEviction() {
  std::lock_guard lock(mu_);
  ++stats_.evicted;
}

void RootProtocol::OnReceived(const PeerPtr& p, size_t n) {
  if (p->closing || p->closed) return;
  const Status s = p->reader.Commit(n);
  if (!s.ok()) {
    UpdateBuffered(p);
    if (p->rank < 0 && s.code() == StatusCode::kOutOfRange) {
      return Reject(p, s.message() + " before a Hello");
    }
    return Reject(p, s.message());
  }
  auto frame = p->reader.TakeFrame();
  UpdateBuffered(p);
  if (!frame) return;
  if (!frame->ok()) return Reject(p, frame->status().message());
  FATHOM_LOG(kDebug, "bootstrap root: " + BodyName(**frame) + " from " + p->name +
                         (p->rank >= 0 ? " (rank " + std::to_string(p->rank) + ")" : ""));
  OnMessage(p, **frame);
}

void RootProtocol::OnMessage(const PeerPtr& p, const proto::Envelope& env) {
  if (p->rank < 0) {
    if (env.body_case() != proto::Envelope::kHello) {
      return Reject(p, "expected Hello first, got " + BodyName(env));
    }
    return OnHello(p, env.hello());
  }
  switch (env.body_case()) {
    case proto::Envelope::kGather:
      return OnGather(p, env.gather());
    case proto::Envelope::kAbort:
      return AbortAll(p->rank, env.abort().reason());
    case proto::Envelope::kReport: {
      // Kept under the rank that sent it, whatever rank it names.
      std::lock_guard lock(mu_);
      proto::Report& r = reports_[p->rank];
      r = env.report();
      r.set_rank(p->rank);
      cv_.notify_all();
      return;
    }
    case proto::Envelope::kGoodbye: {
      if (p->goodbye) return;
      p->goodbye = true;
      FATHOM_LOG(kInfo, "bootstrap root: rank " + std::to_string(p->rank) + " said Goodbye");
      std::lock_guard lock(mu_);
      ++goodbyes_;
      cv_.notify_all();
      return;
    }
    default:
      return Reject(
          p, "unexpected " + BodyName(env) + " from registered rank " + std::to_string(p->rank));
  }
}

void RootProtocol::OnHello(const PeerPtr& p, const proto::Hello& h) {
  if (h.version() != kProtocolVersion) {
    return Reject(p, "wrong protocol version " + std::to_string(h.version()) +
                         " (this root speaks version " + std::to_string(kProtocolVersion) + ")");
  }
  if (h.token() != options_.token) {
    return Reject(p, "wrong token from a peer claiming rank " + std::to_string(h.rank()));
  }
  if (h.world_size() != options_.world_size) {
    return Reject(p, "rank " + std::to_string(h.rank()) + " says world_size " +
                         std::to_string(h.world_size()) + ", the root has " +
                         std::to_string(options_.world_size));
  }
  if (h.rank() < 0 || h.rank() >= options_.world_size) {
    return Reject(p, "rank " + std::to_string(h.rank()) + " is outside 0.." +
                         std::to_string(options_.world_size - 1));
  }
  const auto r = static_cast<size_t>(h.rank());
  if (slots_[r]) {
    return Reject(p, "rank " + std::to_string(h.rank()) + " is already registered (from " +
                         slots_[r]->name + ")");
  }
  p->rank = h.rank();
  p->reader.set_max_body_bytes(options_.max_message_bytes);
  slots_[r] = p;
  ++registered_count_;
  --unauthenticated_;
  {
    std::lock_guard lock(mu_);
    registered_shared_ = registered_count_;
    stats_.unauthenticated = unauthenticated_;
  }
  FATHOM_LOG(kInfo, "bootstrap root: rank " + std::to_string(p->rank) + " registered from " +
                        p->name + " (" + std::to_string(registered_count_) + " of " +
                        std::to_string(options_.world_size) + ")");
  OnRegistered(p);
  proto::Envelope w;
  w.mutable_welcome()->set_world_size(options_.world_size);
  Send(p, w);
  if (aborted_) SendAbort(p);
}

void RootProtocol::OnGather(const PeerPtr& p, const proto::Gather& g) {
  if (aborted_) return SendAbort(p);
  if (g.seq() != seq_) {
    return Reject(p, "rank " + std::to_string(p->rank) + " sent Gather round " +
                         std::to_string(g.seq()) + ", the root is at round " +
                         std::to_string(seq_));
  }
  if (payloads_.empty()) payloads_.resize(static_cast<size_t>(options_.world_size));
  auto& slot = payloads_[static_cast<size_t>(p->rank)];
  if (slot.has_value()) {
    return Reject(p, "rank " + std::to_string(p->rank) + " sent Gather round " +
                         std::to_string(seq_) + " twice");
  }
  slot = g.payload();
  if (++gathered_ < options_.world_size) return;
  proto::Envelope result;
  result.mutable_gather_result()->set_seq(seq_);
  for (auto& payload : payloads_) result.mutable_gather_result()->add_payloads(std::move(*payload));
  for (auto& peer : slots_) {
    if (peer && !peer->closed) Send(peer, result);
  }
  FATHOM_LOG(kDebug, "bootstrap root: round " + std::to_string(seq_) + " complete");
  payloads_.clear();
  gathered_ = 0;
  ++seq_;
}

void RootProtocol::OnDisconnect(const PeerPtr& p, const std::string& why) {
  const bool lost = p->rank >= 0 && !p->goodbye && !p->closing;
  FATHOM_LOG(kInfo, "bootstrap root: connection from " + p->name +
                        (p->rank >= 0 ? " (rank " + std::to_string(p->rank) + ")" : "") +
                        " closed: " + why);
  MarkClosed(p);
  if (lost) {
    AbortAll(-1, "rank " + std::to_string(p->rank) + " (" + p->name +
                     ") lost its bootstrap connection: " + why);
  }
}

void RootProtocol::Reject(const PeerPtr& p, const std::string& reason) {
  if (p->closing || p->closed) return;
  FATHOM_LOG(kInfo, "bootstrap root: rejected " + p->name + ": " + reason);
  {
    std::lock_guard lock(mu_);
    ++stats_.rejected;
    if (rejections_.size() < kMaxRejectionsKept) rejections_.push_back(p->name + ": " + reason);
  }
  proto::Envelope e;
  e.mutable_error()->set_reason(reason);
  Send(p, e);
  p->closing = true;
  if (p->rank >= 0) AbortAll(-1, "rank " + std::to_string(p->rank) + " was rejected: " + reason);
}

void RootProtocol::OnAcceptTimeout() {
  if (all_registered()) return;
  std::string missing;
  for (size_t r = 0; r < slots_.size(); ++r) {
    if (!slots_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  AbortAll(-1, "rank(s) " + missing + " did not register within " +
                   std::to_string(options_.accept_timeout.seconds()) + " s");
}

void RootProtocol::AbortAll(int rank, const std::string& reason) {
  if (aborted_) return;
  aborted_ = true;
  abort_rank_ = rank;
  abort_reason_ = reason;
  {
    std::lock_guard lock(mu_);
    abort_text_ =
        (rank >= 0 ? "rank " + std::to_string(rank) + " aborted: " : "root aborted: ") + reason;
    // Info, not warn: every rank is told, and reports it to its user.
    FATHOM_LOG(kInfo, "bootstrap " + abort_text_);
    cv_.notify_all();
  }
  for (auto& peer : slots_) {
    if (peer && !peer->closed && !peer->closing) SendAbort(peer);
  }
}

void RootProtocol::SendAbort(const PeerPtr& p) {
  proto::Envelope a;
  a.mutable_abort()->set_rank(abort_rank_);
  a.mutable_abort()->set_reason(abort_reason_);
  Send(p, a);
}

Status RootProtocol::SharedWait(Picoseconds timeout) {
  std::unique_lock lock(mu_);
  const bool done = cv_.wait_for(lock, ToChrono(timeout), [this] {
    return !abort_text_.empty() || goodbyes_ == options_.world_size;
  });
  if (!abort_text_.empty()) return Aborted(abort_text_);
  if (!done) {
    return DeadlineExceeded("bootstrap root: " + std::to_string(goodbyes_) + " of " +
                            std::to_string(options_.world_size) + " ranks finished within " +
                            std::to_string(timeout.seconds()) + " s");
  }
  return Status::Ok();
}

std::vector<std::string> RootProtocol::SharedRejections() const {
  std::lock_guard lock(mu_);
  return rejections_;
}

std::vector<proto::Report> RootProtocol::SharedWaitReports(int count, Picoseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, ToChrono(timeout), [&] { return static_cast<int>(reports_.size()) >= count; });
  std::vector<proto::Report> out;
  for (const auto& [rank, r] : reports_) out.push_back(r);
  return out;
}

int RootProtocol::SharedRegistered() const {
  std::lock_guard lock(mu_);
  return registered_shared_;
}

RootStats RootProtocol::SharedStats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace fathom::transport::bootstrap
