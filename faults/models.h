// The fault models: concrete classes, one per kind, each owning its
// parameters, its active window, its filter, its counters and its random
// stream. A model's Apply(frame, verdict) is the simulator's hot path: inline,
// no allocation, no exception, no virtual call (FaultSet in fault_set.h holds
// them in a std::variant). Apply returns false when the frame is dropped, so
// later models do not see it. Parameters are validated when a model is built
// from a scenario (spec.h); constructors assume valid values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "faults/fec.h"
#include "faults/frame.h"
#include "faults/rng.h"

namespace fathom::faults {

// Advances a continuous Bernoulli bit-error stream over a frame of `bits`
// bits: `gap` holds the error-free bits before the next error and carries
// over to the next frame. Returns the number of bits in error in this frame.
inline uint64_t CountBitErrors(uint64_t bits, uint64_t& gap, const GapSampler& sampler, Rng& rng) {
  if (gap >= bits) {  // the common case: one compare
    if (gap != GapSampler::kNever) gap -= bits;
    return 0;
  }
  uint64_t flips = 0;
  uint64_t pos = gap;
  while (pos < bits) {
    ++flips;
    const uint64_t g = sampler.Next(rng);
    if (g == GapSampler::kNever) {
      gap = GapSampler::kNever;
      return flips;
    }
    pos += g + 1;
  }
  gap = pos - bits;
  return flips;
}

// Base of every model: window, filter, counters, random stream.
class ModelBase {
 public:
  ModelBase(Window window, Filter filter, uint64_t seed)
      : window_(window), filter_(filter), rng_(seed) {}
  const Counters& counters() const { return counters_; }
  const Window& window() const { return window_; }
  const Filter& filter() const { return filter_; }

 protected:
  // In the window and matched: the model applies (and counts the frame).
  bool Applies(const Frame& f) {
    if (!window_.Contains(f.at) || !filter_.Matches(f)) return false;
    ++counters_.frames_seen;
    return true;
  }
  bool Drop(Verdict& v, DropReason reason) {
    v.action = Verdict::Action::kDrop;
    v.reason = reason;
    ++counters_.frames_dropped;
    return false;
  }
  void Corrupt(Verdict& v) {
    if (v.action == Verdict::Action::kPass) v.action = Verdict::Action::kCorrupt;
    ++counters_.frames_corrupted;
    ++counters_.port_rcv_errors;  // the receiver drops it on FCS/ICRC
  }

  Window window_;
  Filter filter_;
  Counters counters_;
  Rng rng_;
};

// Independent loss with probability `rate` per matching frame.
class BernoulliLoss : public ModelBase {
 public:
  BernoulliLoss(double rate, Window w, Filter f, uint64_t seed)
      : ModelBase(w, f, seed), rate_(rate), threshold_(Rng::Threshold(rate)) {}
  bool Apply(const Frame& f, Verdict& v) {
    if (!Applies(f)) return true;
    return rng_.Hit(threshold_) ? Drop(v, DropReason::kLoss) : true;
  }
  double rate() const { return rate_; }

 private:
  double rate_;
  uint64_t threshold_;
};

// Gilbert-Elliott loss with netem's parameters ("loss gemodel p r 1-h 1-k",
// sch_netem.c loss_gilb_ell): p = P(good -> bad), r = P(bad -> good), 1-h =
// loss probability in the bad state, 1-k = loss probability in the good
// state. Per frame the state moves first and the loss is drawn with the
// probability of the state the frame found (as netem does), so the
// stationary loss is (1-k) r/(p+r) + (1-h) p/(p+r).
class GilbertElliottLoss : public ModelBase {
 public:
  struct Params {
    double p = 0;
    double r = 1;
    double one_minus_h = 1;
    double one_minus_k = 0;
  };
  GilbertElliottLoss(const Params& params, Window w, Filter f, uint64_t seed)
      : ModelBase(w, f, seed),
        params_(params),
        to_bad_(Rng::Threshold(params.p)),
        to_good_(Rng::Threshold(params.r)),
        loss_bad_(Rng::Threshold(params.one_minus_h)),
        loss_good_(Rng::Threshold(params.one_minus_k)) {}
  bool Apply(const Frame& f, Verdict& v) {
    if (!Applies(f)) return true;
    const bool was_bad = bad_;
    bad_ = was_bad ? !rng_.Hit(to_good_) : rng_.Hit(to_bad_);
    return rng_.Hit(was_bad ? loss_bad_ : loss_good_) ? Drop(v, DropReason::kLoss) : true;
  }
  const Params& params() const { return params_; }
  double StationaryLoss() const {
    const double s = params_.p + params_.r;
    if (s <= 0) return params_.one_minus_k;
    return params_.one_minus_k * params_.r / s + params_.one_minus_h * params_.p / s;
  }

 private:
  Params params_;
  uint64_t to_bad_, to_good_, loss_bad_, loss_good_;
  bool bad_ = false;
};

// RS-FEC on a link direction with a pre-FEC BER (fec.h). Adds the decoder
// latency to every frame; a frame with an uncorrectable codeword is corrupted.
class FecModel : public ModelBase {
 public:
  struct Params {
    FecMode mode = FecMode::kKp4;
    double pre_fec_ber = 0;
    double mean_burst_symbols = 1;
    std::optional<Picoseconds> decode_latency;  // default: the code's typical value
  };
  FecModel(const Params& params, Window w, Filter f, uint64_t seed)
      : ModelBase(w, f, seed),
        params_(params),
        code_(&FecCodeFor(params.mode)),
        latency_(params.decode_latency.value_or(code_->decode_latency)) {
    if (code_->mode != FecMode::kNone) {
      sampler_ = FecErrorSampler(*code_, params.pre_fec_ber, params.mean_burst_symbols, rng_);
    } else {
      bits_.SetProbability(params.pre_fec_ber);
      gap_ = bits_.Next(rng_);
    }
  }
  bool Apply(const Frame& f, Verdict& v) {
    if (!Applies(f)) return true;
    const uint64_t bits = static_cast<uint64_t>(f.wire_bytes) * 8;
    if (code_->mode == FecMode::kNone) {
      // No FEC: any bit error fails the FCS.
      const uint64_t flips = CountBitErrors(bits, gap_, bits_, rng_);
      if (flips > 0) {
        counters_.bit_flips += flips;
        Corrupt(v);
      }
      return true;
    }
    v.extra_delay += latency_;
    const FecFrameResult r = sampler_.SampleFrame(bits, rng_);
    counters_.fec_codewords += r.codewords;
    counters_.fec_corrected_blocks += r.corrected;
    counters_.fec_symbol_errors += r.corrected_symbols;
    if (r.uncorrectable > 0) {
      counters_.fec_uncorrectable_blocks += r.uncorrectable;
      counters_.symbol_error += r.uncorrectable;
      Corrupt(v);
    }
    return true;
  }
  const Params& params() const { return params_; }
  const FecCode& code() const { return *code_; }

 private:
  Params params_;
  const FecCode* code_;  // static storage (FecCodeFor)
  Picoseconds latency_;
  FecErrorSampler sampler_;
  GapSampler bits_;
  uint64_t gap_ = GapSampler::kNever;
};

// Egress MTU of a port direction: an IP packet longer than it is dropped
// silently and counted, as switches do (CASES.md 3, 4).
class MtuModel : public ModelBase {
 public:
  MtuModel(uint32_t mtu_bytes, Window w, Filter f, uint64_t seed)
      : ModelBase(w, f, seed), mtu_bytes_(mtu_bytes) {}
  bool Apply(const Frame& f, Verdict& v) {
    const uint32_t len = f.ip_bytes != 0 ? f.ip_bytes : f.wire_bytes;
    if (len <= mtu_bytes_ || !Applies(f)) return true;
    ++counters_.port_xmit_discards;
    return Drop(v, DropReason::kOversize);
  }
  uint32_t mtu_bytes() const { return mtu_bytes_; }

 private:
  uint32_t mtu_bytes_;
};

// When a link is down: at `start` for `duration`, repeating every `period`
// (0 = once) until `until`. Pure arithmetic on virtual time.
struct FlapSchedule {
  Picoseconds start;
  Picoseconds duration = Picoseconds::Max();  // Max = stays down
  Picoseconds period;                         // 0 = a single outage
  Picoseconds until = Picoseconds::Max();     // no outage starts at or after this

  bool IsDown(Picoseconds t) const { return DownDuring(t, t); }
  // Whether any outage overlaps [from, to].
  bool DownDuring(Picoseconds from, Picoseconds to) const;
  // Outages started at or before t (the link_downed counter at t).
  uint64_t DownEventsBy(Picoseconds t) const;
  // The first state change strictly after t: {time, down?}; nullopt if none.
  struct Transition {
    Picoseconds at;
    bool down;
  };
  std::optional<Transition> NextTransition(Picoseconds t) const;

 private:
  // End of the outage starting at s, saturating.
  Picoseconds OutageEnd(Picoseconds s) const {
    return duration >= Picoseconds::Max() - s ? Picoseconds::Max() : s + duration;
  }
  // Number of outages that start before `until` (max if unbounded).
  uint64_t OutageCount() const;
};

// Link down / flap: frames that would be on the wire (or queued to leave)
// while the link is down are lost. link_downed follows the schedule.
class LinkFlapModel : public ModelBase {
 public:
  LinkFlapModel(const FlapSchedule& schedule, Filter f, uint64_t seed)
      : ModelBase(Window{}, f, seed), schedule_(schedule) {}
  bool Apply(const Frame& f, Verdict& v) {
    const Picoseconds to = f.end > f.at ? f.end : f.at;
    if (to < schedule_.start) return true;  // before the first outage: one compare
    SyncTo(f.at);
    if (!schedule_.DownDuring(f.at, to) || !Applies(f)) return true;
    return Drop(v, DropReason::kLinkDown);
  }
  // Brings link_downed up to time `now` (reports call it at the end of a run).
  void SyncTo(Picoseconds now) {
    counters_.link_downed = std::max(counters_.link_downed, schedule_.DownEventsBy(now));
  }
  const FlapSchedule& schedule() const { return schedule_; }

 private:
  FlapSchedule schedule_;
};

// Bit flips on the wire: each bit flips with probability `ber`, or (when
// `frame_rate` > 0) each matching frame is corrupted with that probability.
// The receiver drops a corrupted frame on its ICRC.
class CorruptionModel : public ModelBase {
 public:
  CorruptionModel(double ber, double frame_rate, Window w, Filter f, uint64_t seed)
      : ModelBase(w, f, seed),
        ber_(ber),
        frame_threshold_(Rng::Threshold(frame_rate)),
        per_frame_(frame_rate > 0),
        bits_(ber) {
    gap_ = bits_.Next(rng_);
  }
  bool Apply(const Frame& f, Verdict& v) {
    if (!Applies(f)) return true;
    if (per_frame_) {
      if (rng_.Hit(frame_threshold_)) {
        ++counters_.bit_flips;
        Corrupt(v);
      }
      return true;
    }
    const uint64_t flips =
        CountBitErrors(static_cast<uint64_t>(f.wire_bytes) * 8, gap_, bits_, rng_);
    if (flips > 0) {
      counters_.bit_flips += flips;
      Corrupt(v);
    }
    return true;
  }
  double ber() const { return ber_; }

 private:
  double ber_;
  uint64_t frame_threshold_;
  bool per_frame_;
  GapSampler bits_;
  uint64_t gap_ = GapSampler::kNever;
};

// Extra delay, with netem-style uniform jitter in [-jitter, +jitter]
// (clamped at zero extra delay). Jitter larger than the frame spacing
// reorders frames, which an RC receiver sees as a PSN sequence error.
class DelayModel : public ModelBase {
 public:
  DelayModel(Picoseconds delay, Picoseconds jitter, Window w, Filter f, uint64_t seed)
      : ModelBase(w, f, seed), delay_(delay), jitter_(jitter) {}
  bool Apply(const Frame& f, Verdict& v) {
    if (!Applies(f)) return true;
    int64_t d = delay_.ps();
    if (jitter_.ps() > 0) {
      const uint64_t span = static_cast<uint64_t>(jitter_.ps()) * 2 + 1;
      d += static_cast<int64_t>(rng_.Next() % span) - jitter_.ps();
    }
    if (d > 0) {
      v.extra_delay += Picoseconds(d);
      ++counters_.frames_delayed;
    }
    return true;
  }
  Picoseconds delay() const { return delay_; }
  Picoseconds jitter() const { return jitter_; }

 private:
  Picoseconds delay_;
  Picoseconds jitter_;
};

// Drops every matching frame: a flow (UDP source port), a QP, or — attached
// to one link direction — an ECMP next hop.
class BlackHoleModel : public ModelBase {
 public:
  BlackHoleModel(Window w, Filter f, uint64_t seed) : ModelBase(w, f, seed) {}
  bool Apply(const Frame& f, Verdict& v) {
    if (!Applies(f)) return true;
    return Drop(v, DropReason::kBlackHole);
  }
};

// A host that stops responding at window.start: nothing from it or to it
// gets through any more.
class HostCrashModel : public ModelBase {
 public:
  HostCrashModel(int32_t host, Window w, uint64_t seed)
      : ModelBase(w, Filter{}, seed), host_(host) {}
  bool Apply(const Frame& f, Verdict& v) {
    if (f.src_host != host_ && f.dst_host != host_) return true;
    if (!Applies(f)) return true;
    return Drop(v, DropReason::kHostDown);
  }
  int32_t host() const { return host_; }

 private:
  int32_t host_;
};

}  // namespace fathom::faults
