// `fathom testbed run|assets`: real soft-RoCE (rxe) in qemu VMs wired through
// the host switch (testbed/testbed.h), or with --fabric through a scenario's
// modelled fabric (the live emulator, fabric/live). `run` boots N VMs, runs a command or a
// script in each, prints each VM's stdout, stderr and exit status, copies the
// files each wrote in $FATHOM_OUT to --out DIR/vmN, and tears everything down
// (also on a failure, the timeout and Ctrl-C). `assets` builds the VM assets.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "base/json.h"
#include "fabric/live/emulator.h"
#include "testbed/testbed.h"
#include "tools/command.h"

namespace fathom::tools {
namespace {

using testbed::Testbed;
using testbed::TestbedOptions;

struct RunArgs {
  int vms = 2;
  std::vector<int> mtus;
  std::string accel = "auto";
  std::string mode = "vm";
  std::string command;
  std::vector<std::string> vm_commands;  // "N=command"
  std::string script;
  std::string out;
  std::string capture;
  std::string assets;
  std::vector<std::string> max_frame;  // "N=bytes"
  std::vector<std::string> drop;       // "N=probability"
  uint64_t seed = 1;
  int timeout_s = 120;
  int boot_timeout_s = 120;
  bool direct = false;
  bool json = false;
  std::string fabric;
  double time_dilation = 1.0;
  std::string fabric_listen = "127.0.0.1:0";
  std::string metrics_out;
};

void OnSignal(int) { testbed::RequestInterrupt(); }

// Parses "N=value" for a per-VM flag.
bool ParsePerVm(const std::string& flag, const std::string& item, int vms, int* vm,
                std::string* value) {
  const size_t eq = item.find('=');
  try {
    if (eq != std::string::npos) {
      *vm = std::stoi(item.substr(0, eq));
      *value = item.substr(eq + 1);
      if (*vm >= 0 && *vm < vms && !value->empty()) return true;
    }
  } catch (const std::exception&) {
  }
  std::fprintf(stderr, "fathom testbed: %s %s: expected VM=VALUE with VM in 0..%d\n", flag.c_str(),
               item.c_str(), vms - 1);
  return false;
}

int RunTestbed(const RunArgs& a) {
  TestbedOptions o;
  o.num_vms = a.vms;
  o.mtus = a.mtus;
  o.direct = a.direct;
  o.capture_path = a.capture;
  o.assets_dir = a.assets;
  o.boot_timeout = std::chrono::seconds(a.boot_timeout_s);
  o.fabric_scenario = a.fabric;
  o.fabric_time_dilation = a.time_dilation;
  o.fabric_listen = a.fabric_listen;
  if (!a.fabric.empty()) {
    // The switch's impairments have no place in a modelled fabric: its
    // faults come from the scenario or `fathom emulate ctl`.
    const char* clash = a.direct               ? "--direct"
                        : !a.max_frame.empty() ? "--max-frame"
                        : !a.drop.empty()      ? "--drop"
                        : !a.capture.empty()   ? "--capture"
                                               : nullptr;
    if (clash != nullptr) {
      std::fprintf(stderr,
                   "fathom testbed: --fabric %s: %s is a host-switch option; put the fault in the "
                   "scenario or add it with `fathom emulate ctl` (captures: `ctl capture LINK "
                   "FILE`)\n",
                   a.fabric.c_str(), clash);
      return kExitUsage;
    }
    if (!(a.time_dilation >= 1e-3 && a.time_dilation <= 1e6)) {
      std::fprintf(stderr, "fathom testbed: --time-dilation %g: must be within [0.001, 1000000]\n",
                   a.time_dilation);
      return kExitUsage;
    }
  } else if (!a.metrics_out.empty()) {
    std::fprintf(stderr, "fathom testbed: --metrics-out needs --fabric\n");
    return kExitUsage;
  }
  auto accel = testbed::ParseAccel(a.accel);
  if (!accel.ok()) {
    std::fprintf(stderr, "fathom testbed: %s\n", accel.status().message().c_str());
    return kExitUsage;
  }
  o.accel = *accel;
  if (a.mode == "vm") {
    o.mode = testbed::Mode::kVm;
  } else if (a.mode == "native") {
    o.mode = testbed::Mode::kNative;
  } else if (a.mode == "auto") {
    o.mode = testbed::Mode::kAuto;
  } else {
    std::fprintf(stderr, "fathom testbed: --mode %s: expected vm, native or auto\n",
                 a.mode.c_str());
    return kExitUsage;
  }
  o.impairments.resize(a.vms);
  for (int i = 0; i < a.vms; ++i) o.impairments[i].seed = a.seed + i;
  int vm;
  std::string value;
  for (const std::string& item : a.max_frame) {
    if (!ParsePerVm("--max-frame", item, a.vms, &vm, &value)) return kExitUsage;
    o.impairments[vm].max_frame_bytes = std::atoi(value.c_str());
  }
  for (const std::string& item : a.drop) {
    if (!ParsePerVm("--drop", item, a.vms, &vm, &value)) return kExitUsage;
    o.impairments[vm].drop_probability = std::atof(value.c_str());
  }
  // The command per VM: --vm-cmd beats --cmd beats --script.
  std::vector<std::string> commands(a.vms);
  std::string common = a.command;
  if (!a.script.empty()) {
    std::ifstream in(a.script);
    if (!in) {
      std::fprintf(stderr, "fathom testbed: --script %s: cannot read\n", a.script.c_str());
      return kExitUsage;
    }
    std::ostringstream os;
    os << in.rdbuf();
    common = os.str();
  }
  for (std::string& c : commands) c = common;
  for (const std::string& item : a.vm_commands) {
    if (!ParsePerVm("--vm-cmd", item, a.vms, &vm, &value)) return kExitUsage;
    commands[vm] = value;
  }

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  auto tb_or = Testbed::Start(o);
  if (!tb_or.ok()) {
    std::fprintf(stderr, "fathom testbed: %s\n", tb_or.status().ToString().c_str());
    return tb_or.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  Testbed& tb = **tb_or;
  std::fprintf(stderr, "fathom testbed: mode %s, %d VM(s)\n", tb.ModeDescription().c_str(),
               tb.size());
  for (int i = 0; i < tb.size(); ++i) {
    std::fprintf(stderr, "fathom testbed: vm%d mac %s ipv4 %s ipv6 %s mtu %d ready in %.1f s\n", i,
                 tb.vm(i).mac.c_str(), tb.vm(i).ipv4.c_str(), tb.vm(i).ipv6.c_str(), tb.vm(i).mtu,
                 tb.vm(i).boot_to_ready.count() / 1000.0);
  }
  if (tb.emulator() != nullptr) {
    std::fprintf(stderr,
                 "fathom testbed: vm i is host rank i of %s; metrics and control on "
                 "http://127.0.0.1:%u (fathom emulate ctl --server 127.0.0.1:%u ...)\n",
                 a.fabric.c_str(), tb.fabric_port(), tb.fabric_port());
  }
  std::vector<testbed::CommandHandle> handles;
  std::vector<int> launched;
  int exit_code = kExitOk;
  for (int i = 0; i < tb.size(); ++i) {
    if (commands[i].empty()) continue;
    auto h = tb.Launch(i, commands[i] + "\n", std::chrono::seconds(a.timeout_s));
    if (!h.ok()) {
      std::fprintf(stderr, "fathom testbed: %s\n", h.status().ToString().c_str());
      exit_code = kExitFailure;
      break;
    }
    handles.push_back(*h);
  }
  std::ostringstream json;
  json << "{\"mode\":\"" << tb.ModeDescription() << "\",\"vms\":[";
  for (size_t k = 0; k < handles.size(); ++k) {
    const int i = handles[k].vm;
    auto r = tb.Wait(handles[k]);
    if (!r.ok()) {
      std::fprintf(stderr, "fathom testbed: %s\n", r.status().ToString().c_str());
      exit_code = kExitFailure;
      if (r.status().code() == StatusCode::kAborted) break;
      continue;
    }
    if (r->exit_status != 0) exit_code = kExitFailure;
    if (a.json) {
      json << (k ? "," : "") << "{\"vm\":" << i << ",\"exit_status\":" << r->exit_status
           << ",\"timed_out\":" << (r->timed_out ? "true" : "false")
           << ",\"boot_to_ready_ms\":" << tb.vm(i).boot_to_ready.count() << ",\"stdout\":\""
           << JsonEscape(r->stdout_text) << "\",\"stderr\":\"" << JsonEscape(r->stderr_text)
           << "\"}";
    } else {
      std::printf("=== vm%d exit %d%s\n%s", i, r->exit_status, r->timed_out ? " (timed out)" : "",
                  r->stdout_text.c_str());
      if (!r->stderr_text.empty()) std::printf("--- vm%d stderr\n%s", i, r->stderr_text.c_str());
    }
    if (!a.out.empty()) {
      Status s = tb.CollectFiles(i, a.out + "/vm" + std::to_string(i));
      if (!s.ok()) {
        std::fprintf(stderr, "fathom testbed: %s\n", s.ToString().c_str());
        exit_code = kExitFailure;
      }
    }
  }
  std::string metrics;
  if (tb.emulator() != nullptr) {
    auto reply = tb.emulator()->Control({"GET", "/metrics", ""}).get();
    metrics = reply.body;
    if (!a.metrics_out.empty()) {
      std::ofstream f(a.metrics_out);
      f << metrics;
      if (!f) {
        std::fprintf(stderr, "fathom testbed: --metrics-out %s: cannot write it\n",
                     a.metrics_out.c_str());
        exit_code = kExitFailure;
      }
    }
  }
  if (tb.emulator() != nullptr) {
    if (a.json) {
      json << "],\"fabric_metrics\":\"" << JsonEscape(metrics) << "\"}";
    } else if (a.metrics_out.empty()) {
      std::printf("=== fabric metrics\n%s", metrics.c_str());
    }
  } else if (tb.host_switch() != nullptr) {
    if (a.json) {
      json << "],\"switch\":" << tb.host_switch()->CountersJson() << "}";
    } else {
      std::printf("=== switch\n%s", tb.host_switch()->CountersText().c_str());
    }
  } else if (a.json) {
    json << "]}";
  }
  if (a.json) std::printf("%s\n", json.str().c_str());
  Status down = tb.Teardown();
  if (!down.ok()) {
    std::fprintf(stderr, "fathom testbed: %s\n", down.ToString().c_str());
    exit_code = kExitFailure;
  }
  if (testbed::InterruptRequested()) {
    std::fprintf(stderr, "fathom testbed: interrupted; torn down\n");
    return kExitFailure;
  }
  return exit_code;
}

Command MakeCommand() {
  Command c;
  c.name = "testbed";
  c.description = "real rxe in qemu VMs through a host switch: run commands, collect results";
  c.order = 80;
  c.setup = [](CLI::App* sub) -> std::function<int()> {
    auto args = std::make_shared<RunArgs>();
    auto assets_dir = std::make_shared<std::string>();
    sub->require_subcommand(1);
    CLI::App* run = sub->add_subcommand("run", "boot VMs, run a command in each, tear down");
    run->add_option("--vms", args->vms, "number of VMs (1..8)")->check(CLI::Range(1, 8));
    run->add_option("--mtu", args->mtus, "Ethernet MTU per VM, e.g. --mtu 9000 1500")
        ->delimiter(',');
    run->add_option("--accel", args->accel, "auto (KVM if a probe boots), tcg or kvm");
    run->add_option("--mode", args->mode, "vm, native (local RDMA device) or auto");
    run->add_option("--cmd", args->command, "shell command for every VM");
    run->add_option("--vm-cmd", args->vm_commands, "VM=command for one VM");
    run->add_option("--script", args->script, "shell script file for every VM");
    run->add_option("--out", args->out, "copy each VM's $FATHOM_OUT to DIR/vmN");
    run->add_option("--capture", args->capture, "pcap of every frame the switch sees");
    run->add_option("--assets", args->assets, "VM asset cache directory");
    run->add_option("--max-frame", args->max_frame, "VM=bytes: drop longer frames to VM");
    run->add_option("--drop", args->drop, "VM=probability: drop frames to VM at random");
    run->add_option("--seed", args->seed, "seed of the drop streams");
    run->add_option("--timeout", args->timeout_s, "per-command timeout, seconds");
    run->add_option("--boot-timeout", args->boot_timeout_s, "per-VM boot timeout, seconds");
    run->add_flag("--direct", args->direct, "wire two VMs to each other, no switch");
    run->add_flag("--json", args->json, "print results as JSON");
    run->add_option("--fabric", args->fabric,
                    "SCENARIO.yaml: wire VM i to host rank i of the scenario's modelled fabric "
                    "(the live emulator, as `fathom emulate`) instead of the host switch");
    run->add_option("--time-dilation", args->time_dilation,
                    "--fabric: wall seconds per model second")
        ->default_val(1.0);
    run->add_option("--fabric-listen", args->fabric_listen,
                    "--fabric: ADDRESS:PORT of the emulator's metrics/control HTTP endpoint "
                    "(port 0: any, printed)")
        ->default_val("127.0.0.1:0");
    run->add_option("--metrics-out", args->metrics_out,
                    "--fabric: write the emulator's metrics here after the commands");
    CLI::App* assets = sub->add_subcommand("assets", "build the VM assets (kernel, initramfs)");
    assets->add_option("--dir", *assets_dir, "asset directory");
    return [args, assets_dir, run, assets]() -> int {
      if (assets->parsed()) {
        const std::string dir = assets_dir->empty() ? testbed::DefaultAssetsDir() : *assets_dir;
        Status s = testbed::EnsureAssets(dir);
        if (!s.ok()) {
          std::fprintf(stderr, "fathom testbed assets: %s\n", s.ToString().c_str());
          return kExitFailure;
        }
        std::printf("%s\n", dir.c_str());
        return kExitOk;
      }
      if (args->command.empty() && args->script.empty() && args->vm_commands.empty()) {
        std::fprintf(stderr, "fathom testbed run: give --cmd, --vm-cmd or --script\n");
        return kExitUsage;
      }
      (void)run;
      return RunTestbed(*args);
    };
  };
  return c;
}

FATHOM_REGISTER_COMMAND(testbed, MakeCommand());

}  // namespace
}  // namespace fathom::tools
