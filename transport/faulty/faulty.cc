#include "transport/faulty/faulty.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>

namespace fathom::transport::faulty {

class FaultyCq;
class FaultyQp;

class FaultyDevice final : public Device {
 public:
  FaultyDevice(std::unique_ptr<Device> inner, FaultInjector* injector, int rank,
               std::vector<size_t> faults)
      : inner_(std::move(inner)), injector_(injector), rank_(rank), faults_(std::move(faults)) {}
  ~FaultyDevice() override { *alive_ = false; }

  const DeviceInfo& info() const override { return inner_->info(); }
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, uint64_t length,
                                                         uint32_t access) override {
    return inner_->RegisterMemory(addr, length, access);
  }
  StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) override;
  StatusOr<std::unique_ptr<QueuePair>> CreateQp(int peer_rank, const QpOptions& options,
                                                CompletionQueue* cq) override;
  std::vector<AsyncEvent> TakeAsyncEvents() override {
    CheckTriggers();
    std::vector<AsyncEvent> out = inner_->TakeAsyncEvents();
    out.insert(out.end(), events_.begin(), events_.end());
    events_.clear();
    return out;
  }

  // Schedules the time triggers of qp_error / async_event (sim only).
  void ScheduleTimed();
  // Fires the qp_error / async_event faults whose time and count have come.
  void CheckTriggers();

  FaultInjector* injector() { return injector_; }
  const std::vector<size_t>& faults() const { return faults_; }
  int rank() const { return rank_; }
  const VerbsFault& fault(size_t i) const { return injector_->plan_[i]; }
  FaultInjector::Stats& stats(size_t i) { return injector_->stats_[i]; }
  Picoseconds Elapsed() const { return injector_->env_.clock->Now() - injector_->env_.origin; }
  // Counts one matching operation of fault i; true when the fault acts on it
  // (its time has come, `after` operations passed, `count` not used up).
  bool CountAndCheck(size_t i) {
    FaultInjector::Stats& s = stats(i);
    const uint64_t before = s.seen++;
    const VerbsFault& f = fault(i);
    return Elapsed() >= f.at && before >= f.after && (f.count == 0 || s.acted < f.count);
  }
  std::weak_ptr<bool> alive() const { return alive_; }
  // Wakes the driver at fault i's time to fire it (qp_error, async_event).
  void ScheduleOne(size_t i);
  void Forget(FaultyQp* qp) { qps_.erase(std::find(qps_.begin(), qps_.end(), qp)); }

 private:
  std::unique_ptr<Device> inner_;
  FaultInjector* injector_;
  int rank_;
  std::vector<size_t> faults_;  // indices into the plan: this rank's
  std::vector<FaultyQp*> qps_;  // alive, in creation order
  int created_ = 0;
  std::vector<AsyncEvent> events_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

class FaultyQp final : public QueuePair {
 public:
  FaultyQp(std::unique_ptr<QueuePair> inner, FaultyDevice* device, FaultyCq* cq, int index);
  ~FaultyQp() override;

  uint32_t qp_num() const override { return inner_->qp_num(); }
  int peer_rank() const override { return inner_->peer_rank(); }
  QpState state() const override { return inner_->state(); }
  EndpointInfo LocalInfo() const override { return inner_->LocalInfo(); }
  Status Connect(const EndpointInfo& remote) override { return inner_->Connect(remote); }
  int path_mtu() const override { return inner_->path_mtu(); }
  // PostSendList stays the base class's loop: each WR meets the plan.
  Status PostSend(const SendWr& wr) override {
    if (Status s = MaybeFail(false, wr.wr_id); !s.ok()) return s;
    Status st = inner_->PostSend(wr);
    if (st.ok()) sends_.push_back(wr.signaled);
    CountPost();
    return st;
  }
  Status PostRecv(const RecvWr& wr) override {
    if (Status s = MaybeFail(true, wr.wr_id); !s.ok()) return s;
    Status st = inner_->PostRecv(wr);
    if (st.ok()) ++recvs_;
    CountPost();
    return st;
  }
  // As the caller sees them: a swallowed or delayed completion leaves its
  // WRs outstanding (what the watchdog reports).
  int outstanding_sends() const override { return static_cast<int>(sends_.size()); }
  int outstanding_recvs() const override { return recvs_; }
  Status ModifyToError() override { return inner_->ModifyToError(); }

  bool Matches(const VerbsFault& f) const {
    if (f.qp >= 0) return f.qp == index_;
    if (f.qpn != 0) return f.qpn == inner_->qp_num();
    if (f.peer >= 0) return f.peer == inner_->peer_rank();
    return true;
  }
  // A completion reaches the caller: retire what it accounts for (verbs: a
  // signaled send completes the unsignaled ones before it; an error, the WR).
  void OnDelivered(const Completion& c) {
    if (static_cast<uint8_t>(c.opcode) & 0x80) {
      if (recvs_ > 0) --recvs_;
      return;
    }
    while (!sends_.empty()) {
      const bool signaled = sends_.front();
      sends_.pop_front();
      if (signaled || c.status != WcStatus::kSuccess) break;
    }
  }
  int index() const { return index_; }
  uint64_t posts() const { return posts_; }

 private:
  Status MaybeFail(bool recv, uint64_t wr_id);
  void CountPost();

  std::unique_ptr<QueuePair> inner_;
  FaultyDevice* device_;
  FaultyCq* cq_;
  int index_;
  std::deque<bool> sends_;  // posted, not delivered: signaled?
  int recvs_ = 0;
  uint64_t posts_ = 0;
};

class FaultyCq final : public CompletionQueue {
 public:
  FaultyCq(std::unique_ptr<CompletionQueue> inner, FaultyDevice* device)
      : inner_(std::move(inner)), device_(device) {
    inner_->SetNotify([this] { OnInner(); });
  }
  ~FaultyCq() override {
    *alive_ = false;
    inner_->SetNotify(nullptr);
  }
  int Poll(std::span<Completion> out) override {
    device_->CheckTriggers();
    Drain();
    const Picoseconds now = device_->injector()->env().clock->Now();
    int n = 0;
    while (n < static_cast<int>(out.size()) && !pending_.empty() && pending_.front().ready <= now) {
      const Completion& c = pending_.front().c;
      auto it = qps_.find(c.qp_num);
      if (it != qps_.end()) it->second->OnDelivered(c);
      out[static_cast<size_t>(n++)] = c;
      pending_.pop_front();
    }
    return n;
  }
  void SetNotify(std::function<void()> notify) override { notify_ = std::move(notify); }

  CompletionQueue* inner() { return inner_.get(); }
  void Attach(uint32_t qpn, FaultyQp* qp) { qps_[qpn] = qp; }
  void Detach(uint32_t qpn) { qps_.erase(qpn); }

 private:
  struct Held {
    Completion c;
    Picoseconds ready;
  };
  // The backend says completions arrived (the sim: at their virtual time).
  void OnInner() {
    Drain();
    const Picoseconds now = device_->injector()->env().clock->Now();
    if (!pending_.empty() && pending_.front().ready <= now && notify_) notify_();
  }
  void Drain() {
    std::array<Completion, 64> buf;
    while (true) {
      const int n = inner_->Poll(buf);
      for (int i = 0; i < n; ++i) Classify(buf[static_cast<size_t>(i)]);
      if (n < static_cast<int>(buf.size())) break;
    }
  }
  void Classify(const Completion& c) {
    FaultInjector* inj = device_->injector();
    const Picoseconds now = inj->env().clock->Now();
    Picoseconds ready = now;
    auto it = qps_.find(c.qp_num);
    if (it != qps_.end()) {
      for (size_t i : device_->faults()) {
        const VerbsFault& f = device_->fault(i);
        if (f.kind != FaultKind::kSwallowError && f.kind != FaultKind::kDelayCompletions) continue;
        if (!it->second->Matches(f)) continue;
        if (!device_->CountAndCheck(i)) continue;
        char buf[160];
        if (f.kind == FaultKind::kSwallowError) {
          if (c.status == WcStatus::kSuccess) continue;
          std::snprintf(buf, sizeof(buf), "swallowed %s of rank %d qpn 0x%x wr_id 0x%llx",
                        std::string(WcStatusName(c.status)).c_str(), device_->rank(), c.qp_num,
                        static_cast<unsigned long long>(c.wr_id));
          inj->Acted(i, buf);
          return;  // never reaches the caller (CASES.md 20)
        }
        std::snprintf(buf, sizeof(buf), "delayed a completion of rank %d qpn 0x%x by %.3f us",
                      device_->rank(), c.qp_num, f.delay.us());
        inj->Acted(i, buf);
        ready = std::max(ready, now + f.delay);
      }
    }
    // A CQ is a FIFO: nothing overtakes a delayed completion.
    if (!pending_.empty()) ready = std::max(ready, pending_.back().ready);
    pending_.push_back({c, ready});
    if (ready > now && inj->env().wake_at) {
      std::weak_ptr<bool> alive = alive_;
      inj->env().wake_at(device_->rank(), ready, [this, alive] {
        if (auto a = alive.lock(); a && *a && notify_) notify_();
      });
    }
  }

  std::unique_ptr<CompletionQueue> inner_;
  FaultyDevice* device_;
  std::function<void()> notify_;
  std::deque<Held> pending_;
  std::map<uint32_t, FaultyQp*> qps_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

FaultyQp::FaultyQp(std::unique_ptr<QueuePair> inner, FaultyDevice* device, FaultyCq* cq, int index)
    : inner_(std::move(inner)), device_(device), cq_(cq), index_(index) {
  cq_->Attach(inner_->qp_num(), this);
}

FaultyQp::~FaultyQp() {
  cq_->Detach(inner_->qp_num());
  device_->Forget(this);
}

Status FaultyQp::MaybeFail(bool recv, uint64_t wr_id) {
  for (size_t i : device_->faults()) {
    const VerbsFault& f = device_->fault(i);
    if (f.kind != FaultKind::kFailPost || f.recv_queue != recv || !Matches(f)) continue;
    if (!device_->CountAndCheck(i)) continue;
    // The text and code the verbs backend gives a failed post
    // (transport/verbs/verbs_queues.cc): the call, the QP, the errno's text;
    // UNAVAILABLE for ENOMEM/EAGAIN (a full queue: try later), IO_ERROR else.
    const std::string call = recv ? "ibv_post_recv" : "ibv_post_send";
    const std::string text =
        call + " qpn=" + Hex(inner_->qp_num()) +
        " peer_rank=" + std::to_string(inner_->peer_rank()) + " wr_id=" + Hex(wr_id) +
        " outstanding=" + std::to_string(recv ? recvs_ : static_cast<int>(sends_.size())) +
        " (injected: " + Describe(f) + "): " + std::strerror(f.error);
    device_->injector()->Acted(i, call + " of rank " + std::to_string(device_->rank()) + " qpn " +
                                      Hex(inner_->qp_num()) + " failed with " +
                                      std::strerror(f.error));
    if (f.error == ENOMEM || f.error == EAGAIN) return Unavailable(text);
    return IoError(text);
  }
  return Status::Ok();
}

void FaultyQp::CountPost() {
  ++posts_;
  for (size_t i : device_->faults()) {
    const VerbsFault& f = device_->fault(i);
    if ((f.kind == FaultKind::kQpError || f.kind == FaultKind::kAsyncEvent) && Matches(f)) {
      ++device_->stats(i).seen;
    }
  }
  device_->CheckTriggers();
}

StatusOr<std::unique_ptr<CompletionQueue>> FaultyDevice::CreateCq(int depth) {
  FATHOM_ASSIGN_OR_RETURN(std::unique_ptr<CompletionQueue> cq, inner_->CreateCq(depth));
  return std::unique_ptr<CompletionQueue>(new FaultyCq(std::move(cq), this));
}

StatusOr<std::unique_ptr<QueuePair>> FaultyDevice::CreateQp(int peer_rank, const QpOptions& options,
                                                            CompletionQueue* cq) {
  auto* fcq = dynamic_cast<FaultyCq*>(cq);
  if (fcq == nullptr) {
    return InvalidArgument("ibv_create_qp rank " + std::to_string(rank_) +
                           ": the CQ is not one of this (fault-injecting) device's");
  }
  FATHOM_ASSIGN_OR_RETURN(std::unique_ptr<QueuePair> qp,
                          inner_->CreateQp(peer_rank, options, fcq->inner()));
  auto* f = new FaultyQp(std::move(qp), this, fcq, created_++);
  qps_.push_back(f);
  return std::unique_ptr<QueuePair>(f);
}

void FaultyDevice::ScheduleTimed() {
  const FaultEnv& env = injector_->env_;
  if (!env.wake_at) return;
  for (size_t i : faults_) {
    const VerbsFault& f = fault(i);
    if (f.kind != FaultKind::kQpError && f.kind != FaultKind::kAsyncEvent) continue;
    if (f.at.ps() == 0) continue;              // checked at every post and poll
    if (f.at == Picoseconds::Max()) continue;  // placed at an iteration: Arm
    ScheduleOne(i);
  }
}

void FaultyDevice::ScheduleOne(size_t i) {
  const FaultEnv& env = injector_->env_;
  if (!injector_->IsLocal(rank_)) return;  // another process runs this rank
  std::weak_ptr<bool> alive = alive_;
  env.wake_at(rank_, env.origin + fault(i).at, [this, alive] {
    if (auto a = alive.lock(); a && *a) CheckTriggers();
  });
}

void FaultyDevice::CheckTriggers() {
  for (size_t i : faults_) {
    const VerbsFault& f = fault(i);
    if (f.kind != FaultKind::kQpError && f.kind != FaultKind::kAsyncEvent) continue;
    FaultInjector::Stats& s = stats(i);
    if (s.acted > 0 || Elapsed() < f.at || s.seen < f.after) continue;
    const bool device_level =
        f.kind == FaultKind::kAsyncEvent && f.event.rfind("IBV_EVENT_QP_", 0) != 0;
    std::vector<FaultyQp*> hit;
    for (FaultyQp* q : qps_) {
      if (q->Matches(f)) hit.push_back(q);
    }
    if (hit.empty() && !device_level) continue;  // its QP does not exist yet
    char when[64];
    std::snprintf(when, sizeof(when), "%.6f s", Elapsed().seconds());
    // Acted first: moving a QP to ERR flushes WRs, whose completions may
    // call back into this device.
    if (device_level) {
      AsyncEvent e;
      e.type = f.event;
      e.port = 1;
      e.detail = "injected (" + Describe(f) + ") at " + when;
      events_.push_back(e);
      injector_->Acted(i, "raised " + f.event + " on rank " + std::to_string(rank_));
      continue;
    }
    std::string qpns;
    for (FaultyQp* q : hit) qpns += " " + Hex(q->qp_num());
    injector_->Acted(i, std::string(f.kind == FaultKind::kQpError ? "moved to IBV_QPS_ERR"
                                                                  : "raised " + f.event + " on") +
                            " rank " + std::to_string(rank_) + " qpn" + qpns);
    for (FaultyQp* q : hit) {
      if (f.kind == FaultKind::kAsyncEvent) {
        AsyncEvent e;
        e.type = f.event;
        e.qp_num = q->qp_num();
        e.port = 1;
        e.detail = "injected (" + Describe(f) + ") qpn " + Hex(q->qp_num()) + " at " + when;
        events_.push_back(e);
      }
      // QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR: "the QP transitioned to the
      // error state" (man ibv_get_async_event); qp_error is the move alone.
      (void)q->ModifyToError();
    }
  }
}

FaultInjector::FaultInjector(std::vector<VerbsFault> plan, FaultEnv env)
    : plan_(std::move(plan)), env_(std::move(env)), stats_(plan_.size()) {}

FaultInjector::~FaultInjector() = default;

std::unique_ptr<Device> FaultInjector::Wrap(std::unique_ptr<Device> device, int rank) {
  std::vector<size_t> mine;
  for (size_t i = 0; i < plan_.size(); ++i) {
    if (plan_[i].rank == rank) mine.push_back(i);
  }
  // A rank the plan does not name runs on its backend's device as is.
  if (mine.empty()) return device;
  auto* d = new FaultyDevice(std::move(device), this, rank, std::move(mine));
  d->ScheduleTimed();
  devices_.emplace_back(d->alive(), d);
  return std::unique_ptr<Device>(d);
}

void FaultInjector::Arm(size_t i, Picoseconds at) {
  VerbsFault& f = plan_[i];
  f.at = at;
  if (!env_.wake_at || (f.kind != FaultKind::kQpError && f.kind != FaultKind::kAsyncEvent)) {
    return;  // the others are checked at every post and completion
  }
  for (auto& [alive, device] : devices_) {
    const auto a = alive.lock();
    if (!a || !*a) continue;
    const std::vector<size_t>& mine = device->faults();
    if (std::find(mine.begin(), mine.end(), i) != mine.end()) device->ScheduleOne(i);
  }
}

void FaultInjector::Acted(size_t i, const std::string& detail) {
  Stats& s = stats_[i];
  if (s.acted++ == 0) {
    s.first = env_.clock->Now() - env_.origin;
    s.first_detail = detail;
  }
}

std::string FaultInjector::Report() const { return ReportOf(plan_, stats_); }

std::string FaultInjector::EncodeLocalStats() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < plan_.size(); ++i) {
    if (!IsLocal(plan_[i].rank)) continue;
    const Stats& s = stats_[i];
    out.push_back({{"index", i},
                   {"seen", s.seen},
                   {"acted", s.acted},
                   {"first_ps", s.first.ps()},
                   {"detail", s.first_detail}});
  }
  return out.dump();
}

std::string FaultInjector::MergedReport(const std::vector<std::string>& parts) const {
  // A rank is local to exactly one process, which alone ran its faults
  // after setup (setup ran everywhere, alike): its stats are the fault's.
  std::vector<Stats> merged = stats_;
  for (const std::string& part : parts) {
    const nlohmann::json lines = nlohmann::json::parse(part, nullptr, /*allow_exceptions=*/false);
    if (!lines.is_array()) return ReportOf(plan_, stats_);  // not ours: as is
    for (const nlohmann::json& l : lines) {
      const size_t i = l.value("index", merged.size());
      if (i >= merged.size()) continue;
      Stats& s = merged[i];
      s.seen = l.value("seen", s.seen);
      s.acted = l.value("acted", s.acted);
      s.first = Picoseconds(l.value("first_ps", s.first.ps()));
      s.first_detail = l.value("detail", s.first_detail);
    }
  }
  return ReportOf(plan_, merged);
}

std::string FaultInjector::ReportOf(const std::vector<VerbsFault>& plan,
                                    const std::vector<Stats>& stats) {
  std::string r;
  char buf[160];
  for (size_t i = 0; i < plan.size(); ++i) {
    const Stats& s = stats[i];
    r += "verbs fault " + Describe(plan[i]) + ": ";
    if (s.acted == 0) {
      r += "never acted (" + std::to_string(s.seen) + " matching operations)\n";
      continue;
    }
    std::snprintf(buf, sizeof(buf),
                  "acted %llu times, first at %.6f s: ", static_cast<unsigned long long>(s.acted),
                  s.first.seconds());
    r += buf + s.first_detail + "\n";
  }
  return r;
}

}  // namespace fathom::transport::faulty
