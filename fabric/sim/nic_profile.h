// NicProfile: what a NIC model adds to the wire — the time a transfer
// spends in the host and the NIC (doorbell, WQE fetch, pipelines, payload
// DMA, CQE write) and how it retransmits (rxe's retry_cnt 7 = forever,
// ConnectX's adaptive retransmissions, timeout floor and doubled interval).
// A NetworkConfig holds one (NetworkConfig::nic); each Nic copies it when it
// is built. The functions below are the profile's closed forms, for whoever
// needs a per-step latency without running the simulator (`fathom coll`).
//
// How the Nic applies the delays (all zero in `ideal`, whose path is the
// simulator's original one):
// - post -> visible to the transmit scheduler: PostToWireDelay (doorbell,
//   WQE fetch, per-message overhead, the first payload DMA read);
// - the TX and RX pipelines are constant per packet and first-in first-out,
//   so they are folded into the latency of the links at the hosts (exact for
//   a FIFO pipeline: every packet, data or ACK, is delayed by the same
//   amount and none overtakes another);
// - a completion becomes visible in its CQ after the CQE write (and, for a
//   receive, the payload's DMA write before it): ReceiveCompletionDelay,
//   SendCompletionDelay. Completions stay in order per NIC.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/units.h"

namespace fathom::sim {

struct NicProfile {
  std::string name = "ideal";

  // Host and NIC timing. Every delay is per message unless it says packet.
  Picoseconds doorbell;           // ibv_post_send -> the doorbell (MMIO write) reaches the NIC
  Picoseconds wqe_fetch;          // the NIC reads the WQE over PCIe (a DMA read round trip)
  Picoseconds per_message;        // the NIC's per-WR work (scheduling, QP context)
  Picoseconds tx_pipeline;        // NIC transmit pipeline, per packet
  Picoseconds dma_read_latency;   // payload DMA read: the first byte's latency
  Picoseconds rx_pipeline;        // NIC receive pipeline, per packet
  Picoseconds dma_write_latency;  // payload DMA write until visible in host memory
  Picoseconds cqe_write;          // CQE DMA write until a poll can see it
  BitsPerSecond pcie_rate;        // payload DMA rate; 0 = not modelled (no time)

  // Retransmission.
  // retry_cnt 7 retries forever (rxe; the IBTA and hardware NICs do not).
  bool infinite_retry7 = false;
  // ConnectX (CASES.md 21): adaptive retransmissions before the QP's timer,
  // on gaps adaptive_first_gap * (adaptive_growth_permille / 1000)^k for as
  // long as their sum fits in one regular interval; together they use one
  // unit of retry_cnt (counted as roce_adp_retrans). Then retry_cnt - 1
  // regular timeouts, the last of which reports IBV_WC_RETRY_EXC_ERR.
  bool adaptive_retransmission = false;
  Picoseconds adaptive_first_gap;
  int32_t adaptive_growth_permille = 1000;
  // The regular interval: timeout_multiplier * 4.096 us * 2^max(T, floor).
  int32_t timeout_floor = 0;  // 0: none
  int32_t timeout_multiplier = 1;

  // The RoCEv2 UDP source port (ECMP entropy). false: rxe before Linux
  // 5.17, 0xC000 | hash_32(qpn, 14) at QP creation (the simulator's
  // default). true: rxe since 5.17 (rxe_verbs.c rxe_modify_qp with a GRH
  // address: rdma_get_udp_sport(flow_label, qpn, dest_qpn); the flow label
  // 0 becomes rdma_calc_flow_label of the two QP numbers, include/rdma/
  // ib_verbs.h), set when the QP learns its destination (RTR). The testbed's
  // Debian 6.1 kernel does this; the live emulator's VM test compares paths.
  bool udp_sport_from_qp_pair = false;

  bool ideal() const { return name == "ideal"; }
};

// The named profiles: ideal, rxe, cx6, cx7.
StatusOr<NicProfile> NicProfileNamed(std::string_view name);
// "ideal, rxe, cx6, cx7", for error messages and --help.
std::string_view NicProfileNames();

// Post -> the first packet may leave: doorbell + WQE fetch + per-message
// overhead + the DMA read of the first packet's payload (`first_bytes`).
Picoseconds PostToWireDelay(const NicProfile& p, uint32_t first_bytes);
// A received message's last packet -> its receive CQE visible: the DMA
// write of that packet's payload, then the CQE write.
Picoseconds ReceiveCompletionDelay(const NicProfile& p, uint32_t last_bytes);
// A send WR completed by an ACK or response -> its CQE visible.
Picoseconds SendCompletionDelay(const NicProfile& p);
// Payload bytes over PCIe at the profile's DMA rate (0 when not modelled).
Picoseconds DmaTime(const NicProfile& p, uint32_t bytes);

// ib_send_lat-class one-way latency of a SEND of `bytes` (at most one MTU)
// from post to the receiver's CQE, over `hops` links of `rate` and
// `latency` each (store and forward), IPv4: the wire plus every part above.
Picoseconds SmallMessageLatency(const NicProfile& p, uint32_t bytes, BitsPerSecond rate,
                                Picoseconds latency, int hops = 1);
// What a message costs the NIC beyond the wire and the pipelines (post to
// wire, receive completion): the per-message term of an alpha-beta model.
Picoseconds PerMessageOverhead(const NicProfile& p, uint32_t bytes);

// Retransmission timing: the regular ACK-timeout interval for QP timeout
// `timeout` (0: no timer), the adaptive gaps, their number for `timeout`,
// and the time from the post to IBV_WC_RETRY_EXC_ERR when the peer never
// answers, from the first transmission to the error CQE's generation (the
// post-to-wire and CQE-write delays come on top; a closed form of what the
// Nic does; infinite: Picoseconds::Max()).
int64_t RegularTimeoutPs(const NicProfile& p, int timeout);
int64_t AdaptiveGapPs(const NicProfile& p, int step);
int AdaptiveRetransmissions(const NicProfile& p, int timeout, int retry_cnt);
Picoseconds RetryExceededTime(const NicProfile& p, int timeout, int retry_cnt);

}  // namespace fathom::sim
