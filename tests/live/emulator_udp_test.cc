// The live emulator in process, through the testbed's UDP endpoints (what a
// qemu `-netdev socket,udp=...` VM sends: one Ethernet frame per datagram on
// 127.0.0.1): no root needed. The test plays both VMs: L2 learning and
// flooding, a loss fault's drops against the counts, an MTU fault added at
// run time (small frames pass, large ones do not, the metric names the
// link), and the metrics' names.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fabric/live/emulator.h"
#include "fabric/live/endpoint.h"
#include "fabric/scenario/scenario.h"

namespace fathom::live {
namespace {

const std::string kScenario = std::string(FATHOM_SOURCE_DIR) + "/scenarios/live/two_leaf.yaml";

double Metric(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

// One "VM": a UDP socket on 127.0.0.1:port that the emulator's endpoint
// udp:listen:port sends to, and that sends to listen.
struct Vm {
  int fd = -1;
  uint16_t port = 0;
  uint16_t emulator_port = 0;
  uint8_t mac[6];
  explicit Vm(uint8_t id) {
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    const uint8_t m[6] = {0x02, 0, 0, 0, 0, id};
    std::copy(m, m + 6, mac);
    timeval tv{0, 300000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Vm() { close(fd); }
  // An IPv4/UDP frame of `len` bytes to `dst` (broadcast when null).
  void Send(const uint8_t* dst, size_t len) {
    std::vector<uint8_t> f(len, 0);
    const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    std::copy(dst ? dst : bcast, (dst ? dst : bcast) + 6, f.begin());
    std::copy(mac, mac + 6, f.begin() + 6);
    f[12] = 0x08;  // IPv4
    f[14] = 0x45;
    const uint16_t ip_len = static_cast<uint16_t>(len - 14);
    f[16] = static_cast<uint8_t>(ip_len >> 8);
    f[17] = static_cast<uint8_t>(ip_len);
    f[23] = 17;    // UDP
    f[34] = 0x9c;  // source port 40000
    f[35] = 0x40;
    f[36] = 0x13;  // destination port 5000
    f[37] = 0x88;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(emulator_port);
    sendto(fd, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
  }
  // Frames of `len` bytes received until 300 ms of silence.
  int Count(size_t len) {
    int n = 0;
    uint8_t buf[10000];
    for (;;) {
      const ssize_t got = recv(fd, buf, sizeof(buf), 0);
      if (got < 0) return n;
      if (static_cast<size_t>(got) == len) ++n;
    }
  }
};

uint16_t FreePort() {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class EmulatorUdp : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = sim::LoadScenario(kScenario);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    std::vector<std::unique_ptr<Endpoint>> eps;
    for (Vm* vm : {&a_, &b_}) {
      vm->emulator_port = FreePort();
      auto ep =
          OpenEndpoint("udp:" + std::to_string(vm->emulator_port) + ":" + std::to_string(vm->port));
      ASSERT_TRUE(ep.ok()) << ep.status().ToString();
      eps.push_back(std::move(ep).value());
    }
    EmulatorOptions options;
    options.time_dilation = 10;  // 10 Gb/s links run at 1 Gb/s
    auto emu = Emulator::Create(loaded.value(), options, std::move(eps));
    ASSERT_TRUE(emu.ok()) << emu.status().ToString();
    emu_ = std::move(emu).value();
    loop_ = std::thread([this] { status_ = emu_->Run(stop_); });
  }
  void TearDown() override {
    stop_.store(true);
    if (loop_.joinable()) loop_.join();
    EXPECT_TRUE(status_.ok()) << status_.ToString();
  }
  ControlReply Ctl(const std::string& method, const std::string& target,
                   const std::string& body = "") {
    return emu_->Control({method, target, body}).get();
  }
  Vm a_{1}, b_{2};
  std::unique_ptr<Emulator> emu_;
  std::atomic<bool> stop_{false};
  std::thread loop_;
  Status status_;
};

TEST_F(EmulatorUdp, FloodLearnAndLossCounts) {
  // Unknown destination: flooded to h1, which answers, so both are learned.
  a_.Send(nullptr, 60);
  EXPECT_EQ(b_.Count(60), 1);
  b_.Send(a_.mac, 60);
  EXPECT_EQ(a_.Count(60), 1);
  constexpr int kSent = 300;
  // Counted while sent: the test's own socket buffer would overflow too.
  auto counted = std::async(std::launch::async, [this] { return b_.Count(600); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 0; i < kSent; ++i) {
    a_.Send(b_.mac, 600);
    // Paced: a burst would overflow the emulator's socket buffer before the
    // model sees it (the kernel's drop, not the fabric's).
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const int received = counted.get();
  const std::string m = Ctl("GET", "/metrics").body;
  const double dropped = Metric(m, "fathom_fault_frames_dropped_total{fault=\"loss#0\"");
  EXPECT_GT(dropped, 0) << m;
  EXPECT_EQ(received + static_cast<int>(dropped), kSent) << m;
  EXPECT_EQ(Metric(m, "fathom_emulator_flooded_frames_total"), 1);
  EXPECT_EQ(Metric(m, "fathom_endpoint_rx_frames_total{host=\"h0\""), kSent + 1);
}

// The MTU-mismatch fault on both spines' links toward leaf1, added at run
// time: frames that fit pass, larger ones vanish, and the metrics name the
// fault's discards; cleared, large frames pass again.
TEST_F(EmulatorUdp, MtuFaultAtRunTime) {
  a_.Send(nullptr, 60);
  b_.Send(a_.mac, 60);
  b_.Count(60);
  a_.Count(60);
  // The scenario's loss fault goes first (a scenario fault cleared at run
  // time), so that what vanishes is the MTU's doing.
  ControlReply r = Ctl("DELETE", "/faults/loss%230");
  ASSERT_EQ(r.status, 200) << r.body;
  r = Ctl("POST", "/faults", "{kind: mtu, link: leaf1-spine*, mtu_bytes: 1000}");
  ASSERT_EQ(r.status, 201) << r.body;
  for (int i = 0; i < 5; ++i) a_.Send(b_.mac, 900);
  for (int i = 0; i < 5; ++i) a_.Send(b_.mac, 1400);
  EXPECT_EQ(b_.Count(900), 5);
  const std::string m = Ctl("GET", "/metrics").body;
  EXPECT_EQ(Metric(m, "fathom_fault_xmit_discards_total{fault=\"mtu#1\""), 5) << m;
  // Changed at run time (PUT replaces it under its name): 1400-byte frames
  // fit a 1500-byte MTU, 1600-byte ones do not.
  r = Ctl("PUT", "/faults/mtu%231", "{kind: mtu, link: leaf1-spine*, mtu_bytes: 1500}");
  ASSERT_EQ(r.status, 200) << r.body;
  for (int i = 0; i < 3; ++i) a_.Send(b_.mac, 1400);
  for (int i = 0; i < 3; ++i) a_.Send(b_.mac, 1600);
  EXPECT_EQ(b_.Count(1400), 3);
  // The changed fault counts from its change.
  EXPECT_EQ(Metric(Ctl("GET", "/metrics").body, "fathom_fault_xmit_discards_total{fault=\"mtu#1\""),
            3);
  EXPECT_NE(Ctl("GET", "/faults").body.find("fault changed"), std::string::npos);
  r = Ctl("DELETE", "/faults/mtu%231");
  ASSERT_EQ(r.status, 200) << r.body;
  for (int i = 0; i < 5; ++i) a_.Send(b_.mac, 1400);
  EXPECT_EQ(b_.Count(1400), 5);
  EXPECT_NE(Ctl("GET", "/faults").body.find("fault cleared: mtu#1"), std::string::npos);
  EXPECT_EQ(Ctl("GET", "/nothing").status, 404);
}

}  // namespace
}  // namespace fathom::live
