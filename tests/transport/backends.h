// The backends of the transport API (transport.h) as test fixtures, so that
// one test body runs on each (gloo's idea): two ranks' devices, the clock the
// waits run on and the budget a wait gets. A backend that cannot run here
// (no RDMA device) opens with NOT_FOUND and its tests skip, saying why.
//
//  - "emulated": ranks 0 and 1 on the two hosts of a back-to-back topology,
//    the simulator's emulated RoCEv2 NIC, virtual time (always available).
//  - "verbs": two device contexts on one RDMA device (rxe in the testbed VMs,
//    or a NIC; FATHOM_VERBS_DEVICE=<name> picks it), QPs connected to each
//    other through the device's loopback, wall-clock time.
//
// Ownership: a Backend owns its devices; everything created from them must be
// destroyed before the Backend (transport.h's rule).
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "base/status.h"
#include "fabric/sim/network.h"
#include "topologies/builders.h"
#include "transport/emulated/emulated.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_device.h"
#include "transport/wait.h"

namespace fathom::transport::testing {

class Backend {
 public:
  virtual ~Backend() = default;
  // The device of rank 0 or 1.
  virtual Device& device(int rank) = 0;
  virtual Clock& clock() = 0;
  // How long a wait for a completion that must come may take: virtual time
  // on the emulated NIC, wall time (generous: TCG VMs are slow) on verbs.
  virtual Picoseconds wait_budget() const = 0;
  // How long to let time pass when checking that nothing happens.
  virtual Picoseconds quiet_period() const = 0;
  // Takes rank's port down or up, as a link fault would (an async event
  // source). False when the backend cannot (a real port is not the test's).
  virtual bool SetPortState(int rank, bool up) = 0;
};

class EmulatedBackend final : public Backend {
 public:
  static StatusOr<std::unique_ptr<Backend>> Open() {
    FATHOM_ASSIGN_OR_RETURN(topo::Topology topo, topo::BuildPreset("back-to-back:gpus=1"));
    auto b = std::unique_ptr<EmulatedBackend>(new EmulatedBackend(std::move(topo)));
    for (int r = 0; r < 2; ++r) {
      FATHOM_ASSIGN_OR_RETURN(b->devices_[r], b->fabric_.OpenDevice(r));
    }
    return std::unique_ptr<Backend>(std::move(b));
  }
  Device& device(int rank) override { return *devices_[rank]; }
  Clock& clock() override { return fabric_.clock(); }
  Picoseconds wait_budget() const override { return Picoseconds::FromMilliseconds(100); }
  Picoseconds quiet_period() const override { return Picoseconds::FromMilliseconds(1); }
  bool SetPortState(int rank, bool up) override {
    net_.nic(fabric_.HostOf(rank)).SetPortState(up);
    return true;
  }

 private:
  explicit EmulatedBackend(topo::Topology topo)
      : topo_(std::move(topo)),
        engine_(1),
        net_(&engine_, &topo_, sim::NetworkConfig{}),
        fabric_(&net_, emulated::EmulatedOptions{}) {}

  topo::Topology topo_;
  sim::Engine engine_;
  sim::Network net_;
  emulated::EmulatedFabric fabric_;
  std::unique_ptr<Device> devices_[2];
};

class VerbsBackend final : public Backend {
 public:
  // NOT_FOUND (the test skips) when the machine has no RDMA device.
  static StatusOr<std::unique_ptr<Backend>> Open() {
    auto b = std::unique_ptr<VerbsBackend>(new VerbsBackend());
    for (int r = 0; r < 2; ++r) {
      verbs::DeviceOptions o;
      if (const char* name = std::getenv("FATHOM_VERBS_DEVICE")) o.name = name;
      o.rank = r;
      FATHOM_ASSIGN_OR_RETURN(b->devices_[r], verbs::OpenDevice(o));
    }
    return std::unique_ptr<Backend>(std::move(b));
  }
  Device& device(int rank) override { return *devices_[rank]; }
  Clock& clock() override { return clock_; }
  Picoseconds wait_budget() const override { return Picoseconds::FromSeconds(20); }
  Picoseconds quiet_period() const override { return Picoseconds::FromMilliseconds(50); }
  bool SetPortState(int, bool) override { return false; }

 private:
  VerbsBackend() = default;
  WallClock clock_;
  std::unique_ptr<Device> devices_[2];
};

// The backend named `name` ("emulated" or "verbs").
inline StatusOr<std::unique_ptr<Backend>> OpenBackend(const std::string& name) {
  if (name == "emulated") return EmulatedBackend::Open();
  if (name == "verbs") return VerbsBackend::Open();
  return InvalidArgument("OpenBackend: unknown backend \"" + name + "\"");
}

}  // namespace fathom::transport::testing
