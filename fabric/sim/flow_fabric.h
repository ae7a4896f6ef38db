// FlowFabric: the flow-level transfer model attached to a Network's NICs
// (NetworkConfig::flow_model; docs/FLOW.md). Everything above the NIC — QPs,
// CQs, WQE order, verbs, the collectives — is unchanged; below it, each
// SEND/WRITE at the head of a QP's send queue becomes one FlowModel flow on
// the route its packets would take (the QP's fixed route, QpFlow::path,
// after the NIC's own port), of the bytes its packets would put on the wire.
// When the flow's last byte has left, the QP's next message starts; the
// receiver places the message (data, receive CQE) after the route's
// latency, and the requester completes it when the ACK would return.
//
// Ownership: owns the FlowModel and the in-flight messages; the Network (and
// its Engine) must outlive it. Detach is implicit: destroy the Network after.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "fabric/sim/flow_model.h"
#include "fabric/sim/network.h"

namespace fathom::sim {

class FlowFabric {
 public:
  // Sets every NIC of `network` to the flow model. FAILED_PRECONDITION when
  // the network's NICs carry no fixed routes (NetworkConfig::fixed_paths off).
  static StatusOr<std::unique_ptr<FlowFabric>> Attach(Network* network,
                                                      const NetworkConfig& config);
  ~FlowFabric();

  FlowModel& model() { return model_; }
  // The model's link for a port (every port of the network is one).
  int32_t LinkOf(const Port* port) const { return link_of_.at(port); }
  Nic* NicOfHost(int32_t host_node) const {
    return static_cast<size_t>(host_node) < nic_of_node_.size()
               ? nic_of_node_[static_cast<size_t>(host_node)]
               : nullptr;
  }
  uint64_t messages() const { return messages_; }
  uint64_t rnr_retries() const { return rnr_retries_; }

  // A message whose last byte left `src` (Nic::OnFlowSent): the receiver
  // places it after `forward`, the ACK reaches the requester `back` later.
  void Deliver(Nic* src, uint32_t src_qpn, Nic* dst, uint32_t dst_qpn, const SendWr& wr,
               uint32_t npkts, uint32_t end_psn, Picoseconds forward, Picoseconds back,
               int rnr_retry, int64_t rnr_wait_ps);

 private:
  explicit FlowFabric(Network* network) : network_(network), model_(&network->engine()) {}
  struct Message {
    Nic* src;
    Nic* dst;
    uint32_t src_qpn, dst_qpn;
    SendWr wr;
    uint32_t npkts, end_psn;
    Picoseconds back;
    int rnr_left;  // 7: infinite (IBTA 9.7.5.2.8)
    int64_t rnr_wait_ps;
  };
  static void OnArrive(void* fabric, uint64_t index);
  static void OnAck(void* fabric, uint64_t index);
  static void OnRnrRetry(void* fabric, uint64_t key);
  // Tries the receive of the oldest message blocked at `key` (dst NIC's
  // host << 32 | QPN) and those behind it, in order, until one waits.
  void Drain(uint64_t key);
  // Places message `index` at its receiver; false when it waits (RNR).
  bool TryReceive(uint32_t index, uint64_t key);

  Network* network_;
  FlowModel model_;
  std::unordered_map<const Port*, int32_t> link_of_;
  std::vector<Nic*> nic_of_node_;
  std::vector<Message> messages_pool_;
  std::vector<uint32_t> free_;
  // Messages that arrived behind an RNR-waiting one at the same QP, oldest
  // first (receive order is the QP's order).
  std::unordered_map<uint64_t, std::vector<uint32_t>> blocked_;
  uint64_t messages_ = 0;
  uint64_t rnr_retries_ = 0;
};

}  // namespace fathom::sim
