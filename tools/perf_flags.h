// The command line of `fathom perf`: perftest's flags as typed (PerfFlags),
// the option declarations (AddPerfFlags), and the checks of the flags that
// only make sense together, with the defaults that depend on the test
// (CheckFlags). tools/cmd_perf.cc registers the command; the other perf_*
// files run what these flags ask for.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "transport/bootstrap/bootstrap.h"

namespace fathom::tools::perf {

struct PerfFlags {
  std::string test;
  std::string server;  // empty = server side
  std::string device;
  int ib_port = 0;
  int gid_index = -1;
  bool gid_ipv6 = false;
  uint64_t size = 0;  // 0 = the test's default
  bool all_sizes = false;
  uint64_t iters = 0;  // 0 = the test's default
  double duration = 0;
  int qps = 1;
  int mtu = 0;
  int timeout = 14;
  int retry_cnt = 7;  // rxe treats 7 as infinite (ROCEV2.md)
  bool events = false;
  int tcp_port = transport::bootstrap::kDefaultPort;
  std::string bind = "0.0.0.0";
  bool gbits = false;
  bool json = false;
  bool verify = false;
  int tx_depth = 128;
  double stall_s = 30;
  // perftest's flags beyond the basics (perftest_parameters.c's usage text).
  bool cpu_freq_f = false;     // -F: accepted, nothing to silence (kIgnoredHelp)
  bool bidirectional = false;  // -b: both sides send; the figures are the sum
  std::string connection;      // -c: RC only
  int cq_mod = 0;              // -Q: signal one WR in this many (0 = default)
  int inline_size = -1;        // -I: max bytes posted inline (-1 = device default 128)
  int post_list = 1;           // -l: WRs chained into one ibv_post_send
  int sl = 0;                  // -S: service level
  int tos = -1;                // -T: ToS, which is the GRH traffic class (-1 = unset)
  int tclass = -1;             // --tclass: GRH traffic class (-1 = unset)
  bool rdma_cm = false;        // -R: not supported (rejected)
  std::string counters;        // -W: sysfs counters to report the change of
  bool out_json = false;       // --out_json: the report also into out_json_file
  std::string out_json_file = "perftest_out.json";
  bool run_infinitely = false;  // --run_infinitely: -D windows until SIGINT
};

// True for the bandwidth tests (write_bw, read_bw, send_bw).
bool IsBw(const std::string& t);

// The bandwidth sender signals one WR in this many (perftest's CQ moderation,
// -Q). By default 100, at most half the TX depth so the queue never runs dry
// while a signaled completion is on its way; with -l and no -Q, one per post
// list (perftest's rule). A -Q is capped at the TX depth, as perftest does.
int CqModeration(const PerfFlags& f);

// perftest flags that fathom accepts and ignores, and why (stderr and --help).
extern const char* const kIgnoredHelp;

// Declares every flag of `fathom perf` on `sub`, bound to `*f` (which must
// outlive the parse).
void AddPerfFlags(CLI::App* sub, PerfFlags* f);

// Checks the flags that only make sense together and fills the defaults that
// depend on the test. Returns kExitUsage after printing why, or -1 to go on.
// Flags accepted but ignored get one line each on stderr.
int CheckFlags(PerfFlags& f);

}  // namespace fathom::tools::perf
