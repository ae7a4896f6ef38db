#include "tools/perf_flags.h"

#include <algorithm>
#include <cstdio>

#include "tools/command.h"

namespace fathom::tools::perf {

bool IsBw(const std::string& t) { return t.ends_with("_bw"); }

int CqModeration(const PerfFlags& f) {
  if (f.cq_mod > 0) return std::min(f.cq_mod, f.tx_depth);
  if (f.post_list > 1) return std::min(f.post_list, f.tx_depth);
  return std::max(1, std::min(100, f.tx_depth / 2));
}

const char* const kIgnoredHelp =
    "perftest flags accepted and ignored: -F (fathom times with the cycle counter scaled by the "
    "monotonic clock, not /proc/cpuinfo's cpu MHz, so there is no CPU-frequency warning to "
    "silence); -Q and -l in the _lat tests (they signal and post every WR alone, as perftest's "
    "do); -I in read tests (an RDMA READ carries no inline data). Rejected with exit 2: -c other "
    "than RC, -R (rdma_cm).";

void AddPerfFlags(CLI::App* sub, PerfFlags* f) {
  // perftest's -V: the version, then exit (before the test is required).
  sub->add_flag_callback(
      "-V,--version",
      [] { throw CLI::CallForVersion("fathom perf 0.1.0 (perftest's flags and tables)", 0); },
      "print the version and exit");
  sub->add_option("test", f->test, "write_bw|write_lat|read_bw|read_lat|send_bw|send_lat")
      ->required()
      ->check(
          CLI::IsMember({"write_bw", "write_lat", "read_bw", "read_lat", "send_bw", "send_lat"}));
  sub->add_option("server", f->server, "server address (client side); omit on the server");
  sub->add_option("-d,--ib-dev", f->device, "RDMA device (default: first ACTIVE)");
  sub->add_option("-i,--ib-port", f->ib_port, "device port (default: first ACTIVE)");
  sub->add_option("-x,--gid-index", f->gid_index, "GID index (default: RoCE v2 IPv4)");
  sub->add_flag("--ipv6", f->gid_ipv6, "use a RoCE v2 IPv6 GID");
  sub->add_option("-s,--size", f->size, "message size (default 65536 bw, 2 lat)");
  sub->add_flag("-a,--all", f->all_sizes, "all sizes 2 .. 2^23");
  sub->add_option("-n,--iters", f->iters, "iterations (default 5000 bw, 1000 lat)");
  sub->add_option("-D,--duration", f->duration, "run for seconds (bw tests)");
  sub->add_option("-q,--qp", f->qps, "QPs (bw tests)")->check(CLI::Range(1, 64));
  sub->add_option("-m,--mtu", f->mtu, "force the path MTU (256..4096)")
      ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}));
  sub->add_option("-u,--qp-timeout", f->timeout, "QP timeout (4.096 us * 2^u)")
      ->check(CLI::Range(0, 31));
  sub->add_option("--retry-cnt,--retry_count", f->retry_cnt,
                  "QP retry_cnt (7; rxe: 7 = forever); --retry_count is perftest's "
                  "rdma_cm name for the same QP attribute")
      ->check(CLI::Range(0, 7));
  sub->add_flag("-e,--events", f->events, "sleep on CQ events instead of polling");
  sub->add_option("-p,--port", f->tcp_port, "bootstrap TCP port (18515)")
      ->check(CLI::Range(1, 65535));
  sub->add_option("--bind", f->bind, "server: address to listen on (0.0.0.0)");
  sub->add_option("-t,--tx-depth", f->tx_depth, "WRs in flight per QP (128)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--stall-timeout", f->stall_s, "seconds without progress = failure (30)");
  sub->add_flag("--report_gbits", f->gbits, "report Gb/sec instead of MB/sec");
  sub->add_flag("--json", f->json, "JSON output");
  sub->add_flag("--verify", f->verify, "verify the data that landed");
  sub->add_flag("-b,--bidirectional", f->bidirectional,
                "bw tests: both sides send at once; the figures are the sum of both "
                "directions (both sides)");
  sub->add_option("-c,--connection", f->connection, "connection type: RC (the only one)")
      ->check(CLI::IsMember({"RC", "XRC", "UC", "UD", "DC", "SRD"}));
  sub->add_option("-Q,--cq-mod", f->cq_mod,
                  "bw tests: signal one WR in this many (default 100, at most half the "
                  "TX depth; capped at the TX depth)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("-I,--inline_size", f->inline_size,
                  "max message size posted inline (default 128)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("-l,--post_list", f->post_list,
                  "bw tests: post WRs in chained lists of this many (one ibv_post_send "
                  "each)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("-S,--sl", f->sl, "service level (0)")->check(CLI::Range(0, 15));
  sub->add_option("-T,--tos", f->tos,
                  "type of service; without rdma_cm it is the GRH traffic class")
      ->check(CLI::Range(0, 255));
  sub->add_option("--tclass", f->tclass, "GRH traffic class (0)")->check(CLI::Range(0, 255));
  sub->add_flag("-R,--rdma_cm", f->rdma_cm, "not supported: rejected (see below)");
  sub->add_option("-W,--report-counters", f->counters,
                  "port counters to report the change of, e.g. "
                  "counters/port_xmit_data,hw_counters/out_of_buffer");
  sub->add_flag("-F,--CPU-freq", f->cpu_freq_f, "accepted and ignored (see below)");
  sub->add_flag("--out_json", f->out_json, "also write the JSON report to a file");
  sub->add_option("--out_json_file", f->out_json_file,
                  "the file of --out_json (perftest_out.json)");
  sub->add_flag("--run_infinitely", f->run_infinitely,
                "bw tests: one -D window (default 5 s) after another until Ctrl-C, a "
                "line each (both sides)");
}

int CheckFlags(PerfFlags& f) {
  const bool bw = IsBw(f.test);
  auto usage = [](const std::string& why) {
    std::fprintf(stderr, "fathom perf: %s\n", why.c_str());
    return kExitUsage;
  };
  auto note = [](const std::string& line) {
    std::fprintf(stderr, "fathom perf: %s\n", line.c_str());
  };
  if (f.size == 0) f.size = bw ? 65536 : 2;
  if (f.iters == 0) f.iters = bw ? 5000 : 1000;
  if (!f.connection.empty() && f.connection != "RC") {
    return usage("-c " + f.connection +
                 ": fathom perf runs RC queue pairs only (its transport has no UC, UD, XRC, DC "
                 "or SRD); use -c RC or leave -c out");
  }
  if (f.rdma_cm) {
    return usage(
        "-R (rdma_cm) is not supported: fathom exchanges QP numbers, GIDs and keys over its own "
        "TCP bootstrap (-p PORT) and connects the QPs with ibv_modify_qp; leave -R out on both "
        "sides");
  }
  if (f.events && f.test == "write_lat") {
    return usage(
        "-e does not apply to write_lat (it polls memory for the peer's write, not the CQ)");
  }
  if (f.duration > 0 && !bw) return usage("-D is supported by the _bw tests only");
  if (f.bidirectional && !bw) {
    return usage("-b (bidirectional) is for the _bw tests only, as in perftest");
  }
  if (f.run_infinitely) {
    if (!bw) return usage("--run_infinitely is for the _bw tests only, as in perftest");
    if (f.events) return usage("--run_infinitely does not support -e, as in perftest");
    if (f.bidirectional && f.test == "send_bw") {
      return usage("--run_infinitely does not support send_bw -b, as in perftest");
    }
    if (f.all_sizes) return usage("--run_infinitely runs one size; leave -a out");
    if (f.duration <= 0) f.duration = 5;  // perftest's default window
  }
  if (f.tos >= 0 && f.tclass >= 0 && f.tos != f.tclass) {
    return usage("-T " + std::to_string(f.tos) + " and --tclass " + std::to_string(f.tclass) +
                 " disagree: both set the GRH traffic class");
  }
  if (f.post_list > f.tx_depth) {
    return usage("-l " + std::to_string(f.post_list) + " is larger than the TX depth (-t " +
                 std::to_string(f.tx_depth) + ")");
  }
  if (f.size > (1u << 30) || (f.test == "write_lat" && f.size < 1)) {
    return usage("-s " + std::to_string(f.size) + " is outside 1..1073741824");
  }
  if (f.cpu_freq_f) {
    note(
        "-F accepted and ignored: fathom times with the cycle counter scaled by the monotonic "
        "clock, not with /proc/cpuinfo's cpu MHz, so there is no CPU-frequency warning to silence");
  }
  if (!bw && f.cq_mod > 0) {
    note("-Q accepted and ignored: the _lat tests signal every WR, as perftest's do");
  }
  if (!bw && f.post_list > 1) {
    note("-l accepted and ignored: the _lat tests post one WR at a time, as perftest's do");
  }
  if (f.test.starts_with("read") && f.inline_size >= 0) {
    note("-I accepted and ignored: an RDMA READ carries no inline data");
  }
  if (f.tos >= 0 && f.tclass < 0) {
    note("-T " + std::to_string(f.tos) +
         ": without rdma_cm the ToS goes straight into the GRH traffic class (as --tclass)");
  }
  if (f.tos >= 0) f.tclass = f.tos;
  return -1;
}

}  // namespace fathom::tools::perf
