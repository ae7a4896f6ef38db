// Endpoint: where real frames enter and leave the emulated fabric — one per
// host port of the scenario. The one small interface every attachment
// implements (DESIGN.md "Wave 2"): a TAP device the emulator creates (the
// test moves it into a network namespace), an AF_PACKET raw socket on an
// existing interface (a veth end), the testbed's qemu UDP socket netdev, and
// a DPDK port (endpoint_dpdk.cc, when built with libdpdk).
//
// Spec strings (`fathom emulate --endpoint HOST=SPEC`):
//   tap:IFNAME              create TAP device IFNAME (gone when the emulator exits)
//   raw:IFNAME              AF_PACKET socket bound to existing interface IFNAME
//   udp:LISTEN:PEER         127.0.0.1:LISTEN receives what a qemu `-netdev socket,udp=
//                           127.0.0.1:LISTEN,localaddr=127.0.0.1:PEER` sends; frames go to PEER
//   dpdk:VDEV               a DPDK virtual device, e.g. net_tap0,iface=dtap0 or
//                           net_af_packet0,iface=veth0 (EAL: --no-huge --no-pci)
//
// Threading: an Endpoint belongs to the emulator's loop thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "fabric/live/frame.h"

namespace fathom::live {

class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // The spec it was opened from ("tap:ftap0"), for messages and metrics.
  virtual const std::string& spec() const = 0;
  // Receives up to `max` frames (taking them from `pool`; stops early when
  // the pool is empty, leaving the rest queued where they are). Never blocks.
  virtual int Receive(FramePool& pool, Frame** out, int max) = 0;
  // Sends `n` frames; returns how many left (the caller still owns all of
  // them and releases them). Never blocks: a full queue drops.
  virtual int Transmit(Frame* const* frames, int n) = 0;
  // A descriptor that becomes readable when frames wait (poll), or -1 when
  // the endpoint must be polled (DPDK).
  virtual int fd() const { return -1; }
  // Frames lost before the emulator read them, as the device or kernel
  // counts them (a socket's receive queue overflowing: SO_RXQ_OVFL; a DPDK
  // port's imissed + rx_nombuf): the endpoint's "cannot keep up" drops. A
  // TAP device counts its own (ip -s link); 0 here.
  virtual uint64_t rx_overflows() const { return 0; }
};

// Options the DPDK endpoints share (one EAL per process).
struct DpdkOptions {
  int memory_mb = 1024;  // EAL -m: 256 cannot hold the mbuf pool (TESTBED.md)
  uint32_t mbufs = 8192;
};

// Opens the endpoint `spec` names. InvalidArgument for a malformed spec,
// Unavailable for a kind this build or machine lacks (DPDK), IoError naming
// the system call and errno when the device cannot be opened.
StatusOr<std::unique_ptr<Endpoint>> OpenEndpoint(const std::string& spec);

// The dpdk: kind of OpenEndpoint (`vdev` is the spec without "dpdk:"); the
// EAL must be running (StartDpdk).
StatusOr<std::unique_ptr<Endpoint>> OpenDpdkEndpoint(const std::string& spec,
                                                     const std::string& vdev);
// Whether this build has the DPDK path (pkg-config libdpdk at configure time).
bool DpdkBuilt();
// DPDK: starts the EAL with `vdevs` (each a dpdk: spec without the prefix)
// once, before any dpdk: endpoint opens; a no-op without DPDK endpoints.
Status StartDpdk(const std::vector<std::string>& vdevs, const DpdkOptions& options);
// DPDK: closes the ports and cleans the EAL up (TAP devices it made vanish).
void StopDpdk();

}  // namespace fathom::live
