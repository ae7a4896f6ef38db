// Signature expectations (issue 27): the parts of a scenario's `expect`
// block that pin a field case's signature — per flow and per QP outcomes and
// error times, counters by the names the report prints at a scope, drops by
// reason, "no error surfaced". scenario.cc calls these from Validate and
// CheckExpectations; the counter tables are shared with the report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "fabric/scenario/scenario.h"

namespace fathom::sim {

// QP hardware counters by name (QpCounters fields, as `fathom sim` prints
// them; "rnr_naks", the summary's name for rcvd_rnr_err, too).
template <typename Fn>
void ForEachQpCounter(const QpCounters& c, Fn&& fn) {
  fn("sent_pkts", c.sent_pkts);
  fn("rcvd_pkts", c.rcvd_pkts);
  fn("retransmitted_packets", c.retransmitted_packets);
  fn("packet_seq_err", c.packet_seq_err);
  fn("implied_nak_seq_err", c.implied_nak_seq_err);
  fn("local_ack_timeout_err", c.local_ack_timeout_err);
  fn("rcvd_rnr_err", c.rcvd_rnr_err);
  fn("retry_exceeded_err", c.retry_exceeded_err);
  fn("rnr_nak_retry_err", c.rnr_nak_retry_err);
  fn("out_of_sequence", c.out_of_sequence);
  fn("duplicate_request", c.duplicate_request);
  fn("send_rnr_err", c.send_rnr_err);
  fn("ack_deferred", c.ack_deferred);
  fn("rdma_sends", c.rdma_sends);
  fn("rdma_recvs", c.rdma_recvs);
}

// IB port counters by name (PortCounters fields; mtu_discards and
// port_xmit_wait_ps are the simulator's, the rest IBTA PortCounters names).
template <typename Fn>
void ForEachPortCounter(const PortCounters& c, Fn&& fn) {
  fn("port_xmit_data", c.port_xmit_data);
  fn("port_xmit_packets", c.port_xmit_packets);
  fn("port_rcv_data", c.port_rcv_data);
  fn("port_rcv_packets", c.port_rcv_packets);
  fn("port_xmit_discards", c.port_xmit_discards);
  fn("port_rcv_errors", c.port_rcv_errors);
  fn("mtu_discards", c.mtu_discards);
  fn("port_xmit_wait_ps", c.port_xmit_wait_ps);
}

// Checks the signature fields of `sc.spec.expect()` against the file and the
// topology: names of counters, hosts, ports, faults, flows and QPs; times
// (finite, >= 0; a tolerance needs a value); bounds. `flows` is how many
// flows the workload makes, `qps` how many QPs each has.
Status ValidateExpect(const LoadedScenario& sc, int64_t flows, int32_t qps);

// Appends one "expectation not met: ..." line, expected vs got, per
// signature item the run misses. `accepted_failed` / `accepted_stalled` get
// the flows the items expect to fail / stall (so they do not fail the run).
void CheckSignature(const proto::ExpectSpec& e, const RunReport& r, std::vector<std::string>* out,
                    std::vector<bool>* accepted_failed, std::vector<bool>* accepted_stalled);

// Expect items whose src/dst select no flow of this run: InvalidArgument
// naming file:line and field.
Status CheckExpectReferences(const LoadedScenario& sc, const RunReport& r);

}  // namespace fathom::sim

namespace fathom::sim {

// The checks and messages above for other runners of a scenario's `expect`
// (`fathom coll --scenario`, transport/worlds/coll_expect.h): a TimeExpect
// against the file (finite, >= 0, a tolerance needs a value); an unmet time
// ("expected 12 us +- 1 us, got 15 us"; got_us < 0: none), empty when met;
// a microsecond figure as the messages print it.
Status ValidateTimeExpect(const config::SourceMap& m, const std::string& path,
                          const proto::TimeExpect& t);
std::string MissTimeUs(const proto::TimeExpect& t, double got_us);
std::string UsText(double us);

}  // namespace fathom::sim
