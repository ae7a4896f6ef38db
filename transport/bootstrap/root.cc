// The bootstrap root: an Asio server on its own thread (see bootstrap.h)
// around the socket-free protocol of root_protocol.h.
// <utility> first: Boost 1.74 Asio uses std::exchange without including it (GCC 12, C++20).
#include <utility>
//
#include <algorithm>
#include <boost/asio.hpp>
#include <cerrno>
#include <deque>
#include <list>
#include <thread>

#include "base/log.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/root_protocol.h"

namespace fathom::transport::bootstrap {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::chrono::nanoseconds ToChrono(Picoseconds t) { return std::chrono::nanoseconds(t.ps() / 1000); }

// A body is read this much at a time, so the buffer follows the bytes that
// arrive rather than the length a peer claims.
constexpr size_t kReadChunkBytes = 64 * 1024;

std::string PeerName(const tcp::socket& socket) {
  boost::system::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  return ec ? std::string("unknown peer")
            : ep.address().to_string() + ":" + std::to_string(ep.port());
}

struct Session final : Peer {
  Session(asio::io_context& io, tcp::socket s, uint32_t max_hello_bytes)
      : Peer(PeerName(s), max_hello_bytes), socket(std::move(s)), hello_timer(io) {}
  tcp::socket socket;
  asio::steady_timer hello_timer;
  std::deque<std::string> out;
  std::list<std::shared_ptr<Session>>::iterator unauth_pos;  // valid while rank < 0
  bool socket_closed = false;
};
using SessionPtr = std::shared_ptr<Session>;

Session& AsSession(const PeerPtr& p) { return static_cast<Session&>(*p); }

// Out of descriptors or memory: the pending connection stays queued and the
// next accept would fail the same way at once.
bool IsResourceExhaustion(const boost::system::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
         ec == asio::error::no_memory || ec.value() == ENFILE;
}

class RootImpl final : public Root, private RootProtocol {
 public:
  explicit RootImpl(const RootOptions& o)
      : RootProtocol(o), acceptor_(io_), accept_timer_(io_), backoff_timer_(io_) {}

  ~RootImpl() override {
    asio::post(io_, [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      accept_timer_.cancel();
      backoff_timer_.cancel();
      const auto all = sessions_;
      for (const auto& s : all) Close(s);
    });
    io_.stop();
    if (thread_.joinable()) thread_.join();
    sessions_.clear();
    unauthenticated_order_.clear();
    ReleasePeers();
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
    FATHOM_LOG(kInfo, "bootstrap root: listening on " + options_.bind_address + ":" +
                          std::to_string(port_) + " for " + std::to_string(options_.world_size) +
                          " rank(s)");
    return Status::Ok();
  }

  void Run() {
    Accept();
    accept_timer_.expires_after(ToChrono(options_.accept_timeout));
    accept_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) OnAcceptTimeout();
    });
    thread_ = std::thread([this] { io_.run(); });
  }

  uint16_t port() const override { return port_; }
  Status Wait(Picoseconds timeout) override { return SharedWait(timeout); }
  std::vector<std::string> Rejections() const override { return SharedRejections(); }
  std::vector<proto::Report> WaitReports(int count, Picoseconds timeout) override {
    return SharedWaitReports(count, timeout);
  }
  int registered() const override { return SharedRegistered(); }
  RootStats stats() const override { return SharedStats(); }

 private:
  void Accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (ec) return OnAcceptError(ec);
      if (accept_failing_) {
        FATHOM_LOG(kInfo, "bootstrap root: accepting again after " +
                              std::to_string(accept_failures_) + " failed accept(s)");
        accept_failing_ = false;
        accept_failures_ = 0;
      }
      OnAccepted(std::move(socket));
      Accept();
    });
  }

  void OnAcceptError(const boost::system::error_code& ec) {
    CountAcceptError();
    ++accept_failures_;
    if (!IsResourceExhaustion(ec)) {
      // A connection that failed on its own (reset before accept): next one.
      FATHOM_LOG(kInfo, "bootstrap root: accept: " + ec.message());
      return Accept();
    }
    if (!accept_failing_) {
      FATHOM_LOG(kWarn, "bootstrap root: accept: " + ec.message() + "; retrying every " +
                            std::to_string(options_.accept_backoff.ps() / 1'000'000'000) +
                            " ms while serving the connected ranks");
      accept_failing_ = true;
    }
    backoff_timer_.expires_after(ToChrono(options_.accept_backoff));
    backoff_timer_.async_wait([this](const boost::system::error_code& tec) {
      if (!tec && acceptor_.is_open()) Accept();
    });
  }

  void OnAccepted(tcp::socket socket) {
    CountAccept();
    if (unauthenticated() >= options_.max_unauthenticated && !unauthenticated_order_.empty()) {
      const SessionPtr oldest = unauthenticated_order_.front();
      CountEviction();
      Reject(oldest, "too many connections without a Hello (limit " +
                         std::to_string(options_.max_unauthenticated) +
                         "): closed the oldest for a new one");
      Close(oldest);  // now, the Error written or not: the slot is needed
    }
    auto s = std::make_shared<Session>(io_, std::move(socket), options_.max_hello_bytes);
    FATHOM_LOG(kInfo, "bootstrap root: accepted a connection from " + s->name);
    boost::system::error_code ignored;
    s->socket.set_option(tcp::no_delay(true), ignored);
    sessions_.push_back(s);
    s->unauth_pos = unauthenticated_order_.insert(unauthenticated_order_.end(), s);
    OnOpen(s);
    s->hello_timer.expires_after(ToChrono(options_.hello_timeout));
    s->hello_timer.async_wait([this, s](const boost::system::error_code& tec) {
      if (tec || s->rank >= 0 || s->closed) return;
      // Closed once the Error is written (at once: a stranger has been sent
      // nothing else, so the socket's buffer has room).
      Reject(s, "no Hello within " + std::to_string(options_.hello_timeout.seconds()) + " s");
    });
    Read(s);
  }

  void Read(const SessionPtr& s) {
    const std::span<uint8_t> into = s->reader.Prepare(kReadChunkBytes);
    s->socket.async_read_some(asio::buffer(into.data(), into.size()),
                              [this, s](const boost::system::error_code& ec, size_t n) {
                                if (s->socket_closed) return;
                                if (ec) {
                                  OnDisconnect(s, ec.message());
                                  return Close(s);
                                }
                                OnReceived(s, n);
                                if (!s->closing && !s->closed) Read(s);
                              });
  }

  void OnRegistered(const PeerPtr& p) override {
    Session& s = AsSession(p);
    s.hello_timer.cancel();
    unauthenticated_order_.erase(s.unauth_pos);
    if (all_registered()) accept_timer_.cancel();
  }

  void Send(const PeerPtr& p, const proto::Envelope& env) override {
    const SessionPtr s = std::static_pointer_cast<Session>(p);
    if (s->closed) return;
    s->out.push_back(EncodeFrame(env));
    if (s->out.size() == 1) DoWrite(s);
  }

  void DoWrite(const SessionPtr& s) {
    asio::async_write(s->socket, asio::buffer(s->out.front()),
                      [this, s](const boost::system::error_code& ec, size_t) {
                        if (s->socket_closed) return;
                        s->out.pop_front();
                        if (ec) return Close(s);
                        if (!s->out.empty()) return DoWrite(s);
                        if (s->closing) Close(s);
                      });
  }

  // Closes the socket and drops the session: its read buffer goes now, the
  // rest when the pending handlers holding it finish (operation_aborted).
  void Close(SessionPtr s) {
    if (s->socket_closed) return;
    s->socket_closed = true;
    if (s->rank < 0) unauthenticated_order_.erase(s->unauth_pos);
    boost::system::error_code ignored;
    s->hello_timer.cancel();
    s->socket.shutdown(tcp::socket::shutdown_both, ignored);
    s->socket.close(ignored);  // first: no read may still fill the buffer MarkClosed frees
    MarkClosed(s);
    std::erase(sessions_, s);
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_timer_;
  asio::steady_timer backoff_timer_;
  std::thread thread_;
  uint16_t port_ = 0;
  // I/O-thread state.
  std::vector<SessionPtr> sessions_;             // open ones
  std::list<SessionPtr> unauthenticated_order_;  // open, no Hello yet; oldest first
  bool accept_failing_ = false;
  uint64_t accept_failures_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Root>> Root::Start(const RootOptions& options) {
  if (options.world_size < 1) {
    return InvalidArgument("bootstrap root: world_size " + std::to_string(options.world_size) +
                           " must be at least 1");
  }
  if (options.max_unauthenticated < 1) {
    return InvalidArgument("bootstrap root: max_unauthenticated " +
                           std::to_string(options.max_unauthenticated) + " must be at least 1");
  }
  // Never below world_size: every rank connecting at once must fit.
  RootOptions o = options;
  o.max_unauthenticated = std::max(o.max_unauthenticated, o.world_size);
  auto root = std::make_unique<RootImpl>(o);
  FATHOM_RETURN_IF_ERROR(root->Listen());
  root->Run();
  return std::unique_ptr<Root>(std::move(root));
}

}  // namespace fathom::transport::bootstrap
