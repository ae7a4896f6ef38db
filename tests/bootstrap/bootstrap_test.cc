// The bootstrap over 127.0.0.1 with ranks in threads: rendezvous, endpoint
// exchange, barriers, abort propagation, connect retry while the root is not
// up, deadlines, and hostile input — each rejected with a clear error while
// the root keeps serving the real ranks.
#include "transport/bootstrap/bootstrap.h"

#include <gtest/gtest.h>

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without it
//
#include <boost/asio.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/bootstrap/test_options.h"
#include "transport/bootstrap/framing.h"

namespace fathom::transport::bootstrap {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

using test_util::RankOpts;
using test_util::RootOpts;

proto::EndpointRecord Record(int rank) {
  proto::EndpointRecord r;
  r.set_rank(rank);
  r.set_lid(static_cast<uint32_t>(rank + 1));
  r.set_gid(std::string(16, static_cast<char>(rank)));
  r.set_gid_index(3);
  r.set_active_mtu(rank == 1 ? 1024 : 4096);
  auto* qp = r.add_qps();
  qp->set_peer_rank((rank + 1) % 4);
  qp->set_qpn(static_cast<uint32_t>(0x100 + rank));
  qp->set_psn(static_cast<uint32_t>(0xabc + rank));
  auto* b = r.add_buffers();
  b->set_addr(0x7f0000000000ull + static_cast<uint64_t>(rank));
  b->set_length(1u << 20);
  b->set_rkey(static_cast<uint32_t>(0x500 + rank));
  return r;
}

TEST(BootstrapTest, FourRanksExchangeEndpointsAndRunBarriers) {
  auto root = Root::Start(RootOpts(4));
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  std::vector<std::thread> threads;
  std::vector<Status> results(4);
  std::vector<std::vector<proto::EndpointRecord>> seen(4);
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      auto rank = Rank::Connect(RankOpts(**root, r, 4));
      if (!rank.ok()) {
        results[static_cast<size_t>(r)] = rank.status();
        return;
      }
      auto eps = (*rank)->ExchangeEndpoints(Record(r));
      if (!eps.ok()) {
        results[static_cast<size_t>(r)] = eps.status();
        return;
      }
      seen[static_cast<size_t>(r)] = *eps;
      for (int i = 0; i < 3; ++i) {
        Status s = (*rank)->Barrier();
        if (!s.ok()) {
          results[static_cast<size_t>(r)] = s;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(results[static_cast<size_t>(r)].ok()) << results[static_cast<size_t>(r)].ToString();
    ASSERT_EQ(seen[static_cast<size_t>(r)].size(), 4u);
    for (int p = 0; p < 4; ++p) {
      const auto& e = seen[static_cast<size_t>(r)][static_cast<size_t>(p)];
      EXPECT_EQ(e.rank(), p);
      EXPECT_EQ(e.qps(0).qpn(), static_cast<uint32_t>(0x100 + p));
      EXPECT_EQ(e.buffers(0).rkey(), static_cast<uint32_t>(0x500 + p));
      EXPECT_EQ(e.active_mtu(), p == 1 ? 1024 : 4096);
    }
  }
  EXPECT_TRUE((*root)->Wait(Picoseconds::FromSeconds(10)).ok());
  EXPECT_TRUE((*root)->Rejections().empty());
}

// Payloads far over one frame (4 KiB here) arrive whole, in rounds; an
// empty payload takes no room; one plain AllGather of the same payloads would
// exceed the frame limit.
TEST(BootstrapTest, ChunkedAllGatherCarriesPayloadsOverTheFrameLimit) {
  constexpr uint32_t kMax = 4096;
  RootOptions ro = RootOpts(3);
  ro.max_message_bytes = kMax;
  auto root = Root::Start(ro);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  const auto payload = [](int r) {
    std::string p;
    for (size_t i = 0; i < (r == 0 ? 0u : r == 1 ? 20000u : 9000u); ++i) {
      p.push_back(static_cast<char>('a' + (i * 7 + static_cast<size_t>(r)) % 26));
    }
    return p;
  };
  std::vector<Status> results(3);
  std::vector<std::vector<std::string>> seen(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      RankOptions o = RankOpts(**root, r, 3);
      o.max_message_bytes = kMax;
      auto rank = Rank::Connect(o);
      if (!rank.ok()) {
        results[static_cast<size_t>(r)] = rank.status();
        return;
      }
      auto all = AllGatherChunked(**rank, payload(r));
      if (!all.ok()) {
        results[static_cast<size_t>(r)] = all.status();
        return;
      }
      seen[static_cast<size_t>(r)] = *all;
      // The rounds stay in step: a plain round still works after them.
      results[static_cast<size_t>(r)] = (*rank)->Barrier();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(results[static_cast<size_t>(r)].ok()) << results[static_cast<size_t>(r)].ToString();
    ASSERT_EQ(seen[static_cast<size_t>(r)].size(), 3u);
    for (int p = 0; p < 3; ++p) {
      EXPECT_EQ(seen[static_cast<size_t>(r)][static_cast<size_t>(p)], payload(p))
          << "rank " << r << " saw rank " << p;
    }
  }
  EXPECT_TRUE((*root)->Wait(Picoseconds::FromSeconds(10)).ok());
  EXPECT_TRUE((*root)->Rejections().empty());
}

TEST(BootstrapTest, AbortReachesEveryRankWithItsReason) {
  auto root = Root::Start(RootOpts(3));
  ASSERT_TRUE(root.ok());
  std::vector<Status> results(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      auto rank = Rank::Connect(RankOpts(**root, r, 3));
      if (!rank.ok()) {
        results[static_cast<size_t>(r)] = rank.status();
        return;
      }
      if (Status s = (*rank)->Barrier(); !s.ok()) {
        results[static_cast<size_t>(r)] = s;
        return;
      }
      if (r == 2) {
        results[2] = (*rank)->Abort("device rxe0 port 1 is DOWN");
        return;
      }
      results[static_cast<size_t>(r)] = (*rank)->Barrier();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(results[2].ok()) << results[2].ToString();
  for (int r : {0, 1}) {
    const Status& s = results[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    EXPECT_NE(s.message().find("rank 2 aborted: device rxe0 port 1 is DOWN"), std::string::npos)
        << s.ToString();
  }
  const Status w = (*root)->Wait(Picoseconds::FromSeconds(10));
  EXPECT_EQ(w.code(), StatusCode::kAborted);
  EXPECT_NE(w.message().find("port 1 is DOWN"), std::string::npos);
}

// Found by bootstrap_fuzz: the reason is a proto3 string, which protobuf
// will not parse unless it is UTF-8, so a reason quoting raw bytes reached
// the root as a "malformed message" and the other ranks never saw it.
TEST(BootstrapTest, AnAbortReasonThatIsNotUtf8StillReachesTheOthers) {
  auto root = Root::Start(RootOpts(2));
  ASSERT_TRUE(root.ok());
  Status s1;
  std::thread t([&] {
    auto rank1 = Rank::Connect(RankOpts(**root, 1, 2));
    s1 = rank1.ok() ? (*rank1)->Barrier() : rank1.status();
  });
  auto rank0 = Rank::Connect(RankOpts(**root, 0, 2));
  ASSERT_TRUE(rank0.ok()) << rank0.status().ToString();
  EXPECT_TRUE((*rank0)->Abort("fw_ver \xff\xfe is unreadable").ok());
  t.join();
  EXPECT_EQ(s1.code(), StatusCode::kAborted) << s1.ToString();
  EXPECT_NE(s1.message().find("rank 0 aborted: fw_ver \xEF\xBF\xBD\xEF\xBF\xBD is unreadable"),
            std::string::npos)
      << s1.ToString();
  EXPECT_TRUE((*root)->Rejections().empty());
}

TEST(BootstrapTest, RankRetriesUntilTheRootComesUp) {
  uint16_t port = 0;
  {
    auto probe = Root::Start(RootOpts(1));
    ASSERT_TRUE(probe.ok());
    port = (*probe)->port();
  }
  Status result = Internal("not run");
  std::thread rank_thread([&] {
    RankOptions o;
    o.root_port = port;
    o.rank = 0;
    o.world_size = 1;
    o.connect_timeout = Picoseconds::FromSeconds(20);
    auto rank = Rank::Connect(o);
    result = rank.ok() ? (*rank)->Barrier() : rank.status();
  });
  // The rank is already retrying; the root starts late.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  RootOptions ro = RootOpts(1);
  ro.port = port;
  auto root = Root::Start(ro);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  rank_thread.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
}

TEST(BootstrapTest, ConnectDeadlineNamesTheRootAddress) {
  uint16_t port = 0;
  {
    auto probe = Root::Start(RootOpts(1));
    ASSERT_TRUE(probe.ok());
    port = (*probe)->port();
  }
  RankOptions o;
  o.root_port = port;
  o.connect_timeout = Picoseconds::FromMilliseconds(300);
  auto rank = Rank::Connect(o);
  ASSERT_FALSE(rank.ok());
  EXPECT_EQ(rank.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(rank.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << rank.status().ToString();
}

TEST(BootstrapTest, BarrierDeadlineWhenAPeerNeverArrives) {
  auto root = Root::Start(RootOpts(2));
  ASSERT_TRUE(root.ok());
  RankOptions o = RankOpts(**root, 0, 2);
  o.op_timeout = Picoseconds::FromMilliseconds(300);
  auto rank = Rank::Connect(o);
  ASSERT_TRUE(rank.ok());
  const Status s = (*rank)->Barrier();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("bootstrap rank 0: no GatherResult round 0"), std::string::npos)
      << s.ToString();
}

TEST(BootstrapTest, RootAbortsWhenRanksDoNotRegisterInTime) {
  RootOptions ro = RootOpts(3);
  ro.accept_timeout = Picoseconds::FromMilliseconds(300);
  auto root = Root::Start(ro);
  ASSERT_TRUE(root.ok());
  auto rank = Rank::Connect(RankOpts(**root, 0, 3));
  ASSERT_TRUE(rank.ok());
  const Status s = (*rank)->Barrier();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_NE(s.message().find("rank(s) 1, 2 did not register"), std::string::npos) << s.ToString();
}

// A stranger speaking raw bytes to the root; returns what the root answered
// (the Error's reason) once it closes the connection.
std::string RawExchange(uint16_t port, const std::string& bytes) {
  asio::io_context io;
  tcp::socket s(io);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(s, asio::buffer(bytes));
  std::string reply;
  boost::system::error_code ec;
  asio::read(s, asio::dynamic_buffer(reply), ec);  // until the root closes
  if (reply.size() < kFrameHeaderBytes) return "(no reply)";
  auto len =
      DecodeFrameHeader(std::span<const uint8_t, kFrameHeaderBytes>(
                            reinterpret_cast<const uint8_t*>(reply.data()), kFrameHeaderBytes),
                        1u << 20);
  if (!len.ok() || reply.size() < kFrameHeaderBytes + *len) return "(bad reply)";
  auto env = ParseFrameBody(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(reply.data()) + kFrameHeaderBytes, *len));
  if (!env.ok() || env->body_case() != proto::Envelope::kError) return "(not an Error)";
  return env->error().reason();
}

std::string HelloFrame(uint32_t version, int rank, int world, const std::string& token) {
  proto::Envelope e;
  e.mutable_hello()->set_version(version);
  e.mutable_hello()->set_rank(rank);
  e.mutable_hello()->set_world_size(world);
  e.mutable_hello()->set_token(token);
  return EncodeFrame(e);
}

TEST(BootstrapHostileTest, RootRejectsHostileInputAndKeepsServingRealRanks) {
  RootOptions ro = RootOpts(2);
  ro.token = "let-me-in";
  ro.hello_timeout = Picoseconds::FromMilliseconds(300);
  auto root = Root::Start(ro);
  ASSERT_TRUE(root.ok());
  const uint16_t port = (*root)->port();

  // Rank 0 registers first, so that a duplicate can be tried.
  RankOptions r0 = RankOpts(**root, 0, 2);
  r0.token = "let-me-in";
  auto rank0 = Rank::Connect(r0);
  ASSERT_TRUE(rank0.ok()) << rank0.status().ToString();

  EXPECT_NE(RawExchange(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").find("bad frame magic"),
            std::string::npos);
  EXPECT_NE(RawExchange(port, std::string("FTHB\x7f\xff\xff\xff", 8)).find("oversized message"),
            std::string::npos);
  EXPECT_NE(
      RawExchange(port, std::string("FTHB\x00\x00\x00\x03\xff\xff\xff", 11)).find("malformed"),
      std::string::npos);
  EXPECT_NE(RawExchange(port, HelloFrame(7, 1, 2, "let-me-in")).find("wrong protocol version 7"),
            std::string::npos);
  EXPECT_NE(RawExchange(port, HelloFrame(kProtocolVersion, 1, 2, "guess")).find("wrong token"),
            std::string::npos);
  EXPECT_NE(RawExchange(port, HelloFrame(kProtocolVersion, 0, 2, "let-me-in"))
                .find("rank 0 is already registered"),
            std::string::npos);
  EXPECT_NE(RawExchange(port, HelloFrame(kProtocolVersion, 5, 2, "let-me-in")).find("outside 0..1"),
            std::string::npos);
  EXPECT_NE(RawExchange(port, "").find("no Hello within"), std::string::npos);
  // The same through the Rank API: a wrong token is a clear rejection.
  RankOptions bad = RankOpts(**root, 1, 2);
  bad.token = "nope";
  auto stranger = Rank::Connect(bad);
  ASSERT_FALSE(stranger.ok());
  EXPECT_EQ(stranger.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stranger.status().message().find("rejected us: wrong token"), std::string::npos)
      << stranger.status().ToString();

  // The real rank 1 still gets in, and both finish a round.
  Status s1;
  std::thread t([&] {
    RankOptions r1 = RankOpts(**root, 1, 2);
    r1.token = "let-me-in";
    auto rank1 = Rank::Connect(r1);
    s1 = rank1.ok() ? (*rank1)->Barrier() : rank1.status();
  });
  const Status s0 = (*rank0)->Barrier();
  t.join();
  EXPECT_TRUE(s0.ok()) << s0.ToString();
  EXPECT_TRUE(s1.ok()) << s1.ToString();
  rank0->reset();
  EXPECT_TRUE((*root)->Wait(Picoseconds::FromSeconds(10)).ok());
  EXPECT_EQ((*root)->Rejections().size(), 9u);
  EXPECT_EQ((*root)->registered(), 2);
}

TEST(BootstrapTest, ARankThatVanishesAbortsTheOthers) {
  auto root = Root::Start(RootOpts(2));
  ASSERT_TRUE(root.ok());
  auto rank0 = Rank::Connect(RankOpts(**root, 0, 2));
  ASSERT_TRUE(rank0.ok());
  {
    // Rank 1 registers and dies without Goodbye (a killed process).
    asio::io_context io;
    tcp::socket s(io);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), (*root)->port()));
    asio::write(s, asio::buffer(HelloFrame(kProtocolVersion, 1, 2, "")));
    std::array<uint8_t, 64> buf;
    boost::system::error_code ec;
    s.read_some(asio::buffer(buf), ec);  // the Welcome
  }
  const Status s = (*rank0)->Barrier();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_NE(s.message().find("rank 1"), std::string::npos);
  EXPECT_NE(s.message().find("lost its bootstrap connection"), std::string::npos) << s.ToString();
}

// A rank busy with RDMA between rounds (a collective's driver) learns of
// another rank's abort without blocking: PollAbort() is OK while nothing
// came, then ABORTED with who and why, and stays so.
TEST(BootstrapTest, PollAbortSeesAnotherRanksAbortWithoutBlocking) {
  auto root = Root::Start(RootOpts(2));
  ASSERT_TRUE(root.ok());
  std::unique_ptr<Rank> rank1;
  std::thread t([&] {
    auto r = Rank::Connect(RankOpts(**root, 1, 2));
    if (r.ok()) rank1 = std::move(*r);
  });
  auto rank0 = Rank::Connect(RankOpts(**root, 0, 2));
  t.join();
  ASSERT_TRUE(rank0.ok() && rank1 != nullptr);
  EXPECT_TRUE((*rank0)->PollAbort().ok());
  ASSERT_TRUE(rank1->Abort("rank 1 -> rank 0 channel 0: completion IBV_WC_RETRY_EXC_ERR").ok());
  Status s;
  for (int i = 0; i < 2000 && s.ok(); ++i) {
    s = (*rank0)->PollAbort();
    if (s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_NE(s.message().find("rank 1 aborted: rank 1 -> rank 0 channel 0: completion "
                             "IBV_WC_RETRY_EXC_ERR"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ((*rank0)->PollAbort().code(), StatusCode::kAborted);
  // The next round says so too, at once.
  EXPECT_EQ((*rank0)->Barrier().code(), StatusCode::kAborted);
}

// After one rank aborts, every rank (the aborting one too) sends the root
// what it saw; the root hands them out by rank once all are in, or, when one
// never reports, those that did once the wait runs out.
TEST(BootstrapTest, ReportsAfterAnAbortReachTheRootFromEveryRank) {
  auto root = Root::Start(RootOpts(3));
  ASSERT_TRUE(root.ok());
  std::vector<std::unique_ptr<Rank>> ranks(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      auto rank = Rank::Connect(RankOpts(**root, r, 3));
      if (rank.ok()) ranks[static_cast<size_t>(r)] = std::move(*rank);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : ranks) ASSERT_NE(r, nullptr);
  EXPECT_TRUE((*root)->WaitReports(1, Picoseconds::FromMilliseconds(1)).empty());
  ASSERT_TRUE(ranks[2]->Abort("watchdog: no progress on rank 2").ok());
  ASSERT_TRUE(ranks[2]->Report("rank 2: waits for rank 1\n").ok());
  // The others learn of the abort, then report too; rank 1 twice (the
  // latest counts), rank 0 not yet.
  Status s;
  for (int i = 0; i < 2000 && s.ok(); ++i) {
    s = ranks[1]->PollAbort();
    if (s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  ASSERT_TRUE(ranks[1]->Report("stale").ok());
  ASSERT_TRUE(ranks[1]->Report("rank 1: waits for rank 0\n").ok());
  auto partial = (*root)->WaitReports(3, Picoseconds::FromMilliseconds(300));
  ASSERT_EQ(partial.size(), 2u);
  EXPECT_EQ(partial[0].rank(), 1);
  EXPECT_EQ(partial[0].text(), "rank 1: waits for rank 0\n");
  EXPECT_EQ(partial[1].rank(), 2);
  ASSERT_TRUE(ranks[0]->Report("rank 0: waits for rank 2\n", "fathom-trace ...").ok());
  auto all = (*root)->WaitReports(3, Picoseconds::FromSeconds(10));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].rank(), 0);
  EXPECT_EQ(all[0].text(), "rank 0: waits for rank 2\n");
  EXPECT_EQ(all[0].trace(), "fathom-trace ...");
  EXPECT_EQ(all[2].text(), "rank 2: waits for rank 1\n");
  EXPECT_EQ(all[2].trace(), "");
}

}  // namespace
}  // namespace fathom::transport::bootstrap
