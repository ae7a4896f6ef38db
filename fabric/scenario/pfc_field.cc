#include "fabric/scenario/pfc_field.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>

#include "faults/spec.h"

namespace fathom::sim {

struct PfcField::StormEvent {
  Port* port;
  uint8_t classes;
  bool start;
};

PfcField::PfcField(Network* net, const PfcFieldOptions& options)
    : net_(net), lossless_(options.lossless) {
  if (lossless_ == 0) return;
  const topo::Topology& topo = net->topology();
  if (options.watchdog.has_value()) {
    watchdog_ = std::make_unique<PfcWatchdog>(
        &net->engine(), *options.watchdog,
        PfcQueueControl{&PausedSince, &PauseFrames, &Mitigate, &TxDropped, nullptr, this});
    for (Port* p : net->ports()) {
      if (topo.node(p->config().node).kind != topo::NodeKind::kSwitch) continue;
      for (int c = 0; c < kPriorities; ++c) {
        if ((lossless_ >> c) & 1) watchdog_->Watch(p, c);
      }
    }
  }
  if (options.detect_deadlock) {
    deadlock_ = std::make_unique<PfcDeadlockDetector>(
        &net->engine(), [this] { return Snapshot(); }, options.deadlock_interval,
        options.deadlock_persist);
  }
}

PfcField::~PfcField() = default;

void PfcField::Start() {
  // Each stops when only the other's event is pending.
  if (watchdog_) {
    watchdog_->set_idle_pending(deadlock_ ? 1 : 0);
    watchdog_->Start();
  }
  if (deadlock_) {
    deadlock_->set_idle_pending(watchdog_ ? 1 : 0);
    deadlock_->Start();
  }
}

void PfcField::Finish() {
  if (deadlock_) deadlock_->Check();
}

Picoseconds PfcField::PausedSince(void*, Port* port, int tc) {
  const PortPfc* pfc = port->pfc();
  if (pfc == nullptr || ((pfc->paused >> tc) & 1) == 0) return Picoseconds::Max();
  return Picoseconds(pfc->paused_since_ps[static_cast<size_t>(tc)]);
}

uint64_t PfcField::PauseFrames(void*, Port* port, int tc) {
  const PortPfc* pfc = port->pfc();
  return pfc == nullptr ? 0 : pfc->counters.rx_pause[static_cast<size_t>(tc)];
}

void PfcField::Mitigate(void* ctx, Port* port, int tc, PfcWdAction action, bool on) {
  auto* self = static_cast<PfcField*>(ctx);
  const Picoseconds now = self->net_->engine().Now();
  if (!on) {
    port->WatchdogDrop(tc, false);
    port->IgnorePause(tc, now);  // honoured again from now
    return;
  }
  if (action == PfcWdAction::kDrop) {
    // Discard every frame that comes for the queue from now on, and the
    // frames waiting in it (as SONiC's drop action does); their bytes leave
    // the switch's ingress accounts, so the XOFF it asserted upstream is
    // released. Before PAUSE stops being honoured (below), which would send
    // the waiting frames on.
    port->WatchdogDrop(tc, true);
    port->DropWaiting(tc);
  }
  port->IgnorePause(tc, Picoseconds::Max());
}

uint64_t PfcField::TxDropped(void*, Port* port, int tc) {
  const PortPfc* pfc = port->pfc();
  return pfc == nullptr ? 0 : pfc->counters.watchdog_dropped[static_cast<size_t>(tc)];
}

std::vector<PfcWait> PfcField::Snapshot() const {
  std::vector<PfcWait> waits;
  for (Port* u : net_->ports()) {
    const PortPfc* pfc = u->pfc();
    if (pfc == nullptr || (pfc->paused & lossless_) == 0) continue;
    for (int c = 0; c < kPriorities; ++c) {
      if (((pfc->paused & lossless_) >> c & 1) == 0) continue;
      PfcWait w{u, c, {}, Picoseconds(pfc->paused_since_ps[static_cast<size_t>(c)])};
      // Paused by a switch's ingress account (not a NIC's own PAUSE): the
      // bytes it waits on sit in that switch's egress ports.
      const PortPfc* far = u->peer()->pfc();
      if (pfc->far_switch != nullptr && far != nullptr && ((far->by_account >> c) & 1)) {
        w.holders = pfc->far_switch->EgressHolding(u, c);
      }
      waits.push_back(std::move(w));
    }
  }
  return waits;
}

void PfcField::OnStorm(void* obj, uint64_t) {
  auto* e = static_cast<StormEvent*>(obj);
  if (e->start) {
    // Duration 0: until released, refreshed at half the pause time (pfc.h).
    e->port->EmitPause(e->classes, Picoseconds(0));
  } else {
    e->port->ReleasePause(e->classes);
  }
}

void PfcField::Storm(int32_t host, int priority, Picoseconds start, Picoseconds end) {
  const int32_t node = net_->topology().hosts()[static_cast<size_t>(host)];
  Port* port = &net_->port(node, 0);
  const uint8_t classes = static_cast<uint8_t>(1u << (priority & 7));
  storms_.push_back(std::make_unique<StormEvent>(StormEvent{port, classes, true}));
  net_->engine().Schedule<&PfcField::OnStorm>(start, EventKind::kFault, static_cast<uint32_t>(node),
                                              storms_.back().get(), 0);
  if (end != Picoseconds::Max()) {
    storms_.push_back(std::make_unique<StormEvent>(StormEvent{port, classes, false}));
    net_->engine().Schedule<&PfcField::OnStorm>(end, EventKind::kFault, static_cast<uint32_t>(node),
                                                storms_.back().get(), 0);
  }
}

uint64_t PfcField::TxPauseOfHost(int32_t host_rank) const {
  const int32_t node = net_->topology().hosts()[static_cast<size_t>(host_rank)];
  const PortPfc* pfc = net_->port(node, 0).pfc();
  if (pfc == nullptr) return 0;
  uint64_t n = 0;
  for (uint64_t v : pfc->counters.tx_pause) n += v;
  return n;
}

std::vector<PfcField::TierPause> PfcField::PauseByTier() const {
  const topo::Topology& topo = net_->topology();
  std::map<int, TierPause> by;
  for (Port* p : net_->ports()) {
    const PortPfc* pfc = p->pfc();
    if (pfc == nullptr) continue;
    const int tier = topo.node(p->config().node).tier;
    TierPause& t = by.try_emplace(tier, TierPause{tier}).first->second;
    for (int c = 0; c < kPriorities; ++c) {
      t.tx_pause += pfc->counters.tx_pause[static_cast<size_t>(c)];
      t.rx_pause += pfc->counters.rx_pause[static_cast<size_t>(c)];
    }
  }
  std::vector<TierPause> out;
  for (const auto& [tier, t] : by) out.push_back(t);
  return out;
}

std::string PfcField::CycleName() const {
  if (!deadlock_ || !deadlock_->deadlocked()) return "";
  const topo::Topology& topo = net_->topology();
  auto name = [&](const Port* p) {
    return topo.node(p->config().node).name + ":" + std::to_string(p->config().index);
  };
  std::string s;
  for (const PfcQueue& q : deadlock_->cycle()) s += name(q.first) + " -> ";
  return s + name(deadlock_->cycle().front().first);
}

std::string PfcField::Summary() const {
  if (lossless_ == 0) return "";
  const topo::Topology& topo = net_->topology();
  char buf[256];
  std::string s = "pfc        PAUSE frames sent / received by tier:";
  for (const TierPause& t : PauseByTier()) {
    std::snprintf(buf, sizeof buf, " %s %" PRIu64 "/%" PRIu64,
                  t.tier == 0 ? "hosts" : ("tier" + std::to_string(t.tier)).c_str(), t.tx_pause,
                  t.rx_pause);
    s += buf;
  }
  s += "\n";
  if (watchdog_) {
    const PfcWatchdogConfig& c = watchdog_->config();
    std::snprintf(buf, sizeof buf,
                  "pfcwd      action %s, detection %.0f ms, restoration %.0f ms, poll %.0f ms: "
                  "%" PRIu64 " storms detected, %" PRIu64 " restored\n",
                  PfcWdActionName(c.action), c.detection_time.ns() / 1e6,
                  c.restoration_time.ns() / 1e6, c.poll_interval.ns() / 1e6,
                  watchdog_->storms_detected(), watchdog_->storms_restored());
    s += buf;
    // Each queue that stormed, SONiC's `pfcwd show stats` columns.
    for (size_t i = 0; i < watchdog_->queue_count(); ++i) {
      const PfcWatchdog::QueueStats q = watchdog_->stats(i);
      if (q.storm_detected == 0) continue;
      const Port* p = watchdog_->port(i);
      std::snprintf(buf, sizeof buf,
                    "  %s:%d->%s prio %d  %s  STORM DETECTED/RESTORED %" PRIu64 "/%" PRIu64
                    "  TX DROP %" PRIu64 "\n",
                    topo.node(p->config().node).name.c_str(), p->config().index,
                    topo.node(p->peer()->config().node).name.c_str(), watchdog_->tc(i),
                    q.stormed ? "stormed" : "operational", q.storm_detected, q.storm_restored,
                    q.tx_dropped_packets);
      s += buf;
    }
    for (const PfcWatchdog::Event& e : watchdog_->events()) {
      std::snprintf(buf, sizeof buf, "  %.3f ms %s:%d prio %d %s\n", e.at.ns() / 1e6,
                    topo.node(e.port->config().node).name.c_str(), e.port->config().index, e.tc,
                    e.detected ? "storm detected" : "storm restored");
      s += buf;
    }
  }
  if (deadlock_ && deadlock_->deadlocked()) {
    std::snprintf(buf, sizeof buf,
                  "PFC deadlock: a cycle of %zu paused queues (paused since %.3f ms, declared at "
                  "%.3f ms): ",
                  deadlock_->cycle().size(), deadlock_->first_seen().ns() / 1e6,
                  deadlock_->declared_at().ns() / 1e6);
    s += buf + CycleName() + "\n";
  }
  return s;
}

namespace {

std::string Ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g ms", v);
  return buf;
}

// A time in milliseconds in (0, max].
Status CheckMs(const config::SourceMap& map, const std::string& path, double v, double max,
               const char* why) {
  if (!std::isfinite(v) || v <= 0 || v > max) {
    return map.Error(path, Ms(v) + " is outside (0, " + Ms(max) + "] (" + why + ")");
  }
  return Status::Ok();
}

}  // namespace

Status ValidatePfcField(const proto::Scenario& s, const config::SourceMap& map) {
  const proto::QosSpec& qos = s.network().qos();
  uint8_t lossless = 0;
  for (const proto::PfcClassSpec& c : qos.classes()) {
    if (c.lossless() && c.priority() >= 0 && c.priority() < 8) lossless |= 1u << c.priority();
  }
  if (qos.has_pfc_watchdog()) {
    const proto::PfcWatchdogSpec& w = qos.pfc_watchdog();
    const std::string at = "network.qos.pfc_watchdog";
    // SONiC's CLI ranges (sonic-utilities pfcwd/main.py): detection up to
    // 5000 ms, restoration up to 60000 ms, poll up to 1000 ms.
    // Unset: PfcWatchdogConfig's defaults.
    const PfcWatchdogConfig d;
    auto ms = [](Picoseconds t) { return static_cast<double>(t.ps()) / 1e9; };
    const double detection =
        w.has_detection_time_ms() ? w.detection_time_ms() : ms(d.detection_time);
    const double restoration =
        w.has_restoration_time_ms() ? w.restoration_time_ms() : ms(d.restoration_time);
    const double poll = w.has_poll_interval_ms() ? w.poll_interval_ms() : ms(d.poll_interval);
    FATHOM_RETURN_IF_ERROR(CheckMs(map, at + ".detection_time_ms", detection, 5000,
                                   "SONiC's pfcwd allows up to 5000 ms"));
    FATHOM_RETURN_IF_ERROR(CheckMs(map, at + ".restoration_time_ms", restoration, 60000,
                                   "SONiC's pfcwd allows up to 60000 ms"));
    FATHOM_RETURN_IF_ERROR(
        CheckMs(map, at + ".poll_interval_ms", poll, 1000, "SONiC's pfcwd allows up to 1000 ms"));
    if (poll > detection || poll > restoration) {
      return map.Error(at + ".poll_interval_ms", Ms(poll) + " is longer than the detection (" +
                                                     Ms(detection) + ") or restoration (" +
                                                     Ms(restoration) +
                                                     ") time; SONiC refuses such a poll interval");
    }
    if (!w.action().empty() && w.action() != "drop" && w.action() != "forward") {
      return map.Error(at + ".action", "'" + w.action() + "' is not drop or forward");
    }
    if (lossless == 0) {
      return map.Error(at, "the watchdog watches lossless classes, and network.qos has none");
    }
  }
  for (int i = 0; i < s.faults_size(); ++i) {
    const proto::FaultSpec& f = s.faults(i);
    if (f.kind() != "pfc_storm") continue;
    const int prio = faults::PfcStormOf(f).priority;
    if (((lossless >> prio) & 1) == 0) {
      return map.Error("faults[" + std::to_string(i) + "]" + (f.has_priority() ? ".priority" : ""),
                       "priority " + std::to_string(prio) +
                           " is not a lossless class of network.qos: a PFC storm pauses a "
                           "lossless priority");
    }
  }
  return Status::Ok();
}

PfcFieldOptions PfcFieldOptionsOf(const proto::Scenario& s, const QosConfig& qos) {
  PfcFieldOptions o;
  o.lossless = qos.lossless_mask();
  const proto::QosSpec& q = s.network().qos();
  if (q.has_pfc_watchdog() && (!q.pfc_watchdog().has_enabled() || q.pfc_watchdog().enabled())) {
    const proto::PfcWatchdogSpec& w = q.pfc_watchdog();
    PfcWatchdogConfig c;
    auto ms = [](double v) { return Picoseconds(std::llround(v * 1e9)); };
    if (w.has_detection_time_ms()) c.detection_time = ms(w.detection_time_ms());
    if (w.has_restoration_time_ms()) c.restoration_time = ms(w.restoration_time_ms());
    if (w.has_poll_interval_ms()) c.poll_interval = ms(w.poll_interval_ms());
    if (w.action() == "forward") c.action = PfcWdAction::kForward;
    o.watchdog = c;
  }
  return o;
}

void AttachPfcStorms(const proto::Scenario& s, const topo::Topology& topo, PfcField* field) {
  for (const proto::FaultSpec& f : s.faults()) {
    if (f.kind() != "pfc_storm") continue;
    const faults::PfcStorm storm = faults::PfcStormOf(f);
    // The host was resolved when the faults were attached.
    const int32_t node = topo.FindNode(f.host()).value();
    field->Storm(topo.HostRank(node), storm.priority, storm.window.start, storm.window.end);
  }
}

}  // namespace fathom::sim
