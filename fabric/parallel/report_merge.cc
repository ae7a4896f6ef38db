#include "fabric/parallel/report_merge.h"

#include <algorithm>
#include <cmath>

#include "base/pod_bytes.h"
#include "fabric/parallel/pfc_cross.h"

namespace fathom::parallel {
namespace {

class Writer {
 public:
  template <typename T>
  void Pod(const T& v) {
    AppendPod(&out_, v);
  }
  void Str(const std::string& s) {
    Pod(static_cast<uint64_t>(s.size()));
    out_ += s;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : at_(in.data()), end_(in.data() + in.size()) {}
  template <typename T>
  void Pod(T* v) {
    if (!ReadPod(at_, end_, v)) ok_ = false;
  }
  void Str(std::string* s) {
    uint64_t n = 0;
    Pod(&n);
    if (!ok_ || static_cast<uint64_t>(end_ - at_) < n) {
      ok_ = false;
      return;
    }
    s->assign(at_, n);
    at_ += n;
  }
  bool ok() const { return ok_ && at_ == end_; }

 private:
  const char* at_;
  const char* end_;
  bool ok_ = true;
};

// Both directions of one format: Io is Writer (values by const&) or
// Reader (by pointer).
void Io(Writer& w, const sim::RunReport& r, const RunStats& s) {
  w.Pod(s);
  w.Pod(static_cast<uint64_t>(r.drops.size()));
  for (const auto& [k, v] : r.drops) {
    w.Str(k);
    w.Pod(v);
  }
  for (uint64_t v :
       {r.retransmitted_packets, r.packet_seq_err, r.local_ack_timeout_err, r.implied_nak_seq_err,
        r.rnr_naks, r.duplicate_request, r.out_of_sequence, r.retry_exceeded_err,
        r.rnr_nak_retry_err, r.send_rnr_err, r.roce_adp_retrans, r.ecn_marked_packets,
        r.captured_frames, static_cast<uint64_t>(r.peak_packets)}) {
    w.Pod(v);
  }
  w.Pod(r.wall_s);
  w.Pod(r.dcqcn);
  w.Pod(static_cast<uint64_t>(r.completion_statuses.size()));
  for (const auto& [k, v] : r.completion_statuses) {
    w.Str(k);
    w.Pod(v);
  }
  w.Pod(static_cast<uint64_t>(r.flow_table.size()));
  for (const sim::FlowReport& f : r.flow_table) {
    w.Str(f.status);
    w.Pod(f.end_ns);
    w.Pod(f.fct_ns);
    w.Str(f.first_error);
    w.Pod(f.first_error_ns);
    w.Pod(static_cast<uint64_t>(f.qps.size()));
    for (const sim::QpReport& q : f.qps) {
      w.Str(q.state);
      w.Str(q.first_error);
      w.Pod(q.first_error_ns);
      w.Pod(q.requester);
      w.Pod(q.responder);
      // The requester's DCQCN limiter, as its process saw it.
      w.Pod(q.dcqcn);
      for (double v : {q.dcqcn_rate_gbps, q.dcqcn_min_gbps, q.dcqcn_mean_gbps}) w.Pod(v);
      w.Pod(q.dcqcn_cuts);
    }
  }
  w.Pod(static_cast<uint64_t>(r.ports.size()));
  for (const sim::PortReport& p : r.ports) w.Pod(p.counters);
  w.Pod(static_cast<uint64_t>(r.fault_stats.size()));
  for (const sim::FaultStats& f : r.fault_stats) w.Pod(f.counters);
  w.Str(EncodePfcReport(r));  // pfc_cross.h
}

bool Io(Reader& rd, sim::RunReport* r, RunStats* s) {
  rd.Pod(s);
  uint64_t n = 0;
  rd.Pod(&n);
  for (uint64_t i = 0; i < n && i < (1u << 20); ++i) {
    std::string k;
    uint64_t v = 0;
    rd.Str(&k);
    rd.Pod(&v);
    r->drops[k] = v;
  }
  uint64_t peak = 0;
  for (uint64_t* v :
       {&r->retransmitted_packets, &r->packet_seq_err, &r->local_ack_timeout_err,
        &r->implied_nak_seq_err, &r->rnr_naks, &r->duplicate_request, &r->out_of_sequence,
        &r->retry_exceeded_err, &r->rnr_nak_retry_err, &r->send_rnr_err, &r->roce_adp_retrans,
        &r->ecn_marked_packets, &r->captured_frames, &peak}) {
    rd.Pod(v);
  }
  r->peak_packets = static_cast<size_t>(peak);
  rd.Pod(&r->wall_s);
  rd.Pod(&r->dcqcn);
  rd.Pod(&n);
  for (uint64_t i = 0; i < n && i < (1u << 20); ++i) {
    std::string k;
    uint64_t v = 0;
    rd.Str(&k);
    rd.Pod(&v);
    r->completion_statuses[k] = v;
  }
  rd.Pod(&n);
  r->flow_table.resize(std::min<uint64_t>(n, uint64_t{1} << 26));
  for (sim::FlowReport& f : r->flow_table) {
    rd.Str(&f.status);
    rd.Pod(&f.end_ns);
    rd.Pod(&f.fct_ns);
    rd.Str(&f.first_error);
    rd.Pod(&f.first_error_ns);
    uint64_t m = 0;
    rd.Pod(&m);
    f.qps.resize(std::min<uint64_t>(m, 1u << 16));
    for (sim::QpReport& q : f.qps) {
      rd.Str(&q.state);
      rd.Str(&q.first_error);
      rd.Pod(&q.first_error_ns);
      rd.Pod(&q.requester);
      rd.Pod(&q.responder);
      rd.Pod(&q.dcqcn);
      for (double* v : {&q.dcqcn_rate_gbps, &q.dcqcn_min_gbps, &q.dcqcn_mean_gbps}) rd.Pod(v);
      rd.Pod(&q.dcqcn_cuts);
    }
  }
  rd.Pod(&n);
  r->ports.resize(std::min<uint64_t>(n, uint64_t{1} << 26));
  for (sim::PortReport& p : r->ports) rd.Pod(&p.counters);
  rd.Pod(&n);
  r->fault_stats.resize(std::min<uint64_t>(n, 1u << 16));
  for (sim::FaultStats& f : r->fault_stats) rd.Pod(&f.counters);
  std::string pfc;  // pfc_cross.h
  rd.Str(&pfc);
  return rd.ok() && DecodePfcReport(pfc, r);
}

void Add(sim::PortCounters* a, const sim::PortCounters& b) {
  a->port_xmit_data += b.port_xmit_data;
  a->port_xmit_packets += b.port_xmit_packets;
  a->port_rcv_data += b.port_rcv_data;
  a->port_rcv_packets += b.port_rcv_packets;
  a->port_xmit_discards += b.port_xmit_discards;
  a->port_rcv_errors += b.port_rcv_errors;
  a->mtu_discards += b.mtu_discards;
  a->port_xmit_wait_ps += b.port_xmit_wait_ps;
}

// As RunScenario's: the nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t idx = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  idx = idx == 0 ? 0 : idx - 1;
  return sorted[std::min(idx, sorted.size() - 1)];
}

// The earlier of two (time, name) errors; -1 is none.
void Earlier(double at, const std::string& what, double* best_at, std::string* best) {
  if (at < 0) return;
  if (*best_at < 0 || at < *best_at) {
    *best_at = at;
    *best = what;
  }
}

}  // namespace

std::string EncodeReport(const sim::RunReport& report, const RunStats& stats) {
  Writer w;
  Io(w, report, stats);
  return w.take();
}

Status DecodeReport(const std::string& bytes, sim::RunReport* report, RunStats* stats) {
  Reader rd(bytes);
  report->drops.clear();
  report->completion_statuses.clear();
  if (!Io(rd, report, stats)) {
    return InvalidArgument("DecodeReport: a process's report (" + std::to_string(bytes.size()) +
                           " bytes) does not parse: are the binaries the same?");
  }
  return Status::Ok();
}

sim::RunReport MergeReports(const std::vector<sim::RunReport>& reports,
                            const std::vector<RunStats>& stats, const Partition& partition,
                            const topo::Topology& topology, RunStats* total) {
  // Rank 0's report has every name and setting; the counters are summed.
  sim::RunReport m = reports[0];
  *total = RunStats{};
  for (const RunStats& s : stats) {
    total->digest_sum += s.digest_sum;
    total->windows = std::max(total->windows, s.windows);
    total->shipped += s.shipped;
    total->shipped_bytes += s.shipped_bytes;
    total->events += s.events;
    total->sync_wall_s = std::max(total->sync_wall_s, s.sync_wall_s);
  }
  m.trace_digest = sim::Engine::CanonicalDigest(total->digest_sum);
  // PFC's counters and summary line, from each process's own ports.
  for (size_t k = 1; k < reports.size(); ++k) MergePfcReport(&m, reports[k]);
  m.events = total->events;
  m.drops.clear();
  m.completion_statuses.clear();
  m.retransmitted_packets = m.packet_seq_err = m.local_ack_timeout_err = 0;
  m.implied_nak_seq_err = m.rnr_naks = m.duplicate_request = m.out_of_sequence = 0;
  m.retry_exceeded_err = m.rnr_nak_retry_err = m.send_rnr_err = m.roce_adp_retrans = 0;
  m.ecn_marked_packets = m.captured_frames = 0;
  m.dcqcn = sim::DcqcnCounters{};
  m.peak_packets = 0;
  for (sim::PortReport& p : m.ports) p.counters = sim::PortCounters{};
  for (sim::FaultStats& f : m.fault_stats) f.counters = faults::Counters{};
  for (size_t k = 0; k < reports.size(); ++k) {
    const sim::RunReport& r = reports[k];
    for (const auto& [reason, n] : r.drops) m.drops[reason] += n;
    for (const auto& [status, n] : r.completion_statuses) m.completion_statuses[status] += n;
    m.retransmitted_packets += r.retransmitted_packets;
    m.packet_seq_err += r.packet_seq_err;
    m.local_ack_timeout_err += r.local_ack_timeout_err;
    m.implied_nak_seq_err += r.implied_nak_seq_err;
    m.rnr_naks += r.rnr_naks;
    m.duplicate_request += r.duplicate_request;
    m.out_of_sequence += r.out_of_sequence;
    m.retry_exceeded_err += r.retry_exceeded_err;
    m.rnr_nak_retry_err += r.rnr_nak_retry_err;
    m.send_rnr_err += r.send_rnr_err;
    m.roce_adp_retrans += r.roce_adp_retrans;
    m.ecn_marked_packets += r.ecn_marked_packets;
    m.captured_frames += r.captured_frames;
    m.dcqcn += r.dcqcn;
    m.peak_packets = std::max(m.peak_packets, r.peak_packets);
    m.wall_s = std::max(m.wall_s, r.wall_s);
    for (size_t i = 0; i < m.ports.size() && i < r.ports.size(); ++i) {
      Add(&m.ports[i].counters, r.ports[i].counters);
    }
    for (size_t i = 0; i < m.fault_stats.size() && i < r.fault_stats.size(); ++i) {
      faults::Counters c = r.fault_stats[i].counters;
      // Time-driven: every process's copy of the fault counts its flaps.
      const uint64_t downed = std::max(m.fault_stats[i].counters.link_downed, c.link_downed);
      c.link_downed = 0;
      m.fault_stats[i].counters.link_downed = 0;
      m.fault_stats[i].counters += c;
      m.fault_stats[i].counters.link_downed = downed;
    }
  }
  // Ports: what RunScenario derives from their counters.
  m.packet_hops = 0;
  m.port_drops.clear();
  for (const sim::PortReport& p : m.ports) {
    const sim::PortCounters& c = p.counters;
    m.packet_hops += c.port_xmit_packets;
    if (c.port_xmit_discards + c.mtu_discards + c.port_rcv_errors > 0) {
      m.port_drops.push_back({p.name, {c.port_xmit_discards, c.mtu_discards, c.port_rcv_errors}});
    }
  }
  std::stable_sort(m.port_drops.begin(), m.port_drops.end(), [](const auto& a, const auto& b) {
    return a.second[0] + a.second[1] + a.second[2] > b.second[0] + b.second[1] + b.second[2];
  });
  // Flows: each end decided what it saw; the flow's outcome is the earliest
  // decision. A QP's state and DCQCN rates are its requester's process's.
  m.first_error_ns = -1;
  for (size_t i = 0; i < m.flow_table.size(); ++i) {
    sim::FlowReport& row = m.flow_table[i];
    const sim::FlowReport* decided = nullptr;
    for (const sim::RunReport& r : reports) {
      const sim::FlowReport& x = r.flow_table[i];
      if (x.status == "stalled") continue;
      if (decided == nullptr || x.end_ns < decided->end_ns ||
          (x.end_ns == decided->end_ns && x.status == "failed")) {
        decided = &x;
      }
    }
    row.status = decided != nullptr ? decided->status : "stalled";
    row.end_ns = decided != nullptr ? decided->end_ns : -1;
    row.fct_ns = decided != nullptr ? decided->fct_ns : -1;
    row.first_error.clear();
    row.first_error_ns = -1;
    row.retransmissions = 0;
    for (size_t j = 0; j < row.qps.size(); ++j) {
      sim::QpReport& q = row.qps[j];
      auto host = topology.FindNode(q.host);
      const size_t owner = host.ok() ? static_cast<size_t>(partition.owner[*host]) : 0;
      const sim::QpReport& own = reports[std::min(owner, reports.size() - 1)].flow_table[i].qps[j];
      q.state = own.state;
      // The requester's DCQCN rate limiter lives where its host is.
      q.dcqcn = own.dcqcn;
      q.dcqcn_rate_gbps = own.dcqcn_rate_gbps;
      q.dcqcn_min_gbps = own.dcqcn_min_gbps;
      q.dcqcn_mean_gbps = own.dcqcn_mean_gbps;
      q.dcqcn_cuts = own.dcqcn_cuts;
      q.requester = sim::QpCounters{};
      q.responder = sim::QpCounters{};
      q.first_error.clear();
      q.first_error_ns = -1;
      for (const sim::RunReport& r : reports) {
        const sim::QpReport& x = r.flow_table[i].qps[j];
        q.requester += x.requester;
        q.responder += x.responder;
        Earlier(x.first_error_ns, x.first_error, &q.first_error_ns, &q.first_error);
      }
      Earlier(q.first_error_ns, q.first_error, &row.first_error_ns, &row.first_error);
      row.retransmissions += q.requester.retransmitted_packets;
    }
    // A post that failed fails its flow without a completion.
    if (row.status == "failed" && row.first_error.empty() && decided != nullptr) {
      row.first_error = decided->first_error;
      row.first_error_ns = decided->first_error_ns;
    }
    if (row.first_error_ns >= 0 &&
        (m.first_error_ns < 0 || row.first_error_ns < m.first_error_ns)) {
      m.first_error_ns = row.first_error_ns;
    }
  }
  // The flow figures, as RunScenario computes them.
  m.flows_completed = m.flows_failed = 0;
  m.bytes_completed = 0;
  std::vector<double> fct;
  double first_start = 0, last_end = 0, rate_sum = 0;
  bool any = false;
  for (const sim::FlowReport& row : m.flow_table) {
    if (row.status == "failed") ++m.flows_failed;
    if (row.status != "completed") continue;
    ++m.flows_completed;
    const double ns = row.fct_ns;
    fct.push_back(ns);
    m.bytes_completed += row.bytes;
    if (ns > 0) rate_sum += static_cast<double>(row.bytes) * 8 / ns;
    first_start = any ? std::min(first_start, row.start_ns) : row.start_ns;
    last_end = any ? std::max(last_end, row.end_ns) : row.end_ns;
    any = true;
  }
  m.flows_stalled = m.flows_total - m.flows_completed - m.flows_failed;
  std::sort(fct.begin(), fct.end());
  m.fct_p50_ns = Percentile(fct, 0.50);
  m.fct_p99_ns = Percentile(fct, 0.99);
  m.fct_max_ns = fct.empty() ? 0 : fct.back();
  m.goodput_gbps = 0;
  if (any && last_end > first_start) {
    m.goodput_gbps = static_cast<double>(m.bytes_completed) * 8 / (last_end - first_start);
  }
  m.mean_flow_gbps = fct.empty() ? 0 : rate_sum / static_cast<double>(fct.size());
  // The fault lines of the summary, from the merged counters.
  if (!m.faults_summary.empty()) {
    // Rank 0's lines: a re-route's count of flows moved is the same in
    // every process (each applies it to its copy of the routes).
    std::vector<std::string> lines;
    for (size_t at = 0; at < m.faults_summary.size();) {
      const size_t nl = m.faults_summary.find('\n', at);
      const size_t end = nl == std::string::npos ? m.faults_summary.size() : nl;
      lines.push_back(m.faults_summary.substr(at, end - at));
      at = end + 1;
    }
    m.faults_summary.clear();
    for (size_t i = 0; i < m.fault_stats.size(); ++i) {
      const sim::FaultStats& f = m.fault_stats[i];
      std::string line = "fault " + f.name + " (" + f.kind + ", " + f.target + ", " +
                         std::to_string(f.attachments) + " port" + (f.attachments == 1 ? "" : "s") +
                         "):";
      bool moved = false;
      f.counters.ForEach([&](const char* n, uint64_t v) {
        if (v == 0) return;
        line += std::string(" ") + n + "=" + std::to_string(v);
        moved = true;
      });
      constexpr const char* kRerouted = " flows_rerouted=";
      const size_t rerouted = i < lines.size() ? lines[i].find(kRerouted) : std::string::npos;
      if (rerouted != std::string::npos) {
        line += lines[i].substr(rerouted);
        moved = true;
      }
      if (!moved) line += " no counter moved";
      m.faults_summary += line + "\n";
    }
  }
  return m;
}

}  // namespace fathom::parallel
