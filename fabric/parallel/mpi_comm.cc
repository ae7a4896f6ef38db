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
    // Counts first, then the bytes in one Alltoallv (the batch of a window).
    std::vector<int> send_counts(static_cast<size_t>(size_)), recv_counts(send_counts.size());
    std::vector<int> send_displ(send_counts.size()), recv_displ(send_counts.size());
    std::string send;
    for (int r = 0; r < size_; ++r) {
      send_displ[static_cast<size_t>(r)] = static_cast<int>(send.size());
      send_counts[static_cast<size_t>(r)] = static_cast<int>(out[static_cast<size_t>(r)].size());
      send += out[static_cast<size_t>(r)];
    }
    MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < size_; ++r) {
      recv_displ[static_cast<size_t>(r)] = total;
      total += recv_counts[static_cast<size_t>(r)];
    }
    std::string recv(static_cast<size_t>(total), '\0');
    MPI_Alltoallv(send.data(), send_counts.data(), send_displ.data(), MPI_BYTE, recv.data(),
                  recv_counts.data(), recv_displ.data(), MPI_BYTE, MPI_COMM_WORLD);
    std::vector<std::string> in(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      in[static_cast<size_t>(r)] =
          recv.substr(static_cast<size_t>(recv_displ[static_cast<size_t>(r)]),
                      static_cast<size_t>(recv_counts[static_cast<size_t>(r)]));
    }
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
