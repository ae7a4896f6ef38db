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
// flows) and runs the start and finish of every flow that can share a link
// with one of its own (Plan's classes; every flow without a plan); a
// message's arrival (data,
// receive CQE, RNR) runs only where its receiver's host is, the requester's
// completion only where the requester's is. A message of one packet shares
// nothing (FlowModel::Pass), so it runs only in its requester's process
// unless the replicas need it to order the QP's next flow: "kept home".
// What crosses between windows (TakeOutbox/TakeInbox): the posted send WRs
// that the replicas need (every multi-packet one, and a one-packet one
// behind a message the replicas still send), to every other process that
// replicates its QP's class (each
// reaches the wire after the NIC profile's PostToWireDelay, the lookahead),
// with the time the QP is free of what was kept home; each message's
// arrival, from the requester's process to the receiver's (after the
// route's latency, at least one window), and each ACK, back (after the ACK
// route's latency).
//
// Ownership: owns the FlowModel and the in-flight messages; the Network (and
// its Engine) must outlive it. Detach is implicit: destroy the Network after.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
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
  // Split: which processes replicate which flows from now on (docs/FLOW.md,
  // "Across processes"). `data` (host node, QPN): every QP that may send a
  // message of more than one packet until the next Plan (a collective's
  // data QPs); `owner` by node id, this process `me` of `procs`. The data
  // QPs whose routes share a link, transitively, form a class; a process
  // replicates a class's flows only when it owns one of its QPs' hosts,
  // and the least such process counts their finishes. A multi-packet
  // message on a QP outside `data` aborts the run (the declaration was
  // wrong). With one class (or `full`) every process replicates every
  // flow, as without a plan. Every process calls it alike, while no flow
  // runs (between collectives); returns the number of classes (0: full
  // replication), or FAILED_PRECONDITION when a flow still runs.
  StatusOr<size_t> Plan(std::vector<std::pair<int32_t, uint32_t>> data,
                        const std::vector<int32_t>& owner, int32_t me, int32_t procs, bool full);
  // Split across `procs` processes: why a post may cross to another
  // process under the current Plan ("" when none can: every class is
  // replicated by one process only). A crossing post needs the NIC
  // profile's post-to-wire delay as its lookahead (DistSimBackend refuses a
  // profile without one where this is not empty).
  std::string PostsCrossBecause(int32_t procs) const;
  // Set when the run has no post lookahead (the ideal profile across
  // processes): a post shipped to another process then aborts the run, as
  // it would arrive after its own start there.
  void set_no_post_lookahead(bool v) { no_post_lookahead_ = v; }
  // A WR posted at a local NIC that reaches its send queue at `at_ps`:
  // shipped to the replicas, or kept home (one packet, and the replicas'
  // copy of the QP has nothing left to send).
  void NotePost(const Nic& nic, uint32_t qpn, const SendWr& wr, int64_t at_ps);
  // The component of a split run's events that free a QP after a
  // one-packet message left (Nic::OnFlowFree, OnKeptDone), the same in
  // every process: above every flow slot, by host node (below 2^17) and QP
  // index (below 2^14; beyond, two QPs may share one, which only orders
  // their ties by insertion).
  static uint32_t PassKey(int32_t host, uint32_t qpn) {
    return 0x80000000u | ((static_cast<uint32_t>(host) & 0x1FFFFu) << 14) |
           ((qpn - kFirstQpn) & 0x3FFFu);
  }
  // Split: the requester's process notes a message's arrival for the
  // receiver's (Deliver's arguments; through the exchange, as an ACK). Its
  // last byte leaves `later` from now: 0 for a flow's finish, a folded
  // one-packet message's lone time (Nic::FlowActivate). A message that
  // has not left by the end of the window is held until the window it
  // leaves in (TakeOutbox), so that its QP failing before then withdraws
  // it (WithdrawHeld) as one process does.
  void NoteArrival(Nic* src, uint32_t src_qpn, Nic* dst, uint32_t dst_qpn, const SendWr& wr,
                   uint32_t npkts, uint32_t end_psn, Picoseconds later, Picoseconds forward,
                   Picoseconds back, int rnr_retry, int64_t rnr_wait_ps);
  // The held arrival of `src_host`'s QP `src_qpn` (its latest), which never
  // left: dropped. Returns its WR.
  SendWr WithdrawHeld(int32_t src_host, uint32_t src_qpn);
  // This window's crossings, by destination process (`owner` by node id):
  // the posts for every other process, the arrivals of the messages that
  // left by `through_ps` (the last picosecond the engine has run), the
  // ACKs for the requester's (this one's too: in the canonical order an
  // ACK always goes through here, so that one process schedules it where
  // several do).
  // `least`: lowered to the earliest ACK or arrival taken, and to when the
  // earliest held message leaves (the posts are in this process's NIC
  // queues already, so its engine's next event covers them).
  std::vector<std::string> TakeOutbox(const std::vector<int32_t>& owner, int32_t me, int32_t procs,
                                      int64_t through_ps, int64_t* least);
  // What the processes sent (by sender): posts join their NIC's replica
  // send queue; ACKs, then arrivals, are scheduled in (time, host, QPN,
  // PSN) order.
  void TakeInbox(const std::vector<std::string>& in);
  // A replicated event this process runs but does not count (Split).
  void Uncount(int64_t time_ps, EventKind kind, uint32_t component) {
    uncounted_sum_ += Engine::CanonicalEventDigest(time_ps, kind, component);
    ++uncounted_events_;
  }
  // What to take out of the engine's digest sum (Uncount's and the model's).
  uint64_t uncounted_sum() const { return uncounted_sum_ + model_.uncounted_sum(); }
  // How many such events (the engine's count less these is this process's
  // share of the run's events).
  uint64_t uncounted_events() const { return uncounted_events_ + model_.uncounted_events(); }
  uint64_t posts_shipped() const { return posts_shipped_; }
  uint64_t acks_shipped() const { return acks_shipped_; }
  uint64_t arrivals_shipped() const { return arrivals_shipped_; }
  // Posts of this process's NICs that no other process needed.
  uint64_t posts_kept() const { return posts_kept_; }
  // Replica QPs held for a message kept in another process (OnKeptDone).
  uint64_t replica_holds() const { return replica_holds_; }
  uint64_t rnr_retries() const { return rnr_retries_; }

  // A message whose last byte left `src` (Nic::FlowSent): the receiver
  // places it after `forward`, the ACK reaches the requester `back` later.
  // Returns its slot (for Withdraw).
  uint32_t Deliver(Nic* src, uint32_t src_qpn, Nic* dst, uint32_t dst_qpn, const SendWr& wr,
                   uint32_t npkts, uint32_t end_psn, Picoseconds forward, Picoseconds back,
                   int rnr_retry, int64_t rnr_wait_ps);
  // A delivered message that never left after all (Nic::FlowWithdrawFold,
  // before its arrival): its arrival does nothing. Returns its WR.
  const SendWr& Withdraw(uint32_t slot) {
    messages_pool_[slot].withdrawn = true;
    return messages_pool_[slot].wr;
  }

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
    bool withdrawn = false;
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
    // When the QP's last one-packet message kept home leaves, if not before
    // at_ps: the replica holds the QP busy until then (OnKeptDone).
    int64_t free_at;
  };
  // A message for the receiver's process (NoteArrival).
  struct ArriveNote {
    int64_t at_ps;
    int32_t src_host, dst_host;
    uint32_t src_qpn, dst_qpn;
    SendWr wr;
    uint32_t npkts, end_psn;
    int64_t back_ps;
    int32_t rnr_retry;
    int64_t rnr_wait_ps;
  };
  // A replica's stand-in for the event that frees the QP after a message
  // kept home left (Nic::OnFlowFree: same time and component): the QP is
  // free for its next message.
  static void OnKeptDone(void* nic, uint64_t qpn);
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
  std::vector<uint32_t> posts_out_class_;  // each post's QP's split_class
  // Plan's: the classes (0: none), and whether process p replicates class
  // c, at [(c - 1) * procs + p].
  size_t classes_ = 0;
  int32_t procs_ = 1;
  std::vector<char> holds_;
  bool no_post_lookahead_ = false;
  std::vector<AckNote> acks_out_;
  std::vector<ArriveNote> arrivals_out_;
  // Folded messages still leaving at the window's end, with when they
  // leave (NoteArrival), in the order noted.
  std::vector<std::pair<int64_t, ArriveNote>> arrivals_held_;
  uint64_t uncounted_sum_ = 0;
  uint64_t uncounted_events_ = 0;
  uint64_t posts_shipped_ = 0, acks_shipped_ = 0, arrivals_shipped_ = 0, posts_kept_ = 0;
  uint64_t replica_holds_ = 0;
};

}  // namespace fathom::sim
