// The reaction point's rate machine (dcqcn.h). The structure follows the
// DCQCN paper (section 3.2, figure 7: cut on CNP, alpha timer, rate-increase
// timer and byte counter, fast recovery / additive / hyper increase) and the
// ConnectX firmware's parameters: the target is clamped to the current rate
// on a cut only once the rate has been raised by the timer
// (CLAMP_TGT_RATE_AFTER_TIME_INC; ns-3 HPCC's DCQCN, rdma-hw.cc, does the
// same), one cut per RATE_REDUCE_MONITOR_PERIOD, alpha in 10-bit fixed point.
#include "fabric/sim/dcqcn.h"

#include <algorithm>
#include <cstdint>

namespace fathom::sim {
namespace {

constexpr int64_t kPsPerUs = 1000000;
constexpr double kBpsPerMbps = 1e6;
constexpr int32_t kAlphaOne = 1024;  // alpha's fixed point: 10 fraction bits
constexpr int32_t kAlphaMax = 1023;  // the firmware's ceiling (INITIAL_ALPHA_VALUE range)

}  // namespace

double DcqcnRate::max_bps(const DcqcnConfig& c) const {
  const double cap = static_cast<double>(c.rpg_max_rate_mbps) * kBpsPerMbps;
  return c.rpg_max_rate_mbps > 0 && cap < line_bps_ ? cap : line_bps_;
}

void DcqcnRate::AdvanceAlpha(const DcqcnConfig& c, int64_t now_ps) {
  const int64_t period = std::max<int64_t>(c.dce_tcp_rtt_us, 1) * kPsPerUs;
  const int32_t g = c.dce_tcp_g;
  while (now_ps >= alpha_period_ps_ + period) {
    // A period ends: alpha = g * alpha + (1 - g) with a CNP in it, g * alpha
    // without (g = dce_tcp_g / 1024).
    alpha_ = (alpha_ * g) / kAlphaOne + (cnp_in_period_ ? kAlphaOne - g : 0);
    alpha_ = std::min(alpha_, kAlphaMax);
    cnp_in_period_ = false;
    alpha_period_ps_ += period;
    if (alpha_ == 0) {
      // Nothing left to decay: skip the idle periods at once.
      alpha_period_ps_ += (now_ps - alpha_period_ps_) / period * period;
      break;
    }
  }
}

int32_t DcqcnRate::alpha(const DcqcnConfig& c, int64_t now_ps) {
  if (limited_) AdvanceAlpha(c, now_ps);
  return alpha_;
}

void DcqcnRate::Account(int64_t now_ps) {
  if (first_cnp_ps_ < 0) return;
  rate_ps_sum_ += rate_bps() * static_cast<double>(now_ps - accounted_ps_);
  accounted_ps_ = now_ps;
}

DcqcnRateStats DcqcnRate::Stats(int64_t now_ps) const {
  DcqcnRateStats s;
  if (first_cnp_ps_ < 0) return s;
  s.cnp_seen = true;
  s.rate_bps = rate_bps();
  s.min_bps = min_bps_;
  s.cuts = cuts_;
  const double sum = rate_ps_sum_ + rate_bps() * static_cast<double>(now_ps - accounted_ps_);
  const int64_t span = now_ps - first_cnp_ps_;
  s.mean_bps = span > 0 ? sum / static_cast<double>(span) : rate_bps();
  return s;
}

void DcqcnRate::OnCnp(const DcqcnConfig& c, int64_t line_bps, int64_t now_ps) {
  if (!limited_) {
    if (first_cnp_ps_ < 0) {
      first_cnp_ps_ = accounted_ps_ = now_ps;
      min_bps_ = static_cast<double>(line_bps);
    } else {
      Account(now_ps);  // released until now: at line rate
    }
    // The first CNP of a flow: the limiter starts at the current rate (line
    // rate) or RATE_TO_SET_ON_FIRST_CNP, alpha at INITIAL_ALPHA_VALUE.
    line_bps_ = static_cast<double>(line_bps);
    limited_ = true;
    rate_bps_ = max_bps(c);
    if (c.rate_to_set_on_first_cnp_mbps > 0) {
      rate_bps_ =
          std::min(rate_bps_, static_cast<double>(c.rate_to_set_on_first_cnp_mbps) * kBpsPerMbps);
    }
    target_bps_ = rate_bps_;
    alpha_ = std::clamp(c.initial_alpha_value, 0, kAlphaMax);
    alpha_period_ps_ = now_ps;
    next_send_ps_ = now_ps;
    last_bytes_ = 0;
    t_stage_ = b_stage_ = 0;
    bytes_ = 0;
    cnp_in_period_ = true;
    Cut(c, now_ps);
    return;
  }
  AdvanceAlpha(c, now_ps);
  cnp_in_period_ = true;
  const int64_t monitor = c.rate_reduce_monitor_period_us * kPsPerUs;
  if (now_ps - last_cut_ps_ >= monitor) {
    Cut(c, now_ps);
  } else {
    cut_pending_ = true;  // at the end of the monitor period (OnTimer)
  }
}

void DcqcnRate::Cut(const DcqcnConfig& c, int64_t now_ps) {
  Account(now_ps);
  AdvanceAlpha(c, now_ps);
  const bool clamp =
      c.clamp_tgt_rate ||
      (c.clamp_tgt_rate_after_time_inc ? t_stage_ > 0 : t_stage_ > 0 || b_stage_ > 0);
  if (clamp) target_bps_ = rate_bps_;
  // RC * (1 - alpha / 2^rpg_gd): with alpha in 1/1024 and rpg_gd 11, the
  // paper's RC * (1 - alpha / 2). One cut keeps at least
  // rpg_min_dec_fac_percent of the rate, and the rate stays >= rpg_min_rate.
  const double factor = static_cast<double>(alpha_) / static_cast<double>(int64_t{1} << c.rpg_gd);
  double next = rate_bps_ * (1 - factor);
  next = std::max(next, rate_bps_ * c.rpg_min_dec_fac_percent / 100.0);
  next = std::max(next, static_cast<double>(c.rpg_min_rate_mbps) * kBpsPerMbps);
  rate_bps_ = std::min(next, max_bps(c));
  min_bps_ = std::min(min_bps_, rate_bps_);
  t_stage_ = b_stage_ = 0;
  bytes_ = 0;
  cut_pending_ = false;
  last_cut_ps_ = now_ps;
  increase_at_ps_ = now_ps + c.rpg_time_reset_us * kPsPerUs;
  ++cuts_;
}

void DcqcnRate::Increase(const DcqcnConfig& c, bool by_timer) {
  // The stage from the events so far (the paper's figure 7; F =
  // rpg_threshold): fast recovery while both counters are below F, hyper
  // increase once both are above it, additive increase between.
  const int32_t f = c.rpg_threshold;
  if (std::max(t_stage_, b_stage_) < f) {
    // Fast recovery: the target stays.
  } else if (std::min(t_stage_, b_stage_) > f) {
    target_bps_ += static_cast<double>(c.rpg_hai_rate_mbps) * kBpsPerMbps;
  } else {
    target_bps_ += static_cast<double>(c.rpg_ai_rate_mbps) * kBpsPerMbps;
  }
  const double cap = max_bps(c);
  target_bps_ = std::min(target_bps_, cap);
  rate_bps_ = (rate_bps_ + target_bps_) / 2;
  Repace();
  if (by_timer) {
    ++t_stage_;
  } else {
    ++b_stage_;
  }
  // Back within one additive step of the cap: the limiter lets go (a rate
  // halving its distance to the target never reaches it exactly).
  if (target_bps_ >= cap &&
      cap - rate_bps_ <= static_cast<double>(c.rpg_ai_rate_mbps) * kBpsPerMbps) {
    limited_ = false;
    rate_bps_ = target_bps_ = cap;
    cut_pending_ = false;
  }
}

void DcqcnRate::Repace() {
  if (last_bytes_ == 0) return;
  const int64_t at =
      last_send_ps_ + static_cast<int64_t>(static_cast<double>(last_bytes_) * 8e12 / rate_bps_);
  next_send_ps_ = std::min(next_send_ps_, at);
}

void DcqcnRate::OnSent(const DcqcnConfig& c, uint32_t bytes, int64_t now_ps) {
  if (!limited_) return;
  // Paced at RC: the next packet may start when this one would have ended
  // at RC (from now, when the QP was not sending: no credit builds up).
  const int64_t from = std::max(next_send_ps_, now_ps);
  next_send_ps_ = from + static_cast<int64_t>(static_cast<double>(bytes) * 8e12 / rate_bps_);
  last_send_ps_ = from;
  last_bytes_ = bytes;
  bytes_ += bytes;
  const uint32_t reset = static_cast<uint32_t>(std::max<int64_t>(c.rpg_byte_reset_bytes, 1));
  if (bytes_ >= reset) Account(now_ps);
  while (limited_ && bytes_ >= reset) {
    bytes_ -= reset;
    Increase(c, /*by_timer=*/false);
  }
}

void DcqcnRate::OnTimer(const DcqcnConfig& c, int64_t now_ps) {
  if (!limited_) return;
  Account(now_ps);
  const int64_t monitor = c.rate_reduce_monitor_period_us * kPsPerUs;
  if (cut_pending_ && now_ps >= last_cut_ps_ + monitor) Cut(c, now_ps);
  if (limited_ && now_ps >= increase_at_ps_) {
    increase_at_ps_ = now_ps + c.rpg_time_reset_us * kPsPerUs;
    Increase(c, /*by_timer=*/true);
  }
}

int64_t DcqcnRate::next_timer_ps(const DcqcnConfig& c) const {
  if (!limited_) return 0;
  int64_t at = increase_at_ps_;
  if (cut_pending_) at = std::min(at, last_cut_ps_ + c.rate_reduce_monitor_period_us * kPsPerUs);
  return at;
}

}  // namespace fathom::sim
