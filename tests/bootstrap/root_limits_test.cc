// The root under strangers that cost it resources (issue 24): floods of
// connections claiming large bodies, idle connections, a registered rank's
// half-sent frame, and accept() failing for lack of file descriptors. The
// root must hold only what arrived, within its limits, give it back when the
// strangers go, and keep serving the real ranks.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "tests/bootstrap/test_options.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/framing.h"

namespace fathom::transport::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

using test_util::RankOpts;
using test_util::RootOpts;

// A blocking client socket to 127.0.0.1:port, or -1.
int RawConnect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the root closes the connection (or `wait` passes); returns the
// Error's reason, or what went wrong in parentheses.
std::string ReadUntilClosed(int fd, std::chrono::seconds wait) {
  std::string got;
  const auto deadline = Clock::now() + wait;
  char buf[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return "(still open)";
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  if (got.size() < kFrameHeaderBytes) return "(closed without a reply)";
  auto len = DecodeFrameHeader(std::span<const uint8_t, kFrameHeaderBytes>(
                                   reinterpret_cast<const uint8_t*>(got.data()), kFrameHeaderBytes),
                               1u << 20);
  if (!len.ok() || got.size() < kFrameHeaderBytes + *len) return "(bad reply)";
  auto env = ParseFrameBody(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(got.data()) + kFrameHeaderBytes, *len));
  if (!env.ok() || !env->has_error()) return "(not an Error)";
  return env->error().reason();
}

std::string Header(uint32_t length) {
  std::string h = "FTHB";
  for (int shift = 24; shift >= 0; shift -= 8)
    h.push_back(static_cast<char>((length >> shift) & 0xff));
  return h;
}

std::string HelloFrame(int rank, int world) {
  proto::Envelope e;
  e.mutable_hello()->set_version(kProtocolVersion);
  e.mutable_hello()->set_rank(rank);
  e.mutable_hello()->set_world_size(world);
  return EncodeFrame(e);
}

// Polls `done` every 10 ms for up to `wait` (a generous bound, not a timing).
bool Eventually(const std::function<bool()>& done,
                std::chrono::seconds wait = std::chrono::seconds(20)) {
  const auto deadline = Clock::now() + wait;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// Resident set of this process (root and clients alike), from /proc.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// Both ranks register and finish a barrier; the error of either, else OK.
Status TwoRanksBarrier(const Root& root) {
  Status s1;
  std::thread t([&] {
    auto rank1 = Rank::Connect(RankOpts(root, 1, 2));
    s1 = rank1.ok() ? (*rank1)->Barrier() : rank1.status();
  });
  auto rank0 = Rank::Connect(RankOpts(root, 0, 2));
  const Status s0 = rank0.ok() ? (*rank0)->Barrier() : rank0.status();
  t.join();
  return s0.ok() ? s1 : s0;
}

// Issue 24: 500 strangers each sending an 8-byte header that claims 1 MiB
// took the root from 9 MB to 524 MB (the body was allocated, and zeroed, on
// the header's word). Now a body is bounded by max_hello_bytes before a Hello
// and grows only with the bytes that arrive.
TEST(RootLimitsTest, StrangersClaimingLargeBodiesCostNothingAndRanksAreServed) {
  RootOptions ro = RootOpts(2);
  ro.max_unauthenticated = 16;
  ro.hello_timeout = Picoseconds::FromSeconds(120);  // not what bounds them
  auto root = Root::Start(ro);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  const size_t rss_before = ResidentBytes();

  constexpr int kStrangers = 300;
  const std::string claim = Header(kDefaultMaxMessageBytes) + std::string(1000, 'x');
  std::vector<int> fds;
  for (int i = 0; i < kStrangers; ++i) {
    const int fd = RawConnect((*root)->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    SendAll(fd, claim);  // may fail once the root has closed it: that is fine
    fds.push_back(fd);
  }
  ASSERT_TRUE(Eventually([&] { return (*root)->stats().accepted >= kStrangers; }))
      << "accepted " << (*root)->stats().accepted;
  // Each is refused on its header (before the fix: none was, each held 1 MiB).
  EXPECT_TRUE(Eventually([&] { return (*root)->stats().rejected >= kStrangers; }))
      << "rejected " << (*root)->stats().rejected;
  const RootStats during = (*root)->stats();
  EXPECT_LE(during.unauthenticated, ro.max_unauthenticated);
  EXPECT_LE(during.buffered_bytes,
            static_cast<uint64_t>(ro.max_unauthenticated) * ro.max_hello_bytes * 2);
  // Coarse: before the fix this was 300 MiB (1 MiB per stranger).
  const size_t rss_during = ResidentBytes();
  EXPECT_LT(rss_during, rss_before + (64u << 20))
      << "RSS " << rss_before / 1024 << " KiB -> " << rss_during / 1024 << " KiB";
  EXPECT_NE(ReadUntilClosed(fds.back(), std::chrono::seconds(20)).find("oversized message"),
            std::string::npos);

  // The real ranks are served while the strangers' sockets are still open.
  const Status s = TwoRanksBarrier(**root);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (int fd : fds) ::close(fd);
  EXPECT_TRUE((*root)->Wait(Picoseconds::FromSeconds(20)).ok());
  EXPECT_TRUE(Eventually([&] { return (*root)->stats().open == 0; }))
      << "open " << (*root)->stats().open;
  EXPECT_EQ((*root)->stats().buffered_bytes, 0u);
}

// Idle strangers beyond max_unauthenticated evict the oldest, each told why.
TEST(RootLimitsTest, IdleStrangersBeyondTheCapEvictTheOldest) {
  RootOptions ro = RootOpts(2);
  ro.max_unauthenticated = 4;
  auto root = Root::Start(ro);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  std::vector<int> fds;
  for (int i = 0; i < 10; ++i) {
    const int fd = RawConnect((*root)->port());
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    // One at a time, so that "oldest" is the order of this loop.
    ASSERT_TRUE(
        Eventually([&] { return (*root)->stats().accepted >= static_cast<uint64_t>(i + 1); }));
  }
  const RootStats st = (*root)->stats();
  EXPECT_EQ(st.evicted, 6u);
  EXPECT_EQ(st.unauthenticated, 4);
  for (int i = 0; i < 6; ++i) {
    EXPECT_NE(ReadUntilClosed(fds[static_cast<size_t>(i)], std::chrono::seconds(20))
                  .find("too many connections without a Hello (limit 4)"),
              std::string::npos)
        << "stranger " << i;
  }
  // The real ranks still get in (each evicting an idle stranger).
  const Status s = TwoRanksBarrier(**root);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (int fd : fds) ::close(fd);
}

// The cap is raised to world_size: ranks that connect all at once, before
// any of them says Hello, do not evict each other.
TEST(RootLimitsTest, TheCapNeverEvictsRanksConnectingTogether) {
  constexpr int kWorld = 8;
  RootOptions ro = RootOpts(kWorld);
  ro.max_unauthenticated = 2;
  auto root = Root::Start(ro);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  // Every rank's connection is open before the first Hello is sent.
  std::vector<int> fds;
  for (int r = 0; r < kWorld; ++r) {
    fds.push_back(RawConnect((*root)->port()));
    ASSERT_GE(fds.back(), 0);
  }
  ASSERT_TRUE(Eventually([&] { return (*root)->stats().accepted >= kWorld; }));
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(SendAll(fds[static_cast<size_t>(r)], HelloFrame(r, kWorld)));
  EXPECT_TRUE(Eventually([&] { return (*root)->registered() == kWorld; }))
      << "registered " << (*root)->registered();
  EXPECT_EQ((*root)->stats().evicted, 0u);
  for (int fd : fds) ::close(fd);
}

// A stranger that sends part of a frame and then nothing is closed at the
// Hello deadline, and what it held is released.
TEST(RootLimitsTest, HelloDeadlineClosesIdleStrangersAndReleasesTheirBuffers) {
  RootOptions ro = RootOpts(2);
  ro.hello_timeout = Picoseconds::FromMilliseconds(200);
  auto root = Root::Start(ro);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  std::vector<int> fds;
  for (int i = 0; i < 5; ++i) {
    const int fd = RawConnect((*root)->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, Header(1000) + std::string(10, 'x')));
    fds.push_back(fd);
  }
  for (int fd : fds) {
    EXPECT_NE(ReadUntilClosed(fd, std::chrono::seconds(20)).find("no Hello within"),
              std::string::npos);
    ::close(fd);
  }
  EXPECT_TRUE(Eventually([&] {
    const RootStats st = (*root)->stats();
    return st.open == 0 && st.unauthenticated == 0 && st.buffered_bytes == 0;
  }));
  EXPECT_EQ((*root)->stats().accepted, 5u);
}

// A registered rank may send max_message_bytes, but the root holds only what
// arrived of it (plus one read chunk), not the length it claims.
TEST(RootLimitsTest, ARanksHalfSentFrameHoldsOnlyWhatArrived) {
  auto root = Root::Start(RootOpts(2));
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  const int fd = RawConnect((*root)->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, HelloFrame(1, 2)));
  ASSERT_TRUE(Eventually([&] { return (*root)->registered() == 1; }));
  ASSERT_TRUE(SendAll(fd, Header(kDefaultMaxMessageBytes) + std::string(100, 'x')));
  ASSERT_TRUE(Eventually([&] { return (*root)->stats().buffered_bytes > 0; }));
  EXPECT_LE((*root)->stats().buffered_bytes, 128u * 1024) << "claimed " << kDefaultMaxMessageBytes;
  ::close(fd);  // rank 1 vanishes: the run aborts, and the buffer goes
  EXPECT_EQ((*root)->Wait(Picoseconds::FromSeconds(20)).code(), StatusCode::kAborted);
  EXPECT_TRUE(Eventually([&] { return (*root)->stats().buffered_bytes == 0; }));
}

// Runs `body` in a forked child (so that its rlimit stays there); the
// child's exit code is the number of failed checks, each printed.
int InChild(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

#define CHILD_CHECK(cond, ...)                                  \
  do {                                                          \
    if (!(cond)) {                                              \
      std::fprintf(stderr, "child: check failed: %s: ", #cond); \
      std::fprintf(stderr, __VA_ARGS__);                        \
      std::fprintf(stderr, "\n");                               \
      ++failures;                                               \
    }                                                           \
  } while (0)

// Issue 24: with no file descriptor left, accept() failed at once, forever,
// and the handler re-armed it at once: a busy loop. Now it backs off.
TEST(RootLimitsTest, OutOfDescriptorsBacksOffAndServesTheConnectedRanks) {
  const int code = InChild([] {
    int failures = 0;
    RootOptions ro = RootOpts(2);
    ro.accept_backoff = Picoseconds::FromMilliseconds(50);
    auto root = Root::Start(ro);
    if (!root.ok()) return 1;
    auto rank0 = Rank::Connect(RankOpts(**root, 0, 2));
    auto rank1 = Rank::Connect(RankOpts(**root, 1, 2));
    if (!rank0.ok() || !rank1.ok()) return 2;
    // A client socket made now, connected once no descriptor is left.
    const int client = ::socket(AF_INET, SOCK_STREAM, 0);
    if (client < 0) return 3;
    // Rank 1's side of two barriers: one now, one once descriptors are gone.
    // The first, and the thread, run every type the second meets (see below).
    Status s1_first, s1;
    std::atomic<bool> go{false};
    std::thread t([&] {
      s1_first = (*rank1)->Barrier();
      while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      s1 = (*rank1)->Barrier();
    });
    const Status s0_first = (*rank0)->Barrier();
    (void)(*root)->stats();
    // The lowest free descriptor is the limit: nothing more can be opened.
    const int probe = ::dup(0);
    rlimit old{};
    ::getrlimit(RLIMIT_NOFILE, &old);
    rlimit low = old;
    low.rlim_cur = static_cast<rlim_t>(probe);
    ::close(probe);
    // Logged once with descriptors to spare, like the first barrier and the
    // thread above: the asan preset's UBSan checks each dynamic type the
    // first time it sees it, probing memory through a pipe(2), which fails
    // with no descriptor left (a false report). With none left, only
    // checked types are met.
    FATHOM_LOG(kWarn, "child: RLIMIT_NOFILE " + std::to_string(old.rlim_cur) + " -> " +
                          std::to_string(probe));
    if (::setrlimit(RLIMIT_NOFILE, &low) != 0) ::_exit(4);  // t is still waiting
    CHILD_CHECK(::dup(0) < 0, "a descriptor could still be opened");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons((*root)->port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHILD_CHECK(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0,
                "connect: the kernel queues it without the root's accept");
    rusage before{};
    ::getrusage(RUSAGE_SELF, &before);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // The connected ranks are served meanwhile.
    go.store(true);
    const Status s0 = (*rank0)->Barrier();
    t.join();
    CHILD_CHECK(s0_first.ok() && s1_first.ok(), "first barrier: %s / %s",
                s0_first.ToString().c_str(), s1_first.ToString().c_str());
    CHILD_CHECK(s0.ok() && s1.ok(), "barrier: %s / %s", s0.ToString().c_str(),
                s1.ToString().c_str());
    rusage after{};
    ::getrusage(RUSAGE_SELF, &after);
    const RootStats st = (*root)->stats();
    // ~10 at one try per 50 ms; a spinning handler makes hundreds of
    // thousands in the same half second.
    CHILD_CHECK(st.accept_errors >= 1 && st.accept_errors <= 200, "accept_errors %llu",
                static_cast<unsigned long long>(st.accept_errors));
    const double cpu_s = static_cast<double>(after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
                         static_cast<double>(after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
                         (after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1e6 +
                         (after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1e6;
    std::fprintf(stderr, "child: %llu failed accepts, %.3f s CPU in the half second\n",
                 static_cast<unsigned long long>(st.accept_errors), cpu_s);
    // Descriptors back: the queued connection is accepted.
    ::setrlimit(RLIMIT_NOFILE, &old);
    CHILD_CHECK(Eventually([&] { return (*root)->stats().accepted >= 3; }), "accepted %llu",
                static_cast<unsigned long long>((*root)->stats().accepted));
    ::close(client);
    rank0->reset();
    rank1->reset();
    CHILD_CHECK((*root)->Wait(Picoseconds::FromSeconds(20)).ok(), "root did not finish");
    return failures;
  });
  EXPECT_EQ(code, 0) << "see the child's lines above";
}

}  // namespace
}  // namespace fathom::transport::bootstrap
