#include "transport/worlds/sim_backend.h"

#include <unistd.h>

#include <cstdio>

#include "transport/collectives/report.h"

namespace fathom::transport::worlds {

std::vector<int> SimBackend::local_ranks() const {
  std::vector<int> r(static_cast<size_t>(world_->nranks()));
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int>(i);
  return r;
}

std::string SimBackend::Where() const {
  return std::to_string(nranks()) + " ranks on " + world_->topology().name() + ", profile " +
         world_->profile() + ", " + (world_->lossless() ? "lossless" : "lossy");
}

std::string SimBackend::WhereJson() const {
  return "\"topology\":\"" + world_->topology().name() + "\",\"profile\":\"" + world_->profile() +
         "\",\"fabric\":\"" + (world_->lossless() ? "lossless" : "lossy") + "\"";
}

std::vector<std::string> SimBackend::DeviceLines() {
  std::vector<std::string> lines;
  for (int r = 0; r < nranks(); ++r) {
    const std::string dev = world_->comm(r).device().info().name;
    const std::string host = dev.rfind("sim:", 0) == 0 ? dev.substr(4) : dev;
    lines.push_back(coll::DeviceLine(r, static_cast<int>(getpid()), host, dev + " (emulated)"));
  }
  return lines;
}

BitsPerSecond SimBackend::link_bandwidth() {
  return BitsPerSecond::Gbps(static_cast<int64_t>(world_->comm(0).device().info().active_gbps));
}

void SimBackend::WatchProgress(Progress* progress) {
  if (progress == nullptr || !progress->enabled()) {
    world_->engine().set_progress(nullptr, nullptr, 0);
    return;
  }
  // Every 64K events: cheap next to the events themselves.
  world_->engine().set_progress(
      [](void* ctx, const sim::Engine& e) {
        char buf[48];
        std::snprintf(buf, sizeof(buf), ", sim t=%.0fus", e.Now().us());
        static_cast<Progress*>(ctx)->Tick(buf);
      },
      progress, 1u << 16);
}

bool SimBackend::WriteTrace(const std::string& path, const coll::Trace& trace, bool) {
  return WriteTraceFile(path, trace.ToJson());
}

}  // namespace fathom::transport::worlds
