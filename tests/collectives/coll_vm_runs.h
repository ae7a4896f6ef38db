// Running `fathom coll --backend verbs` ranks in the two VMs of a testbed
// and reading their nccl-tests tables: shared by coll_vm_test and
// coll_verbs_vm_test.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "testbed/testbed.h"

namespace fathom::testbed {

inline const std::string kCollFathom = std::string(FATHOM_BINARY_DIR) + "/tools/fathom";

// Two busy-polling ranks share a 1-vCPU TCG VM with rxe's own work, so an
// ACK can take far longer than perftest's 67 ms: timeout 17 (537 ms per
// retry) keeps retransmissions (and their duplicate traffic) out of it.
inline std::string VerbsCmd(const std::string& args, int nranks, int rank, int port) {
  return kCollFathom + " coll " + args + " --backend verbs --nranks " + std::to_string(nranks) +
         " --rank " + std::to_string(rank) +
         " --bootstrap $FATHOM_VM0_IP4:" + std::to_string(port) + " --ib-timeout 17";
}

// The data rows of a nccl-tests table: every line that does not start with '#'.
inline std::vector<std::vector<std::string>> Rows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.find_first_not_of(' ') == std::string::npos) {
      continue;
    }
    std::istringstream f(line);
    std::vector<std::string> cols;
    std::string c;
    while (f >> c) cols.push_back(c);
    if (cols.size() >= 13) rows.push_back(cols);  // 13 nccl-tests columns, then algo
  }
  return rows;
}

// Both VMs' results of one RunRanks.
struct VmRunResult {
  CommandResult vm0, vm1;
  std::string All() const {
    return vm0.stdout_text + vm0.stderr_text + "\n" + vm1.stdout_text + vm1.stderr_text;
  }
  std::string Describe() const {
    return "vm0 rc=" + std::to_string(vm0.exit_status) + (vm0.timed_out ? " (timed out)" : "") +
           "\n" + vm0.stdout_text + vm0.stderr_text +
           "\nvm1 rc=" + std::to_string(vm1.exit_status) + (vm1.timed_out ? " (timed out)" : "") +
           "\n" + vm1.stdout_text + vm1.stderr_text;
  }
};

// `nranks` ranks over the two VMs. Node-major (`per_vm` > 0): ranks
// vm*per_vm .. vm*per_vm+per_vm-1 on VM vm, as --ranks-per-node places
// them; else even ranks on VM 0, odd on VM 1. The lowest rank of each VM
// runs in the foreground; the others' output and exit status are appended.
inline VmRunResult RunRanks(Testbed& tb, const std::string& args, int nranks, int port,
                            std::chrono::seconds timeout, int per_vm = 0) {
  std::string script[2];
  for (int vm = 0; vm < 2; ++vm) {
    std::vector<int> mine;
    for (int r = 0; r < nranks; ++r) {
      if ((per_vm > 0 ? r / per_vm : r % 2) == vm) mine.push_back(r);
    }
    std::string bg, fg;
    for (int r : mine) {
      const std::string cmd = VerbsCmd(args, nranks, r, port);
      if (r == mine.front()) {
        fg = cmd;
      } else {
        const std::string f = "r" + std::to_string(r) + ".out";
        bg += "(" + cmd + " > " + f + " 2>&1; echo \"rank " + std::to_string(r) + " rc=$?\" >> " +
              f + ") & ";
      }
    }
    script[vm] = "rm -f r*.out; " + bg + fg + "; rc=$?; wait; cat r*.out 2>/dev/null; exit $rc\n";
  }
  VmRunResult res;
  auto h0 = tb.Launch(0, script[0], timeout);
  auto h1 = tb.Launch(1, script[1], timeout);
  EXPECT_TRUE(h0.ok() && h1.ok());
  if (h1.ok()) {
    auto r = tb.Wait(*h1);
    if (r.ok()) res.vm1 = *r;
  }
  if (h0.ok()) {
    auto r = tb.Wait(*h0);
    if (r.ok()) res.vm0 = *r;
  }
  return res;
}

}  // namespace fathom::testbed
