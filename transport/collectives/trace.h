// Chrome trace / Perfetto JSON of collective steps (`fathom coll --trace`).
// A Trace collects the events of the ranks one process drives (the sim's
// every rank, verbs' one rank). For verbs, each rank's events are on its own
// steady clock: the ranks ship them to rank 0 in a compact text form
// (EncodeRankTrace / DecodeRankTrace, small enough to chunk through the
// bootstrap), and rank 0 writes one file with every rank on one timeline
// (MergedTraceJson), each rank's clock shifted by its reading at a common
// reference point.
//
// Ownership: plain values; no threads.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/units.h"

namespace fathom::transport::coll {

// One step of one rank's stream: send, recv, reduce or the wait before it.
struct TraceEvent {
  std::string name;  // "wait", "recv-reduce-send", ... (no tab or newline)
  int rank = 0;
  int stream = 0;
  Picoseconds start;
  Picoseconds duration;
  std::string args;  // JSON object body, e.g. "\"peer\":3" (no tab or newline)
};

struct Trace {
  std::vector<TraceEvent> events;
  // {"traceEvents":[...]} with ts/dur in microseconds, pid = rank, tid = stream.
  std::string ToJson() const;
};

// One rank's events for the merged file. `origin` is the rank's clock
// reading at the common reference point: its events land at start - origin.
struct RankTrace {
  int rank = 0;
  Picoseconds origin;
  // How many events the rank recorded; events.size() is less when the rank
  // sent only its first ones (see EncodeRankTrace).
  size_t total_events = 0;
  std::vector<TraceEvent> events;
};

// The compact form shipped to rank 0: a header line
// "fathom-trace 1 RANK ORIGIN_PS TOTAL KEPT" and one line per event
// "NAME STREAM START_PS DURATION_PS ARGS", tab-separated. It holds the
// first events of `trace` that fit in `max_bytes` (whole lines; the header
// always fits); *kept (optional) says how many. Tabs and newlines inside a
// name or args (there are none today) become spaces.
std::string EncodeRankTrace(const RankTrace& trace, size_t max_bytes, size_t* kept = nullptr);
// INVALID_ARGUMENT naming the line for anything EncodeRankTrace would not
// have written.
StatusOr<RankTrace> DecodeRankTrace(std::string_view text);

// One Chrome trace of every rank in `ranks`: complete ("X") events with
// ts = start - origin in microseconds, pid = rank, tid = stream; metadata
// events naming each process "rank N" (sorted by rank) and each thread
// "stream S"; `notes` (clock alignment, ranks missing or cut short) go to
// "otherData" as "note0", "note1", ...
std::string MergedTraceJson(const std::vector<RankTrace>& ranks,
                            const std::vector<std::string>& notes);

}  // namespace fathom::transport::coll
