// `fathom emulate SCENARIO.yaml --endpoint HOST=SPEC ...`: the live
// emulator (fabric/live): real frames from real endpoints cross the
// scenario's modelled fabric in real time, with Prometheus metrics and
// run-time faults over HTTP. `fathom emulate ctl ACTION` talks to a running
// one. Exit 2 for bad input: a bad scenario or flag, endpoints that do not
// match the hosts, an endpoint or DPDK device that cannot start, or a time
// dilation the emulator cannot keep up with (--max-lag-us); 1 for a failure
// while running.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "fabric/live/control_server.h"
#include "fabric/live/emulator.h"
#include "fabric/live/endpoint.h"
#include "fabric/scenario/scenario.h"
#include "tools/command.h"

namespace fathom::tools {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

struct EmulateFlags {
  std::string scenario;
  std::vector<std::string> endpoints;
  double time_dilation = 1.0;
  double max_lag_us = 0;
  std::string listen = "127.0.0.1:9464";
  std::string port_file;
  std::string metrics_out;
  double duration_s = 0;
  size_t frames = 4096;
  int dpdk_memory_mb = 1024;
  // ctl
  std::string server = "127.0.0.1:9464";
  std::vector<std::string> ctl_args;
};

bool SplitHostPort(const std::string& s, std::string* host, uint16_t* port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  *host = s.substr(0, colon);
  try {
    const int p = std::stoi(s.substr(colon + 1));
    if (p < 0 || p > 65535) return false;
    *port = static_cast<uint16_t>(p);
  } catch (...) {
    return false;
  }
  return true;
}

int Fail(const std::string& message, int code = kExitUsage) {
  std::fprintf(stderr, "fathom emulate: %s\n", message.c_str());
  return code;
}

int RunEmulate(const EmulateFlags& flags) {
  if (flags.scenario.empty())
    return Fail("a SCENARIO.yaml is required (or: fathom emulate ctl ...)");
  if (!(flags.time_dilation >= 1e-3 && flags.time_dilation <= 1e6)) {
    return Fail("--time-dilation " + std::to_string(flags.time_dilation) +
                ": must be within [0.001, 1000000] (wall seconds per model second)");
  }
  if (flags.max_lag_us < 0) return Fail("--max-lag-us: must be >= 0");
  if (flags.duration_s < 0) return Fail("--duration: must be >= 0");
  std::string listen_host;
  uint16_t listen_port = 0;
  if (!SplitHostPort(flags.listen, &listen_host, &listen_port)) {
    return Fail("--listen " + flags.listen + ": expected ADDRESS:PORT");
  }
  auto loaded = sim::LoadScenario(flags.scenario);
  if (!loaded.ok()) return Fail(loaded.status().ToString());
  const sim::LoadedScenario& scenario = loaded.value();
  const topo::Topology& topo = scenario.topology;
  const size_t hosts = topo.hosts().size();
  // HOST=SPEC, or SPEC alone for the next host in topology order.
  std::vector<std::string> specs(hosts);
  size_t next = 0;
  for (const std::string& e : flags.endpoints) {
    const size_t eq = e.find('=');
    const size_t colon = e.find(':');
    size_t rank = next;
    std::string spec = e;
    if (eq != std::string::npos && (colon == std::string::npos || eq < colon)) {
      const std::string host = e.substr(0, eq);
      spec = e.substr(eq + 1);
      auto node = topo.FindNode(host);
      if (!node.ok() || topo.HostRank(node.value()) < 0) {
        return Fail("--endpoint " + e + ": " + host + " is not a host of " + flags.scenario);
      }
      rank = static_cast<size_t>(topo.HostRank(node.value()));
    }
    if (rank >= hosts) {
      return Fail("--endpoint " + e + ": more endpoints than the " + std::to_string(hosts) +
                  " hosts of " + flags.scenario);
    }
    if (!specs[rank].empty()) {
      return Fail("--endpoint " + e + ": host " + topo.node(topo.hosts()[rank]).name +
                  " already has endpoint " + specs[rank]);
    }
    specs[rank] = spec;
    next = rank + 1;
  }
  std::string missing;
  size_t attached = 0;
  for (size_t r = 0; r < hosts; ++r) {
    if (!specs[r].empty()) {
      ++attached;
    } else {
      missing += (missing.empty() ? "" : ", ") + topo.node(topo.hosts()[r]).name;
    }
  }
  if (attached != hosts) {
    return Fail(flags.scenario + ": the topology has " + std::to_string(hosts) + " hosts but " +
                std::to_string(attached) + " endpoints are attached (no endpoint for " + missing +
                "): attach one per host with --endpoint HOST=SPEC");
  }
  std::vector<std::string> vdevs;
  for (const std::string& s : specs) {
    if (s.rfind("dpdk:", 0) == 0) vdevs.push_back(s.substr(5));
  }
  live::DpdkOptions dpdk;
  dpdk.memory_mb = flags.dpdk_memory_mb;
  if (Status s = live::StartDpdk(vdevs, dpdk); !s.ok()) return Fail(s.ToString());
  struct DpdkGuard {
    ~DpdkGuard() { live::StopDpdk(); }
  } dpdk_guard;
  int code = kExitOk;
  {
    std::vector<std::unique_ptr<live::Endpoint>> endpoints;
    for (const std::string& s : specs) {
      auto ep = live::OpenEndpoint(s);
      if (!ep.ok()) return Fail(ep.status().ToString());
      endpoints.push_back(std::move(ep).value());
    }
    live::EmulatorOptions options;
    options.time_dilation = flags.time_dilation;
    options.max_lag_ns = static_cast<int64_t>(flags.max_lag_us * 1e3);
    options.frames = flags.frames;
    auto emu = live::Emulator::Create(scenario, options, std::move(endpoints));
    if (!emu.ok()) return Fail(emu.status().ToString());
    live::Emulator& e = *emu.value();
    auto server = live::ControlServer::Start(
        listen_host, listen_port, [&e](live::ControlRequest r) { return e.Control(std::move(r)); });
    if (!server.ok()) return Fail(server.status().ToString());
    const uint16_t port = server.value()->port();
    if (!flags.port_file.empty()) {
      std::ofstream f(flags.port_file);
      f << port << '\n';
      if (!f) return Fail("--port-file " + flags.port_file + ": cannot write it");
    }
    std::fprintf(stderr, "fathom emulate: ready: %zu hosts; metrics on http://%s:%u/metrics\n",
                 hosts, listen_host.c_str(), port);
    struct sigaction sa {};
    sa.sa_handler = &OnSignal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    std::thread timer;
    std::atomic<bool> done{false};
    if (flags.duration_s > 0) {
      timer = std::thread([&] {
        const auto end = std::chrono::steady_clock::now() +
                         std::chrono::microseconds(static_cast<int64_t>(flags.duration_s * 1e6));
        while (!done.load() && std::chrono::steady_clock::now() < end) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        g_stop.store(true);
      });
    }
    const Status run = e.Run(g_stop);
    done.store(true);
    if (timer.joinable()) timer.join();
    if (!flags.metrics_out.empty()) {
      // The loop has stopped: its last metrics.
      std::ofstream f(flags.metrics_out);
      f << e.MetricsText();
      if (!f) code = Fail("--metrics-out " + flags.metrics_out + ": cannot write it", kExitFailure);
    }
    const live::Emulator::Lateness l = e.lateness();
    std::fprintf(stderr,
                 "fathom emulate: %llu frames delivered; lateness after the model: median %.1f us, "
                 "p99 %.1f us, max %.1f us\n",
                 static_cast<unsigned long long>(l.frames), l.p50_ns / 1e3, l.p99_ns / 1e3,
                 l.max_ns / 1e3);
    if (!run.ok()) {
      code = Fail(run.ToString(),
                  run.code() == StatusCode::kFailedPrecondition ? kExitUsage : kExitFailure);
    }
  }
  return code;
}

int RunCtl(const EmulateFlags& flags) {
  std::string host;
  uint16_t port = 0;
  if (!SplitHostPort(flags.server, &host, &port)) {
    return Fail("--server " + flags.server + ": expected ADDRESS:PORT");
  }
  const std::vector<std::string>& a = flags.ctl_args;
  const std::string usage =
      "ctl ACTION: metrics | faults | add-fault YAML | change-fault NAME YAML | clear-fault NAME "
      "| capture LINK FILE | capture-stop LINK";
  if (a.empty()) return Fail(usage);
  live::ControlRequest r;
  auto need = [&](size_t n) { return a.size() == n + 1; };
  auto escape = [](const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/' || c == '#') {
        out += static_cast<char>(c);
      } else {
        char buf[4];
        std::snprintf(buf, sizeof(buf), "%%%02X", c);
        out += buf;
      }
    }
    return out;
  };
  if (a[0] == "metrics" && need(0)) {
    r = {"GET", "/metrics", ""};
  } else if (a[0] == "faults" && need(0)) {
    r = {"GET", "/faults", ""};
  } else if (a[0] == "add-fault" && need(1)) {
    r = {"POST", "/faults", a[1]};
  } else if (a[0] == "change-fault" && need(2)) {
    r = {"PUT", "/faults/" + escape(a[1]), a[2]};
  } else if (a[0] == "clear-fault" && need(1)) {
    r = {"DELETE", "/faults/" + escape(a[1]), ""};
  } else if (a[0] == "capture" && need(2)) {
    r = {"POST", "/capture?link=" + escape(a[1]) + "&file=" + escape(a[2]), ""};
  } else if (a[0] == "capture-stop" && need(1)) {
    r = {"DELETE", "/capture?link=" + escape(a[1]), ""};
  } else {
    return Fail(usage);
  }
  auto reply = live::ControlRequestTo(host, port, r);
  if (!reply.ok()) return Fail(reply.status().ToString(), kExitFailure);
  std::fputs(reply.value().body.c_str(), reply.value().status < 300 ? stdout : stderr);
  if (reply.value().status >= 500) return kExitFailure;
  return reply.value().status < 300 ? kExitOk : kExitUsage;
}

}  // namespace

FATHOM_REGISTER_COMMAND(
    emulate,
    Command{"emulate", "live emulator: real frames through the scenario's modelled fabric",
            [](CLI::App* sub) -> std::function<int()> {
              auto flags = std::make_shared<EmulateFlags>();
              sub->add_option("scenario", flags->scenario, "scenario file (YAML)");
              sub->add_option("-e,--endpoint", flags->endpoints,
                              "HOST=SPEC (or SPEC for the next host), one per host: tap:IFNAME "
                              "(created), raw:IFNAME (AF_PACKET on an existing interface), "
                              "udp:LISTEN:PEER (qemu -netdev socket), dpdk:VDEV (e.g. "
                              "net_af_packet0,iface=veth0)");
              sub->add_option("--time-dilation", flags->time_dilation,
                              "wall seconds per model second (10: links run 10x slower)")
                  ->default_val(1.0);
              sub->add_option("--max-lag-us", flags->max_lag_us,
                              "exit 2 when a frame reaches its endpoint more than this after the "
                              "model delivered it (0: only report lateness in the metrics)")
                  ->default_val(0.0);
              sub->add_option("--listen", flags->listen,
                              "ADDRESS:PORT of the metrics and control HTTP endpoint (port 0: any)")
                  ->default_val("127.0.0.1:9464");
              sub->add_option("--port-file", flags->port_file,
                              "write the HTTP port here once ready");
              sub->add_option("--metrics-out", flags->metrics_out,
                              "write the final metrics (Prometheus text) here at exit");
              sub->add_option("--duration", flags->duration_s,
                              "stop after this many wall seconds (0: at SIGINT/SIGTERM)");
              sub->add_option("--frames", flags->frames, "frame buffers")->default_val(4096);
              sub->add_option("--dpdk-memory-mb", flags->dpdk_memory_mb, "DPDK EAL -m")
                  ->default_val(1024);
              CLI::App* ctl = sub->add_subcommand(
                  "ctl",
                  "talk to a running emulator: metrics | faults | add-fault YAML | "
                  "change-fault NAME YAML | clear-fault NAME | capture LINK FILE | "
                  "capture-stop LINK");
              ctl->add_option("--server", flags->server, "the emulator's ADDRESS:PORT")
                  ->default_val("127.0.0.1:9464");
              ctl->add_option("args", flags->ctl_args, "the action and its arguments");
              return [flags, ctl] { return ctl->parsed() ? RunCtl(*flags) : RunEmulate(*flags); };
            },
            75});

}  // namespace fathom::tools
