#include "fabric/scenario/pfc_field.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "base/pod_bytes.h"
#include "faults/spec.h"

namespace fathom::sim {

namespace {

// Reads what AppendPod wrote; false (and nothing read) past the end.
class Bytes {
 public:
  explicit Bytes(const std::string& s) : at_(s.data()), end_(s.data() + s.size()) {}
  template <typename T>
  bool Get(T* v) {
    return ReadPod(at_, end_, v);
  }

 private:
  const char* at_;
  const char* end_;
};

void PutPort(std::string* out, const Port* p) {
  AppendPod(out, p->config().node);
  AppendPod(out, p->config().index);
}

}  // namespace

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
  if (!split_) {
    if (deadlock_) deadlock_->Check();
    return;
  }
  // Every process agrees whether it is declared (OnWindow).
  if (deadlock_ && !deadlock_->deadlocked()) {
    Note(net_->engine().Now());
    Decide();
  }
  if (watchdog_) GatherWatchdog();
}

void PfcField::Split(PfcFieldSplit split) {
  split_ = true;
  split_with_ = std::move(split);
  if (watchdog_) {
    watchdog_->RetainQueues([this](const Port* p) { return split_with_.owns(p->config().node); });
    watchdog_->set_per_node_polls(true);
  }
  if (deadlock_) deadlock_->set_deferred([this](Picoseconds now) { Note(now); });
}

size_t PfcField::periodic_pending() const {
  return (watchdog_ ? watchdog_->node_polls() : 0) + (deadlock_ && deadlock_->scheduled() ? 1 : 0);
}

uint64_t PfcField::storms_detected() const {
  return merged_ ? merged_->detected : watchdog_ ? watchdog_->storms_detected() : 0;
}

uint64_t PfcField::storms_restored() const {
  return merged_ ? merged_->restored : watchdog_ ? watchdog_->storms_restored() : 0;
}

void PfcField::Note(Picoseconds now) {
  // As Snapshot, in two halves: the paused queues of the ports this
  // process sends on, and for each upstream port of this process's
  // switches whose account asserts XOFF, the egress ports holding its bytes
  // (Snapshot reads them for a paused upstream; the merge pairs them).
  std::string& out = notes_;
  AppendPod(&out, now.ps());
  std::string paused, holding;
  uint32_t n_paused = 0, n_holding = 0;
  for (Port* u : net_->ports()) {
    const PortPfc* pfc = u->pfc();
    if (pfc == nullptr) continue;
    if (split_with_.owns(u->config().node)) {
      for (int c = 0; c < kPriorities; ++c) {
        if (((pfc->paused & lossless_) >> c & 1) == 0) continue;
        PutPort(&paused, u);
        AppendPod(&paused, c);
        AppendPod(&paused, pfc->paused_since_ps[static_cast<size_t>(c)]);
        ++n_paused;
      }
    }
    const PortPfc* far = u->peer()->pfc();
    if (u->account().far_switch == nullptr || far == nullptr ||
        !split_with_.owns(u->peer()->config().node)) {
      continue;
    }
    for (int c = 0; c < kPriorities; ++c) {
      if (((far->by_account & lossless_) >> c & 1) == 0) continue;
      const std::vector<Port*> holders = u->account().far_switch->EgressHolding(u, c);
      PutPort(&holding, u);
      AppendPod(&holding, c);
      AppendPod(&holding, static_cast<uint32_t>(holders.size()));
      for (const Port* h : holders) PutPort(&holding, h);
      ++n_holding;
    }
  }
  AppendPod(&out, n_paused);
  out += paused;
  AppendPod(&out, n_holding);
  out += holding;
  ++noted_;
}

void PfcField::OnWindow() {
  if (!split_ || noted_ == 0) return;  // the same in every process
  Decide();
  deadlock_->ResumeDeferred();
}

void PfcField::Decide() {
  const std::vector<std::string> parts = split_with_.all_gather(notes_);
  std::vector<Bytes> in;
  for (const std::string& p : parts) in.emplace_back(p);
  auto port = [&](Bytes& b) -> Port* {
    int32_t node = 0, index = 0;
    b.Get(&node);
    b.Get(&index);
    return &net_->port(node, index);
  };
  for (uint64_t k = 0; k < noted_; ++k) {
    int64_t at = 0;
    // (port's place in Network::ports(), class) -> the wait; the ports
    // are in (node, index) order, as Snapshot walks them.
    std::map<std::tuple<int32_t, int32_t, int>, PfcWait> waits;
    std::map<std::pair<Port*, int>, std::vector<Port*>> held;
    for (Bytes& b : in) {
      b.Get(&at);
      uint32_t n = 0;
      b.Get(&n);
      for (uint32_t i = 0; i < n; ++i) {
        Port* u = port(b);
        int c = 0;
        int64_t since = 0;
        b.Get(&c);
        b.Get(&since);
        waits[{u->config().node, u->config().index, c}] = PfcWait{u, c, {}, Picoseconds(since)};
      }
      b.Get(&n);
      for (uint32_t i = 0; i < n; ++i) {
        Port* u = port(b);
        int c = 0;
        uint32_t m = 0;
        b.Get(&c);
        b.Get(&m);
        std::vector<Port*>& h = held[{u, c}];
        for (uint32_t j = 0; j < m; ++j) h.push_back(port(b));
      }
    }
    std::vector<PfcWait> list;
    for (auto& [key, w] : waits) {
      auto it = held.find({w.paused, w.tc});
      if (it != held.end()) w.holders = it->second;
      list.push_back(std::move(w));
    }
    deadlock_->Decide(Picoseconds(at), list);
  }
  notes_.clear();
  noted_ = 0;
}

PfcField::WatchdogView PfcField::LocalWatchdog() const {
  WatchdogView v;
  v.detected = watchdog_->storms_detected();
  v.restored = watchdog_->storms_restored();
  for (size_t i = 0; i < watchdog_->queue_count(); ++i) {
    const PfcWatchdog::QueueStats q = watchdog_->stats(i);
    if (q.storm_detected > 0)
      v.queues.push_back(WatchdogRow{watchdog_->port(i), watchdog_->tc(i), q});
  }
  v.events = watchdog_->events();
  return v;
}

void PfcField::GatherWatchdog() {
  const WatchdogView mine = LocalWatchdog();
  std::string out;
  AppendPod(&out, mine.detected);
  AppendPod(&out, mine.restored);
  AppendPod(&out, static_cast<uint64_t>(mine.queues.size()));
  for (const WatchdogRow& r : mine.queues) {
    PutPort(&out, r.port);
    AppendPod(&out, r.tc);
    AppendPod(&out, r.stats);
  }
  AppendPod(&out, static_cast<uint64_t>(mine.events.size()));
  for (const PfcWatchdog::Event& e : mine.events) {
    AppendPod(&out, e.at.ps());
    PutPort(&out, e.port);
    AppendPod(&out, e.tc);
    AppendPod(&out, static_cast<uint8_t>(e.detected));
    AppendPod(&out, e.paused_since.ps());
  }
  WatchdogView all;
  for (const std::string& part : split_with_.all_gather(out)) {
    Bytes b(part);
    uint64_t d = 0, r = 0, n = 0;
    b.Get(&d);
    b.Get(&r);
    all.detected += d;
    all.restored += r;
    b.Get(&n);
    for (uint64_t i = 0; i < n; ++i) {
      int32_t node = 0, index = 0;
      WatchdogRow row{};
      b.Get(&node);
      b.Get(&index);
      b.Get(&row.tc);
      b.Get(&row.stats);
      row.port = &net_->port(node, index);
      all.queues.push_back(row);
    }
    b.Get(&n);
    for (uint64_t i = 0; i < n; ++i) {
      int64_t at = 0, since = 0;
      int32_t node = 0, index = 0;
      int tc = 0;
      uint8_t detected = 0;
      b.Get(&at);
      b.Get(&node);
      b.Get(&index);
      b.Get(&tc);
      b.Get(&detected);
      b.Get(&since);
      all.events.push_back(PfcWatchdog::Event{Picoseconds(at), &net_->port(node, index), tc,
                                              detected != 0, Picoseconds(since)});
    }
  }
  // One process's order: queues as watched (port order, then class);
  // events by poll time, then switch (its poll's key), then queue.
  auto key = [](const Port* p, int tc) {
    return std::make_tuple(p->config().node, p->config().index, tc);
  };
  std::stable_sort(all.queues.begin(), all.queues.end(),
                   [&](const WatchdogRow& a, const WatchdogRow& b) {
                     return key(a.port, a.tc) < key(b.port, b.tc);
                   });
  std::stable_sort(all.events.begin(), all.events.end(),
                   [&](const PfcWatchdog::Event& a, const PfcWatchdog::Event& b) {
                     if (a.at != b.at) return a.at < b.at;
                     return key(a.port, a.tc) < key(b.port, b.tc);
                   });
  merged_ = std::move(all);
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
      if (u->account().far_switch != nullptr && far != nullptr && ((far->by_account >> c) & 1)) {
        w.holders = u->account().far_switch->EgressHolding(u, c);
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
    const WatchdogView view = merged_ ? *merged_ : LocalWatchdog();
    std::snprintf(buf, sizeof buf,
                  "pfcwd      action %s, detection %.0f ms, restoration %.0f ms, poll %.0f ms: "
                  "%" PRIu64 " storms detected, %" PRIu64 " restored\n",
                  PfcWdActionName(c.action), c.detection_time.ns() / 1e6,
                  c.restoration_time.ns() / 1e6, c.poll_interval.ns() / 1e6, view.detected,
                  view.restored);
    s += buf;
    // Each queue that stormed, SONiC's `pfcwd show stats` columns.
    for (const WatchdogRow& row : view.queues) {
      const PfcWatchdog::QueueStats& q = row.stats;
      const Port* p = row.port;
      std::snprintf(buf, sizeof buf,
                    "  %s:%d->%s prio %d  %s  STORM DETECTED/RESTORED %" PRIu64 "/%" PRIu64
                    "  TX DROP %" PRIu64 "\n",
                    topo.node(p->config().node).name.c_str(), p->config().index,
                    topo.node(p->peer()->config().node).name.c_str(), row.tc,
                    q.stormed ? "stormed" : "operational", q.storm_detected, q.storm_restored,
                    q.tx_dropped_packets);
      s += buf;
    }
    for (const PfcWatchdog::Event& e : view.events) {
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
