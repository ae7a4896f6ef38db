// The live emulator: real frames from real endpoints cross a scenario's
// modelled fabric in real time, through the simulator's own models (the
// Network's ports, switches, buffers, ECMP and QoS classes, and the fault
// models of fabric/scenario's FaultAttachment) — not a copy of them.
//
// How: the sim Engine is driven against the wall clock. Model time is
// (wall time since start) / time_dilation. Each turn of the loop runs the
// engine up to the present, hands the frames the model delivered to their
// endpoints, and injects the frames the endpoints sent at the present, as
// sim Packets referencing their Frame (Packet::ext().data): a packet leaves
// at the host port its destination MAC lives behind, after the
// serialization, queueing, propagation and faults of its path, or not at
// all (dropped by the model: the frame goes back to its pool).
//
// Addressing: L2 learning. A frame's source MAC is learned at the host it
// entered; a unicast frame to a learned MAC goes to that host, and
// broadcast, multicast and unknown-unicast frames are flooded: one packet
// per other host, each through the fabric on its own path (so ARP and IPv6
// neighbour discovery work across the fabric, and cross its faults).
// ECMP: a frame's flow is (source host, destination host, L4 source port),
// the simulator's FlowHash, so RoCEv2's per-QP UDP source port (and any
// UDP/TCP source port) picks the path as it does in `fathom sim`.
//
// The scenario's workload is not run: the endpoints are the traffic. Every
// host of the topology needs an endpoint.
//
// Threading: Run() owns the model and the endpoints on the calling thread.
// Control() may be called from any thread (the HTTP server): the request
// runs on the loop's thread between two turns.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "fabric/live/endpoint.h"
#include "fabric/live/frame.h"
#include "fabric/scenario/fault_attach.h"
#include "fabric/scenario/scenario.h"
#include "fabric/sim/engine.h"
#include "fabric/sim/network.h"

namespace fathom::wire {
class PcapWriter;
}

namespace fathom::live {

struct EmulatorOptions {
  // Wall-clock seconds per model second: 10 runs a 100 Gb/s link at 10 Gb/s
  // and its 1 us of propagation in 10 us (TCG VMs slower than the model).
  double time_dilation = 1.0;
  // A frame handed to its endpoint later than this after the model
  // delivered it means the emulator cannot keep up at this dilation: Run()
  // stops with FailedPrecondition. 0: no bound (lateness is only reported).
  int64_t max_lag_ns = 0;
  size_t frames = 4096;  // frame buffers (FramePool)
};

// A control request (HTTP method, target with query, body) and its answer.
struct ControlRequest {
  std::string method;
  std::string target;
  std::string body;
};
struct ControlReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class Emulator {
 public:
  // `endpoints[r]` attaches to host rank r (topology hosts() order).
  // InvalidArgument when the counts differ (naming both), or a fault of the
  // scenario does not attach.
  static StatusOr<std::unique_ptr<Emulator>> Create(
      const sim::LoadedScenario& scenario, const EmulatorOptions& options,
      std::vector<std::unique_ptr<Endpoint>> endpoints);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  // Runs until `stop` is set (OK), or the lag bound is broken
  // (FailedPrecondition naming the dilation and the lateness).
  Status Run(const std::atomic<bool>& stop);

  // Queues a control request for the loop; the future gets its reply.
  // Targets: GET /metrics (Prometheus text), GET /faults, POST /faults
  // (body: one fault in the scenario's syntax, a YAML map; its times count
  // from now), PUT /faults/NAME (replace), DELETE /faults/NAME, POST
  // /capture?link=A->B&file=PATH, DELETE /capture?link=A->B.
  std::future<ControlReply> Control(ControlRequest request);

  // Lateness of the frames handed to endpoints (wall ns after the model
  // delivered them): median and 99th percentile of the last 64Ki frames.
  struct Lateness {
    uint64_t frames = 0;
    double p50_ns = 0, p99_ns = 0, max_ns = 0;
  };
  // After Run returned (the loop no longer runs).
  Lateness lateness() const;
  // The metrics (Prometheus text), after Run returned.
  std::string MetricsText() { return Metrics(); }

 private:
  struct Host;
  struct Capture;
  Emulator(const sim::LoadedScenario& scenario, const EmulatorOptions& options);

  // The model's packet for one copy of a frame, sent into host `src`'s port.
  void Inject(Frame* f, int32_t src, int32_t dst, int64_t now_wall_ns);
  void Ingress(Frame* f, int32_t src, int64_t now_wall_ns);
  sim::QpFlow* FlowFor(int32_t src, int32_t dst, uint16_t sport, uint8_t tos, bool ipv6);
  static void OnDeliver(void* host, sim::Packet* p, int32_t in_port);
  static void OnPacketFreed(void* emulator, sim::Packet* p);
  static void OnTap(void* capture, const sim::Packet& p, Picoseconds at);
  void FlushTx(int64_t now_wall_ns, Status* lag);
  int64_t ModelPs(int64_t wall_ns) const;
  int64_t WallNs(int64_t model_ps) const;
  void RecordLateness(int64_t ns);

  // Control, on the loop's thread.
  void ServeControl();
  ControlReply Handle(const ControlRequest& r);
  std::string Metrics();
  ControlReply AddFault(const std::string& yaml, const std::string& replace);
  ControlReply ClearFault(const std::string& name);
  ControlReply ListFaults();
  ControlReply StartCapture(const std::string& link, const std::string& file);
  ControlReply StopCapture(const std::string& link);
  // Re-attaches fault_specs_ (the old attachment is retired, not destroyed:
  // events it scheduled may still point into it).
  Status Reattach();
  void Log(const std::string& line);
  sim::Port* PortByName(const std::string& name, std::string* error) const;

  sim::LoadedScenario scenario_;
  EmulatorOptions options_;
  sim::Engine engine_;
  std::unique_ptr<sim::Network> net_;
  FramePool frames_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::vector<std::unique_ptr<Host>> hosts_;  // by rank
  std::vector<int32_t> rank_of_node_;
  std::unordered_map<uint64_t, int32_t> mac_to_rank_;
  std::unordered_map<uint64_t, sim::QpFlow*> flows_;
  std::deque<sim::QpFlow> flow_storage_;  // stable addresses
  // Faults: the specs in force (each named), the attachment built from them
  // and the ones it replaced; the log of changes with their times.
  std::vector<proto::FaultSpec> fault_specs_;
  int fault_serial_ = 0;
  std::unique_ptr<sim::FaultAttachment> faults_;
  std::vector<std::unique_ptr<sim::FaultAttachment>> retired_;
  std::vector<std::string> log_;
  std::map<std::string, std::unique_ptr<Capture>> captures_;
  int64_t start_wall_ns_ = 0;
  int64_t backlog_limit_ps_ = 0;
  // Counters of the emulator itself.
  uint64_t flooded_frames_ = 0;
  uint64_t late_frames_ = 0;
  uint64_t turns_ = 0;
  static constexpr double kLatenessBounds[] = {1e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 1e-2, 1e-1, 1.0};
  uint64_t lateness_buckets_[std::size(kLatenessBounds)] = {};
  uint64_t lateness_count_ = 0;
  double lateness_sum_s_ = 0;
  double lateness_max_s_ = 0;
  std::vector<int64_t> lateness_ring_;  // the last kLatenessRing frames' lateness
  static constexpr size_t kLatenessRing = 65536;
  // Control requests from other threads; an eventfd wakes the loop.
  std::mutex control_mu_;
  std::vector<std::pair<ControlRequest, std::promise<ControlReply>>> control_;
  int wake_fd_ = -1;
};

}  // namespace fathom::live
