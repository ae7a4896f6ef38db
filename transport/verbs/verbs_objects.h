// Internal to the verbs backend (not for users: include verbs_device.h): the
// RAII objects behind Device, MemoryRegion, CompletionQueue and QueuePair.
// The device owns the context and PD; each child counts itself in the
// device's live count so that destroying a Device with children alive is
// caught in debug builds (the verbs rule: children first).
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>

#include "transport/verbs/gid.h"
#include "transport/verbs/verbs_device.h"

namespace fathom::transport::verbs::internal {

Status SetNonBlocking(int fd, const char* what);

// RAII deleters. Destruction errors cannot be returned from a destructor;
// they mean a child is still alive (EBUSY), which the live count catches.
struct DeviceListDeleter {
  void operator()(ibv_device** l) const { ibv_free_device_list(l); }
};
struct ContextDeleter {
  void operator()(ibv_context* c) const { ibv_close_device(c); }
};
struct PdDeleter {
  void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); }
};
struct MrDeleter {
  void operator()(ibv_mr* m) const { ibv_dereg_mr(m); }
};
struct CqDeleter {
  void operator()(ibv_cq* c) const { ibv_destroy_cq(c); }
};
struct ChannelDeleter {
  void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); }
};
struct QpDeleter {
  void operator()(ibv_qp* q) const { ibv_destroy_qp(q); }
};

class VerbsDevice;
class VerbsQp;

class VerbsMr final : public MemoryRegion {
 public:
  VerbsMr(ibv_mr* mr, int* live) : mr_(mr), live_(live) { ++*live_; }
  ~VerbsMr() override {
    mr_.reset();
    --*live_;
  }
  void* addr() const override { return mr_->addr; }
  uint64_t length() const override { return mr_->length; }
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const override { return mr_->rkey; }

 private:
  std::unique_ptr<ibv_mr, MrDeleter> mr_;
  int* live_;
};

class VerbsCq final : public VerbsCompletionQueue {
 public:
  VerbsCq(ibv_cq* cq, ibv_comp_channel* channel, int* live)
      : channel_(channel), cq_(cq), live_(live) {
    ++*live_;
  }
  ~VerbsCq() override {
    assert(qps_.empty() && "destroy every QP before its CQ");
    if (unacked_events_ > 0) ibv_ack_cq_events(cq_.get(), unacked_events_);
    cq_.reset();
    channel_.reset();
    --*live_;
  }

  int Poll(std::span<Completion> out) override;
  void SetNotify(std::function<void()> notify) override { notify_ = std::move(notify); }
  int event_fd() const override { return channel_ ? channel_->fd : -1; }
  Status HandleEvents() override;
  Status WaitForEvent(Picoseconds timeout) override;
  uint64_t events() const override { return events_; }

  ibv_cq* cq() const { return cq_.get(); }
  // A completion made here, not by the device (a receive posted in ERR):
  // Poll() returns it after the device's, and the notify callback runs now.
  void AddFlushed(const Completion& c) {
    flushed_.push_back(c);
    if (notify_) notify_();
  }
  void Attach(uint32_t qpn, VerbsQp* qp) { qps_[qpn] = qp; }
  void Detach(uint32_t qpn) { qps_.erase(qpn); }

 private:
  std::unique_ptr<ibv_comp_channel, ChannelDeleter> channel_;
  std::unique_ptr<ibv_cq, CqDeleter> cq_;
  std::unordered_map<uint32_t, VerbsQp*> qps_;
  std::function<void()> notify_;
  std::deque<Completion> flushed_;
  unsigned int unacked_events_ = 0;
  uint64_t events_ = 0;
  int* live_;
};

// What the QP remembers of each posted WR: completions (and above all error
// completions, whose opcode verbs leaves undefined) are matched back to it.
struct PostedWr {
  uint64_t wr_id;
  WcOpcode opcode;
};

class VerbsQp final : public QueuePair {
 public:
  VerbsQp(ibv_qp* qp, VerbsCq* cq, VerbsDevice* device, int peer_rank, const QpOptions& options,
          uint32_t psn, int* live)
      : qp_(qp),
        cq_(cq),
        device_(device),
        peer_rank_(peer_rank),
        options_(options),
        psn_(psn),
        live_(live) {
    ++*live_;
    cq_->Attach(qp_->qp_num, this);
  }
  ~VerbsQp() override {
    cq_->Detach(qp_->qp_num);
    qp_.reset();
    --*live_;
  }

  uint32_t qp_num() const override { return qp_->qp_num; }
  int peer_rank() const override { return peer_rank_; }
  QpState state() const override { return state_; }
  EndpointInfo LocalInfo() const override;
  Status Connect(const EndpointInfo& remote) override;
  int path_mtu() const override { return path_mtu_; }
  Status PostSend(const SendWr& wr) override;
  Status PostSendList(std::span<const SendWr> wrs) override;
  Status PostRecv(const RecvWr& wr) override;
  int outstanding_sends() const override { return static_cast<int>(sends_.size()); }
  int outstanding_recvs() const override { return static_cast<int>(recvs_.size()); }
  Status ModifyToError() override;

  Status ToInit();
  void set_inline_size(uint32_t n) { inline_size_ = n; }
  // Fills the fields verbs does not give (peer, opcode of an error) and
  // retires the WR(s) the completion accounts for.
  void OnCompletion(Completion& c);

 private:
  std::string Describe() const { return "qpn=" + Hex(qp_->qp_num); }
  // FAILED_PRECONDITION unless the QP is in RTS or later (ERR flushes).
  Status CheckCanSend(const SendWr& wr) const;

  std::unique_ptr<ibv_qp, QpDeleter> qp_;
  VerbsCq* cq_;
  VerbsDevice* device_;
  int peer_rank_;
  QpOptions options_;
  uint32_t psn_;
  int* live_;
  QpState state_ = QpState::kReset;
  int path_mtu_ = 0;
  uint32_t inline_size_ = 0;
  // Signaled and unsignaled sends in post order: a signaled completion
  // retires every earlier unsignaled WR too (RC completes in order).
  std::deque<PostedWr> sends_;
  std::deque<bool> send_signaled_;
  std::deque<PostedWr> recvs_;
  // PostSendList's chain, kept to post without allocating.
  std::vector<ibv_send_wr> list_wrs_;
  std::vector<ibv_sge> list_sges_;
};

class VerbsDevice final : public Device {
 public:
  VerbsDevice(ibv_context* ctx, ibv_pd* pd, DeviceInfo info, const DeviceOptions& options,
              const ibv_device_attr& dev_attr, const ibv_port_attr& port_attr, const GidEntry& gid)
      : ctx_(ctx),
        pd_(pd),
        info_(std::move(info)),
        options_(options),
        dev_attr_(dev_attr),
        port_attr_(port_attr),
        gid_(gid) {}
  ~VerbsDevice() override {
    assert(live_ == 0 && "destroy every MR, CQ and QP before their Device");
    pd_.reset();
    ctx_.reset();
  }

  const DeviceInfo& info() const override { return info_; }
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, uint64_t length,
                                                         uint32_t access) override;
  StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) override;
  StatusOr<std::unique_ptr<QueuePair>> CreateQp(int peer_rank, const QpOptions& options,
                                                CompletionQueue* cq) override;
  std::vector<AsyncEvent> TakeAsyncEvents() override;

  bool is_roce() const { return port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  int port() const { return info_.port; }
  int rank() const { return options_.rank; }
  uint16_t lid() const { return port_attr_.lid; }
  const GidEntry& gid() const { return gid_; }
  int active_mtu() const { return info_.active_mtu; }
  const ibv_device_attr& dev_attr() const { return dev_attr_; }

 private:
  std::unique_ptr<ibv_context, ContextDeleter> ctx_;
  std::unique_ptr<ibv_pd, PdDeleter> pd_;
  DeviceInfo info_;
  DeviceOptions options_;
  ibv_device_attr dev_attr_;
  ibv_port_attr port_attr_;
  GidEntry gid_;
  int live_ = 0;
  std::mt19937 psn_rng_{std::random_device{}()};
};

}  // namespace fathom::transport::verbs::internal
