#include "fabric/scenario/event_trace.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <string>

#include "base/json.h"

namespace fathom::sim {
namespace {

// Component numbers by kind (the Schedule calls that make them): an arrival
// is node * 1024 + the receiving port's index (port.cc), a QP timer
// host node * 65536 + QPN (nic.cc); a NIC pump and a fault name the host
// node, a flow start the flow's index.
constexpr uint32_t kPortsPerNode = 1024;
constexpr uint32_t kQpnsPerHost = 65536;

}  // namespace

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kArrival:
      return "arrival";
    case EventKind::kNicPump:
      return "nic_pump";
    case EventKind::kQpTimer:
      return "qp_timer";
    case EventKind::kFlowStart:
      return "flow_start";
    case EventKind::kUser:
      return "user";
    case EventKind::kFault:
      return "fault";
  }
  return "unknown";
}

EventTraceWriter::EventTraceWriter(FILE* out, const topo::Topology* topology)
    : out_(out),
      topology_(topology),
      workload_pid_(static_cast<int64_t>(topology->nodes().size()) + 1),
      user_pid_(static_cast<int64_t>(topology->nodes().size()) + 2) {
  std::fputs("{\"traceEvents\":[", out_);
}

EventTraceWriter::Track EventTraceWriter::TrackOf(EventKind kind, uint32_t component) const {
  switch (kind) {
    case EventKind::kArrival:
      return {component / kPortsPerNode + 1, component % kPortsPerNode + 1};
    case EventKind::kNicPump:
      return {int64_t{component} + 1, kNicTid};
    case EventKind::kQpTimer:
      return {component / kQpnsPerHost + 1, kQpTimerTid};
    case EventKind::kFault:
      return {int64_t{component} + 1, kFaultTid};
    case EventKind::kFlowStart:
      return {workload_pid_, 1};
    case EventKind::kUser:
      break;
  }
  return {user_pid_, int64_t{component} + 1};
}

void EventTraceWriter::NameTrack(const Track& t, EventKind kind, uint32_t component) {
  const int64_t node = t.pid - 1;
  const bool is_node = node >= 0 && node < static_cast<int64_t>(topology_->nodes().size());
  // The document's first entry is always the first event's process name.
  if (named_pids_.insert(t.pid).second) {
    const std::string name = is_node                  ? topology_->node(node).name
                             : t.pid == workload_pid_ ? std::string("workload")
                                                      : std::string("user");
    std::fprintf(out_,
                 "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRId64
                 ",\"args\":{\"name\":%s}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\","
                 "\"pid\":%" PRId64 ",\"args\":{\"sort_index\":%" PRId64 "}}",
                 named_pids_.size() == 1 ? "\n" : ",\n", t.pid, JsonString(name).c_str(), t.pid,
                 t.pid);
  }
  std::string thread;
  if (t.tid == kNicTid) {
    thread = "NIC";
  } else if (t.tid == kQpTimerTid) {
    thread = "QP timers";
  } else if (t.tid == kFaultTid) {
    thread = "faults";
  } else if (kind == EventKind::kArrival && is_node &&
             static_cast<int32_t>(t.tid - 1) < topology_->PortCount(static_cast<int32_t>(node))) {
    const int32_t port = static_cast<int32_t>(t.tid - 1);
    thread = "port " + std::to_string(port) + " rx " +
             topology_->link(topology_->LinkAt(static_cast<int32_t>(node), port)).name;
  } else if (kind == EventKind::kFlowStart) {
    thread = "flow starts";
  } else {
    thread = "component " + std::to_string(component);
  }
  std::fprintf(out_,
               ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%" PRId64 ",\"tid\":%" PRId64
               ",\"args\":{\"name\":%s}}",
               t.pid, t.tid, JsonString(thread).c_str());
}

void EventTraceWriter::OnEvent(void* ctx, Picoseconds at, EventKind kind, uint32_t component) {
  auto* self = static_cast<EventTraceWriter*>(ctx);
  const Track t = self->TrackOf(kind, component);
  // A track is (pid, tid); pids and tids both fit in 32 bits.
  const uint64_t key = (static_cast<uint64_t>(t.pid) << 32) | static_cast<uint32_t>(t.tid);
  if (self->named_tracks_.insert(key).second) self->NameTrack(t, kind, component);
  // ts in microseconds with six decimals: the picosecond, exactly.
  const int64_t ps = at.ps();
  std::fprintf(self->out_,
               ",\n{\"name\":\"%s\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%" PRId64 ".%06" PRId64
               ",\"pid\":%" PRId64 ",\"tid\":%" PRId64,
               EventKindName(kind), ps / 1000000, ps % 1000000, t.pid, t.tid);
  switch (kind) {
    case EventKind::kQpTimer:
      std::fprintf(self->out_, ",\"args\":{\"qpn\":%" PRIu32 "}}", component % kQpnsPerHost);
      break;
    case EventKind::kFlowStart:
      std::fprintf(self->out_, ",\"args\":{\"flow\":%" PRIu32 "}}", component);
      break;
    case EventKind::kUser:
      std::fprintf(self->out_, ",\"args\":{\"component\":%" PRIu32 "}}", component);
      break;
    default:
      std::fputs("}", self->out_);
  }
  ++self->events_;
}

Status EventTraceWriter::Finish(const std::string& what) {
  std::fprintf(out_,
               "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"source\":\"fathom sim\","
               "\"events\":%" PRIu64 "}}\n",
               events_);
  if (std::fflush(out_) != 0 || std::ferror(out_) != 0) {
    return IoError(what + ": write failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace fathom::sim
