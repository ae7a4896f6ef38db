#include "testbed/testbed.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "base/temp_dir.h"
#include "fabric/live/control_server.h"
#include "fabric/live/emulator.h"
#include "fabric/live/endpoint.h"
#include "fabric/scenario/scenario.h"
#include "testbed/process.h"

namespace fathom::testbed {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

namespace {

std::atomic<bool> g_interrupt{false};
constexpr int kMaxVms = 8;
constexpr int kDefaultMtu = 9000;
// Slack on top of a command's own timeout before the host gives up on a VM:
// the in-VM timeout kills the command first; under TCG reporting back via 9p
// can take a few seconds.
constexpr seconds kResultSlack{30};
constexpr milliseconds kPoll{50};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string Tail(const std::string& text, size_t bytes) {
  std::string t = text.size() > bytes ? text.substr(text.size() - bytes) : text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  for (char& c : t) {
    if (c == '\n' || c == '\r') c = '|';
  }
  return t;
}

Status WriteAtomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return IoError("write " + tmp.string() + ": " + std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return IoError("rename " + tmp.string() + " -> " + path.string() + ": " + ec.message());
  return Status::Ok();
}

// A VM's end of its cable: a UDP socket on 127.0.0.1 that the testbed opens
// and hands to qemu (`-netdev dgram,local.type=fd`), rather than letting qemu
// open it, so that its receive buffer can be large. qemu's own socket gets the
// host's default (212992 bytes here, about 23 jumbo frames): a TCG VM that
// falls behind a burst drops frames there, and rxe then measures its
// retransmission timeouts. Bound on open; Connect() names the far end.
class VmSocket {
 public:
  static constexpr int kReceiveBytes = 4 << 20;
  VmSocket() = default;
  VmSocket(const VmSocket&) = delete;
  VmSocket& operator=(const VmSocket&) = delete;
  ~VmSocket() {
    if (fd_ >= 0) close(fd_);
  }
  Status Open() {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return IoError(std::string("VmSocket socket(): ") + std::strerror(errno));
    // Past net.core.rmem_max when root (SO_RCVBUFFORCE), else up to it.
    int bytes = kReceiveBytes;
    if (setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return IoError(std::string("VmSocket bind 127.0.0.1:0: ") + std::strerror(errno));
    }
    port_ = ntohs(addr.sin_port);
    return Status::Ok();
  }
  Status Connect(uint16_t peer_port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(peer_port);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return IoError("VmSocket connect 127.0.0.1:" + std::to_string(peer_port) + ": " +
                     std::strerror(errno));
    }
    return Status::Ok();
  }
  int fd() const { return fd_; }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A stock kernel hangs after the BIOS under KVM on some hosts (TESTBED.md):
// use KVM only when the kernel prints its banner within a few seconds.
bool KvmBoots(const std::string& assets, const fs::path& work) {
  if (access("/dev/kvm", R_OK | W_OK) != 0) return false;
  const fs::path console = work / "kvm-probe.console.log";
  auto pid =
      Spawn({"qemu-system-x86_64", "-accel", "kvm", "-m", "256", "-nodefaults", "-no-user-config",
             "-display", "none", "-no-reboot", "-kernel", assets + "/vmlinuz", "-append",
             "console=ttyS0 panic=-1 rdinit=/fathom-probe", "-serial", "file:" + console.string()},
            (work / "kvm-probe.log").string());
  if (!pid.ok()) return false;
  bool booted = false;
  const auto end = steady_clock::now() + seconds(10);
  while (!booted && steady_clock::now() < end && !PollExit(*pid).has_value()) {
    booted = ReadFile(console).find("Linux version") != std::string::npos;
    std::this_thread::sleep_for(milliseconds(100));
  }
  Terminate(*pid, milliseconds(500));
  FATHOM_LOG(kInfo, std::string("testbed: KVM probe: ") +
                        (booted ? "the kernel booted, using kvm"
                                : "no kernel banner within 10 s, using tcg"));
  return booted;
}

}  // namespace

void RequestInterrupt() { g_interrupt.store(true); }
bool InterruptRequested() { return g_interrupt.load(); }

StatusOr<Accel> ParseAccel(const std::string& s) {
  if (s == "auto") return Accel::kAuto;
  if (s == "tcg") return Accel::kTcg;
  if (s == "kvm") return Accel::kKvm;
  return InvalidArgument("--accel " + s + ": expected auto, tcg or kvm");
}

std::string_view AccelName(Accel accel) {
  switch (accel) {
    case Accel::kAuto:
      return "auto";
    case Accel::kTcg:
      return "tcg";
    case Accel::kKvm:
      return "kvm";
  }
  return "?";
}

std::string DefaultAssetsDir() {
  if (const char* env = getenv("FATHOM_TESTBED_ASSETS"); env != nullptr && *env != '\0') {
    return env;
  }
  return FATHOM_TESTBED_DEFAULT_ASSETS_DIR;
}

Status EnsureAssets(const std::string& dir) {
  const std::string log = dir + ".log";
  FATHOM_LOG(kInfo, "testbed: assets in " + dir + " (make_assets.sh, log " + log + ")");
  auto rc = RunToCompletion({"bash", FATHOM_TESTBED_SCRIPT_DIR "/make_assets.sh", dir}, log,
                            seconds(600));
  if (!rc.ok()) return rc.status().WithContext("EnsureAssets(" + dir + ")");
  if (*rc != 0) {
    return IoError("EnsureAssets(" + dir + "): make_assets.sh exited " + std::to_string(*rc) +
                   ": " + Tail(ReadFile(log), 400));
  }
  return Status::Ok();
}

bool HasNativeRdmaDevice() {
  std::error_code ec;
  return fs::is_directory("/sys/class/infiniband", ec) &&
         !fs::is_empty("/sys/class/infiniband", ec);
}

StatusOr<std::unique_ptr<Testbed>> Testbed::Start(TestbedOptions options) {
  if (options.num_vms < 1 || options.num_vms > kMaxVms) {
    return InvalidArgument("Testbed::Start num_vms=" + std::to_string(options.num_vms) +
                           ": expected 1.." + std::to_string(kMaxVms));
  }
  if (options.direct && options.num_vms != 2) {
    return InvalidArgument("Testbed::Start direct wiring needs num_vms=2, got " +
                           std::to_string(options.num_vms));
  }
  for (size_t i = 0; i < options.mtus.size(); ++i) {
    if (options.mtus[i] < 1280 || options.mtus[i] > 9000) {
      // IPv6 (and so GID 0) needs at least 1280; virtio-net allows 9000.
      return InvalidArgument("Testbed::Start mtu[" + std::to_string(i) +
                             "]=" + std::to_string(options.mtus[i]) + ": expected 1280..9000");
    }
  }
  if (options.temp_root.find(',') != std::string::npos) {
    return InvalidArgument("Testbed::Start temp_root=" + options.temp_root +
                           ": qemu option values cannot contain ','");
  }
  std::unique_ptr<Testbed> tb(new Testbed());
  tb->options_ = std::move(options);
  TestbedOptions& o = tb->options_;
  if (o.assets_dir.empty()) o.assets_dir = DefaultAssetsDir();

  const StatusOr<std::string> dir = MakeTempDir("fathom-testbed", o.temp_root);
  if (!dir.ok()) return IoError("Testbed::Start " + dir.status().message());
  if (dir.value().find(',') != std::string::npos) {
    // $TMPDIR chose it (temp_root empty): the same limit as above.
    std::error_code ec;
    fs::remove(dir.value(), ec);
    return InvalidArgument("Testbed::Start work directory " + dir.value() +
                           " (from $TMPDIR): qemu option values cannot contain ','");
  }
  tb->work_dir_ = dir.value();
  FATHOM_LOG(kDebug, "testbed: work directory " + dir.value());

  tb->mode_ = o.mode;
  if (o.mode == Mode::kAuto) tb->mode_ = HasNativeRdmaDevice() ? Mode::kNative : Mode::kVm;
  if (tb->mode_ == Mode::kNative) {
    if (!HasNativeRdmaDevice()) {
      Status s = NotFound("Testbed::Start mode=native: /sys/class/infiniband is empty");
      (void)tb->Teardown();
      return s;
    }
    tb->native_device_ = fs::directory_iterator("/sys/class/infiniband")->path().filename();
    FATHOM_LOG(kInfo, "testbed: native mode on " + tb->native_device_);
  }
  Status s = tb->Boot();
  if (s.ok() && tb->mode_ == Mode::kVm) s = tb->WaitReady();
  if (s.ok() && tb->emulator_ != nullptr) s = tb->ClampTcpMss();
  if (!s.ok()) {
    (void)tb->Teardown();
    return s;
  }
  return tb;
}

std::string Testbed::ModeDescription() const {
  if (mode_ == Mode::kNative) return "native:" + native_device_;
  return std::string("vm-") + std::string(AccelName(accel_));
}

std::string Testbed::ConfigText(int vm) const {
  std::ostringstream os;
  const VmInfo& v = vms_[vm];
  os << "export FATHOM_VM_ID=" << vm << " FATHOM_NUM_VMS=" << vms_.size() << " FATHOM_MTU=" << v.mtu
     << " FATHOM_MAC=" << v.mac << " FATHOM_IP4=" << v.ipv4 << " FATHOM_IP6=" << v.ipv6
     << " FATHOM_RDMA_DEV=" << (mode_ == Mode::kNative ? native_device_ : "rxe0") << "\n";
  for (const VmInfo& p : vms_) {
    os << "export FATHOM_VM" << p.index << "_IP4=" << p.ipv4 << " FATHOM_VM" << p.index
       << "_IP6=" << p.ipv6 << "\n";
  }
  return os.str();
}

Status Testbed::Boot() {
  const TestbedOptions& o = options_;
  for (int i = 0; i < o.num_vms; ++i) {
    VmInfo v;
    v.index = i;
    char mac[32];
    std::snprintf(mac, sizeof(mac), "52:54:00:fa:00:%02x", i + 1);
    v.mac = mac;
    v.ipv4 = "192.0.2." + std::to_string(i + 1);
    v.ipv6 = "2001:db8::" + std::to_string(i + 1);
    v.mtu = i < static_cast<int>(o.mtus.size()) ? o.mtus[i] : kDefaultMtu;
    v.share = work_dir_ / ("vm" + std::to_string(i));
    vms_.push_back(v);
  }
  for (int i = 0; i < o.num_vms; ++i) {
    std::error_code ec;
    fs::create_directories(vms_[i].share / "out", ec);
    if (ec) return IoError("Testbed mkdir " + vms_[i].share.string() + ": " + ec.message());
    FATHOM_RETURN_IF_ERROR(WriteAtomically(vms_[i].share / "config", ConfigText(i)));
  }
  if (mode_ == Mode::kNative) {
    for (VmInfo& v : vms_) {
      // Native: every "VM" is the host; peers reach each other on loopback.
      v.ipv4 = "127.0.0.1";
      v.ipv6 = "::1";
    }
    for (int i = 0; i < o.num_vms; ++i) {
      FATHOM_RETURN_IF_ERROR(WriteAtomically(vms_[i].share / "config", ConfigText(i)));
    }
    return Status::Ok();
  }

  FATHOM_RETURN_IF_ERROR(EnsureAssets(o.assets_dir));
  accel_ = o.accel;
  if (accel_ == Accel::kAuto)
    accel_ = KvmBoots(o.assets_dir, work_dir_) ? Accel::kKvm : Accel::kTcg;
  FATHOM_LOG(kInfo, "testbed: booting " + std::to_string(o.num_vms) + " VM(s) with accel " +
                        std::string(AccelName(accel_)) +
                        (o.direct ? ", wired directly"
                         : !o.fabric_scenario.empty()
                             ? ", through the emulated fabric of " + o.fabric_scenario
                             : ", through the host switch"));

  // Wiring: each VM's socket (VmSocket) is connected to a switch port (the
  // switch learns the VM's port from its first frame), or directly to the
  // other VM's socket.
  std::vector<VmSocket> sockets(static_cast<size_t>(o.num_vms));
  for (VmSocket& s : sockets) FATHOM_RETURN_IF_ERROR(s.Open());
  const std::string netdev = "dgram,id=n0,local.type=fd,local.str=" + std::to_string(kPassedFd);
  if (o.direct) {
    FATHOM_RETURN_IF_ERROR(sockets[0].Connect(sockets[1].port()));
    FATHOM_RETURN_IF_ERROR(sockets[1].Connect(sockets[0].port()));
  } else if (!o.fabric_scenario.empty()) {
    // Each VM's cable ends at its host port of the modelled fabric: a udp:
    // endpoint of the live emulator (what `fathom emulate -e HOST=udp:..`
    // opens), so ARP, neighbour discovery, the ranks' TCP bootstrap and
    // RoCEv2 all cross the fabric's links, queues, ECMP and faults.
    std::vector<uint16_t> vm_ports;
    for (const VmSocket& s : sockets) vm_ports.push_back(s.port());
    FATHOM_ASSIGN_OR_RETURN(const std::vector<uint16_t> ends, StartFabric(vm_ports));
    for (int i = 0; i < o.num_vms; ++i) {
      FATHOM_RETURN_IF_ERROR(sockets[static_cast<size_t>(i)].Connect(ends[static_cast<size_t>(i)]));
    }
  } else {
    switch_ = std::make_unique<Switch>();
    for (int i = 0; i < o.num_vms; ++i) {
      FATHOM_ASSIGN_OR_RETURN(auto port, UdpPort::Open(switch_->io(), "vm" + std::to_string(i)));
      const uint16_t local = port->LocalPort();
      PortImpairments imp;
      if (i < static_cast<int>(o.impairments.size())) imp = o.impairments[i];
      switch_->AddPort(std::move(port), imp);
      FATHOM_RETURN_IF_ERROR(sockets[static_cast<size_t>(i)].Connect(local));
    }
    if (!o.capture_path.empty()) FATHOM_RETURN_IF_ERROR(switch_->EnableCapture(o.capture_path));
    switch_->Start();
  }

  for (int i = 0; i < o.num_vms; ++i) {
    VmInfo& v = vms_[i];
    const std::string base = (work_dir_ / ("vm" + std::to_string(i))).string();
    std::vector<std::string> argv = {
        "qemu-system-x86_64", "-accel", std::string(AccelName(accel_)),
        // The guest runs the host's binaries, and fathom links DPDK, which
        // Debian builds for SSE4.2: qemu's default CPU model (qemu64) lacks
        // it and the guest dies of SIGILL at load. The model gains just what
        // Debian's DPDK targets (corei7: SSSE3, SSE4.1/4.2, POPCNT), so the
        // guest's libraries keep the code paths the testbed was timed with.
        "-cpu", "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt", "-m", std::to_string(o.memory_mib), "-smp",
        "1", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-kernel",
        o.assets_dir + "/vmlinuz", "-initrd", o.assets_dir + "/initramfs.cpio.gz", "-append",
        "console=ttyS0 panic=-1 quiet", "-serial", "file:" + base + ".console.log",
        // The host root, read-only: rdma-core, perftest and the build tree run
        // unchanged inside the VM (TESTBED.md).
        "-fsdev", "local,id=r,path=/,security_model=none,readonly=on,multidevs=remap", "-device",
        "virtio-9p-pci,fsdev=r,mount_tag=hostroot", "-fsdev",
        "local,id=s,path=" + v.share.string() + ",security_model=none,multidevs=remap", "-device",
        "virtio-9p-pci,fsdev=s,mount_tag=results", "-netdev", netdev,
        // event_idx=off: with event-index notification suppression (the
        // default), 4 of about 45 kill-test write_bw runs left the guest's TX
        // queue stuck for good: qemu's view of it (x-query-virtio-queue-status)
        // had last-avail = shadow-avail = used, while the guest had put 65-73 more
        // frames through its qdisc and kicked no more. rxe then stops at its
        // in-flight skb limit, and a QP that sends nothing arms no retransmit
        // timer, so it sits in RTS forever. The flag-based suppression has no
        // event index to miss.
        "-device", "virtio-net-pci,netdev=n0,mac=" + v.mac + ",host_mtu=9000,event_idx=off"};
    FATHOM_ASSIGN_OR_RETURN(v.pid,
                            Spawn(argv, base + ".qemu.log", sockets[static_cast<size_t>(i)].fd()));
    spawned_at_.push_back(steady_clock::now());
    FATHOM_LOG(kInfo, "testbed: vm" + std::to_string(i) + " qemu pid " + std::to_string(v.pid) +
                          " (console " + base + ".console.log)");
    FATHOM_LOG(kDebug, "testbed: vm" + std::to_string(i) + " mac " + v.mac + " ipv4 " + v.ipv4 +
                           " mtu " + std::to_string(v.mtu));
  }
  return Status::Ok();
}

StatusOr<std::vector<uint16_t>> Testbed::StartFabric(const std::vector<uint16_t>& vm_ports) {
  const TestbedOptions& o = options_;
  FATHOM_ASSIGN_OR_RETURN(sim::LoadedScenario scenario, sim::LoadScenario(o.fabric_scenario));
  const size_t colon = o.fabric_listen.rfind(':');
  int listen_port = -1;
  if (colon != std::string::npos) {
    try {
      listen_port = std::stoi(o.fabric_listen.substr(colon + 1));
    } catch (const std::exception&) {
    }
  }
  if (listen_port < 0 || listen_port > 65535) {
    return InvalidArgument("Testbed fabric_listen=" + o.fabric_listen + ": expected ADDRESS:PORT");
  }
  std::vector<std::unique_ptr<live::Endpoint>> endpoints;
  std::vector<uint16_t> ends;
  for (size_t i = 0; i < vm_ports.size(); ++i) {
    // udp:LISTEN:PEER needs a port number: take a free one (bind to 0, read
    // it, close) and retry if another process took it in between.
    StatusOr<std::unique_ptr<live::Endpoint>> ep = IoError("no attempt");
    uint16_t listen = 0;
    for (int attempt = 0; attempt < 5 && !ep.ok(); ++attempt) {
      {
        VmSocket probe;
        FATHOM_RETURN_IF_ERROR(probe.Open());
        listen = probe.port();
      }
      ep = live::OpenEndpoint("udp:" + std::to_string(listen) + ":" + std::to_string(vm_ports[i]));
      if (!ep.ok() && ep.status().code() != StatusCode::kIoError) break;
    }
    if (!ep.ok())
      return ep.status().WithContext("Testbed fabric endpoint of vm" + std::to_string(i));
    endpoints.push_back(std::move(ep).value());
    ends.push_back(listen);
  }
  live::EmulatorOptions eo;
  eo.time_dilation = o.fabric_time_dilation;
  auto emu = live::Emulator::Create(scenario, eo, std::move(endpoints));
  if (!emu.ok()) {
    return InvalidArgument("Testbed --fabric " + o.fabric_scenario + " with " +
                           std::to_string(vm_ports.size()) + " VM(s): " + emu.status().ToString());
  }
  emulator_ = std::move(emu).value();
  live::Emulator* e = emulator_.get();
  FATHOM_ASSIGN_OR_RETURN(control_,
                          live::ControlServer::Start(
                              o.fabric_listen.substr(0, colon), static_cast<uint16_t>(listen_port),
                              [e](live::ControlRequest r) { return e->Control(std::move(r)); }));
  fabric_port_ = control_->port();
  fabric_stop_ = std::make_unique<std::atomic<bool>>(false);
  fabric_thread_ = std::thread([this, e] { fabric_status_ = e->Run(*fabric_stop_); });
  FATHOM_LOG(kInfo, "testbed: emulated fabric " + o.fabric_scenario + " (time dilation " +
                        std::to_string(o.fabric_time_dilation) + "); metrics on http://" +
                        o.fabric_listen.substr(0, colon) + ":" + std::to_string(fabric_port_) +
                        "/metrics");
  return ends;
}

Status Testbed::ClampTcpMss() {
  if (options_.fabric_tcp_mss <= 0) return Status::Ok();
  const std::string mss = std::to_string(options_.fabric_tcp_mss);
  std::vector<CommandHandle> handles;
  for (int i = 0; i < size(); ++i) {
    // The on-link routes init.sh's addresses made (IPv6's at the kernel's
    // metric 256, which is part of its key), re-stated with advmss.
    FATHOM_ASSIGN_OR_RETURN(
        CommandHandle h,
        Launch(
            i,
            "ip route change 192.0.2.0/24 dev eth0 proto kernel scope link src $FATHOM_IP4 "
            "advmss " +
                mss +
                " && ip -6 route replace 2001:db8::/64 dev eth0 proto kernel metric 256 advmss " +
                mss + "\n",
            seconds(30)));
    handles.push_back(h);
  }
  for (const CommandHandle& h : handles) {
    FATHOM_ASSIGN_OR_RETURN(const CommandResult r, Wait(h));
    if (r.exit_status != 0) {
      return Unavailable("vm" + std::to_string(h.vm) + ": setting the TCP MSS to " + mss +
                         " failed (exit " + std::to_string(r.exit_status) +
                         "): " + Tail(r.stderr_text, 300));
    }
  }
  return Status::Ok();
}

Status Testbed::StopFabric() {
  if (!fabric_thread_.joinable()) return Status::Ok();
  fabric_stop_->store(true);
  fabric_thread_.join();
  control_.reset();
  if (!fabric_status_.ok()) return fabric_status_.WithContext("Testbed emulated fabric");
  return Status::Ok();
}

Status Testbed::WaitReady() {
  const auto deadline = steady_clock::now() + options_.boot_timeout;
  std::vector<bool> ready(vms_.size(), false);
  size_t remaining = vms_.size();
  while (remaining > 0) {
    if (InterruptRequested()) return Aborted("Testbed boot interrupted");
    for (VmInfo& v : vms_) {
      if (ready[v.index]) continue;
      const std::string base = (work_dir_ / ("vm" + std::to_string(v.index))).string();
      std::error_code ec;
      if (fs::exists(v.share / "ready", ec)) {
        v.boot_to_ready =
            std::chrono::duration_cast<milliseconds>(steady_clock::now() - spawned_at_[v.index]);
        ready[v.index] = true;
        --remaining;
        FATHOM_LOG(kInfo, "testbed: vm" + std::to_string(v.index) + " ready after " +
                              std::to_string(v.boot_to_ready.count()) + " ms");
        continue;
      }
      if (fs::exists(v.share / "failed", ec)) {
        return Unavailable("vm" + std::to_string(v.index) +
                           " init failed: " + Tail(ReadFile(v.share / "failed"), 200) +
                           " (console: " + Tail(ReadFile(base + ".console.log"), 300) + ")");
      }
      if (auto st = PollExit(v.pid)) {
        v.pid = -1;
        return Unavailable("vm" + std::to_string(v.index) + " qemu exited with " +
                           std::to_string(ExitCode(*st)) +
                           " before ready: " + Tail(ReadFile(base + ".qemu.log"), 200) +
                           " (console: " + Tail(ReadFile(base + ".console.log"), 800) + ")");
      }
    }
    if (remaining > 0 && steady_clock::now() >= deadline) {
      for (const VmInfo& v : vms_) {
        if (ready[v.index]) continue;
        const std::string base = (work_dir_ / ("vm" + std::to_string(v.index))).string();
        return DeadlineExceeded(
            "vm" + std::to_string(v.index) + " not ready within " +
            std::to_string(options_.boot_timeout.count()) + " s boot timeout (accel " +
            std::string(AccelName(accel_)) +
            "); killed. Console tail: " + Tail(ReadFile(base + ".console.log"), 300));
      }
    }
    std::this_thread::sleep_for(kPoll);
  }
  return Status::Ok();
}

StatusOr<CommandHandle> Testbed::Launch(int vm, const std::string& script, seconds timeout) {
  if (torn_down_) return FailedPrecondition("Testbed::Launch after Teardown");
  if (vm < 0 || vm >= size()) {
    return InvalidArgument("Testbed::Launch vm=" + std::to_string(vm) + ": testbed has " +
                           std::to_string(size()) + " VMs");
  }
  CommandHandle h;
  h.vm = vm;
  h.id = next_command_++;
  h.timeout = timeout;
  h.started = steady_clock::now();
  const fs::path share = vms_[vm].share;
  const std::string id = std::to_string(h.id);
  std::error_code ec;
  fs::create_directories(share / "cmd", ec);
  fs::create_directories(share / "res", ec);
  if (mode_ == Mode::kNative) {
    FATHOM_RETURN_IF_ERROR(WriteAtomically(share / "cmd" / (id + ".run"), script));
    const std::string run =
        ". " + (share / "config").string() + "; export FATHOM_OUT=" + (share / "out").string() +
        "; cd \"$FATHOM_OUT\" && exec timeout -k 2 " + std::to_string(timeout.count()) +
        " /bin/sh " + (share / "cmd" / (id + ".run")).string() + " >" +
        (share / "res" / (id + ".out")).string() + " 2>" + (share / "res" / (id + ".err")).string();
    FATHOM_ASSIGN_OR_RETURN(h.native_pid,
                            Spawn({"/bin/sh", "-c", run}, (share / "native.log").string()));
    return h;
  }
  // The VM's agent (init.sh) picks up N.sh once it appears; N.env first.
  FATHOM_RETURN_IF_ERROR(WriteAtomically(share / "cmd" / (id + ".env"),
                                         "T=" + std::to_string(timeout.count()) + "\n"));
  FATHOM_RETURN_IF_ERROR(WriteAtomically(share / "cmd" / (id + ".sh"), script));
  return h;
}

StatusOr<CommandResult> Testbed::Wait(const CommandHandle& h) {
  const fs::path res = vms_[h.vm].share / "res";
  const std::string id = std::to_string(h.id);
  const auto deadline = h.started + h.timeout + kResultSlack;
  CommandResult r;
  r.vm = h.vm;
  for (;;) {
    if (InterruptRequested()) return Aborted("Testbed::Wait interrupted");
    if (mode_ == Mode::kNative) {
      if (auto st = PollExit(h.native_pid)) {
        r.exit_status = ExitCode(*st);
        break;
      }
    } else {
      std::error_code ec;
      if (fs::exists(res / (id + ".rc"), ec)) {
        r.exit_status = std::atoi(ReadFile(res / (id + ".rc")).c_str());
        break;
      }
      if (vms_[h.vm].pid > 0) {
        if (auto st = PollExit(vms_[h.vm].pid)) {
          vms_[h.vm].pid = -1;
          return Unavailable("vm" + std::to_string(h.vm) + " died (qemu status " +
                             std::to_string(ExitCode(*st)) + ") while running command " + id);
        }
      }
    }
    if (steady_clock::now() >= deadline) {
      if (mode_ == Mode::kNative) Terminate(h.native_pid, milliseconds(500));
      return DeadlineExceeded("vm" + std::to_string(h.vm) + " command " + id +
                              " reported no result within its " +
                              std::to_string(h.timeout.count()) + " s timeout + " +
                              std::to_string(kResultSlack.count()) + " s");
    }
    std::this_thread::sleep_for(kPoll);
  }
  // timeout(1) exits 124 when the command outlived its limit (137 after -k).
  r.timed_out = r.exit_status == 124 || r.exit_status == 137;
  r.stdout_text = ReadFile(res / (id + ".out"));
  r.stderr_text = ReadFile(res / (id + ".err"));
  return r;
}

StatusOr<CommandResult> Testbed::Run(int vm, const std::string& script, seconds timeout) {
  FATHOM_ASSIGN_OR_RETURN(const CommandHandle h, Launch(vm, script, timeout));
  return Wait(h);
}

Status Testbed::CollectFiles(int vm, const fs::path& dest) const {
  if (vm < 0 || vm >= size()) {
    return InvalidArgument("Testbed::CollectFiles vm=" + std::to_string(vm));
  }
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (!ec) {
    fs::copy(vms_[vm].share / "out", dest,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  }
  if (ec) {
    return IoError("Testbed::CollectFiles vm=" + std::to_string(vm) + " -> " + dest.string() +
                   ": " + ec.message());
  }
  return Status::Ok();
}

Status Testbed::Teardown() {
  if (torn_down_) return Status::Ok();
  torn_down_ = true;
  if (!vms_.empty())
    FATHOM_LOG(kInfo, "testbed: tearing down " + std::to_string(vms_.size()) + " VM(s)");
  for (VmInfo& v : vms_) {
    if (v.pid > 0) Terminate(v.pid, milliseconds(2000));
    v.pid = -1;
  }
  Status status;
  if (switch_) status = switch_->Stop();
  if (Status f = StopFabric(); !f.ok() && status.ok()) status = f;
  if (!work_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(work_dir_, ec);
    if (ec && status.ok()) {
      status = IoError("Testbed::Teardown remove " + work_dir_.string() + ": " + ec.message());
    }
  }
  return status;
}

Testbed::~Testbed() { (void)Teardown(); }

}  // namespace fathom::testbed
