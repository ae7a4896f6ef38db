#include "transport/collectives/collective.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace fathom::transport::coll {

RankCollective::RankCollective(Communicator* comm, const CollSpec& spec, DataType type, RedOp op,
                               const void* in, void* out, Trace* trace)
    : comm_(comm),
      trace_(trace),
      elem_(DataTypeSize(type)),
      in_(static_cast<const uint8_t*>(in)),
      out_(static_cast<uint8_t*>(out)),
      premul_(op == RedOp::kAvg && IsFloatingType(type) && spec.nranks > 1 &&
              (spec.kind == CollKind::kAllReduce || spec.kind == CollKind::kReduceScatter ||
               spec.kind == CollKind::kReduce)),
      postdiv_(op == RedOp::kAvg && !IsFloatingType(type) && spec.nranks > 1 &&
               (spec.kind == CollKind::kAllReduce || spec.kind == CollKind::kReduceScatter ||
                spec.kind == CollKind::kReduce)),
      spec_(spec),
      type_(type),
      op_(op) {}

Status RankCollective::Start(Picoseconds now) {
  spec_.chunk_elems = comm_->options().chunk_bytes / elem_;
  spec_.gpus_per_server = comm_->options().gpus_per_server;
  if (spec_.kind != CollKind::kAllReduce || spec_.algorithm == Algorithm::kRing ||
      Hierarchical(spec_.nranks, spec_.gpus_per_server)) {
    spec_.channels = comm_->options().channels;
  }
  FATHOM_ASSIGN_OR_RETURN(plan_, BuildPlan(spec_, comm_->rank()));
  // In place (the buffers overlap): the kinds whose receives overwrite what
  // is still to be sent order them (CollSpec::in_place).
  const bool overlap = in_ != nullptr && out_ != nullptr && in_ < out_ + plan_.out_count * elem_ &&
                       out_ < in_ + plan_.in_count * elem_;
  if (overlap && !spec_.in_place &&
      (spec_.kind == CollKind::kAllToAll || spec_.kind == CollKind::kSendRecv)) {
    spec_.in_place = true;
    FATHOM_ASSIGN_OR_RETURN(plan_, BuildPlan(spec_, comm_->rank()));
  }
  FATHOM_ASSIGN_OR_RETURN(in_mr_,
                          comm_->Register(const_cast<uint8_t*>(in_), plan_.in_count * elem_));
  FATHOM_ASSIGN_OR_RETURN(out_mr_, comm_->Register(out_, plan_.out_count * elem_));
  nstreams_ = plan_.streams.size();
  streams_.assign(nstreams_, StreamState{});
  unfinished_ = 0;
  for (size_t si = 0; si < nstreams_; ++si) {
    StreamState& ss = streams_[si];
    ss.stream = plan_.streams[si].get();
    ss.size = ss.stream->size();
    ss.clock = now;
    unfinished_ += ss.size > 0 ? 1 : 0;
  }
  modelled_ = comm_->options().modelled;
  slots_ = static_cast<uint64_t>(comm_->options().slots);
  reduce_rate_ = comm_->options().host_reduce_bytes_per_s;
  memory_free_ = now;
  done_ = false;
  // Up to 64 streams (every plan but the widest), the communicator tracks
  // which may run (Communicator::AddWaiter); past that, every pass checks
  // every stream.
  masked_ = nstreams_ <= 64;
  comm_->ClearWaiters();
  comm_->SetRunnable(masked_ ? (nstreams_ == 64 ? ~uint64_t{0} : (uint64_t{1} << nstreams_) - 1)
                             : 0);
  bool progressed = false;
  return Advance(now, &progressed);
}

Status RankCollective::Advance(Picoseconds now, bool* progressed) {
  *progressed = false;
  // Nothing this rank waits on changed: every stream is done or would be
  // skipped (TryStream), so the pass would run nothing. At 1024 ranks most
  // completions (a send's) touch no connection a stream waits on.
  if (masked_ && comm_->runnable() == 0) {
    done_ = unfinished_ == 0;
    return Status::Ok();
  }
  // Passes until nothing more runs: a tree root's down stream waits on its
  // up stream, so one stream's step can unblock an earlier one. A stream
  // not runnable (masked_) is one TryStream would skip.
  while (true) {
    bool any = false;
    for (size_t si = 0; si < nstreams_; ++si) {
      if (masked_ && ((comm_->runnable() >> si) & 1) == 0) continue;
      bool ran = true;
      while (ran) {
        FATHOM_RETURN_IF_ERROR(TryStream(si, now, &ran));
        any = any || ran;
      }
    }
    const bool all_done = unfinished_ == 0;
    *progressed = *progressed || any;
    done_ = all_done;
    if (all_done || !any) return Status::Ok();
  }
}

Status RankCollective::TryStream(size_t si, Picoseconds now, bool* ran) {
  *ran = false;
  StreamState& ss = streams_[si];
  if (ss.next >= ss.size) {
    if (masked_) comm_->ClearRunnable(static_cast<int>(si));
    return Status::Ok();
  }
  // Blocked on a connection that has not changed since: it still blocks.
  if (ss.wait_conn >= 0 && comm_->version(static_cast<size_t>(ss.wait_conn)) == ss.wait_version) {
    return Status::Ok();
  }
  ss.wait_conn = -1;
  const Stream& st = *ss.stream;
  Current& cur = ss.cur;
  if (!cur.valid) {
    // A stream's steps mostly keep their peers (a ring's are the same
    // every step): the connections looked up for the last step stay, and
    // only a changed peer is looked up again.
    const Step next = st.At(ss.next);
    for (int k = 0; k < kMaxPeers; ++k) {
      if (next.recv[k] != cur.step.recv[k]) cur.recv[k] = nullptr;
      if (next.send[k] != cur.step.send[k]) cur.send[k] = nullptr;
    }
    cur.step = next;
    cur.valid = true;
  }
  const Step& s = cur.step;
  if (ss.pending.active) {
    // This step's reduction is under way: its result goes out when it ends.
    Pending& p = ss.pending;
    if (now < p.ready) {
      ss.block = Block::kReduce;
      return Status::Ok();
    }
    p.active = false;
    FATHOM_RETURN_IF_ERROR(FinishStep(si, p.recv, p.send, p.src, p.lkey, p.bytes, now));
    *ran = true;
    return Status::Ok();
  }
  const int ch = st.channel();
  const uint64_t slots = slots_;
  Conn* recv[kMaxPeers] = {nullptr, nullptr, nullptr};
  Conn* send[kMaxPeers] = {nullptr, nullptr, nullptr};
  if (s.after_stream >= 0 && streams_[static_cast<size_t>(s.after_stream)].next <= s.after_step) {
    ss.block = Block::kLocal;
    return Status::Ok();
  }
  if (s.count > 0) {
    for (int k = 0; k < kMaxPeers; ++k) {
      if (s.recv[k] >= 0) {
        if (cur.recv[k] == nullptr) cur.recv[k] = comm_->FindConn(s.recv[k], ch);
        recv[k] = cur.recv[k];
        if (recv[k] == nullptr)
          return Internal("no connection to rank " + std::to_string(s.recv[k]));
        if (recv[k]->arrived <= recv[k]->consumed) {
          ss.block = Block::kData;
          ss.block_peer = s.recv[k];
          Wait(si, recv[k]->index);
          return Status::Ok();
        }
      }
      if (s.send[k] >= 0) {
        if (cur.send[k] == nullptr) cur.send[k] = comm_->FindConn(s.send[k], ch);
        send[k] = cur.send[k];
        if (send[k] == nullptr)
          return Internal("no connection to rank " + std::to_string(s.send[k]));
        if (send[k]->sent - send[k]->credits >= slots) {
          ss.block = Block::kCredit;
          ss.block_peer = s.send[k];
          Wait(si, send[k]->index);
          return Status::Ok();
        }
      }
    }
  }
  // Ready: wait ends here.
  if (trace_ != nullptr && now > ss.clock) {
    trace_->events.push_back({"wait", comm_->rank(), static_cast<int>(si), ss.clock, now - ss.clock,
                              "\"peer\":" + std::to_string(ss.block_peer)});
  }
  const uint64_t bytes = s.count * elem_;
  const bool modelled = modelled_;
  const uint8_t* src = nullptr;
  uint32_t lkey = 0;
  if (!modelled && s.count > 0) {
    uint8_t* dst = nullptr;
    // avg: this rank's input enters the sum scaled by 1/nranks (NCCL's
    // pre-multiplied sum), so a step reading it never sends it as it is.
    const bool scale = premul_ && s.in_offset >= 0;
    if (s.out_offset >= 0) {
      dst = out_ + static_cast<uint64_t>(s.out_offset) * elem_;
      lkey = out_mr_->lkey();
    } else if (recv[0] != nullptr || ((scale || s.stage) && send[0] != nullptr)) {
      FATHOM_ASSIGN_OR_RETURN(dst, comm_->OutStaging(*send[0], &lkey));
    }
    if (dst != nullptr) {
      int first = 0;
      if (s.in_offset >= 0) {
        const uint8_t* local = in_ + static_cast<uint64_t>(s.in_offset) * elem_;
        if (local != dst) std::memcpy(dst, local, bytes);
        if (scale) ScaleElements(dst, s.count, type_, 1.0 / spec_.nranks);
      } else if (recv[0] != nullptr) {
        std::memcpy(dst, comm_->SlotData(*recv[0], recv[0]->consumed), bytes);
        first = 1;
      }
      for (int k = first; k < kMaxPeers; ++k) {
        if (recv[k] != nullptr) {
          ReduceInto(dst, comm_->SlotData(*recv[k], recv[k]->consumed), s.count, type_, op_);
        }
      }
      // Integer avg divides the completed sum, before it is sent on (NCCL's
      // sum-then-divide).
      if (postdiv_ && s.final_sum) {
        DivideElements(dst, s.count, type_, spec_.nranks);
      }
      src = dst;
    } else {
      src = in_ + static_cast<uint64_t>(s.in_offset) * elem_;
      lkey = in_mr_->lkey();
    }
  }
  // The reduction's time at the rank's memory bandwidth: it reads every
  // operand and writes the result once (STREAM's accounting: its Add kernel,
  // a[i] = b[i] + c[i], moves 3 words per element; McCalpin, "STREAM:
  // Sustainable Memory Bandwidth in High Performance Computers"). The
  // streams share the memory: reductions run one after another.
  Picoseconds end = now;
  const double rate = reduce_rate_;
  int operands = s.in_offset >= 0 ? 1 : 0;
  for (const Conn* r : recv) operands += r != nullptr ? 1 : 0;
  if (rate > 0 && recv[0] != nullptr && operands >= 2) {
    const double seconds = static_cast<double>((operands + 1) * bytes) / rate;
    end = std::max(now, memory_free_) + Picoseconds::FromSeconds(seconds);
    memory_free_ = end;
  }
  if (trace_ != nullptr) {
    std::string name;
    if (recv[0] != nullptr) name = s.in_offset >= 0 ? "recv-reduce" : "recv-copy";
    if (send[0] != nullptr) name += name.empty() ? "send" : "-send";
    if (name.empty()) name = "copy";
    std::string args =
        "\"step\":" + std::to_string(ss.next) + ",\"bytes\":" + std::to_string(bytes);
    if (s.recv[0] >= 0) args += ",\"from\":" + std::to_string(s.recv[0]);
    if (s.send[0] >= 0) args += ",\"to\":" + std::to_string(s.send[0]);
    trace_->events.push_back(
        {name, comm_->rank(), static_cast<int>(si), now, end - now, std::move(args)});
  }
  *ran = true;
  if (end > now) {
    // Not blocking: the driver advances this rank again at `end`
    // (next_wake) and the step finishes then.
    ss.pending = Pending{true, end,  {recv[0], recv[1], recv[2]}, {send[0], send[1], send[2]}, src,
                         lkey, bytes};
    ss.clock = now;
    ss.block = Block::kReduce;
    return Status::Ok();
  }
  return FinishStep(si, recv, send, src, lkey, bytes, now);
}

Status RankCollective::FinishStep(size_t si, Conn* const recv[kMaxPeers],
                                  Conn* const send[kMaxPeers], const uint8_t* src, uint32_t lkey,
                                  uint64_t bytes, Picoseconds now) {
  for (int k = 0; k < kMaxPeers; ++k) {
    if (recv[k] == nullptr) continue;
    comm_->ReleaseSlot(*recv[k], recv[k]->consumed, bytes);
    ++recv[k]->consumed;
    comm_->Touch(recv[k]->index);
    FATHOM_RETURN_IF_ERROR(comm_->ReturnCredit(*recv[k]));
  }
  StreamState& ss = streams_[si];
  for (int k = 0; k < kMaxPeers; ++k) {
    if (send[k] != nullptr) {
      FATHOM_RETURN_IF_ERROR(comm_->PostData(*send[k], src, lkey, bytes, ss.next));
    }
  }
  ss.clock = now;
  ss.block = Block::kNone;
  if (++ss.next == ss.size) --unfinished_;
  ss.cur.valid = false;
  return Status::Ok();
}

void RankCollective::Wait(size_t si, size_t conn) {
  StreamState& ss = streams_[si];
  ss.wait_conn = static_cast<int32_t>(conn);
  ss.wait_version = comm_->version(conn);
  if (masked_) {
    comm_->AddWaiter(conn, static_cast<int>(si));
    comm_->ClearRunnable(static_cast<int>(si));
  }
}

Picoseconds RankCollective::next_wake() const {
  Picoseconds w = Picoseconds::Max();
  if (reduce_rate_ <= 0) return w;  // nothing is ever pending
  for (const StreamState& ss : streams_) {
    if (ss.pending.active && ss.pending.ready < w) w = ss.pending.ready;
  }
  return w;
}

std::vector<std::string> RankCollective::DescribeWait(std::vector<int>* peers) const {
  std::vector<std::string> lines;
  char buf[320];
  for (size_t si = 0; si < streams_.size(); ++si) {
    const StreamState& ss = streams_[si];
    const Stream& st = *ss.stream;
    if (ss.next >= st.size()) continue;
    const int peer = ss.block_peer;
    std::string what;
    Communicator* comm = comm_;
    const Conn* c = peer >= 0 ? comm->FindConn(peer, st.channel()) : nullptr;
    switch (ss.block) {
      case Block::kData:
        std::snprintf(buf, sizeof(buf),
                      "waiting for data from rank %d (channel %d: %llu chunks arrived, %llu "
                      "consumed)",
                      peer, st.channel(), static_cast<unsigned long long>(c ? c->arrived : 0),
                      static_cast<unsigned long long>(c ? c->consumed : 0));
        what = buf;
        if (peers != nullptr) peers->push_back(peer);
        break;
      case Block::kCredit:
        std::snprintf(buf, sizeof(buf),
                      "waiting for a free slot at rank %d (channel %d: %llu chunks sent, %llu "
                      "credits back)",
                      peer, st.channel(), static_cast<unsigned long long>(c ? c->sent : 0),
                      static_cast<unsigned long long>(c ? c->credits : 0));
        what = buf;
        if (peers != nullptr) peers->push_back(peer);
        break;
      case Block::kLocal:
        what = "waiting for its own reduction (tree root)";
        break;
      case Block::kReduce:
        std::snprintf(buf, sizeof(buf), "reducing in host memory until t=%.6f s",
                      ss.pending.ready.seconds());
        what = buf;
        break;
      case Block::kNone:
        what = "not started";
        break;
    }
    std::snprintf(
        buf, sizeof(buf),
        "%s(%s) stream %zu step %llu/%llu: ", std::string(CollKindName(spec_.kind)).c_str(),
        std::string(AlgorithmName(spec_.algorithm)).c_str(), si,
        static_cast<unsigned long long>(ss.next), static_cast<unsigned long long>(st.size()));
    lines.push_back(buf + what);
  }
  return lines;
}

}  // namespace fathom::transport::coll
