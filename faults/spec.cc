// Fault specs: catalogue, validation, --fault parsing, model building.
#include "faults/spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>

#include "faults/fec.h"

namespace fathom::faults {
namespace {

namespace pb = google::protobuf;

const std::vector<ParamInfo> kCommon = {
    {"name", "string", "<kind>#<index>", "label of the fault in reports"},
    {"link", "selector", "required (or host)",
     "link name or endpoints \"leaf1-spine3\", \"tier:N\", a node name, or a glob \"leaf3-*\""},
    {"from", "node", "both directions", "only the direction leaving this node (egress port)"},
    {"host", "host", "-", "host_crash: the host; other kinds: every link of the host"},
    {"start_us", "us", "0", "when the fault starts (virtual time)"},
    {"duration_us", "us", "end of run", "how long it lasts"},
    {"at_iteration", "iteration", "-",
     "training scenarios: instead of start_us, when this iteration (0-based) posts its first "
     "collective"},
    {"iteration_offset_us", "us", "0", "with at_iteration: this long after that"},
    {"filter", "map", "all frames",
     "qpn, opcode, udp_sport, src_host, dst_host, traffic_class, min_bytes, max_bytes"},
};

const std::vector<KindInfo> kKinds = {
    {"loss",
     "Bernoulli loss: each matching frame dropped independently",
     {{"rate", "probability", "0.01", "drop probability per frame"}}},
    {"gilbert_elliott",
     "Gilbert-Elliott bursty loss with netem's parameters (loss gemodel p r 1-h 1-k)",
     {{"p", "probability", "0.01", "P(good -> bad) per frame"},
      {"r", "probability", "1 - p", "P(bad -> good) per frame"},
      {"one_minus_h", "probability", "1", "loss probability in the bad state"},
      {"one_minus_k", "probability", "0", "loss probability in the good state"}}},
    {"fec",
     "RS-FEC with a pre-FEC BER: corrected codewords counted, uncorrectable ones corrupt the "
     "frame (bad FCS/ICRC at the receiver); adds decoder latency per hop",
     {{"fec_mode", "none|kr4|kp4", "kp4", "kr4 = RS(528,514) t=7, kp4 = RS(544,514) t=15"},
      {"pre_fec_ber", "BER", "0", "bit error rate before FEC, in [0, 0.5)"},
      {"link_budget", "map", "-",
       "derive the BER: tx_power_dbm, length_km, loss_db_per_km (0.4), connectors (2), "
       "loss_db_per_connector (0.5), penalty_db (0), rx_sensitivity_dbm, reference_ber (2.4e-4)"},
      {"burst_symbols", "symbols", "1", "mean symbols per error burst (PAM4 DFE propagation)"},
      {"fec_latency_ns", "ns", "100 (kr4) / 150 (kp4)", "decoder latency per hop"}}},
    {"mtu",
     "egress MTU: longer IP packets dropped silently (port_xmit_discards, oversize)",
     {{"mtu_bytes", "bytes", "1500", "largest IP packet carried"}}},
    {"link_down",
     "link down at start_us for duration_us: frames queued or in flight are lost",
     {{"reroute_via", "node", "-",
       "re-route the flows crossing the link through this neighbour of the switch before it, "
       "which sends them on, not back (a down-up bounce; CASES.md 17)"}}},
    {"link_flap",
     "link down for duration_us every period_us from start_us until until_us",
     {{"period_us", "us", "required", "time from one outage's start to the next's"},
      {"until_us", "us", "end of run", "no outage starts at or after this time"}}},
    {"corrupt",
     "bit flips on the wire: the receiver drops the frame on its ICRC (port_rcv_errors)",
     {{"ber", "BER", "1e-7 (unless rate)", "bit error rate, in [0, 0.5)"},
      {"rate", "probability", "-", "instead: P(corrupt) per matching frame"}}},
    {"delay",
     "extra one-way delay with uniform jitter (jitter beyond the frame spacing reorders)",
     {{"delay_us", "us", "0", "extra delay"},
      {"jitter_us", "us", "0", "uniform in [-jitter, +jitter], never below zero"}}},
    {"black_hole",
     "drops every matching frame: a flow, a QP, or (on one link direction) an ECMP next hop",
     {}},
    {"host_crash", "the host stops responding at start_us: nothing from or to it gets through", {}},
    {"pfc_storm",
     "the host's NIC sends PFC PAUSE (max quanta, refreshed) on a priority from start_us, as a "
     "NIC with a stuck receive pipeline does: pause spreads upstream (CASES.md 16)",
     {{"priority", "0..7", "3", "the paused priority (a lossless class of network.qos)"}}},
};

// Fields every kind may set.
bool IsCommonField(std::string_view f) {
  return f == "kind" || f == "name" || f == "link" || f == "from" || f == "host" ||
         f == "start_us" || f == "duration_us" || f == "filter" || f == "at_iteration" ||
         f == "iteration_offset_us";
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status CheckProbability(const config::SourceMap& map, const std::string& path, double v) {
  if (!(v >= 0 && v <= 1)) return map.Error(path, Num(v) + " is not a probability in [0, 1]");
  return Status::Ok();
}

Status CheckBer(const config::SourceMap& map, const std::string& path, double v) {
  if (!(v >= 0 && v < 0.5)) return map.Error(path, "BER " + Num(v) + " is outside [0, 0.5)");
  return Status::Ok();
}

// Virtual time is int64 picoseconds (~106 days); every time and every sum
// of times a fault forms stays below this many microseconds (~104 days).
constexpr double kMaxTimeUs = 9.0e12;
// A delay is added to a frame's send time, which may itself be near the
// end of the longest run: 1000 s keeps the sum inside int64 picoseconds.
constexpr double kMaxDelayUs = 1.0e9;

// Times: finite, >= 0 (or > 0), and below ~100 days of virtual time.
Status CheckTime(const config::SourceMap& map, const std::string& path, double us, bool positive,
                 double max_us = kMaxTimeUs) {
  if (!std::isfinite(us) || us < 0 || (positive && us == 0) || us > max_us) {
    return map.Error(path, Num(us) + " us: times must be finite, " + (positive ? "> 0" : ">= 0") +
                               " and at most " + Num(max_us) + " us");
  }
  return Status::Ok();
}

std::string ParamNames(const KindInfo& kind) {
  std::string s;
  for (const ParamInfo& p : kind.params) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s.empty() ? "none beyond the common ones" : s;
}

}  // namespace

const std::vector<KindInfo>& FaultKinds() { return kKinds; }
const std::vector<ParamInfo>& CommonParams() { return kCommon; }

const KindInfo* FindFaultKind(std::string_view name) {
  for (const KindInfo& k : kKinds) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

Status ValidateFaultSpec(const proto::FaultSpec& spec, std::string_view path,
                         const config::SourceMap& map) {
  const std::string base(path);
  auto at = [&](std::string_view field) { return config::JoinPath(base, field); };
  const KindInfo* kind = FindFaultKind(spec.kind());
  if (kind == nullptr) {
    std::string names;
    for (const KindInfo& k : kKinds) names += (names.empty() ? "" : ", ") + std::string(k.name);
    return map.Error(at("kind"),
                     "unknown fault kind \"" + spec.kind() + "\" (known: " + names + ")");
  }
  // Placed at an iteration (issue 27): the times count from when that
  // iteration posts its first collective, so they are checked as if
  // iteration_offset_us were start_us. Which iteration exists is the
  // scenario's to check (fabric/scenario/training_spec.h).
  if (spec.has_at_iteration() || spec.iteration_offset_us() != 0) {
    if (!spec.has_at_iteration()) {
      return map.Error(at("iteration_offset_us"), "needs at_iteration");
    }
    if (spec.start_us() != 0 || map.Find(at("start_us"))) {
      return map.Error(at("start_us"),
                       "set start_us (a time) or at_iteration (an iteration), not both");
    }
    if (spec.at_iteration() < 0) {
      return map.Error(at("at_iteration"), std::to_string(spec.at_iteration()) +
                                               " is negative (iterations count "
                                               "from 0)");
    }
    FATHOM_RETURN_IF_ERROR(
        CheckTime(map, at("iteration_offset_us"), spec.iteration_offset_us(), false));
    if (spec.kind() == "pfc_storm") {
      return map.Error(at("at_iteration"), "pfc_storm is placed by time only (start_us)");
    }
    proto::FaultSpec relative = spec;
    relative.clear_at_iteration();
    relative.clear_iteration_offset_us();
    relative.set_start_us(spec.iteration_offset_us());
    return ValidateFaultSpec(relative, path, map);
  }
  // Only the kind's own parameters.
  std::vector<const pb::FieldDescriptor*> set;
  spec.GetReflection()->ListFields(spec, &set);
  for (const pb::FieldDescriptor* f : set) {
    if (IsCommonField(f->name())) continue;
    const bool own = std::any_of(kind->params.begin(), kind->params.end(),
                                 [&](const ParamInfo& p) { return p.name == f->name(); });
    if (!own) {
      return map.Error(at(f->name()), "not a parameter of kind " + spec.kind() +
                                          " (its parameters: " + ParamNames(*kind) + ")");
    }
  }
  // Target.
  if (spec.kind() == "host_crash" || spec.kind() == "pfc_storm") {
    if (spec.host().empty()) return map.Error(at("host"), spec.kind() + " needs a host");
    if (!spec.link().empty() || !spec.from().empty()) {
      return map.Error(at(spec.link().empty() ? "from" : "link"),
                       spec.kind() + " targets a host, not a link");
    }
    if (spec.kind() == "pfc_storm" && spec.has_filter()) {
      return map.Error(at("filter"), "pfc_storm sends PAUSE frames; it filters no frames");
    }
  } else if (spec.link().empty() == spec.host().empty()) {
    return map.Error(spec.link().empty() ? base : at("host"),
                     "a " + spec.kind() + " fault needs exactly one target: link or host");
  }
  // Every number finite first: NaN passes every range comparison below.
  for (const pb::Message* m : {static_cast<const pb::Message*>(&spec),
                               static_cast<const pb::Message*>(&spec.link_budget())}) {
    std::vector<const pb::FieldDescriptor*> fields;
    m->GetReflection()->ListFields(*m, &fields);
    for (const pb::FieldDescriptor* f : fields) {
      if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_DOUBLE || f->is_repeated()) continue;
      const double v = m->GetReflection()->GetDouble(*m, f);
      if (!std::isfinite(v)) {
        const std::string field =
            m == &spec ? f->name() : std::string("link_budget.") + std::string(f->name());
        return map.Error(at(field), Num(v) + " is not a finite number");
      }
    }
  }
  // Times, and the sums the timeline forms from them, in int64 picoseconds.
  FATHOM_RETURN_IF_ERROR(CheckTime(map, at("start_us"), spec.start_us(), false));
  if (spec.has_duration_us()) {
    FATHOM_RETURN_IF_ERROR(CheckTime(map, at("duration_us"), spec.duration_us(), true));
    if (spec.start_us() + spec.duration_us() > kMaxTimeUs) {
      return map.Error(at("duration_us"),
                       "start_us + duration_us = " + Num(spec.start_us() + spec.duration_us()) +
                           " us is beyond 9e12 us");
    }
  }
  if (spec.kind() == "link_flap") {
    if (!spec.has_duration_us()) return map.Error(base, "link_flap needs duration_us");
    if (!spec.has_period_us()) return map.Error(base, "link_flap needs period_us");
    FATHOM_RETURN_IF_ERROR(CheckTime(map, at("period_us"), spec.period_us(), true));
    if (spec.start_us() + spec.period_us() > kMaxTimeUs) {
      return map.Error(at("period_us"),
                       "start_us + period_us = " + Num(spec.start_us() + spec.period_us()) +
                           " us is beyond 9e12 us");
    }
    if (spec.duration_us() >= spec.period_us()) {
      return map.Error(at("duration_us"), "outage of " + Num(spec.duration_us()) +
                                              " us overlaps the next one (period_us " +
                                              Num(spec.period_us()) + ")");
    }
    if (spec.has_until_us()) {
      FATHOM_RETURN_IF_ERROR(CheckTime(map, at("until_us"), spec.until_us(), true));
      if (spec.until_us() <= spec.start_us()) {
        return map.Error(at("until_us"), Num(spec.until_us()) + " us is not after start_us " +
                                             Num(spec.start_us()) + " us");
      }
    }
  }
  // Parameters.
  if (spec.has_rate()) FATHOM_RETURN_IF_ERROR(CheckProbability(map, at("rate"), spec.rate()));
  if (spec.has_p()) FATHOM_RETURN_IF_ERROR(CheckProbability(map, at("p"), spec.p()));
  if (spec.has_r()) FATHOM_RETURN_IF_ERROR(CheckProbability(map, at("r"), spec.r()));
  if (spec.has_one_minus_h()) {
    FATHOM_RETURN_IF_ERROR(CheckProbability(map, at("one_minus_h"), spec.one_minus_h()));
  }
  if (spec.has_one_minus_k()) {
    FATHOM_RETURN_IF_ERROR(CheckProbability(map, at("one_minus_k"), spec.one_minus_k()));
  }
  if (spec.kind() == "gilbert_elliott" && spec.has_p() && spec.has_r() &&
      spec.p() + spec.r() == 0) {
    return map.Error(at("r"), "p + r must be > 0 (the chain would never move)");
  }
  if (!spec.fec_mode().empty()) {
    if (auto m = ParseFecMode(spec.fec_mode()); !m.ok()) {
      return map.Error(at("fec_mode"), m.status().message());
    }
  }
  if (spec.has_pre_fec_ber()) {
    FATHOM_RETURN_IF_ERROR(CheckBer(map, at("pre_fec_ber"), spec.pre_fec_ber()));
    if (spec.has_link_budget()) {
      return map.Error(at("link_budget"), "give pre_fec_ber or link_budget, not both");
    }
  }
  if (spec.has_link_budget()) {
    LinkBudget b;
    const auto& lb = spec.link_budget();
    b.length_km = lb.length_km();
    if (lb.has_loss_db_per_km()) b.loss_db_per_km = lb.loss_db_per_km();
    if (lb.has_connectors()) b.connectors = lb.connectors();
    if (lb.has_loss_db_per_connector()) b.loss_db_per_connector = lb.loss_db_per_connector();
    if (lb.has_penalty_db()) b.penalty_db = lb.penalty_db();
    if (lb.has_reference_ber()) b.reference_ber = lb.reference_ber();
    if (auto ber = BerFromLinkBudget(b); !ber.ok()) {
      return map.Error(at("link_budget"), ber.status().message());
    }
  }
  if (spec.has_burst_symbols() && !(spec.burst_symbols() >= 1 && spec.burst_symbols() < 1e6)) {
    return map.Error(at("burst_symbols"), Num(spec.burst_symbols()) + " must be in [1, 1e6)");
  }
  if (spec.has_fec_latency_ns() && !(spec.fec_latency_ns() >= 0 && spec.fec_latency_ns() < 1e9)) {
    return map.Error(at("fec_latency_ns"), Num(spec.fec_latency_ns()) + " must be in [0, 1e9)");
  }
  if (spec.has_mtu_bytes() && (spec.mtu_bytes() < 68 || spec.mtu_bytes() > 65535)) {
    return map.Error(at("mtu_bytes"),
                     std::to_string(spec.mtu_bytes()) + " is not an IP MTU in [68, 65535]");
  }
  if (spec.has_priority() && (spec.priority() < 0 || spec.priority() > 7)) {
    return map.Error(at("priority"),
                     std::to_string(spec.priority()) + " is not a PFC priority (0..7)");
  }
  if (spec.has_ber()) FATHOM_RETURN_IF_ERROR(CheckBer(map, at("ber"), spec.ber()));
  if (spec.kind() == "corrupt" && spec.has_ber() && spec.has_rate()) {
    return map.Error(at("rate"), "give ber or rate, not both");
  }
  if (spec.has_delay_us()) {
    FATHOM_RETURN_IF_ERROR(CheckTime(map, at("delay_us"), spec.delay_us(), false, kMaxDelayUs));
  }
  if (spec.has_jitter_us()) {
    FATHOM_RETURN_IF_ERROR(CheckTime(map, at("jitter_us"), spec.jitter_us(), false, kMaxDelayUs));
  }
  if (spec.delay_us() + spec.jitter_us() > kMaxDelayUs) {
    return map.Error(at("jitter_us"),
                     "delay_us + jitter_us = " + Num(spec.delay_us() + spec.jitter_us()) +
                         " us is more than " + Num(kMaxDelayUs) + " us");
  }
  const auto& f = spec.filter();
  if (f.has_opcode() && f.opcode() > 0xFF) {
    return map.Error(at("filter.opcode"), std::to_string(f.opcode()) + " is not an 8-bit opcode");
  }
  if (f.has_qpn() && f.qpn() > 0xFFFFFF) {
    return map.Error(at("filter.qpn"), std::to_string(f.qpn()) + " is not a 24-bit QPN");
  }
  if (f.has_udp_sport() && f.udp_sport() > 0xFFFF) {
    return map.Error(at("filter.udp_sport"), std::to_string(f.udp_sport()) + " is not a port");
  }
  if (f.has_traffic_class() && f.traffic_class() > 0xFF) {
    return map.Error(at("filter.traffic_class"), std::to_string(f.traffic_class()) + " > 255");
  }
  if (f.has_min_bytes() && f.has_max_bytes() && f.min_bytes() > f.max_bytes()) {
    return map.Error(at("filter.max_bytes"), "max_bytes " + std::to_string(f.max_bytes()) +
                                                 " < min_bytes " + std::to_string(f.min_bytes()));
  }
  return Status::Ok();
}

Status ValidateFaults(const pb::RepeatedPtrField<proto::FaultSpec>& faults, std::string_view path,
                      const config::SourceMap& map) {
  auto item = [&](int i) { return std::string(path) + "[" + std::to_string(i) + "]"; };
  for (int i = 0; i < faults.size(); ++i) {
    FATHOM_RETURN_IF_ERROR(ValidateFaultSpec(faults[i], item(i), map));
  }
  // Names label reports; they must be unique.
  for (int j = 0; j < faults.size(); ++j) {
    for (int i = 0; i < j; ++i) {
      if (FaultName(faults[i], i) == FaultName(faults[j], j)) {
        return map.Error(config::JoinPath(item(j), "name"),
                         "\"" + FaultName(faults[j], j) + "\" is already the name of " + item(i));
      }
    }
  }
  // One kind on one target at a time: two losses on one link at once are
  // almost certainly a typo in the timeline, and their combined effect
  // would depend on evaluation order.
  for (int j = 0; j < faults.size(); ++j) {
    const proto::FaultSpec& b = faults[j];
    const Window wb = WindowOf(b);
    for (int i = 0; i < j; ++i) {
      const proto::FaultSpec& a = faults[i];
      // A fault placed at an iteration has no time until the run reaches it.
      if (a.has_at_iteration() != b.has_at_iteration()) continue;
      if (a.has_at_iteration() && a.at_iteration() != b.at_iteration()) continue;
      if (a.kind() != b.kind() || a.link() != b.link() || a.from() != b.from() ||
          a.host() != b.host() ||
          a.filter().SerializeAsString() != b.filter().SerializeAsString()) {
        continue;
      }
      const Window wa = WindowOf(a);
      if (wa.start < wb.end && wb.start < wa.end) {
        return map.Error(config::JoinPath(item(j), "start_us"),
                         "overlaps " + item(i) + " (" + map.Where(item(i)) + "): same kind " +
                             b.kind() + " on the same target at the same time");
      }
    }
  }
  return Status::Ok();
}

std::string FaultName(const proto::FaultSpec& spec, int index) {
  return spec.name().empty() ? spec.kind() + "#" + std::to_string(index) : spec.name();
}

Picoseconds MicrosecondsToPs(double us) { return Picoseconds(std::llround(us * 1e6)); }

namespace {

// Where a spec's times count from: 0, or for a fault placed at an
// iteration, the time that iteration posted its first collective.
Picoseconds Base(const proto::FaultSpec& spec, Picoseconds origin) {
  return spec.has_at_iteration() ? origin : Picoseconds();
}

// start_us, or iteration_offset_us for a fault placed at an iteration.
double StartUs(const proto::FaultSpec& spec) {
  return spec.has_at_iteration() ? spec.iteration_offset_us() : spec.start_us();
}

}  // namespace

Window WindowOf(const proto::FaultSpec& spec, Picoseconds origin) {
  Window w;
  const Picoseconds base = Base(spec, origin);
  w.start = base + MicrosecondsToPs(StartUs(spec));
  if (spec.kind() == "link_flap") {
    if (spec.has_until_us()) w.end = base + MicrosecondsToPs(spec.until_us());
  } else if (spec.has_duration_us()) {
    w.end = w.start + MicrosecondsToPs(spec.duration_us());
  }
  return w;
}

PfcStorm PfcStormOf(const proto::FaultSpec& spec) {
  PfcStorm s;
  if (spec.has_priority()) s.priority = spec.priority();
  s.window = WindowOf(spec);
  return s;
}

FlapSchedule FlapScheduleOf(const proto::FaultSpec& spec, Picoseconds origin) {
  FlapSchedule s;
  const Picoseconds base = Base(spec, origin);
  s.start = base + MicrosecondsToPs(StartUs(spec));
  if (spec.has_duration_us()) s.duration = MicrosecondsToPs(spec.duration_us());
  if (spec.kind() == "link_flap") {
    s.period = MicrosecondsToPs(spec.period_us());
    if (spec.has_until_us()) s.until = base + MicrosecondsToPs(spec.until_us());
  }
  return s;
}

StatusOr<Model> BuildModel(const proto::FaultSpec& spec, const Placement& placement) {
  const uint64_t seed = StreamSeed(placement.scenario_seed, HashId(placement.label));
  const Window w = WindowOf(spec, placement.origin);
  const std::string where = "fault " + placement.label;
  Filter filter;
  const auto& pf = spec.filter();
  if (pf.has_qpn()) {
    filter.fields |= Filter::kQpn;
    filter.qpn = pf.qpn();
  }
  if (pf.has_opcode()) {
    filter.fields |= Filter::kOpcode;
    filter.opcode = static_cast<uint8_t>(pf.opcode());
  }
  if (pf.has_udp_sport()) {
    filter.fields |= Filter::kUdpSport;
    filter.udp_sport = static_cast<uint16_t>(pf.udp_sport());
  }
  if (pf.has_traffic_class()) {
    filter.fields |= Filter::kTrafficClass;
    filter.traffic_class = static_cast<uint8_t>(pf.traffic_class());
  }
  if (pf.has_min_bytes() || pf.has_max_bytes()) {
    filter.fields |= Filter::kSize;
    if (pf.has_min_bytes()) filter.min_bytes = pf.min_bytes();
    if (pf.has_max_bytes()) filter.max_bytes = pf.max_bytes();
  }
  for (auto [has, name, field, out] :
       {std::tuple{pf.has_src_host(), pf.src_host(), Filter::kSrcHost, &filter.src_host},
        std::tuple{pf.has_dst_host(), pf.dst_host(), Filter::kDstHost, &filter.dst_host}}) {
    if (!has) continue;
    if (!placement.find_host) {
      return InvalidArgument(where + ": filter host \"" + name +
                             "\": no topology to look it up in");
    }
    auto id = placement.find_host(name);
    if (!id.ok()) return InvalidArgument(where + ": filter host: " + id.status().message());
    filter.fields |= field;
    *out = *id;
  }

  const std::string& kind = spec.kind();
  if (kind == "loss")
    return Model(BernoulliLoss(spec.has_rate() ? spec.rate() : 0.01, w, filter, seed));
  if (kind == "gilbert_elliott") {
    GilbertElliottLoss::Params p;
    p.p = spec.has_p() ? spec.p() : 0.01;
    p.r = spec.has_r() ? spec.r() : 1 - p.p;
    p.one_minus_h = spec.has_one_minus_h() ? spec.one_minus_h() : 1;
    p.one_minus_k = spec.has_one_minus_k() ? spec.one_minus_k() : 0;
    return Model(GilbertElliottLoss(p, w, filter, seed));
  }
  if (kind == "fec") {
    FecModel::Params p;
    if (!spec.fec_mode().empty()) {
      FATHOM_ASSIGN_OR_RETURN(p.mode, ParseFecMode(spec.fec_mode()));
    }
    if (placement.link_rate.bps() > 0) {
      if (Status s = CheckFecForRate(p.mode, placement.link_rate); !s.ok()) {
        return s.WithContext(where);
      }
    }
    p.pre_fec_ber = spec.pre_fec_ber();
    if (spec.has_link_budget()) {
      const auto& lb = spec.link_budget();
      LinkBudget b;
      b.tx_power_dbm = lb.tx_power_dbm();
      b.length_km = lb.length_km();
      b.rx_sensitivity_dbm = lb.rx_sensitivity_dbm();
      if (lb.has_loss_db_per_km()) b.loss_db_per_km = lb.loss_db_per_km();
      if (lb.has_connectors()) b.connectors = lb.connectors();
      if (lb.has_loss_db_per_connector()) b.loss_db_per_connector = lb.loss_db_per_connector();
      if (lb.has_penalty_db()) b.penalty_db = lb.penalty_db();
      if (lb.has_reference_ber()) b.reference_ber = lb.reference_ber();
      auto ber = BerFromLinkBudget(b);
      if (!ber.ok()) return ber.status().WithContext(where);
      p.pre_fec_ber = *ber;
    }
    if (spec.has_burst_symbols()) p.mean_burst_symbols = spec.burst_symbols();
    if (spec.has_fec_latency_ns()) {
      p.decode_latency = Picoseconds(std::llround(spec.fec_latency_ns() * 1e3));
    }
    return Model(FecModel(p, w, filter, seed));
  }
  if (kind == "mtu") {
    return Model(MtuModel(static_cast<uint32_t>(spec.has_mtu_bytes() ? spec.mtu_bytes() : 1500), w,
                          filter, seed));
  }
  if (kind == "link_down" || kind == "link_flap") {
    return Model(LinkFlapModel(FlapScheduleOf(spec, placement.origin), filter, seed));
  }
  if (kind == "corrupt") {
    const double rate = spec.has_rate() ? spec.rate() : 0;
    const double ber = spec.has_ber() ? spec.ber() : (spec.has_rate() ? 0 : 1e-7);
    return Model(CorruptionModel(ber, rate, w, filter, seed));
  }
  if (kind == "delay") {
    return Model(DelayModel(MicrosecondsToPs(spec.delay_us()), MicrosecondsToPs(spec.jitter_us()),
                            w, filter, seed));
  }
  if (kind == "black_hole") return Model(BlackHoleModel(w, filter, seed));
  if (kind == "host_crash") {
    if (placement.crashed_host < 0) {
      return InvalidArgument(where + ": host \"" + spec.host() + "\" not resolved");
    }
    return Model(HostCrashModel(placement.crashed_host, w, seed));
  }
  if (kind == "pfc_storm") {
    // Not a frame model: the fault attachment makes the host's NIC send
    // PAUSE (fabric/scenario/fault_attach.cc).
    return InvalidArgument(where + ": pfc_storm has no frame model");
  }
  return InvalidArgument(where + ": unknown fault kind \"" + kind + "\"");
}

namespace {

bool LooksLikeScalar(std::string_view v) {
  if (v == "true" || v == "false") return true;
  if (v.empty()) return false;
  char* end = nullptr;
  const std::string s(v);
  std::strtod(s.c_str(), &end);
  if (end == s.c_str() + s.size()) return true;
  return s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

}  // namespace

StatusOr<proto::FaultSpec> ParseFaultFlag(std::string_view text) {
  std::string yaml;
  const size_t first = text.find_first_not_of(" \t");
  if (first != std::string_view::npos && text[first] == '{') {
    yaml = std::string(text);
  } else {
    // key=value,key=value with dotted keys for nested maps, into a flow map.
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> nested;
    std::vector<std::string> order;
    std::string flat;
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t comma = text.find(',', pos);
      if (comma == std::string_view::npos) comma = text.size();
      const std::string_view item = text.substr(pos, comma - pos);
      pos = comma + 1;
      if (item.empty()) continue;
      const size_t eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return InvalidArgument("--fault \"" + config::EscapeForTerminal(text) + "\": \"" +
                               config::EscapeForTerminal(item) + "\" is not key=value");
      }
      const std::string key(item.substr(0, eq));
      const std::string_view raw = item.substr(eq + 1);
      std::string value = LooksLikeScalar(raw) ? std::string(raw) : "\"" + std::string(raw) + "\"";
      const size_t dot = key.find('.');
      if (dot != std::string::npos) {
        const std::string outer = key.substr(0, dot);
        if (!nested.count(outer)) order.push_back(outer);
        nested[outer].emplace_back(key.substr(dot + 1), value);
      } else {
        flat += (flat.empty() ? "" : ", ") + key + ": " + value;
      }
    }
    for (const std::string& outer : order) {
      std::string inner;
      for (const auto& [k, v] : nested[outer]) inner += (inner.empty() ? "" : ", ") + k + ": " + v;
      flat += (flat.empty() ? "" : ", ") + outer + ": {" + inner + "}";
    }
    yaml = "{" + flat + "}";
  }
  proto::FaultSpec spec;
  config::SourceMap map("--fault");
  config::YamlLoadOptions options;
  options.source_map = &map;
  FATHOM_RETURN_IF_ERROR(config::LoadYamlString(yaml, "--fault", &spec, options));
  FATHOM_RETURN_IF_ERROR(ValidateFaultSpec(spec, "", map));
  return spec;
}

Status AppendFaultFlags(const std::vector<std::string>& flags,
                        google::protobuf::RepeatedPtrField<proto::FaultSpec>* faults) {
  for (const std::string& flag : flags) {
    FATHOM_ASSIGN_OR_RETURN(proto::FaultSpec spec, ParseFaultFlag(flag));
    *faults->Add() = std::move(spec);
  }
  return Status::Ok();
}

}  // namespace fathom::faults
