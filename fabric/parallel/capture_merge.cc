#include "fabric/parallel/capture_merge.h"

#include <cstring>
#include <tuple>

#include "base/pod_bytes.h"

namespace fathom::parallel {
namespace {

template <typename T>
T Load(const char* at) {
  T v;
  std::memcpy(&v, at, sizeof(T));
  return v;
}

OutputMerge::Key KeyAt(const char* at) {
  return {Load<int64_t>(at), Load<uint16_t>(at + 8), Load<uint32_t>(at + 10)};
}

bool Before(const OutputMerge::Key& a, const OutputMerge::Key& b) {
  return std::tie(a.time, a.kind, a.component) < std::tie(b.time, b.kind, b.component);
}

// A frame record after its key: the timestamp (ns), the length, the bytes.
constexpr size_t kFrameHead = 8 + 4;
size_t FrameBody(const char* record) {
  return kFrameHead + Load<uint32_t>(record + OutputMerge::kKeyBytes + 8);
}

}  // namespace

OutputMerge::OutputMerge(Comm* comm, std::vector<sim::PortCapture*> captures,
                         sim::EventTraceWriter* trace, bool tracing)
    : comm_(comm), captures_(std::move(captures)), trace_(trace), tracing_(tracing) {
  frame_records_.resize(captures_.size());
  for (size_t i = 0; i < captures_.size(); ++i) {
    sinks_.push_back(std::make_unique<Sink>(Sink{this, i}));
    captures_[i]->set_sink(&OutputMerge::OnFrame, sinks_.back().get());
  }
}

void OutputMerge::Attach(sim::Engine* engine) {
  engine_ = engine;
  if (tracing_ || !captures_.empty()) engine->set_tracer(&OutputMerge::OnEvent, this);
}

void OutputMerge::OnEvent(void* ctx, Picoseconds at, sim::EventKind kind, uint32_t component) {
  auto* self = static_cast<OutputMerge*>(ctx);
  // The key first, even for a skipped event: a frame it sends (an XON a
  // PFC settle event releases) is the one process's frame of that key.
  const int64_t t = at.ps();
  const uint16_t k = static_cast<uint16_t>(kind);
  std::memcpy(self->key_, &t, 8);
  std::memcpy(self->key_ + 8, &k, 2);
  std::memcpy(self->key_ + 10, &component, 4);
  if (self->skip_ && self->skip_(kind, component)) return;
  if (self->tracing_) self->trace_records_.append(self->key_, kKeyBytes);
}

void OutputMerge::OnFrame(void* ctx, std::span<const uint8_t> frame, int64_t timestamp_ns) {
  const auto* sink = static_cast<const Sink*>(ctx);
  std::string& out = sink->self->frame_records_[sink->index];
  out.append(sink->self->key_, kKeyBytes);
  AppendPod(&out, timestamp_ns);
  AppendPod(&out, static_cast<uint32_t>(frame.size()));
  out.append(reinterpret_cast<const char*>(frame.data()), frame.size());
}

void OutputMerge::OnWindow() {
  if (++windows_ % kWindowsPerFlush == 0) Flush();
}

void OutputMerge::Finish() {
  Flush();
  if (engine_ != nullptr) engine_->set_tracer(nullptr, nullptr);
  engine_ = nullptr;
}

void OutputMerge::MergeStreams(const std::vector<std::string_view>& parts,
                               const std::function<size_t(const char* record)>& body,
                               const std::function<void(size_t rank, const char* record)>& take) {
  std::vector<size_t> at(parts.size(), 0);
  for (;;) {
    // The earliest head; a tie between processes cannot happen (a key is
    // one process's), and would go to the lower rank.
    size_t best = parts.size();
    Key best_key{};
    for (size_t r = 0; r < parts.size(); ++r) {
      if (at[r] >= parts[r].size()) continue;
      const Key k = KeyAt(parts[r].data() + at[r]);
      if (best == parts.size() || Before(k, best_key)) {
        best = r;
        best_key = k;
      }
    }
    if (best == parts.size()) return;
    const char* record = parts[best].data() + at[best];
    take(best, record);
    at[best] += kKeyBytes + body(record);
  }
}

void OutputMerge::Flush() {
  if (!tracing_ && captures_.empty()) return;
  // One message per process: each stream as (uint64 length, records).
  std::string mine;
  AppendPod(&mine, static_cast<uint64_t>(trace_records_.size()));
  mine += trace_records_;
  for (const std::string& f : frame_records_) {
    AppendPod(&mine, static_cast<uint64_t>(f.size()));
    mine += f;
  }
  trace_records_.clear();
  for (std::string& f : frame_records_) f.clear();
  const std::vector<std::string> all = comm_->Gather(mine);
  if (comm_->rank() != 0) return;
  const size_t streams = 1 + captures_.size();
  // parts[stream][rank]
  std::vector<std::vector<std::string_view>> parts(streams);
  for (const std::string& msg : all) {
    size_t at = 0;
    for (size_t s = 0; s < streams; ++s) {
      const uint64_t n = Load<uint64_t>(msg.data() + at);
      at += 8;
      parts[s].emplace_back(msg.data() + at, n);
      at += n;
    }
  }
  if (tracing_ && trace_ != nullptr) {
    MergeStreams(
        parts[0], [](const char*) { return size_t{0}; },
        [&](size_t, const char* record) {
          const Key k = KeyAt(record);
          trace_->Record(Picoseconds(k.time), static_cast<sim::EventKind>(k.kind), k.component);
        });
  }
  for (size_t c = 0; c < captures_.size(); ++c) {
    sim::PortCapture* cap = captures_[c];
    MergeStreams(parts[1 + c], FrameBody, [&](size_t, const char* record) {
      const char* head = record + kKeyBytes;
      const uint32_t n = Load<uint32_t>(head + 8);
      cap->WriteMerged(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(head + kFrameHead), n),
          Load<int64_t>(head));
    });
  }
}

}  // namespace fathom::parallel
