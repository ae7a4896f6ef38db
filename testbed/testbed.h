// The real soft-RoCE testbed: N (1..8) qemu VMs, each booting a stock Debian
// kernel over a read-only 9p share of the host root and bringing up a real
// rxe0, wired through the host-side Switch (or, for comparison, two VMs wired
// directly to each other). Commands run inside the VMs; their stdout, stderr,
// exit status and the files they write (in $FATHOM_OUT) come back through a
// per-VM writable 9p share in a per-testbed temporary directory.
//
// On a machine with a native RDMA device (/sys/class/infiniband non-empty) the
// testbed can instead run the commands on the host (Mode::kNative).
//
// Ownership: a Testbed owns its qemu processes (by pid), its switch and its
// temporary directory; Teardown (also run by the destructor) kills exactly
// those pids (SIGTERM, then SIGKILL) and removes the directory. Not
// thread-safe; create, use and destroy it on one thread (PR_SET_PDEATHSIG is
// tied to the thread that spawned qemu).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "testbed/host_switch.h"

namespace fathom::live {
class Emulator;
class ControlServer;
}  // namespace fathom::live

namespace fathom::testbed {

enum class Accel { kAuto, kTcg, kKvm };
enum class Mode { kAuto, kVm, kNative };
StatusOr<Accel> ParseAccel(const std::string& s);
std::string_view AccelName(Accel accel);

struct TestbedOptions {
  int num_vms = 2;
  // Ethernet MTU per VM (index = VM); missing entries use 9000. Staging
  // different MTUs on the two ends reproduces CASES.md cases 1-4.
  std::vector<int> mtus;
  // Egress impairments per switch port (index = VM); missing = none.
  std::vector<PortImpairments> impairments;
  Accel accel = Accel::kAuto;
  Mode mode = Mode::kVm;
  // Two VMs wired to each other, no host switch (throughput baseline).
  bool direct = false;
  // pcap of every frame the switch receives; empty = no capture.
  std::string capture_path;
  std::chrono::seconds boot_timeout{120};
  int memory_mib = 768;
  // Asset cache; built on first use by make_assets.sh. Empty = the build
  // tree's testbed-assets (or $FATHOM_TESTBED_ASSETS).
  std::string assets_dir;
  // Parent of the per-testbed temporary directory (the VMs' disks, shares
  // and logs; removed at teardown). Empty: $TMPDIR, else /tmp.
  std::string temp_root;
  // The live emulator instead of the host switch (issue 29): the scenario
  // whose modelled fabric carries the VMs' frames (fabric/live), VM i on
  // host rank i (the scenario must have num_vms hosts). Empty = the switch.
  // Everything the VMs send crosses it, the ranks' TCP bootstrap included.
  std::string fabric_scenario;
  double fabric_time_dilation = 1.0;  // wall seconds per model second
  // ADDRESS:PORT of the emulator's metrics and control HTTP endpoint (port
  // 0: a free one, see fabric_port()); `fathom emulate ctl --server` talks to it.
  std::string fabric_listen = "127.0.0.1:0";
  // With a fabric, the TCP MSS the VMs advertise to each other (route
  // advmss; 0 = the kernel's, 8960 at MTU 9000). The ranks' bootstrap is TCP
  // on the same eth0 as RoCE, so it crosses the fabric's faults too: with 900
  // its segments are frames of at most 954 bytes, under a 1000-byte MTU
  // fault that stages the RoCE hang (CASES.md case 4), so the watchdog's
  // reports still reach rank 0. A loss fault costs it retransmissions only.
  int fabric_tcp_mss = 900;
};

struct VmInfo {
  int index = 0;
  std::string mac;   // 52:54:00:fa:TT:NN (TT from the testbed's pid, NN = index)
  std::string ipv4;  // 192.0.2.(index+1)
  std::string ipv6;  // 2001:db8::(index+1)
  int mtu = 9000;
  pid_t pid = -1;                              // qemu's pid (-1 once torn down)
  std::chrono::milliseconds boot_to_ready{0};  // spawn to ready marker, host clock
  std::filesystem::path share;                 // host side of /run/fathom
};

struct CommandResult {
  int vm = 0;
  int exit_status = -1;    // the command's; 124 when its in-VM timeout fired
  bool timed_out = false;  // the timeout given to Launch expired
  std::string stdout_text;
  std::string stderr_text;
};

// One launched command, to Wait for.
struct CommandHandle {
  int vm = 0;
  int id = 0;
  std::chrono::seconds timeout{0};
  std::chrono::steady_clock::time_point started;
  pid_t native_pid = -1;  // Mode::kNative only
};

// Set from a SIGINT/SIGTERM handler (by the CLI): every wait in the testbed
// returns Aborted soon after, so the caller's teardown runs.
void RequestInterrupt();
bool InterruptRequested();

// Builds (or finds cached) VM assets in `dir` with testbed/make_assets.sh.
Status EnsureAssets(const std::string& dir);
std::string DefaultAssetsDir();
// True when /sys/class/infiniband lists a device.
bool HasNativeRdmaDevice();

class Testbed {
 public:
  // Boots all VMs in parallel and waits until each is ready (or its boot
  // timeout passes: then everything is torn down and the error names the VM).
  static StatusOr<std::unique_ptr<Testbed>> Start(TestbedOptions options);
  ~Testbed();
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  int size() const { return static_cast<int>(vms_.size()); }
  const VmInfo& vm(int i) const { return vms_[i]; }
  // "vm-tcg", "vm-kvm" or "native:<device>".
  std::string ModeDescription() const;
  Accel accel() const { return accel_; }
  // Null in direct and native mode, and with a fabric.
  Switch* host_switch() { return switch_.get(); }
  // The live emulator wiring the VMs (TestbedOptions::fabric_scenario), null
  // without one; its Control() answers metrics and run-time faults.
  live::Emulator* emulator() { return emulator_.get(); }
  // The emulator's HTTP port (0 without a fabric).
  uint16_t fabric_port() const { return fabric_port_; }
  const std::filesystem::path& work_dir() const { return work_dir_; }

  // Starts `script` (/bin/sh syntax) in VM `vm`, in $FATHOM_OUT, with the
  // testbed's variables (FATHOM_VM_ID, FATHOM_VM<i>_IP4/_IP6, ...) set. The
  // command is killed after `timeout`.
  StatusOr<CommandHandle> Launch(int vm, const std::string& script, std::chrono::seconds timeout);
  // Waits for a launched command. A command killed at its timeout is a
  // result (timed_out), not an error; errors are the testbed's own.
  StatusOr<CommandResult> Wait(const CommandHandle& handle);
  StatusOr<CommandResult> Run(int vm, const std::string& script, std::chrono::seconds timeout);
  // Copies what VM `vm` wrote to $FATHOM_OUT into `dest` (created).
  Status CollectFiles(int vm, const std::filesystem::path& dest) const;

  // Kills the VMs the testbed started, stops the switch (flushing the
  // capture) and removes the temporary directory. Idempotent.
  Status Teardown();

 private:
  Testbed() = default;
  Status Boot();
  Status WaitReady();
  // Opens the emulator's UDP endpoints (one per VM, toward `vm_ports`),
  // starts its loop and HTTP endpoint; returns the endpoints' ports.
  StatusOr<std::vector<uint16_t>> StartFabric(const std::vector<uint16_t>& vm_ports);
  Status StopFabric();
  Status ClampTcpMss();
  std::string ConfigText(int vm) const;

  TestbedOptions options_;
  Mode mode_ = Mode::kVm;
  Accel accel_ = Accel::kTcg;
  std::string native_device_;
  std::filesystem::path work_dir_;
  std::vector<VmInfo> vms_;
  std::unique_ptr<Switch> switch_;
  std::vector<uint16_t> switch_ports_;
  std::unique_ptr<live::Emulator> emulator_;
  std::unique_ptr<live::ControlServer> control_;
  std::unique_ptr<std::atomic<bool>> fabric_stop_;
  std::thread fabric_thread_;
  Status fabric_status_;
  uint16_t fabric_port_ = 0;
  std::vector<std::chrono::steady_clock::time_point> spawned_at_;
  int next_command_ = 1;
  bool torn_down_ = false;
};

}  // namespace fathom::testbed
