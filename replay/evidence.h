// Replay's evidence: what a hung or failed training job left behind, read
// from a bundle (a directory or a tarball) into one value the hypotheses and
// the report work from (issue 28). Every part is optional; each file's fate
// (used, partly used, ignored, unusable, and why) is in `sources`, so bad
// evidence is named in the report and never aborts the replay.
//
// Times: seconds since the bundle's time origin (the earliest timestamp any
// source carries; NCCL logs and link events give wall-clock times, fathom's
// own reports virtual ones). -1 means unknown.
//
// Ownership: Evidence is a value; parsers (evidence_*.cc) fill it, the
// engine (engine.h) and the report (html.h) read it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace fathom::replay {

// How one file of the bundle was read.
struct SourceReport {
  enum class Use { kUsed, kPartly, kIgnored, kUnusable };
  std::string path;  // relative to the bundle's root
  // nccl_log, rdma_statistic, hw_counters, ibv_devinfo, ip_link, gids,
  // ethtool, topology, neighbors, switch_counters, link_events, capture,
  // fathom_watchdog, fathom_report, unknown
  std::string kind;
  std::string host;  // the node it describes, when the name or content says
  Use use = Use::kUsed;
  std::string reason;  // why partly / ignored / unusable, with a line number when there is one
  int lines_recognised = 0;
  int lines_ignored = 0;
};

// The communication library's view of the job (NCCL's INFO lines).
struct LibrarySettings {
  std::string library;  // "nccl", "fathom"
  std::string version;
  std::optional<int> ib_timeout;          // NCCL_IB_TIMEOUT (local ACK timeout exponent)
  std::optional<int> ib_retry_cnt;        // NCCL_IB_RETRY_CNT
  std::optional<int> ib_gid_index;        // NCCL_IB_GID_INDEX
  std::optional<int> ib_tc;               // NCCL_IB_TC (traffic class)
  std::optional<int> qps_per_connection;  // NCCL_IB_QPS_PER_CONNECTION
  std::optional<int> nranks;
  std::string algorithm;  // "ring", "tree", as the log shows it
  // Ring order as the "Channel 00 : 0 1 2 3 ..." lines give it (channel 0).
  std::vector<int> ring;
};

// One rank of the job and where it ran.
struct RankInfo {
  int rank = -1;
  std::string host;    // node name (the fabric's host name when known)
  std::string device;  // "mlx5_0", "rxe0"
  std::string gid;
};

// A completion error a rank reported, e.g. NCCL's "NET/IB : Got completion
// from peer 10.0.0.2<45678> with status=12 opcode=0 len=0 vendor err 129
// (Recv) localGid ... remoteGid ...".
struct CompletionError {
  std::string host;
  int rank = -1;
  std::string peer;       // the peer as the line names it (address or host)
  std::string peer_host;  // resolved to a host name when the bundle allows, else empty
  std::string local_gid, remote_gid;
  int status_code = -1;
  std::string status;  // the IBV_WC_* name of status_code
  std::string opcode;
  int vendor_err = -1;
  uint32_t qpn = 0;
  double time_s = -1;
};

// An asynchronous event ("NET/IB : Got async event : port error"), a
// watchdog's stall report or a "no progress" line: a rank that stopped.
struct RankEvent {
  std::string host;
  int rank = -1;
  std::string kind;    // "async_event", "stall", "abort", "timeout"
  std::string detail;  // the event's name or the line's text
  std::string peer;    // the rank or host it waits for, when named
  double time_s = -1;
};

struct Gid {
  int index = -1;
  std::string gid;   // "fe80::..." or "::ffff:10.0.0.1"
  std::string type;  // "RoCE v1", "RoCE v2", "IB"
  std::string netdev;
};

// One node's RDMA and link state.
struct HostState {
  std::string host;
  std::string driver;  // "mlx5", "rxe", "unknown": which counter names apply
  // `rdma statistic show` / hw_counters, by the driver's names
  // (out_of_sequence, packet_seq_err, local_ack_timeout_err, ...).
  std::map<std::string, uint64_t> rdma_counters;
  std::map<std::string, uint64_t> ethtool;  // `ethtool -S`, by its names
  std::optional<int> netdev_mtu;            // `ip -d link`
  std::optional<int> active_mtu;            // `ibv_devinfo -v` active_mtu, bytes
  std::string port_state;                   // "PORT_ACTIVE", "PORT_DOWN", ...
  std::vector<Gid> gids;
  // Appended (h/evidence): the RDMA device ("mlx5_0", "rxe0"), the node's
  // IP addresses (from `ip -d link`'s addr lines, NCCL's OOB line, GIDs),
  // and counters whose names neither rxe nor mlx5 uses (kept, not trusted).
  std::string device;
  std::vector<std::string> addresses;
  std::vector<std::string> unknown_counters;
};

// Host NIC -> switch port, from a neighbour table (LLDP-style).
struct Neighbor {
  std::string host;
  std::string nic;
  std::string switch_name;
  std::string switch_port;
};

// A switch port's counter from the fabric's side.
struct SwitchCounter {
  std::string port;  // "leaf0:3" or "leaf0->spine1", as the file names it
  std::string counter;
  uint64_t value = 0;
};

// A link state change ("leaf0->spine1 down at 12.5").
struct LinkEvent {
  std::string link;
  bool up = false;
  double time_s = -1;
};

// What a capture shows, per conversation (src -> dst), via fabric/wire.
struct CaptureFinding {
  std::string path;
  std::string src, dst;  // addresses as the capture shows them
  uint32_t dest_qp = 0;
  uint64_t frames = 0;
  uint64_t psn_gaps = 0;
  uint64_t retransmissions = 0;
  uint64_t naks = 0;
  uint64_t oversize_frames = 0;  // larger than the bundle's smallest MTU
  uint32_t max_frame = 0;
  double first_s = -1, last_s = -1;
};

struct Evidence {
  std::string root;  // the bundle as given
  std::vector<SourceReport> sources;
  LibrarySettings library;
  std::vector<RankInfo> ranks;
  std::vector<CompletionError> errors;  // by time
  std::vector<RankEvent> rank_events;   // by time
  std::map<std::string, HostState> hosts;
  // The fabric: a fathom topology (preset name or the YAML's text), the
  // neighbour table, switch counters and link events.
  std::string topology;
  std::string topology_path;  // where it came from, for the report
  std::vector<Neighbor> neighbors;
  std::vector<SwitchCounter> switch_counters;
  std::vector<LinkEvent> link_events;
  std::vector<CaptureFinding> captures;
  double origin_wall_s = 0;  // the time origin as a Unix time, 0 when unknown
  double last_s = -1;        // the latest time any source shows
  // Appended (h/evidence): the latest wall-clock time seen (Unix, 0 when
  // none), from which last_s is derived.
  double wall_last_s = 0;
};

// Reads a bundle: a directory (walked recursively) or a .tar/.tar.gz/.tgz.
// Fails (NotFound / InvalidArgument naming the path) only when the bundle
// itself cannot be opened or holds no file at all; a file it cannot use is a
// SourceReport with Use::kUnusable and the rest is still read.
StatusOr<Evidence> ReadEvidence(const std::string& path);

// "used", "partly", "ignored", "unusable": how reports name a Use.
const char* UseName(SourceReport::Use use);

}  // namespace fathom::replay
