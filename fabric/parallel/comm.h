// The few collective operations a distributed run needs, over MPI
// (mpi_comm.cc, when the build found MPI) or within one process
// (LocalComm). Every process calls each operation in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace fathom::parallel {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;
  // Sends out[r] to process r (size() entries) and returns what each process
  // sent here, by sender.
  virtual std::vector<std::string> Exchange(const std::vector<std::string>& out) = 0;
  // Element-wise reductions over every process, in place.
  virtual void AllMin(std::vector<int64_t>* v) = 0;
  virtual void AllMax(std::vector<int64_t>* v) = 0;
  virtual void AllSum(std::vector<uint64_t>* v) = 0;  // modulo 2^64
  virtual void AllOr(std::vector<uint64_t>* v) = 0;
  // Every process's bytes on rank 0, by rank (empty elsewhere).
  virtual std::vector<std::string> Gather(const std::string& mine) = 0;
};

// One process: the reductions are identities.
class LocalComm final : public Comm {
 public:
  int32_t rank() const override { return 0; }
  int32_t size() const override { return 1; }
  std::vector<std::string> Exchange(const std::vector<std::string>& out) override { return out; }
  void AllMin(std::vector<int64_t>*) override {}
  void AllMax(std::vector<int64_t>*) override {}
  void AllSum(std::vector<uint64_t>*) override {}
  void AllOr(std::vector<uint64_t>*) override {}
  std::vector<std::string> Gather(const std::string& mine) override { return {mine}; }
};

// Whether this process was started by an MPI launcher (mpirun, srun: its
// environment says so). `fathom sim` without one never touches MPI.
bool LaunchedByMpi();
// Whether this binary was built with MPI.
bool HaveMpi();
// Joins the MPI job (MPI_Init; finalized when the Comm goes). Unavailable
// when the build has no MPI.
StatusOr<std::unique_ptr<Comm>> JoinMpi();

}  // namespace fathom::parallel
