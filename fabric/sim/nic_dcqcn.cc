// DCQCN in the NIC (dcqcn.h): the notification point (a CNP for a CE-marked
// packet, at most one per QP per min_time_between_cnps), the reaction point
// (a DcqcnRate per QP, its timer, and the pump's pacing), and the mlx5
// counters. Nothing here runs unless NetworkConfig::dcqcn is enabled, but a
// CE-marked packet is counted (np_ecn_marked_roce_packets) whenever ECN
// marks one.
#include <algorithm>
#include <climits>

#include "fabric/sim/nic.h"

namespace fathom::sim {
namespace {
constexpr int64_t kPsPerUs = 1000000;
}  // namespace

StatusOr<double> Nic::GetQpRateBps(uint32_t qpn) const {
  const Qp* qp = FindQp(qpn);
  if (qp == nullptr) return NotFound("dcqcn rate qpn=" + Hex(qpn) + ": no such QP");
  const double line = port_ != nullptr ? static_cast<double>(port_->config().rate.bps()) : 0;
  if (!dcqcn_) return line;
  const DcqcnRate& r = dcqcn_qps_[qpn - kFirstQpn].rate;
  return r.limited() ? r.rate_bps() : line;
}

StatusOr<DcqcnRateStats> Nic::GetQpDcqcnStats(uint32_t qpn) const {
  const Qp* qp = FindQp(qpn);
  if (qp == nullptr) return NotFound("dcqcn stats qpn=" + Hex(qpn) + ": no such QP");
  if (!dcqcn_) return DcqcnRateStats{};
  return dcqcn_qps_[qpn - kFirstQpn].rate.Stats(engine_->Now().ps());
}

bool Nic::PaceFront() {
  const int64_t now = engine_->Now().ps();
  int64_t earliest = INT64_MAX;
  for (size_t i = 0; i < active_.size(); ++i) {
    Qp* qp = active_.front();
    const DcqcnRate& r = CcOf(*qp).rate;
    if (!r.waits(now)) {
      SyncFront();
      return true;
    }
    earliest = std::min(earliest, r.next_send_ps());
    active_.pop_front();
    active_.push_back(qp);
  }
  SyncFront();
  if (active_.empty()) return true;
  // Every QP waits (a kick since this pump was scheduled): pump when the
  // first may send.
  SchedulePacedPump(earliest);
  return false;
}

int64_t Nic::PaceTime(int64_t at) {
  // What PaceFront will find at `at`: a QP that may send then, or else the
  // earliest time one may. The round-robin order does not matter here.
  int64_t earliest = INT64_MAX;
  for (size_t i = 0; i < active_.size(); ++i) {
    const DcqcnRate& r = CcOf(**active_.at_address(i)).rate;
    if (!r.waits(at)) return at;
    earliest = std::min(earliest, r.next_send_ps());
  }
  return active_.empty() ? at : earliest;
}

void Nic::KickPumpPaced() {
  const int64_t now = engine_->Now().ps();
  const int64_t free = port_->busy_until().ps();
  const int64_t at = free > now ? free : now;
  // Control packets go at once; otherwise the pump runs when the port is
  // free and a QP's rate lets it send, one event per paced packet (not a
  // pump at port-free time that finds every QP waiting and a wake-up).
  const int64_t paced = control_head_ != nullptr ? at : PaceTime(at);
  if (paced == at) {
    if (pump_pending_) return;
    pump_pending_ = true;
    engine_->Schedule<&Nic::OnPump>(Picoseconds(at), EventKind::kNicPump,
                                    static_cast<uint32_t>(host_), this, 0);
    return;
  }
  SchedulePacedPump(paced);
}

void Nic::SchedulePacedPump(int64_t at) {
  // A pending paced pump at or before `at` finds out then (and re-paces).
  if (paced_at_ps_ != 0 && paced_at_ps_ <= at) return;
  paced_at_ps_ = at;
  engine_->Schedule<&Nic::OnPump>(Picoseconds(at), EventKind::kNicPump,
                                  static_cast<uint32_t>(host_), this, static_cast<uint64_t>(at));
}

void Nic::WakeForPace(uint8_t paused) {
  const int64_t now = engine_->Now().ps();
  int64_t earliest = INT64_MAX;
  for (size_t i = 0; i < active_.size(); ++i) {
    const Qp* qp = *active_.at_address(i);
    if (((paused >> (qp->buffer_class & 7)) & 1) != 0) continue;
    const DcqcnRate& r = CcOf(*qp).rate;
    if (r.waits(now)) earliest = std::min(earliest, r.next_send_ps());
  }
  if (earliest != INT64_MAX) SchedulePacedPump(earliest);
}

void Nic::DcqcnSent(Qp& qp, Opcode opcode, uint32_t wire_bytes) {
  // ACKs and CNPs are the NIC's control traffic, not the QP's data.
  if (opcode == Opcode::kAcknowledge || opcode == Opcode::kCnp) return;
  // The byte counter's increases move no timer (a release leaves a stale
  // event, which finds the QP unlimited).
  CcOf(qp).rate.OnSent(dcqcn_config_, wire_bytes, engine_->Now().ps());
}

void Nic::OnCeMarked(Qp& qp) {
  ++dcqcn_counters_.np_ecn_marked_roce_packets;
  if (!dcqcn_ || !dcqcn_config_.np_enabled || crashed_) return;
  DcqcnQp& cc = CcOf(qp);
  const int64_t now = engine_->Now().ps();
  if (cc.last_cnp_ps >= 0 &&
      now - cc.last_cnp_ps < dcqcn_config_.min_time_between_cnps_us * kPsPerUs) {
    return;
  }
  cc.last_cnp_ps = now;
  ++dcqcn_counters_.np_cnp_sent;
  // The CNP (annex A17.9.2): BTH opcode 0x81 to the QP that sent the marked
  // packet, its 16 reserved bytes, on the CNP priority, ahead of the
  // queued ACKs (the NIC sends CNPs at high priority).
  Packet* p = NewPacket(qp, Opcode::kCnp, 0);
  p->buffer_class = static_cast<uint8_t>(dcqcn_config_.cnp_802p_prio & 7);
  p->payload_bytes = static_cast<uint16_t>(wire::kCnpReservedBytes);
  p->ext().cnp_traffic_class = static_cast<uint8_t>(dcqcn_config_.cnp_dscp << 2);
  p->next = control_head_;
  control_head_ = p;
  if (control_tail_ == nullptr) control_tail_ = p;
  engine_->TraceMix(0xc9000000ULL | (uint64_t{qp.qpn} << 32));
  KickPump();
}

void Nic::OnCnp(Qp& qp) {
  if (!dcqcn_ || !dcqcn_config_.rp_enabled) {
    ++dcqcn_counters_.rp_cnp_ignored;
    return;
  }
  ++dcqcn_counters_.rp_cnp_handled;
  const int64_t line = port_ != nullptr ? port_->config().rate.bps() : 0;
  CcOf(qp).rate.OnCnp(dcqcn_config_, line, engine_->Now().ps());
  ArmDcqcnTimer(qp);
}

void Nic::ArmDcqcnTimer(Qp& qp) {
  DcqcnQp& cc = CcOf(qp);
  const int64_t at = cc.rate.next_timer_ps(dcqcn_config_);
  if (at == 0 || cc.timer_at_ps == at) return;             // none needed, or already set
  if (cc.timer_at_ps != 0 && cc.timer_at_ps < at) return;  // the earlier event re-arms
  cc.timer_at_ps = at;
  ++cc.timer_gen;
  engine_->Schedule<&Nic::OnDcqcnTimer>(Picoseconds(at), EventKind::kQpTimer,
                                        static_cast<uint32_t>(host_) * 65536u + qp.qpn, this,
                                        (uint64_t{qp.qpn} << 32) | cc.timer_gen);
}

void Nic::OnDcqcnTimer(void* nic, uint64_t arg) {
  Nic* self = static_cast<Nic*>(nic);
  if (self->crashed_) return;
  Qp* qp = self->FindQp(static_cast<uint32_t>(arg >> 32));
  if (qp == nullptr) return;
  DcqcnQp& cc = self->CcOf(*qp);
  if (static_cast<uint32_t>(arg) != cc.timer_gen) return;  // superseded
  cc.timer_at_ps = 0;
  cc.rate.OnTimer(self->dcqcn_config_, self->engine_->Now().ps());
  self->ArmDcqcnTimer(*qp);
  // A raised rate may let the QP send sooner than the pump's wake-up.
  if (qp->active) self->KickPump();
}

}  // namespace fathom::sim
