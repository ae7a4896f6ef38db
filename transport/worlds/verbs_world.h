// VerbsWorld: one rank of a collective run in this process over real verbs
// (InfiniBand, RoCE, rxe), one process per rank — the counterpart of
// SimWorld. It opens the verbs device, meets the other ranks over the
// bootstrap (rank 0 also hosts the root, bound to the bootstrap address),
// connects the Communicator's QPs to their peers in one endpoint-exchange
// round, and drives the same RankCollective code with a polling Driver and
// its wall-clock watchdog.
//
// Failures reach every rank: when this rank's run stops on a completion
// error or on the watchdog, Run() tells the others through the bootstrap's
// abort (with the status and the peer, or the stuck QPs), and their drivers,
// which poll the bootstrap between turns, stop with that reason.
//
// Ownership: a VerbsWorld owns its device, bootstrap rank (and root), the
// communicator and the driver; callers own the buffers they pass to Run(),
// which must stay allocated (and at the same address) while the world
// lives: registrations are cached by address. One thread uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/collectives/driver.h"
#include "transport/collectives/trace.h"
#include "transport/faulty/faulty.h"
#include "transport/verbs/verbs_device.h"
#include "transport/wait.h"

namespace fathom::transport::worlds {

struct VerbsWorldOptions {
  int nranks = 2;
  int rank = 0;
  // Where rank 0's bootstrap root listens (rank 0 binds it, every rank
  // connects to it).
  std::string bootstrap_address = "127.0.0.1";
  uint16_t bootstrap_port = bootstrap::kDefaultPort;
  std::string token;
  // Every rank must have joined within this; each bootstrap round (barriers,
  // the exchange of results between sizes) waits at most this plus twice the
  // watchdog, so that a stuck rank is reported by its own watchdog first.
  Picoseconds bootstrap_timeout = Picoseconds::FromSeconds(60);
  verbs::DeviceOptions device;  // cq_mode: busy polling (default) or completion events
  coll::CommOptions comm;
  // No completion and no step on this rank for this long (wall time): the
  // watchdog stops the run.
  Picoseconds watchdog = Picoseconds::FromSeconds(30);
  // Verbs-level faults on this rank's device (transport/faulty); times are
  // wall time since the device opened. Busy polling only (device.cq_mode).
  std::vector<faulty::VerbsFault> verbs_faults;
};

class VerbsWorld {
 public:
  static StatusOr<std::unique_ptr<VerbsWorld>> Create(const VerbsWorldOptions& options);
  ~VerbsWorld();
  VerbsWorld(const VerbsWorld&) = delete;
  VerbsWorld& operator=(const VerbsWorld&) = delete;

  int rank() const { return options_.rank; }
  int nranks() const { return options_.nranks; }
  const DeviceInfo& device_info() const { return device_->info(); }
  coll::Communicator& comm() { return *comm_; }
  bootstrap::Rank& bootstrap() { return *boot_; }

  // Runs one collective on this rank (spec.algorithm resolved; every rank
  // must run the same sequence of specs). On a local failure the other
  // ranks are told before it returns. On any failure every rank sends its
  // report (where it stood) to the root, and rank 0's report ends with all
  // of them: the hang seen from every rank, in one place.
  coll::RunOutcome Run(const coll::CollSpec& spec, coll::DataType type, coll::RedOp op,
                       const void* in, void* out, coll::Trace* trace = nullptr);

  // This rank's clock reading (the clock of Run()'s trace events) just as it
  // left the bootstrap barrier that ends the connection setup: the common
  // reference that puts every rank's trace on one timeline. Every rank
  // leaves that barrier when the root's answer reaches it, so the alignment
  // is good to the barrier's skew (the spread of those arrivals: tens of
  // microseconds on a LAN, more in busy VMs), not better.
  Picoseconds trace_origin() const { return trace_origin_; }
  // All of `trace` as this rank's RankTrace, on that timeline.
  coll::RankTrace OwnSteps(const coll::Trace& trace) const;

  // Sends this rank's `trace` to rank 0 through the bootstrap
  // (AllGatherChunked), its clock shifted by trace_origin(). Rank 0 gets
  // every rank's RankTrace (its own whole; each other rank's first events
  // within budget_bytes / (nranks - 1), since every rank receives every
  // round); the other ranks get an empty vector. *sent is how many of this
  // rank's events went. Every rank calls it at the same point, with a
  // bootstrap that was not aborted.
  StatusOr<std::vector<coll::RankTrace>> GatherTrace(const coll::Trace& trace, size_t budget_bytes,
                                                     size_t* sent);

  // Says goodbye to the bootstrap; rank 0 then waits (bounded) until every
  // rank has, so its root outlives the others' last round. The destructor
  // does it too.
  Status Finish();

  // After a failed Run() that was traced: on rank 0, its own steps (all of
  // `trace`) and those the other ranks sent with their reports (their first
  // events within kMaxReportTraceBytes each), by rank; FAILED_PRECONDITION
  // elsewhere. On the other ranks, how many of their events went.
  StatusOr<std::vector<coll::RankTrace>> TracesAfterFailure(const coll::Trace& trace) const;
  size_t reported_trace_events() const { return reported_trace_events_; }

 private:
  explicit VerbsWorld(const VerbsWorldOptions& options) : options_(options) {}
  Status Connect();
  // Rank 0, after a failure: every rank's report, waiting (bounded) for
  // those not yet in.
  std::string GatheredReports();
  // From every rank's view (`own`: this rank's report; the others' gathered
  // ones), the culprit of a hang for the whole world: each rank's watchdog
  // sees only its own QPs, so each names one of its own. "" when no rank
  // named one.
  std::string WorldCulprit(const std::string& own) const;
  // A rank's report to the root is cut here (a watchdog report lists at
  // most 32 ranks and 64 QPs; one rank's is far below), and its steps at
  // the rest of a bootstrap message (1 MiB by default).
  static constexpr size_t kMaxReportBytes = 16 << 10;
  static constexpr size_t kMaxReportTraceBytes = (1 << 20) - (32 << 10);

  // Wall time. Progress() gives the CPU away between polls: busy-poll mode
  // yields it (sched_yield), so that ranks sharing a core with each other or
  // with a software NIC's kernel work (rxe in a 1-vCPU VM) do not starve
  // them; event mode (device.cq_mode kEvents) sleeps on the CQ's completion
  // channel, at most 10 ms so that the watchdog and the abort check run.
  class PollingClock final : public Clock {
   public:
    Picoseconds Now() override { return wall_.Now(); }
    bool Progress(Picoseconds until) override;
    void set_events_cq(verbs::VerbsCompletionQueue* cq) { events_cq_ = cq; }

   private:
    WallClock wall_;
    verbs::VerbsCompletionQueue* events_cq_ = nullptr;
  };

  VerbsWorldOptions options_;
  PollingClock clock_;
  std::unique_ptr<bootstrap::Root> root_;
  std::unique_ptr<bootstrap::Rank> boot_;
  std::unique_ptr<faulty::FaultInjector> injector_;  // outlives device_
  std::unique_ptr<Device> device_;
  std::unique_ptr<coll::Communicator> comm_;
  std::unique_ptr<coll::Driver> driver_;
  Picoseconds trace_origin_;
  bool finished_ = false;
  std::vector<proto::Report> failure_reports_;  // rank 0, after a failed Run()
  size_t reported_trace_events_ = 0;
};

}  // namespace fathom::transport::worlds
