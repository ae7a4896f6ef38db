// The host switch without VMs: real UDP sockets on 127.0.0.1 stand in for
// qemu's socket netdevs. Covers learning, flooding, counters, impairments and
// capture. Every check waits on counters or on received frames, never on time.
#include "testbed/host_switch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <thread>

#include "fabric/wire/pcap.h"
#include "tests/scratch_dir.h"

namespace fathom::testbed {
namespace {

// A "VM": a UDP socket bound on 127.0.0.1 whose frames go to one switch port.
class Host {
 public:
  explicit Host(uint8_t id) : id_(id) {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    timeval tv{10, 0};  // a safety net against a hung test, not a measurement
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Host() { close(fd_); }
  uint16_t port() const { return port_; }
  void Connect(uint16_t switch_port) { switch_port_ = switch_port; }

  std::array<uint8_t, 6> Mac() const { return {0x52, 0x54, 0x00, 0x00, 0x00, id_}; }

  // Sends a frame of `size` bytes to `dst` whose first payload byte is `tag`.
  void Send(const std::array<uint8_t, 6>& dst, size_t size, uint8_t tag) {
    std::vector<uint8_t> f(size, 0);
    std::copy(dst.begin(), dst.end(), f.begin());
    const auto src = Mac();
    std::copy(src.begin(), src.end(), f.begin() + 6);
    f[12] = 0x88;
    f[13] = 0xb5;  // local experimental EtherType
    f[14] = tag;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(switch_port_);
    ASSERT_EQ(sendto(fd_, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a)),
              static_cast<ssize_t>(f.size()));
  }
  // The tag of the next frame received (-1 on the safety-net timeout).
  int ReceiveTag() {
    uint8_t buf[10000];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n >= 15 ? buf[14] : -1;
  }

 private:
  uint8_t id_;
  int fd_ = -1;
  uint16_t port_ = 0;
  uint16_t switch_port_ = 0;
};

constexpr std::array<uint8_t, 6> kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
constexpr std::array<uint8_t, 6> kIpv6AllNodes = {0x33, 0x33, 0x00, 0x00, 0x00, 0x01};

class SwitchTest : public ::testing::Test {
 protected:
  void Build(int n, std::vector<PortImpairments> imps = {}) {
    for (int i = 0; i < n; ++i) hosts_.push_back(std::make_unique<Host>(i + 1));
    for (int i = 0; i < n; ++i) {
      auto port = UdpPort::Open(sw_.io(), "vm" + std::to_string(i), 0, hosts_[i]->port());
      ASSERT_TRUE(port.ok()) << port.status().ToString();
      hosts_[i]->Connect((*port)->LocalPort());
      sw_.AddPort(std::move(port).value(),
                  i < static_cast<int>(imps.size()) ? imps[i] : PortImpairments{});
    }
  }
  // Waits until port `p` has received `frames` (bounded by a safety net).
  void AwaitRx(int p, uint64_t frames) {
    for (int i = 0; i < 10000 && sw_.Counters(p).rx_frames < frames; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(sw_.Counters(p).rx_frames, frames);
  }
  Switch sw_;
  std::vector<std::unique_ptr<Host>> hosts_;
};

// The sockets of the switch's ports are closed on exec: qemu and the shells
// the testbed starts must not inherit (and so keep bound) the switch's ports.
TEST(UdpPortTest, SocketIsClosedOnExec) {
  auto sockets = [] {
    std::set<int> fds;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const auto target = std::filesystem::read_symlink(e.path(), ec);
      if (!ec && target.string().rfind("socket:", 0) == 0) {
        fds.insert(std::stoi(e.path().filename().string()));
      }
    }
    return fds;
  };
  const std::set<int> before = sockets();
  boost::asio::io_context io;
  auto port = UdpPort::Open(io, "p0");
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  int opened = 0;
  for (int fd : sockets()) {
    if (before.count(fd) != 0) continue;
    ++opened;
    const int flags = fcntl(fd, F_GETFD);
    ASSERT_GE(flags, 0);
    EXPECT_NE(flags & FD_CLOEXEC, 0) << "socket fd " << fd;
  }
  EXPECT_EQ(opened, 1);
}

TEST_F(SwitchTest, FloodsBroadcastAndMulticastToAllOtherPorts) {
  Build(3);
  sw_.Start();
  hosts_[0]->Send(kBroadcast, 60, 1);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 1);
  EXPECT_EQ(hosts_[2]->ReceiveTag(), 1);
  hosts_[1]->Send(kIpv6AllNodes, 90, 2);  // IPv6 ND goes to 33:33:xx
  EXPECT_EQ(hosts_[0]->ReceiveTag(), 2);
  EXPECT_EQ(hosts_[2]->ReceiveTag(), 2);
  ASSERT_TRUE(sw_.Stop().ok());
  EXPECT_EQ(sw_.Counters(0).rx_frames, 1u);
  EXPECT_EQ(sw_.Counters(0).tx_frames, 1u);
  EXPECT_EQ(sw_.Counters(2).tx_frames, 2u);
  EXPECT_EQ(sw_.Counters(2).tx_bytes, 150u);
  EXPECT_EQ(sw_.Counters(1).rx_bytes, 90u);
}

TEST_F(SwitchTest, LearnsSourceMacsAndForwardsUnicastToOnePort) {
  Build(3);
  sw_.Start();
  // Unknown unicast floods; it also teaches the switch where host 0 lives.
  hosts_[0]->Send(hosts_[1]->Mac(), 60, 1);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 1);
  EXPECT_EQ(hosts_[2]->ReceiveTag(), 1);
  // Known destination: only host 0 gets it. Host 2's next frame must be the
  // broadcast that follows, proving the unicast never reached it.
  hosts_[1]->Send(hosts_[0]->Mac(), 60, 2);
  EXPECT_EQ(hosts_[0]->ReceiveTag(), 2);
  hosts_[1]->Send(kBroadcast, 60, 3);
  EXPECT_EQ(hosts_[2]->ReceiveTag(), 3);
  EXPECT_EQ(hosts_[0]->ReceiveTag(), 3);
  // Host 1 is now learned as well: unicast 0 -> 1 skips host 2.
  hosts_[0]->Send(hosts_[1]->Mac(), 60, 4);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 4);
  hosts_[0]->Send(kBroadcast, 60, 5);
  EXPECT_EQ(hosts_[2]->ReceiveTag(), 5);
  ASSERT_TRUE(sw_.Stop().ok());
  EXPECT_EQ(sw_.Counters(2).tx_frames, 3u);
  EXPECT_EQ(sw_.Counters(2).TotalDrops(), 0u);
}

TEST_F(SwitchTest, MaxFrameSizeDropsLongFramesOnEgressAndNamesTheReason) {
  PortImpairments mtu;
  mtu.max_frame_bytes = 1000;
  Build(2, {PortImpairments{}, mtu});
  sw_.Start();
  hosts_[0]->Send(kBroadcast, 1082, 1);  // an MTU 1024 RoCE frame (TESTBED.md)
  hosts_[0]->Send(kBroadcast, 1000, 2);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 2);
  ASSERT_TRUE(sw_.Stop().ok());
  const PortCounters c = sw_.Counters(1);
  EXPECT_EQ(c.drops[static_cast<int>(DropReason::kOverMtu)], 1u);
  EXPECT_EQ(c.tx_frames, 1u);
  EXPECT_NE(sw_.CountersText().find("vm1 "), std::string::npos);
  EXPECT_NE(sw_.CountersText().find("drop[over_mtu]=1"), std::string::npos);
  EXPECT_NE(sw_.CountersJson().find("\"vm1\":{\"rx_frames\":0"), std::string::npos);
}

TEST_F(SwitchTest, SizeFilterDropsOnlyFramesInItsRange) {
  PortImpairments filter;
  filter.filter_min_bytes = 100;
  filter.filter_max_bytes = 200;
  Build(2, {PortImpairments{}, filter});
  sw_.Start();
  hosts_[0]->Send(kBroadcast, 100, 1);
  hosts_[0]->Send(kBroadcast, 200, 2);
  hosts_[0]->Send(kBroadcast, 99, 3);
  hosts_[0]->Send(kBroadcast, 201, 4);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 3);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 4);
  ASSERT_TRUE(sw_.Stop().ok());
  EXPECT_EQ(sw_.Counters(1).drops[static_cast<int>(DropReason::kSizeFilter)], 2u);
}

TEST_F(SwitchTest, HookDropsWhatItSelects) {
  Build(2);
  ASSERT_TRUE(sw_.SetHook(1, [](std::span<const uint8_t> f) { return f[14] % 2 == 0; }).ok());
  sw_.Start();
  for (uint8_t t = 1; t <= 6; ++t) hosts_[0]->Send(kBroadcast, 64, t);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 1);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 3);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 5);
  AwaitRx(0, 6);  // frame 6 is dropped: nothing to receive, so wait for the switch
  ASSERT_TRUE(sw_.Stop().ok());
  EXPECT_EQ(sw_.Counters(1).drops[static_cast<int>(DropReason::kHook)], 3u);
  EXPECT_FALSE(sw_.SetHook(5, nullptr).ok());
}

// Returns the number of frames dropped at random out of `n` with `seed`.
uint64_t RandomDrops(uint64_t seed, int n, std::vector<int>* delivered) {
  PortImpairments lossy;
  lossy.drop_probability = 0.3;
  lossy.seed = seed;
  Switch sw;
  Host a(1), b(2);
  auto pa = UdpPort::Open(sw.io(), "a", 0, a.port());
  auto pb = UdpPort::Open(sw.io(), "b", 0, b.port());
  a.Connect((*pa)->LocalPort());
  sw.AddPort(std::move(pa).value());
  sw.AddPort(std::move(pb).value(), lossy);
  sw.Start();
  for (int i = 0; i < n; ++i) {
    a.Send(kBroadcast, 64, static_cast<uint8_t>(i));
    // One at a time: loopback never loses a frame the switch forwarded.
    for (int k = 0; k < 10000 && sw.Counters(0).rx_frames < static_cast<uint64_t>(i + 1); ++k) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  EXPECT_TRUE(sw.Stop().ok());
  const PortCounters c = sw.Counters(1);
  for (uint64_t i = 0; i < c.tx_frames; ++i) delivered->push_back(b.ReceiveTag());
  EXPECT_EQ(c.tx_frames + c.drops[static_cast<int>(DropReason::kRandom)], static_cast<uint64_t>(n));
  return c.drops[static_cast<int>(DropReason::kRandom)];
}

TEST(SwitchRandomDrop, SeededDropsAreReproducibleAndNearTheProbability) {
  std::vector<int> first, second, other;
  const uint64_t d1 = RandomDrops(7, 200, &first);
  const uint64_t d2 = RandomDrops(7, 200, &second);
  const uint64_t d3 = RandomDrops(8, 200, &other);
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(first, second);  // the same frames survive
  EXPECT_NE(first, other);
  EXPECT_GT(d1, 30u);  // 0.3 * 200 = 60 expected
  EXPECT_LT(d1, 90u);
  EXPECT_GT(d3, 30u);
}

TEST_F(SwitchTest, CapturesEveryReceivedFrameToPcap) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.File("switch-capture.pcap");
  PortImpairments mtu;
  mtu.max_frame_bytes = 100;
  Build(2, {PortImpairments{}, mtu});
  ASSERT_TRUE(sw_.EnableCapture(path).ok());
  sw_.Start();
  hosts_[0]->Send(kBroadcast, 60, 1);
  hosts_[0]->Send(kBroadcast, 1500, 2);  // dropped on egress, still captured on ingress
  hosts_[0]->Send(kBroadcast, 70, 3);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 1);
  EXPECT_EQ(hosts_[1]->ReceiveTag(), 3);
  ASSERT_TRUE(sw_.Stop().ok());
  auto reader = wire::PcapReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<size_t> sizes;
  wire::PcapRecord rec;
  for (;;) {
    auto more = (*reader)->Next(&rec);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
    sizes.push_back(rec.data.size());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{60, 1500, 70}));
}

// Measures (prints, never asserts) how many frames per second the switch
// forwards between two ports, with a window of frames in flight.
TEST_F(SwitchTest, ForwardingRateIsReported) {
  Build(2);
  sw_.Start();
  hosts_[1]->Send(kBroadcast, 64, 0);  // learn host 1
  EXPECT_EQ(hosts_[0]->ReceiveTag(), 0);
  constexpr int kFrames = 20000;
  constexpr int kWindow = 64;
  const auto start = std::chrono::steady_clock::now();
  int received = 0;
  for (int sent = 0; sent < kFrames; ++sent) {
    hosts_[0]->Send(hosts_[1]->Mac(), 1082, 1);
    if (sent - received >= kWindow) {
      ASSERT_EQ(hosts_[1]->ReceiveTag(), 1);
      ++received;
    }
  }
  while (received < kFrames) {
    ASSERT_EQ(hosts_[1]->ReceiveTag(), 1);
    ++received;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("switch forwarding: %d frames of 1082 bytes in %.3f s = %.0f frames/s\n", kFrames, s,
              kFrames / s);
  ASSERT_TRUE(sw_.Stop().ok());
  EXPECT_EQ(sw_.Counters(1).tx_frames, static_cast<uint64_t>(kFrames));
}

}  // namespace
}  // namespace fathom::testbed
