// FlowFabric: the flow-level transfer model attached to a Network's NICs
// (NetworkConfig::flow_model; docs/FLOW.md). Everything above the NIC — QPs,
// CQs, WQE order, verbs, the collectives — is unchanged; below it, each
// SEND/WRITE at the head of a QP's send queue becomes one FlowModel flow on
// the route its packets would take (the QP's fixed route, QpFlow::path,
// after the NIC's own port), of the bytes its packets would put on the wire
// (a message of one packet passes outside the sharing: FlowModel::Pass).
// When the flow's last byte has left, the QP's next message starts; the
// receiver places the message (data, receive CQE) after the route's
// latency, and the requester completes it when the ACK would return.
//
// Split (the canonical order, one process or several; docs/FLOW.md, "Across
// processes"): every process keeps a whole replica of the model (links and
// flows) and of every QP's send queue, and runs every flow's start and
// finish; a message's arrival (data, receive CQE, RNR) runs only where its
// receiver's host is, the requester's completion only where the requester's
// is. What crosses between windows (TakeOutbox/TakeInbox): every posted send
// WR, to every other process (it reaches the wire after the NIC profile's
// PostToWireDelay, the lookahead), and each ACK, from the receiver's process
// to the requester's (after the ACK route's latency, at least one window).
//
// Ownership: owns the FlowModel and the in-flight messages; the Network (and
// its Engine) must outlive it. Detach is implicit: destroy the Network after.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
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
  // Splits the model by host (`local` by node id: this process runs that
  // host's arrivals and completions; a node beyond it is local). Before any
  // post. `counts_replicas`: this process counts the events every process
  // runs (flow finishes) in its digest; exactly one process must.
  void Split(std::vector<char> local, bool counts_replicas);
  bool split() const { return split_; }
  bool Local(int32_t host_node) const {
    return static_cast<size_t>(host_node) >= local_.size() ||
           local_[static_cast<size_t>(host_node)] != 0;
  }
  // A WR posted at a local NIC that reaches its send queue at `at_ps`.
  void NotePost(const Nic& nic, uint32_t qpn, const SendWr& wr, int64_t at_ps);
  // This window's crossings, by destination process (`owner` by node id):
  // the posts for every other process, the ACKs for the requester's (this
  // one's too: in the canonical order an ACK always goes through here, so
  // that one process schedules it where several do).
  // `least`: lowered to the earliest ACK taken (the posts are in this
  // process's NIC queues already, so its engine's next event covers them).
  std::vector<std::string> TakeOutbox(const std::vector<int32_t>& owner, int32_t me, int32_t procs,
                                      int64_t* least);
  // What the processes sent (by sender): posts join their NIC's replica
  // send queue; ACKs are scheduled in (time, host, QPN, PSN) order.
  void TakeInbox(const std::vector<std::string>& in);
  // A replicated event this process runs but does not count (Split).
  void Uncount(int64_t time_ps, EventKind kind, uint32_t component) {
    uncounted_sum_ += Engine::CanonicalEventDigest(time_ps, kind, component);
  }
  // What to take out of the engine's digest sum (Uncount's and the model's).
  uint64_t uncounted_sum() const { return uncounted_sum_ + model_.uncounted_sum(); }
  uint64_t posts_shipped() const { return posts_shipped_; }
  uint64_t acks_shipped() const { return acks_shipped_; }
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
  // An ACK for the requester's process (Split).
  struct AckNote {
    int64_t at_ps;
    int32_t src_host;
    uint32_t src_qpn;
    uint32_t end_psn;
    int32_t rnr_left;  // Message::rnr_left: the outcome
  };
  struct PostNote {
    int64_t at_ps;
    int32_t host;
    uint32_t qpn;
    SendWr wr;
  };
  // Schedules message `index`'s ACK at `at` (or notes it for the exchange).
  void SendAck(uint32_t index, Picoseconds at);
  static void OnArrive(void* fabric, uint64_t index);
  static void OnAck(void* fabric, uint64_t index);
  // Fetch hints: the message's receiver's (sender's) NIC and QP. The
  // events' object is the fabric, which every event shares.
  static void PrefetchArrive(const void* fabric, uint64_t index);
  static void PrefetchAck(const void* fabric, uint64_t index);
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
  // A free slot of messages_pool_ (reused first), for a message or an ACK.
  uint32_t TakeSlot();
  std::vector<Message> messages_pool_;
  std::vector<uint32_t> free_;
  // Messages that arrived behind an RNR-waiting one at the same QP, oldest
  // first (receive order is the QP's order).
  std::unordered_map<uint64_t, std::vector<uint32_t>> blocked_;
  uint64_t messages_ = 0;
  uint64_t rnr_retries_ = 0;
  bool split_ = false;
  std::vector<char> local_;  // Split's, by node id
  std::vector<PostNote> posts_out_;
  std::vector<AckNote> acks_out_;
  uint64_t uncounted_sum_ = 0;
  uint64_t posts_shipped_ = 0, acks_shipped_ = 0;
};

}  // namespace fathom::sim
