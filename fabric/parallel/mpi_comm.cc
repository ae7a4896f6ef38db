// Comm over MPI (Open MPI as Debian ships it). Compiled only when CMake
// found MPI (FATHOM_HAVE_MPI); otherwise JoinMpi says so.
#include <cstdlib>

#include "fabric/parallel/comm.h"

#ifdef FATHOM_HAVE_MPI
#include <mpi.h>
#endif

namespace fathom::parallel {

bool LaunchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

#ifdef FATHOM_HAVE_MPI
namespace {

// Exchange's messages (the only point-to-point ones).
constexpr int kExchangeTag = 30;

class MpiComm final : public Comm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiComm() override { MPI_Finalize(); }
  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }

  std::vector<std::string> Exchange(const std::vector<std::string>& out) override {
    // One message to each other process and none of a collective's rounds:
    // the receiver learns a message's size from MPI_Probe. A distributed
    // run exchanges once a window, so this is its synchronization cost.
    // Each pair's messages match in the order sent (MPI's non-overtaking
    // rule), and every process calls Exchange in the same order, so a
    // probe by source never takes a later call's message.
    std::vector<MPI_Request> sends;
    sends.reserve(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const std::string& b = out[static_cast<size_t>(r)];
      sends.emplace_back();
      MPI_Isend(b.data(), static_cast<int>(b.size()), MPI_BYTE, r, kExchangeTag, MPI_COMM_WORLD,
                &sends.back());
    }
    std::vector<std::string> in(static_cast<size_t>(size_));
    in[static_cast<size_t>(rank_)] = out[static_cast<size_t>(rank_)];
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Status st;
      MPI_Probe(r, kExchangeTag, MPI_COMM_WORLD, &st);
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      std::string& b = in[static_cast<size_t>(r)];
      b.resize(static_cast<size_t>(n));
      MPI_Recv(b.data(), n, MPI_BYTE, r, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE);
    return in;
  }
  void AllMin(std::vector<int64_t>* v) override {
    Reduce(v->data(), v->size(), MPI_INT64_T, MPI_MIN);
  }
  void AllMax(std::vector<int64_t>* v) override {
    Reduce(v->data(), v->size(), MPI_INT64_T, MPI_MAX);
  }
  void AllSum(std::vector<uint64_t>* v) override {
    Reduce(v->data(), v->size(), MPI_UINT64_T, MPI_SUM);
  }
  void AllOr(std::vector<uint64_t>* v) override {
    Reduce(v->data(), v->size(), MPI_UINT64_T, MPI_BOR);
  }
  std::vector<std::string> Gather(const std::string& mine) override {
    int n = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<size_t>(size_)), displ(counts.size());
    MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < size_; ++r) {
      displ[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    std::string all(rank_ == 0 ? static_cast<size_t>(total) : 0, '\0');
    MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), displ.data(), MPI_BYTE, 0,
                MPI_COMM_WORLD);
    std::vector<std::string> out;
    if (rank_ != 0) return out;
    for (int r = 0; r < size_; ++r) {
      out.push_back(all.substr(static_cast<size_t>(displ[static_cast<size_t>(r)]),
                               static_cast<size_t>(counts[static_cast<size_t>(r)])));
    }
    return out;
  }

 private:
  void Reduce(void* data, size_t n, MPI_Datatype type, MPI_Op op) {
    MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), type, op, MPI_COMM_WORLD);
  }
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

bool HaveMpi() { return true; }

StatusOr<std::unique_ptr<Comm>> JoinMpi() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited == 0 && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    return Unavailable("MPI_Init failed");
  }
  return std::unique_ptr<Comm>(new MpiComm());
}

#else

bool HaveMpi() { return false; }

StatusOr<std::unique_ptr<Comm>> JoinMpi() {
  return Unavailable("this fathom was built without MPI (install libopenmpi-dev and reconfigure)");
}

#endif

}  // namespace fathom::parallel
