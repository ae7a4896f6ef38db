// The bootstrap root: an Asio server on its own thread (see bootstrap.h).
// <utility> first: Boost 1.74 Asio uses std::exchange without including it (GCC 12, C++20).
#include <utility>
//
#include <boost/asio.hpp>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/framing.h"

namespace fathom::transport::bootstrap {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::chrono::nanoseconds ToChrono(Picoseconds t) { return std::chrono::nanoseconds(t.ps() / 1000); }

class RootImpl;

struct Session {
  Session(asio::io_context& io, tcp::socket s) : socket(std::move(s)), hello_timer(io) {
    boost::system::error_code ec;
    const auto ep = socket.remote_endpoint(ec);
    peer = ec ? std::string("unknown peer")
              : ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  tcp::socket socket;
  asio::steady_timer hello_timer;
  std::array<uint8_t, kFrameHeaderBytes> header{};
  std::vector<uint8_t> body;
  std::deque<std::string> out;
  std::string peer;
  int rank = -1;
  bool goodbye = false;
  bool closing = false;  // close once the write queue drains; read no more
  bool closed = false;
};
using SessionPtr = std::shared_ptr<Session>;

class RootImpl final : public Root {
 public:
  explicit RootImpl(const RootOptions& o)
      : options_(o),
        acceptor_(io_),
        accept_timer_(io_),
        slots_(static_cast<size_t>(o.world_size)) {}

  ~RootImpl() override {
    asio::post(io_, [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      accept_timer_.cancel();
      for (auto& s : sessions_) Close(s);
    });
    io_.stop();
    if (thread_.joinable()) thread_.join();
    sessions_.clear();
    slots_.clear();
  }

  Status Listen() {
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(options_.bind_address, ec);
    if (ec) {
      return InvalidArgument("bootstrap root: bind address \"" + options_.bind_address +
                             "\" is not an IP address");
    }
    const tcp::endpoint ep(addr, options_.port);
    const std::string where = options_.bind_address + ":" + std::to_string(options_.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Unavailable("bootstrap root: listen on " + where + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    return Status::Ok();
  }

  void Run() {
    Accept();
    accept_timer_.expires_after(ToChrono(options_.accept_timeout));
    accept_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || registered_count_ == options_.world_size) return;
      std::string missing;
      for (size_t r = 0; r < slots_.size(); ++r) {
        if (!slots_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      AbortAll(-1, "rank(s) " + missing + " did not register within " +
                       std::to_string(options_.accept_timeout.seconds()) + " s");
    });
    thread_ = std::thread([this] { io_.run(); });
  }

  uint16_t port() const override { return port_; }

  Status Wait(Picoseconds timeout) override {
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

  std::vector<std::string> Rejections() const override {
    std::lock_guard lock(mu_);
    return rejections_;
  }
  std::vector<proto::Report> WaitReports(int count, Picoseconds timeout) override {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, ToChrono(timeout),
                 [&] { return static_cast<int>(reports_.size()) >= count; });
    std::vector<proto::Report> out;
    for (const auto& [rank, r] : reports_) out.push_back(r);
    return out;
  }
  int registered() const override {
    std::lock_guard lock(mu_);
    return registered_shared_;
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) {
        std::erase_if(sessions_, [](const SessionPtr& p) { return p->closed; });
        auto s = std::make_shared<Session>(io_, std::move(socket));
        sessions_.push_back(s);
        s->hello_timer.expires_after(ToChrono(options_.hello_timeout));
        s->hello_timer.async_wait([this, s](const boost::system::error_code& tec) {
          if (!tec && s->rank < 0 && !s->closed) {
            Reject(s, "no Hello within " + std::to_string(options_.hello_timeout.seconds()) + " s");
          }
        });
        ReadHeader(s);
      }
      Accept();
    });
  }

  void ReadHeader(const SessionPtr& s) {
    asio::async_read(s->socket, asio::buffer(s->header),
                     [this, s](const boost::system::error_code& ec, size_t) {
                       if (ec) return OnDisconnect(s, ec);
                       auto len = DecodeFrameHeader(s->header, options_.max_message_bytes);
                       if (!len.ok()) return Reject(s, len.status().message());
                       s->body.resize(*len);
                       asio::async_read(s->socket, asio::buffer(s->body),
                                        [this, s](const boost::system::error_code& ec2, size_t) {
                                          if (ec2) return OnDisconnect(s, ec2);
                                          auto env = ParseFrameBody(s->body);
                                          if (!env.ok()) return Reject(s, env.status().message());
                                          OnMessage(s, *env);
                                          if (!s->closing && !s->closed) ReadHeader(s);
                                        });
                     });
  }

  void OnMessage(const SessionPtr& s, const proto::Envelope& env) {
    if (s->rank < 0) {
      if (env.body_case() != proto::Envelope::kHello) {
        return Reject(s, "expected Hello first, got " + BodyName(env));
      }
      return OnHello(s, env.hello());
    }
    switch (env.body_case()) {
      case proto::Envelope::kGather:
        return OnGather(s, env.gather());
      case proto::Envelope::kAbort:
        return AbortAll(s->rank, env.abort().reason());
      case proto::Envelope::kReport: {
        // Kept under the rank that sent it, whatever rank it names.
        std::lock_guard lock(mu_);
        proto::Report& r = reports_[s->rank];
        r = env.report();
        r.set_rank(s->rank);
        cv_.notify_all();
        return;
      }
      case proto::Envelope::kGoodbye: {
        s->goodbye = true;
        std::lock_guard lock(mu_);
        ++goodbyes_;
        cv_.notify_all();
        return;
      }
      default:
        return Reject(
            s, "unexpected " + BodyName(env) + " from registered rank " + std::to_string(s->rank));
    }
  }

  void OnHello(const SessionPtr& s, const proto::Hello& h) {
    if (h.version() != kProtocolVersion) {
      return Reject(s, "wrong protocol version " + std::to_string(h.version()) +
                           " (this root speaks version " + std::to_string(kProtocolVersion) + ")");
    }
    if (h.token() != options_.token) {
      return Reject(s, "wrong token from a peer claiming rank " + std::to_string(h.rank()));
    }
    if (h.world_size() != options_.world_size) {
      return Reject(s, "rank " + std::to_string(h.rank()) + " says world_size " +
                           std::to_string(h.world_size()) + ", the root has " +
                           std::to_string(options_.world_size));
    }
    if (h.rank() < 0 || h.rank() >= options_.world_size) {
      return Reject(s, "rank " + std::to_string(h.rank()) + " is outside 0.." +
                           std::to_string(options_.world_size - 1));
    }
    const auto r = static_cast<size_t>(h.rank());
    if (slots_[r]) {
      return Reject(s, "rank " + std::to_string(h.rank()) + " is already registered (from " +
                           slots_[r]->peer + ")");
    }
    s->hello_timer.cancel();
    s->rank = h.rank();
    slots_[r] = s;
    ++registered_count_;
    {
      std::lock_guard lock(mu_);
      registered_shared_ = registered_count_;
    }
    proto::Envelope w;
    w.mutable_welcome()->set_world_size(options_.world_size);
    Send(s, w);
    if (aborted_) SendAbort(s);
    if (registered_count_ == options_.world_size) accept_timer_.cancel();
  }

  void OnGather(const SessionPtr& s, const proto::Gather& g) {
    if (aborted_) return SendAbort(s);
    if (g.seq() != seq_) {
      return Reject(s, "rank " + std::to_string(s->rank) + " sent Gather round " +
                           std::to_string(g.seq()) + ", the root is at round " +
                           std::to_string(seq_));
    }
    if (payloads_.empty()) payloads_.resize(static_cast<size_t>(options_.world_size));
    auto& slot = payloads_[static_cast<size_t>(s->rank)];
    if (slot.has_value()) {
      return Reject(s, "rank " + std::to_string(s->rank) + " sent Gather round " +
                           std::to_string(seq_) + " twice");
    }
    slot = g.payload();
    if (++gathered_ < options_.world_size) return;
    proto::Envelope result;
    result.mutable_gather_result()->set_seq(seq_);
    for (auto& p : payloads_) result.mutable_gather_result()->add_payloads(std::move(*p));
    for (auto& peer : slots_) {
      if (peer && !peer->closed) Send(peer, result);
    }
    payloads_.clear();
    gathered_ = 0;
    ++seq_;
  }

  void OnDisconnect(const SessionPtr& s, const boost::system::error_code& ec) {
    const bool lost = s->rank >= 0 && !s->goodbye && !s->closing;
    Close(s);
    if (lost) {
      AbortAll(-1, "rank " + std::to_string(s->rank) + " (" + s->peer +
                       ") lost its bootstrap connection: " + ec.message());
    }
  }

  // Answers with an Error, closes and logs; a registered rank's bad message
  // also aborts the run (its peers would wait for it forever).
  void Reject(const SessionPtr& s, const std::string& reason) {
    if (s->closing || s->closed) return;
    {
      std::lock_guard lock(mu_);
      rejections_.push_back(s->peer + ": " + reason);
    }
    proto::Envelope e;
    e.mutable_error()->set_reason(reason);
    Send(s, e);
    s->closing = true;
    s->hello_timer.cancel();
    if (s->rank >= 0) AbortAll(-1, "rank " + std::to_string(s->rank) + " was rejected: " + reason);
  }

  void AbortAll(int rank, const std::string& reason) {
    if (aborted_) return;
    aborted_ = true;
    abort_rank_ = rank;
    abort_reason_ = reason;
    {
      std::lock_guard lock(mu_);
      abort_text_ =
          (rank >= 0 ? "rank " + std::to_string(rank) + " aborted: " : "root aborted: ") + reason;
      cv_.notify_all();
    }
    for (auto& peer : slots_) {
      if (peer && !peer->closed && !peer->closing) SendAbort(peer);
    }
  }

  void SendAbort(const SessionPtr& s) {
    proto::Envelope a;
    a.mutable_abort()->set_rank(abort_rank_);
    a.mutable_abort()->set_reason(abort_reason_);
    Send(s, a);
  }

  void Send(const SessionPtr& s, const proto::Envelope& env) {
    if (s->closed) return;
    s->out.push_back(EncodeFrame(env));
    if (s->out.size() == 1) DoWrite(s);
  }

  void DoWrite(const SessionPtr& s) {
    asio::async_write(s->socket, asio::buffer(s->out.front()),
                      [this, s](const boost::system::error_code& ec, size_t) {
                        if (s->closed) return;
                        s->out.pop_front();
                        if (ec) return Close(s);
                        if (!s->out.empty()) return DoWrite(s);
                        if (s->closing) Close(s);
                      });
  }

  void Close(const SessionPtr& s) {
    if (s->closed) return;
    s->closed = true;
    boost::system::error_code ignored;
    s->hello_timer.cancel();
    s->socket.shutdown(tcp::socket::shutdown_both, ignored);
    s->socket.close(ignored);
  }

  RootOptions options_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_timer_;
  std::thread thread_;
  uint16_t port_ = 0;
  // I/O-thread state.
  std::vector<SessionPtr> sessions_;
  std::vector<SessionPtr> slots_;  // by rank
  int registered_count_ = 0;
  uint64_t seq_ = 0;
  std::vector<std::optional<std::string>> payloads_;
  int gathered_ = 0;
  bool aborted_ = false;
  int abort_rank_ = -1;
  std::string abort_reason_;
  // Shared with callers of Wait()/Rejections()/registered().
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> rejections_;
  int registered_shared_ = 0;
  int goodbyes_ = 0;
  std::string abort_text_;
  std::map<int, proto::Report> reports_;  // by rank
};

}  // namespace

StatusOr<std::unique_ptr<Root>> Root::Start(const RootOptions& options) {
  if (options.world_size < 1) {
    return InvalidArgument("bootstrap root: world_size " + std::to_string(options.world_size) +
                           " must be at least 1");
  }
  auto root = std::make_unique<RootImpl>(options);
  FATHOM_RETURN_IF_ERROR(root->Listen());
  root->Run();
  return std::unique_ptr<Root>(std::move(root));
}

}  // namespace fathom::transport::bootstrap
