// The captures (`fathom sim --pcap`) and the event trace (`--trace`) of a
// distributed run, merged on rank 0 into the files one process writes
// (issue 30).
//
// Each process sees only the events and frames of its partition: a frame
// is captured where its sending port is simulated, an event where its
// component lives. Every record is tagged with the canonical key of the
// event that made it, (time, kind, component), which names one process
// (docs/PARALLEL.md: a component is simulated in one process) and orders
// every process's records the way the one-process run dispatches them.
// Each process's records are in that order already (its engine runs in
// it), so rank 0 merges the streams by key, keeping a stream's ties in
// its order (events with one key are one node's, in one process). The
// files are then byte for byte those of `--event-order canonical` in one
// process, for any number of processes.
//
// Memory stays bounded: the records are gathered to rank 0 every
// kWindowsPerFlush synchronization windows (every process flushes at the
// same windows) and written there; a window's events all precede the
// next window's, so merging window by window is merging the whole.
//
// Ownership: the captures, the trace writer and the Comm are not owned and
// must outlive the merge. The merge takes the engine's tracer slot
// (Engine::set_tracer) for the run. One thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fabric/parallel/comm.h"
#include "fabric/scenario/capture.h"
#include "fabric/scenario/event_trace.h"
#include "fabric/sim/engine.h"

namespace fathom::parallel {

class OutputMerge {
 public:
  // `captures`: every process's, opened alike (only rank 0's have files);
  // their frames go here from now on. `trace`: rank 0's writer, null
  // elsewhere; `tracing`: whether the run writes a trace (every process
  // says the same).
  OutputMerge(Comm* comm, std::vector<sim::PortCapture*> captures, sim::EventTraceWriter* trace,
              bool tracing);
  OutputMerge(const OutputMerge&) = delete;
  OutputMerge& operator=(const OutputMerge&) = delete;

  // `skip(kind, component)`: events this process dispatches that another
  // process reports (a re-route every process applies: parallel_run.h).
  void set_skip(std::function<bool(sim::EventKind, uint32_t)> skip) { skip_ = std::move(skip); }

  // Before the first event: sees every event of `engine` (canonical order).
  void Attach(sim::Engine* engine);
  // After each synchronization window, in every process: every
  // kWindowsPerFlush windows the records go to rank 0.
  void OnWindow();
  // After the last window, in every process: the rest goes to rank 0, and
  // the engine's tracer is released.
  void Finish();

  // Windows between flushes: a window is one least link latency of
  // traffic, so this bounds the records held to a few microseconds' worth.
  static constexpr uint64_t kWindowsPerFlush = 16;

  // The merge of one stream: `parts` by rank, each a sequence of records
  // that begin with a Key, in key order; `body` gives a record's length
  // after its key. Calls `take(rank, record)` in merged order. Public for
  // the tests.
  struct Key {
    int64_t time;
    uint16_t kind;
    uint32_t component;
  };
  static constexpr size_t kKeyBytes = 8 + 2 + 4;
  static void MergeStreams(const std::vector<std::string_view>& parts,
                           const std::function<size_t(const char* record)>& body,
                           const std::function<void(size_t rank, const char* record)>& take);

 private:
  struct Sink {
    OutputMerge* self;
    size_t index;
  };
  static void OnEvent(void* ctx, Picoseconds at, sim::EventKind kind, uint32_t component);
  static void OnFrame(void* ctx, std::span<const uint8_t> frame, int64_t timestamp_ns);
  void Flush();

  Comm* comm_;
  std::vector<sim::PortCapture*> captures_;
  sim::EventTraceWriter* trace_;
  bool tracing_;
  std::function<bool(sim::EventKind, uint32_t)> skip_;
  sim::Engine* engine_ = nullptr;
  std::vector<std::unique_ptr<Sink>> sinks_;
  char key_[kKeyBytes] = {};  // the current event's key, as recorded
  std::string trace_records_;
  std::vector<std::string> frame_records_;  // by capture
  uint64_t windows_ = 0;
};

}  // namespace fathom::parallel
