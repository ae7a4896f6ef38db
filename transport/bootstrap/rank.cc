// A bootstrap rank: a synchronous client of the root with deadlines on every
// wait (see bootstrap.h).
// <utility> first: Boost 1.74 Asio uses std::exchange without including it (GCC 12, C++20).
#include <utility>
//
#include <poll.h>

#include <boost/asio.hpp>
#include <chrono>
#include <thread>

#include "base/log.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/framing.h"

namespace fathom::transport::bootstrap {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

SteadyClock::time_point DeadlineAfter(Picoseconds t) {
  return SteadyClock::now() + std::chrono::nanoseconds(t.ps() / 1000);
}

class RankImpl final : public Rank {
 public:
  explicit RankImpl(const RankOptions& o)
      : options_(o),
        where_(o.root_address + ":" + std::to_string(o.root_port)),
        me_("bootstrap rank " + std::to_string(o.rank)) {}

  ~RankImpl() override {
    if (connected_ && !aborted_) {
      proto::Envelope g;
      g.mutable_goodbye();
      (void)Write(g);
    }
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  Status Start() {
    if (options_.rank < 0 || options_.rank >= options_.world_size) {
      return InvalidArgument(me_ + ": rank outside 0.." + std::to_string(options_.world_size - 1));
    }
    const auto deadline = DeadlineAfter(options_.connect_timeout);
    FATHOM_RETURN_IF_ERROR(ConnectWithRetry(deadline));
    proto::Envelope hello;
    hello.mutable_hello()->set_version(kProtocolVersion);
    hello.mutable_hello()->set_rank(options_.rank);
    hello.mutable_hello()->set_world_size(options_.world_size);
    hello.mutable_hello()->set_token(options_.token);
    FATHOM_RETURN_IF_ERROR(Write(hello));
    FATHOM_ASSIGN_OR_RETURN(proto::Envelope reply, Read(deadline, "Welcome"));
    if (reply.body_case() == proto::Envelope::kError) {
      return FailedPrecondition(me_ + ": the root at " + where_ +
                                " rejected us: " + reply.error().reason());
    }
    if (reply.body_case() == proto::Envelope::kAbort) return AbortStatus(reply.abort());
    if (reply.body_case() != proto::Envelope::kWelcome) {
      return InvalidArgument(me_ + ": expected Welcome from " + where_ + ", got " +
                             BodyName(reply));
    }
    connected_ = true;
    return Status::Ok();
  }

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  uint32_t max_message_bytes() const override { return options_.max_message_bytes; }

  Status PollAbort() override {
    if (aborted_) return Aborted(me_ + ": " + abort_text_);
    if (!connected_) return Status::Ok();
    // poll(2) with a zero timeout: readable means a message or the root's
    // end of stream; outside a round only Abort (or Error) can come.
    pollfd p{socket_.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
      return Status::Ok();
    }
    // The root writes a message in one piece; a second is plenty for the rest.
    FATHOM_ASSIGN_OR_RETURN(proto::Envelope m,
                            Read(DeadlineAfter(Picoseconds::FromSeconds(1)), "Abort"));
    if (m.body_case() == proto::Envelope::kAbort) return AbortStatus(m.abort());
    aborted_ = true;
    abort_text_ = "unexpected " + BodyName(m) + " from the root at " + where_ + " between rounds";
    return Aborted(me_ + ": " + abort_text_);
  }

  StatusOr<std::vector<std::string>> AllGather(const std::string& payload) override {
    if (aborted_) return Aborted(me_ + ": the run was aborted earlier: " + abort_text_);
    proto::Envelope g;
    g.mutable_gather()->set_seq(seq_);
    g.mutable_gather()->set_payload(payload);
    FATHOM_RETURN_IF_ERROR(Write(g));
    const auto deadline = DeadlineAfter(options_.op_timeout);
    for (;;) {
      FATHOM_ASSIGN_OR_RETURN(proto::Envelope m,
                              Read(deadline, "GatherResult round " + std::to_string(seq_)));
      switch (m.body_case()) {
        case proto::Envelope::kGatherResult: {
          if (m.gather_result().seq() != seq_ ||
              m.gather_result().payloads_size() != options_.world_size) {
            return InvalidArgument(
                me_ + ": GatherResult round " + std::to_string(m.gather_result().seq()) + " with " +
                std::to_string(m.gather_result().payloads_size()) + " payloads, expected round " +
                std::to_string(seq_) + " with " + std::to_string(options_.world_size));
          }
          ++seq_;
          return std::vector<std::string>(m.gather_result().payloads().begin(),
                                          m.gather_result().payloads().end());
        }
        case proto::Envelope::kAbort:
          return AbortStatus(m.abort());
        case proto::Envelope::kError:
          aborted_ = true;
          return FailedPrecondition(me_ + ": the root at " + where_ +
                                    " rejected us: " + m.error().reason());
        default:
          return InvalidArgument(me_ + ": unexpected " + BodyName(m) + " from " + where_);
      }
    }
  }

  Status Barrier() override { return AllGather(std::string()).status(); }

  StatusOr<std::vector<proto::EndpointRecord>> ExchangeEndpoints(
      const proto::EndpointRecord& mine) override {
    FATHOM_ASSIGN_OR_RETURN(auto all, AllGather(mine.SerializeAsString()));
    std::vector<proto::EndpointRecord> out(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      if (!out[r].ParseFromString(all[r]) || out[r].rank() != static_cast<int>(r)) {
        return InvalidArgument(me_ + ": endpoint record of rank " + std::to_string(r) +
                               " is malformed or names another rank");
      }
    }
    return out;
  }

  Status Abort(const std::string& reason) override {
    if (aborted_) return Status::Ok();
    aborted_ = true;
    abort_text_ = "rank " + std::to_string(options_.rank) + " aborted: " + reason;
    proto::Envelope a;
    a.mutable_abort()->set_rank(options_.rank);
    a.mutable_abort()->set_reason(ToValidUtf8(reason));
    return Write(a);
  }

  Status Report(const std::string& text, const std::string& trace) override {
    proto::Envelope r;
    r.mutable_report()->set_rank(options_.rank);
    r.mutable_report()->set_text(ToValidUtf8(text));
    r.mutable_report()->set_trace(ToValidUtf8(trace));
    return Write(r);
  }

 private:
  Status AbortStatus(const proto::Abort& a) {
    aborted_ = true;
    abort_text_ = (a.rank() >= 0 ? "rank " + std::to_string(a.rank()) + " aborted: "
                                 : std::string("root aborted: ")) +
                  a.reason();
    return Aborted(me_ + ": " + abort_text_);
  }

  // Runs the io_context until `done` or the deadline; a missed deadline
  // cancels the pending operation (and drains its handler).
  bool RunUntil(const bool& done, SteadyClock::time_point deadline) {
    io_.restart();
    while (!done) {
      const auto now = SteadyClock::now();
      if (now >= deadline) break;
      io_.run_one_for(deadline - now);
    }
    if (done) return true;
    boost::system::error_code ignored;
    socket_.cancel(ignored);
    io_.restart();
    io_.run();
    return false;
  }

  Status ConnectWithRetry(SteadyClock::time_point deadline) {
    boost::system::error_code ec;
    tcp::resolver resolver(io_);
    const auto endpoints =
        resolver.resolve(options_.root_address, std::to_string(options_.root_port), ec);
    if (ec) {
      return InvalidArgument(me_ + ": cannot resolve root address " + where_ + ": " + ec.message());
    }
    std::string last = "no attempt";
    // The root may not be up yet (ranks start in any order): retry refused
    // connections until the deadline.
    while (SteadyClock::now() < deadline) {
      bool done = false;
      boost::system::error_code cec;
      socket_ = tcp::socket(io_);
      asio::async_connect(socket_, endpoints,
                          [&](const boost::system::error_code& e, const tcp::endpoint&) {
                            cec = e;
                            done = true;
                          });
      if (!RunUntil(done, deadline)) break;
      if (!cec) {
        socket_.set_option(tcp::no_delay(true), ec);
        FATHOM_LOG(kInfo, me_ + ": connected to the root at " + where_);
        return Status::Ok();
      }
      last = cec.message();
      FATHOM_LOG(kDebug, me_ + ": connect to " + where_ + ": " + last + "; retrying");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Unavailable(me_ + ": cannot connect to the bootstrap root at " + where_ + " within " +
                       std::to_string(options_.connect_timeout.seconds()) +
                       " s (last error: " + last + ")");
  }

  Status Write(const proto::Envelope& e) {
    const std::string frame = EncodeFrame(e);
    boost::system::error_code ec;
    asio::write(socket_, asio::buffer(frame), ec);
    if (ec) {
      return Unavailable(me_ + ": sending " + BodyName(e) + " to the root at " + where_ + ": " +
                         ec.message());
    }
    return Status::Ok();
  }

  StatusOr<proto::Envelope> Read(SteadyClock::time_point deadline, const std::string& what) {
    std::array<uint8_t, kFrameHeaderBytes> header{};
    bool done = false;
    boost::system::error_code ec;
    asio::async_read(socket_, asio::buffer(header),
                     [&](const boost::system::error_code& e, size_t) {
                       ec = e;
                       done = true;
                     });
    if (!RunUntil(done, deadline)) return Deadline(what);
    if (ec) return Lost(what, ec);
    FATHOM_ASSIGN_OR_RETURN(uint32_t len, DecodeFrameHeader(header, options_.max_message_bytes));
    std::vector<uint8_t> body(len);
    done = false;
    asio::async_read(socket_, asio::buffer(body), [&](const boost::system::error_code& e, size_t) {
      ec = e;
      done = true;
    });
    if (!RunUntil(done, deadline)) return Deadline(what);
    if (ec) return Lost(what, ec);
    return ParseFrameBody(body);
  }

  Status Deadline(const std::string& what) {
    return DeadlineExceeded(me_ + ": no " + what + " from the root at " + where_ +
                            " before the deadline (a rank is missing or stuck)");
  }
  Status Lost(const std::string& what, const boost::system::error_code& ec) {
    aborted_ = true;
    abort_text_ = "lost the root at " + where_ + " while waiting for " + what + ": " + ec.message();
    return Unavailable(me_ + ": " + abort_text_);
  }

  RankOptions options_;
  std::string where_;
  std::string me_;
  asio::io_context io_;
  tcp::socket socket_{io_};
  bool connected_ = false;
  bool aborted_ = false;
  std::string abort_text_;
  uint64_t seq_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Rank>> Rank::Connect(const RankOptions& options) {
  auto rank = std::make_unique<RankImpl>(options);
  FATHOM_RETURN_IF_ERROR(rank->Start());
  return std::unique_ptr<Rank>(std::move(rank));
}

}  // namespace fathom::transport::bootstrap
