// The events of a simulation run as a Chrome trace / Perfetto JSON file
// (`fathom sim --trace`), which ui.perfetto.dev and chrome://tracing open:
// one instant event per dispatched event, named by its kind ("arrival",
// "nic_pump", ...), at its virtual time (ts in microseconds, to the
// picosecond). Components are tracks: a process per topology node (named
// after it) with a thread per port ("port 1 rx leaf0-spine1": arrivals at
// that port), "NIC", "QP timers" and "faults"; flow starts go to a
// "workload" process. The same conventions as `fathom coll --trace`
// (transport/collectives/trace.h).
//
// Writing is the engine's observed path (Engine::set_tracer): a run without a
// trace never calls it. Events stream straight to the file, so a trace of
// millions of events needs no memory of its own.
//
// Ownership: the writer does not own the FILE (the caller opens and closes
// it) nor the topology, which must outlive it. One thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <unordered_set>

#include "base/status.h"
#include "fabric/sim/engine.h"
#include "topologies/topology.h"

namespace fathom::sim {

class EventTraceWriter {
 public:
  // Starts the JSON document on `out`.
  EventTraceWriter(FILE* out, const topo::Topology* topology);
  EventTraceWriter(const EventTraceWriter&) = delete;
  EventTraceWriter& operator=(const EventTraceWriter&) = delete;

  // Makes `engine` report every event here until set_tracer(nullptr, ...).
  void Attach(Engine* engine) { engine->set_tracer(&EventTraceWriter::OnEvent, this); }
  // Ends the document and flushes; IoError naming `what` (the file, for the
  // message) when anything could not be written.
  Status Finish(const std::string& what);

  uint64_t events() const { return events_; }
  // Writes one event as the engine's tracer would (a distributed run's
  // events, merged on rank 0: fabric/parallel/capture_merge.h).
  void Record(Picoseconds at, EventKind kind, uint32_t component) {
    OnEvent(this, at, kind, component);
  }

  // The track of an event: pid (node id + 1, or the workload/user process)
  // and tid. Public for the tests.
  struct Track {
    int64_t pid;
    int64_t tid;
  };
  Track TrackOf(EventKind kind, uint32_t component) const;
  // Thread and process ids for the components that are not a node's.
  static constexpr int64_t kNicTid = 100000;
  static constexpr int64_t kQpTimerTid = 100001;
  static constexpr int64_t kFaultTid = 100002;

 private:
  static void OnEvent(void* ctx, Picoseconds at, EventKind kind, uint32_t component);
  // Writes the process and thread names of `t` the first time it is seen.
  void NameTrack(const Track& t, EventKind kind, uint32_t component);

  FILE* out_;
  const topo::Topology* topology_;
  int64_t workload_pid_;
  int64_t user_pid_;
  uint64_t events_ = 0;
  std::unordered_set<int64_t> named_pids_;
  std::unordered_set<uint64_t> named_tracks_;
};

// The trace name of an event kind ("arrival", "nic_pump", "qp_timer",
// "flow_start", "user", "fault").
const char* EventKindName(EventKind kind);

}  // namespace fathom::sim
