// The DPDK endpoints: virtual devices (net_tap, net_af_packet, ...) under an
// EAL started without hugepages or PCI devices (--no-huge --no-pci
// --no-shconf: no shared config file is left behind), burst receive and
// transmit on one queue each, polled by the emulator's loop (the EAL's main
// lcore). Received mbufs are not copied: the frame points into the mbuf and
// gives it back to the mempool when the model is done with it. Transmit
// takes an mbuf from the same mempool per frame (a pool get, not an
// allocation) and copies the frame in, since a flood sends one frame to
// several ports. Facts: TESTBED.md "Wave-2 components" (-m 1024, 8192
// mbufs); rte_ethdev.h and rte_mbuf.h of DPDK 22.11.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstring>

#include "fabric/live/endpoint.h"

namespace fathom::live {
namespace {

struct Eal {
  bool started = false;
  rte_mempool* pool = nullptr;
  std::vector<uint16_t> ports;  // started ports, closed by StopDpdk
};
Eal& TheEal() {
  static Eal eal;
  return eal;
}

constexpr uint16_t kRing = 1024;  // descriptors per queue

void FreeMbuf(void* m) { rte_pktmbuf_free(static_cast<rte_mbuf*>(m)); }

class DpdkEndpoint : public Endpoint {
 public:
  DpdkEndpoint(std::string spec, uint16_t port) : spec_(std::move(spec)), port_(port) {}
  const std::string& spec() const override { return spec_; }
  int Receive(FramePool& pool, Frame** out, int max) override {
    if (max > kBurst) max = kBurst;
    // Never take more from the device than the frame pool can hold.
    const size_t room = pool.capacity() - pool.in_use();
    if (static_cast<size_t>(max) > room) max = static_cast<int>(room);
    if (max == 0) return 0;
    rte_mbuf* bufs[kBurst];
    const uint16_t got = rte_eth_rx_burst(port_, 0, bufs, static_cast<uint16_t>(max));
    int n = 0;
    for (uint16_t i = 0; i < got; ++i) {
      rte_mbuf* m = bufs[i];
      Frame* f = pool.Alloc();  // room was checked: never null
      if (m->nb_segs == 1) {
        f->data = rte_pktmbuf_mtod(m, uint8_t*);
        f->len = m->data_len;
        f->release = &FreeMbuf;
        f->handle = m;
      } else if (m->pkt_len <= FramePool::kFrameBytes) {
        // A chained (jumbo) frame: gathered into the frame's own buffer.
        const void* p = rte_pktmbuf_read(m, 0, m->pkt_len, f->data);
        if (p != f->data) std::memcpy(f->data, p, m->pkt_len);
        f->len = m->pkt_len;
        rte_pktmbuf_free(m);
      } else {
        rte_pktmbuf_free(m);
        pool.Unref(f);
        continue;
      }
      out[n++] = f;
    }
    return n;
  }
  uint64_t rx_overflows() const override {
    rte_eth_stats st{};
    if (rte_eth_stats_get(port_, &st) != 0) return 0;
    return st.imissed + st.rx_nombuf;
  }
  int Transmit(Frame* const* frames, int n) override {
    rte_mbuf* bufs[kBurst];
    int sent = 0;
    for (int at = 0; at < n; at += kBurst) {
      const int want = n - at < kBurst ? n - at : kBurst;
      uint16_t ready = 0;
      for (int i = 0; i < want; ++i) {
        const Frame& f = *frames[at + i];
        rte_mbuf* m = rte_pktmbuf_alloc(TheEal().pool);
        if (m == nullptr) break;
        char* dst = rte_pktmbuf_append(m, static_cast<uint16_t>(f.len));
        if (dst == nullptr) {  // longer than one mbuf's data room
          rte_pktmbuf_free(m);
          continue;
        }
        std::memcpy(dst, f.data, f.len);
        bufs[ready++] = m;
      }
      const uint16_t done = rte_eth_tx_burst(port_, 0, bufs, ready);
      for (uint16_t i = done; i < ready; ++i) rte_pktmbuf_free(bufs[i]);
      sent += done;
    }
    return sent;
  }

 private:
  static constexpr int kBurst = 32;
  std::string spec_;
  uint16_t port_;
};

}  // namespace

bool DpdkBuilt() { return true; }

Status StartDpdk(const std::vector<std::string>& vdevs, const DpdkOptions& options) {
  Eal& eal = TheEal();
  if (vdevs.empty() || eal.started) return Status::Ok();
  std::vector<std::string> args = {"fathom-emulate",
                                   "--no-huge",
                                   "--no-pci",
                                   "--no-shconf",
                                   "-m",
                                   std::to_string(options.memory_mb),
                                   "-l",
                                   "0",
                                   "--log-level=lib.eal:error",
                                   "--log-level=pmd.net.tap:error"};
  for (const std::string& v : vdevs) args.push_back("--vdev=" + v);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(args.size()), argv.data()) < 0) {
    return Unavailable("DPDK rte_eal_init(--no-huge --no-pci -m " +
                       std::to_string(options.memory_mb) + "): " + rte_strerror(rte_errno));
  }
  eal.started = true;
  eal.pool = rte_pktmbuf_pool_create("fathom_emulate", options.mbufs, 256, 0,
                                     RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  if (eal.pool == nullptr) {
    return Unavailable("DPDK rte_pktmbuf_pool_create(" + std::to_string(options.mbufs) +
                       " mbufs): " + rte_strerror(rte_errno) + " (raise --dpdk-memory-mb)");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Endpoint>> OpenDpdkEndpoint(const std::string& spec,
                                                     const std::string& vdev) {
  Eal& eal = TheEal();
  if (!eal.started) return FailedPrecondition("endpoint " + spec + ": the EAL is not running");
  const std::string name = vdev.substr(0, vdev.find(','));
  uint16_t port = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port) != 0) {
    return Unavailable("endpoint " + spec + ": DPDK device " + name +
                       " failed to start: the EAL did not create it (its probe failed: see the "
                       "EAL's messages above)");
  }
  auto fail = [&](const char* call, int rc) {
    return Unavailable("endpoint " + spec + ": DPDK device " + name + " failed to start: " + call +
                       ": " + rte_strerror(rc < 0 ? -rc : rc));
  };
  rte_eth_conf conf{};
  int rc = rte_eth_dev_configure(port, 1, 1, &conf);
  if (rc != 0) return fail("rte_eth_dev_configure", rc);
  const int socket = rte_eth_dev_socket_id(port);
  rc = rte_eth_rx_queue_setup(port, 0, kRing, static_cast<unsigned>(socket < 0 ? 0 : socket),
                              nullptr, eal.pool);
  if (rc != 0) return fail("rte_eth_rx_queue_setup", rc);
  rc = rte_eth_tx_queue_setup(port, 0, kRing, static_cast<unsigned>(socket < 0 ? 0 : socket),
                              nullptr);
  if (rc != 0) return fail("rte_eth_tx_queue_setup", rc);
  rc = rte_eth_dev_start(port);
  if (rc != 0) return fail("rte_eth_dev_start", rc);
  eal.ports.push_back(port);
  // Every frame on the segment, whatever its destination MAC: the port is
  // a switch port.
  rte_eth_promiscuous_enable(port);
  return std::unique_ptr<Endpoint>(new DpdkEndpoint(spec, port));
}

void StopDpdk() {
  Eal& eal = TheEal();
  if (!eal.started) return;
  for (uint16_t port : eal.ports) {
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
  }
  eal.ports.clear();
  if (eal.pool != nullptr) rte_mempool_free(eal.pool);
  eal.pool = nullptr;
  rte_eal_cleanup();
  eal.started = false;
}

}  // namespace fathom::live
