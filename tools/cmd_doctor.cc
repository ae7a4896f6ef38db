// `fathom doctor`: the preflight a field engineer runs before training. Every
// rank opens its device, the ranks meet over the bootstrap (rank 0 hosts the
// root), report their device and port facts, and rank 0 prints a table and
// every inconsistency (transport/verbs/preflight.h). Then each pair of ranks
// connects a QP with a short timeout and moves one full-MTU message and one
// 1 MiB message each way; the failing pairs are named with the completion
// status they got. Exit 0 all clear, 1 anything flagged, 2 bad usage or no
// RDMA device on this rank (as `fathom perf`; such a rank still reports, so
// rank 0's table names it).
//
// Rank 0 hosts the bootstrap root where --root says (the address the other
// ranks dial), or on the wildcard address when that is not an address of
// this host (a NAT or load-balancer address) or is a host name; --bind
// overrides both.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "tools/command.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/endpoints.h"
#include "transport/verbs/preflight.h"
#include "transport/verbs/verbs_device.h"
#include "transport/wait.h"

namespace fathom::tools {
namespace {

namespace tv = transport::verbs;
namespace tb = transport::bootstrap;

struct DoctorFlags {
  int world = 2;
  int rank = 0;
  std::string root = "127.0.0.1";
  std::string bind;  // empty = where --root says (see RootBindAddress)
  // The old -n/-r (ranks/rank here, iterations/root elsewhere): set only to
  // say what replaced them.
  std::string old_n, old_r;
  int tcp_port = tb::kDefaultPort;
  std::string token;
  std::string device;
  int ib_port = 0;
  int gid_index = -1;
  int qp_timeout = 12;  // 16.8 ms per retry: a dead pair fails in well under a second
  int retry_cnt = 3;
  double wait_s = 60;
  bool json = false;
};

constexpr uint32_t kBigMessage = 1u << 20;

proto::DeviceFacts ToProto(const tv::RankFacts& r) {
  proto::DeviceFacts p;
  p.set_rank(r.rank);
  p.set_host(r.host);
  p.set_error(r.error);
  p.set_device(r.info.name);
  p.set_fw_ver(r.info.fw_ver);
  p.set_link_layer(r.info.link_layer);
  p.set_port(r.info.port);
  p.set_port_state(r.info.port_state);
  p.set_active_mtu(r.info.active_mtu);
  p.set_gid_index(r.info.gid_index);
  p.set_gid(r.info.gid);
  p.set_gid_type(r.info.gid_type);
  p.set_netdev_mtu(r.info.netdev_mtu);
  p.set_active_gbps(r.info.active_gbps);
  return p;
}

tv::RankFacts FromProto(const proto::DeviceFacts& p) {
  tv::RankFacts r;
  r.rank = p.rank();
  r.host = p.host();
  r.error = p.error();
  r.info.name = p.device();
  r.info.fw_ver = p.fw_ver();
  r.info.link_layer = p.link_layer();
  r.info.port = p.port();
  r.info.port_state = p.port_state();
  r.info.active_mtu = p.active_mtu();
  r.info.gid_index = p.gid_index();
  r.info.gid = p.gid();
  r.info.gid_type = p.gid_type();
  r.info.netdev_mtu = p.netdev_mtu();
  r.info.active_gbps = p.active_gbps();
  return r;
}

// Per peer: a QP, a send buffer and a receive buffer (each 1 MiB + one MTU).
struct PeerLink {
  std::unique_ptr<transport::QueuePair> qp;
  std::vector<uint8_t> send, recv;
  std::unique_ptr<transport::MemoryRegion> send_mr, recv_mr;
  std::string error;  // the first failure toward this peer
};

uint8_t Pattern(int from, int to, uint64_t i) {
  return static_cast<uint8_t>(from * 31 + to * 17 + i * 7 + (i >> 10));
}

// The all-pairs check on this rank: connect, exchange, verify. Returns one
// PairCheck per peer.
proto::PairChecks CheckPairs(const DoctorFlags& f, transport::Device* dev, tb::Rank& boot,
                             Status* fatal) {
  proto::PairChecks out;
  const int me = f.rank;
  std::vector<PeerLink> links(static_cast<size_t>(f.world));
  std::unique_ptr<transport::CompletionQueue> cq;
  proto::EndpointRecord mine;
  mine.set_rank(me);
  mine.set_gid(std::string(16, '\0'));
  if (dev != nullptr) {
    auto c = dev->CreateCq(8 * f.world + 8);
    if (c.ok()) cq = std::move(*c);
  }
  transport::QpOptions qo;
  qo.max_send_wr = 8;
  qo.max_recv_wr = 8;
  qo.timeout = f.qp_timeout;
  qo.retry_cnt = f.retry_cnt;
  qo.rnr_retry = f.retry_cnt;
  const uint64_t buf_bytes = kBigMessage + 4096;
  for (int p = 0; p < f.world && cq; ++p) {
    if (p == me) continue;
    PeerLink& l = links[static_cast<size_t>(p)];
    auto qp = dev->CreateQp(p, qo, cq.get());
    if (!qp.ok()) {
      l.error = qp.status().ToString();
      continue;
    }
    l.qp = std::move(*qp);
    l.send.resize(buf_bytes);
    l.recv.assign(buf_bytes, 0);
    for (uint64_t i = 0; i < buf_bytes; ++i) l.send[i] = Pattern(me, p, i);
    auto smr = dev->RegisterMemory(l.send.data(), buf_bytes, transport::kAccessAll);
    auto rmr = dev->RegisterMemory(l.recv.data(), buf_bytes, transport::kAccessAll);
    if (!smr.ok() || !rmr.ok()) {
      l.error = (!smr.ok() ? smr.status() : rmr.status()).ToString();
      continue;
    }
    l.send_mr = std::move(*smr);
    l.recv_mr = std::move(*rmr);
    if (mine.qps_size() == 0) mine = tb::MakeEndpointRecord(l.qp->LocalInfo());
    tb::AddQp(&mine, p, l.qp->LocalInfo());
  }
  auto all = boot.ExchangeEndpoints(mine);
  if (!all.ok()) {
    *fatal = all.status();
    return out;
  }
  // Connect and pre-post the two receives (MTU-sized lands at offset 0, 1 MiB at 4096).
  for (int p = 0; p < f.world; ++p) {
    PeerLink& l = links[static_cast<size_t>(p)];
    if (p == me || !l.qp || !l.error.empty()) continue;
    auto remote = tb::RemoteEndpoint((*all)[static_cast<size_t>(p)], me, 0);
    Status s = remote.ok() ? l.qp->Connect(*remote) : remote.status();
    if (s.ok()) {
      const uint64_t base = reinterpret_cast<uint64_t>(l.recv.data());
      s = l.qp->PostRecv({1, {base, 4096, l.recv_mr->lkey()}});
      if (s.ok()) s = l.qp->PostRecv({2, {base + 4096, kBigMessage, l.recv_mr->lkey()}});
    }
    if (!s.ok()) l.error = s.ToString();
  }
  // Receives are posted everywhere before anyone sends (no RNR on the first message).
  if (Status s = boot.Barrier(); !s.ok()) {
    *fatal = s;
    return out;
  }
  transport::WallClock clock;
  for (int p = 0; p < f.world; ++p) {
    PeerLink& l = links[static_cast<size_t>(p)];
    if (p == me || !l.qp || !l.error.empty()) continue;
    const uint64_t base = reinterpret_cast<uint64_t>(l.send.data());
    const uint32_t mtu = static_cast<uint32_t>(l.qp->path_mtu());
    transport::SendWr a;
    a.wr_id = 11;
    a.sge = {base, mtu, l.send_mr->lkey()};
    transport::SendWr b;
    b.wr_id = 12;
    b.sge = {base + 4096, kBigMessage, l.send_mr->lkey()};
    Status s = l.qp->PostSend(a);
    if (s.ok()) s = l.qp->PostSend(b);
    if (!s.ok()) l.error = s.ToString();
  }
  // Two sends and two receives per peer; completions of all peers share the CQ.
  std::vector<int> pending(static_cast<size_t>(f.world), 0);
  int total = 0;
  for (int p = 0; p < f.world; ++p) {
    const PeerLink& l = links[static_cast<size_t>(p)];
    if (p != me && l.qp && l.error.empty()) {
      pending[static_cast<size_t>(p)] = 4;
      total += 4;
    }
  }
  const Picoseconds deadline =
      clock.Now() +
      Picoseconds::FromSeconds(LocalAckTimeoutPs(f.qp_timeout) * 1e-12 * (f.retry_cnt + 1) * 4 + 5);
  std::array<transport::Completion, 16> wcs;
  while (total > 0 && clock.Now() < deadline) {
    const int n = cq ? cq->Poll(wcs) : 0;
    for (int i = 0; i < n; ++i) {
      const auto& c = wcs[static_cast<size_t>(i)];
      if (c.peer_rank < 0 || c.peer_rank >= f.world) continue;
      PeerLink& l = links[static_cast<size_t>(c.peer_rank)];
      if (pending[static_cast<size_t>(c.peer_rank)] > 0) {
        --pending[static_cast<size_t>(c.peer_rank)];
        --total;
      }
      if (c.status != WcStatus::kSuccess && l.error.empty()) {
        l.error = transport::DescribeCompletion(c);
      } else if (c.status == WcStatus::kSuccess && c.opcode == WcOpcode::kRecv && l.error.empty()) {
        const uint64_t off = c.wr_id == 1 ? 0 : 4096;
        const uint32_t want = c.wr_id == 1 ? static_cast<uint32_t>(l.qp->path_mtu()) : kBigMessage;
        if (c.byte_len != want) {
          l.error =
              "received " + std::to_string(c.byte_len) + " bytes, expected " + std::to_string(want);
        }
        for (uint64_t k = 0; k < c.byte_len && l.error.empty(); ++k) {
          if (l.recv[off + k] != Pattern(c.peer_rank, me, off + k)) {
            l.error = "data mismatch at byte " + std::to_string(k) + " of the " +
                      std::to_string(want) + "-byte message";
          }
        }
      }
    }
  }
  for (int p = 0; p < f.world; ++p) {
    if (p == me) continue;
    PeerLink& l = links[static_cast<size_t>(p)];
    proto::PairCheck* c = out.add_checks();
    c->set_rank(me);
    c->set_peer_rank(p);
    if (!cq) {
      c->set_detail("no device on this rank");
    } else if (!l.error.empty()) {
      c->set_detail(l.error);
    } else if (pending[static_cast<size_t>(p)] > 0) {
      c->set_detail("deadline: " + std::to_string(pending[static_cast<size_t>(p)]) +
                    " of 4 completions missing (outstanding " +
                    std::to_string(l.qp->outstanding_sends()) + " sends, " +
                    std::to_string(l.qp->outstanding_recvs()) + " recvs)");
    } else {
      c->set_ok(true);
      c->set_detail("path_mtu " + std::to_string(l.qp->path_mtu()) + ", " +
                    std::to_string(l.qp->path_mtu()) + " B and 1 MiB each way");
    }
  }
  for (auto& l : links) {
    l.qp.reset();
    l.send_mr.reset();
    l.recv_mr.reset();
  }
  cq.reset();
  return out;
}

// `addr` when it is a numeric address this host can bind (one of ours:
// 127.0.0.2 is, on Linux), or "" when it cannot (EADDRNOTAVAIL: an address
// of another host, a NAT) or is a host name: a name can resolve differently
// here (Debian's /etc/hosts maps the host's own name to 127.0.1.1) than on
// the ranks that dial it.
std::string LocalAddressOf(const std::string& addr) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  if (getaddrinfo(addr.c_str(), nullptr, &hints, &res) != 0) return "";
  std::string found;
  for (addrinfo* a = res; a != nullptr && found.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    // Port 0 in ai_addr (no service asked): any free port, only to ask "ours?".
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0) {
      char buf[NI_MAXHOST];
      if (getnameinfo(a->ai_addr, a->ai_addrlen, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) ==
          0) {
        found = buf;
      }
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return found;
}

// Where rank 0 listens, and the address its own rank dials to reach it.
struct RootAddress {
  std::string bind, dial;
};

RootAddress RootBindAddress(const DoctorFlags& f) {
  auto dial_for = [](const std::string& bind) {
    if (bind == "0.0.0.0") return std::string("127.0.0.1");
    if (bind == "::") return std::string("::1");
    return bind;
  };
  if (!f.bind.empty()) return {f.bind, dial_for(f.bind)};
  const std::string local = LocalAddressOf(f.root);
  if (!local.empty()) return {local, local};
  const std::string any = f.root.find(':') != std::string::npos ? "::" : "0.0.0.0";
  std::fprintf(stderr,
               "fathom doctor: --root %s is not an address of this host (or is a name); rank 0 "
               "listens on %s port %d (all addresses; --bind ADDR to choose one)\n",
               f.root.c_str(), any.c_str(), f.tcp_port);
  return {any, dial_for(any)};
}

int RunDoctor(const DoctorFlags& f) {
  // -n and -r meant ranks and rank here but iterations (perf) and root (coll)
  // elsewhere; they must not silently mean either.
  if (!f.old_n.empty() || !f.old_r.empty()) {
    std::fprintf(stderr,
                 "fathom doctor: %s%s: doctor takes --nranks N and --rank R, as fathom coll "
                 "--backend verbs does (-n is perf's iterations, -r coll's root)\n",
                 f.old_n.empty() ? "" : ("-n " + f.old_n).c_str(),
                 f.old_r.empty() ? "" : ((f.old_n.empty() ? "-r " : " -r ") + f.old_r).c_str());
    return kExitUsage;
  }
  if (f.rank < 0 || f.rank >= f.world) {
    std::fprintf(stderr, "fathom doctor: --rank %d is outside 0..%d\n", f.rank, f.world - 1);
    return kExitUsage;
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  tv::DeviceOptions d;
  d.name = f.device;
  d.port = f.ib_port;
  d.rank = f.rank;
  if (f.gid_index >= 0) d.gid = {tv::GidMode::kIndex, f.gid_index};
  tv::RankFacts facts;
  facts.rank = f.rank;
  facts.host = host;
  auto dev = tv::OpenDevice(d);
  // No device, or none of that name, port or GID: bad input on this host,
  // exit 2 once the ranks have met (the others learn it from rank 0's table).
  bool no_device = false;
  if (dev.ok()) {
    facts.info = (*dev)->info();
  } else {
    no_device = dev.status().code() == StatusCode::kNotFound ||
                dev.status().code() == StatusCode::kInvalidArgument;
    facts.error = (f.device.empty() ? std::string() : "device \"" + f.device + "\": ") +
                  dev.status().message();
    std::fprintf(stderr, "fathom doctor: rank %d: %s\n", f.rank, facts.error.c_str());
  }
  const auto exit_failure = [&] { return no_device ? kExitUsage : kExitFailure; };

  std::unique_ptr<tb::Root> root;
  const RootAddress where = f.rank == 0 ? RootBindAddress(f) : RootAddress{};
  if (f.rank == 0) {
    tb::RootOptions ro;
    ro.bind_address = where.bind;
    ro.port = static_cast<uint16_t>(f.tcp_port);
    ro.world_size = f.world;
    ro.token = f.token;
    ro.accept_timeout = Picoseconds::FromSeconds(f.wait_s);
    auto r = tb::Root::Start(ro);
    if (!r.ok()) {
      std::fprintf(stderr, "fathom doctor: %s\n", r.status().ToString().c_str());
      return kExitUsage;
    }
    root = std::move(*r);
  }
  tb::RankOptions ro;
  ro.root_address = f.rank == 0 ? where.dial : f.root;
  ro.root_port = static_cast<uint16_t>(f.tcp_port);
  ro.rank = f.rank;
  ro.world_size = f.world;
  ro.token = f.token;
  ro.connect_timeout = Picoseconds::FromSeconds(f.wait_s);
  // Longer than the root's accept deadline, so a missing rank is reported by
  // the root (naming the rank) rather than as this rank's own timeout.
  ro.op_timeout = Picoseconds::FromSeconds(f.wait_s + 30);
  auto boot = tb::Rank::Connect(ro);
  if (!boot.ok()) {
    std::fprintf(stderr, "fathom doctor: %s\n", boot.status().ToString().c_str());
    return exit_failure();
  }
  auto gathered = (*boot)->AllGather(ToProto(facts).SerializeAsString());
  if (!gathered.ok()) {
    std::fprintf(stderr, "fathom doctor: %s\n", gathered.status().ToString().c_str());
    return exit_failure();
  }
  std::vector<tv::RankFacts> all;
  for (const std::string& s : *gathered) {
    proto::DeviceFacts p;
    p.ParseFromString(s);
    all.push_back(FromProto(p));
  }
  std::vector<std::string> flags = tv::FindInconsistencies(all);

  Status fatal;
  proto::PairChecks mine = CheckPairs(f, dev.ok() ? dev->get() : nullptr, **boot, &fatal);
  if (!fatal.ok()) {
    std::fprintf(stderr, "fathom doctor: all-pairs check: %s\n", fatal.ToString().c_str());
    return exit_failure();
  }
  auto pairs = (*boot)->AllGather(mine.SerializeAsString());
  if (!pairs.ok()) {
    std::fprintf(stderr, "fathom doctor: %s\n", pairs.status().ToString().c_str());
    return exit_failure();
  }
  int pairs_ok = 0, pairs_total = 0;
  std::vector<std::string> pair_lines;
  for (const std::string& s : *pairs) {
    proto::PairChecks pc;
    pc.ParseFromString(s);
    for (const auto& c : pc.checks()) {
      ++pairs_total;
      if (c.ok()) {
        ++pairs_ok;
      } else {
        flags.push_back("pair " + std::to_string(c.rank()) + " -> " +
                        std::to_string(c.peer_rank()) + " failed: " + c.detail());
      }
      pair_lines.push_back(std::to_string(c.rank()) + " -> " + std::to_string(c.peer_rank()) +
                           (c.ok() ? " ok: " : " FAILED: ") + c.detail());
    }
  }
  if (dev.ok()) {
    for (const auto& e : (*dev)->TakeAsyncEvents()) {
      flags.push_back("rank " + std::to_string(f.rank) + " async event " + e.type + " on " +
                      e.detail);
    }
  }
  if (f.rank == 0) {
    if (f.json) {
      std::string j = "{\"ranks\":" + std::to_string(f.world) +
                      ",\"pairs_ok\":" + std::to_string(pairs_ok) +
                      ",\"pairs\":" + std::to_string(pairs_total) + ",\"flags\":[";
      for (size_t i = 0; i < flags.size(); ++i) {
        std::string esc;
        for (char ch : flags[i]) {
          if (ch == '"' || ch == '\\') esc += '\\';
          esc += (ch == '\n') ? ' ' : ch;
        }
        j += (i ? ",\"" : "\"") + esc + "\"";
      }
      std::printf("%s]}\n", j.c_str());
    } else {
      std::printf("%s\n", tv::FactsTable(all).c_str());
      std::printf("all-pairs check: %d of %d directions ok\n", pairs_ok, pairs_total);
      for (const auto& l : pair_lines) std::printf("  %s\n", l.c_str());
      if (flags.empty()) {
        std::printf("\nno problems found\n");
      } else {
        std::printf("\n%zu problem(s):\n", flags.size());
        for (const auto& l : flags) std::printf("  - %s\n", l.c_str());
      }
    }
  }
  boot->reset();
  if (root) {
    (void)root->Wait(Picoseconds::FromSeconds(10));
    // Strangers the root turned away (port scanners, a wrong token, another
    // job on the same port) did not stop the run, but the operator should know.
    const std::vector<std::string> rejected = root->Rejections();
    if (!rejected.empty()) {
      std::fprintf(stderr, "fathom doctor: the bootstrap root rejected %zu connection(s):\n",
                   rejected.size());
      for (const std::string& r : rejected) std::fprintf(stderr, "  %s\n", r.c_str());
    }
  }
  if (no_device) return kExitUsage;
  return flags.empty() ? kExitOk : kExitFailure;
}

FATHOM_REGISTER_COMMAND(
    doctor,
    Command{
        "doctor",
        "preflight across ranks: device/port facts, inconsistencies, all-pairs RDMA check",
        [](CLI::App* sub) -> std::function<int()> {
          auto f = std::make_shared<DoctorFlags>();
          sub->footer(
              "Every rank dials --root ADDR:PORT; rank 0 listens there, or on all addresses "
              "when ADDR is a host name or not one of its host's (it says so). Exit 0 all clear, 1 "
              "anything "
              "flagged, 2 bad usage or no RDMA device on this rank.");
          sub->add_option("--nranks", f->world, "number of ranks (2)")->check(CLI::Range(1, 4096));
          sub->add_option("--rank", f->rank, "this rank (0 hosts the bootstrap root)");
          // The old spellings: --ranks still means the rank count; -n and -r
          // are refused with the new names (RunDoctor).
          sub->add_option("--ranks", f->world)->check(CLI::Range(1, 4096))->group("");
          sub->add_option("-n", f->old_n)->group("");
          sub->add_option("-r", f->old_r)->group("");
          sub->add_option("--root", f->root,
                          "address of rank 0, which every rank dials (127.0.0.1); rank 0 listens "
                          "there, or on all addresses when it is not one of this host's");
          sub->add_option("--bind", f->bind, "rank 0: listen on this address instead");
          sub->add_option("-p,--port", f->tcp_port, "bootstrap TCP port (18515)")
              ->check(CLI::Range(1, 65535));
          sub->add_option("--token", f->token, "shared token that keeps strangers out");
          sub->add_option("-d,--ib-dev", f->device, "RDMA device (default: first ACTIVE)");
          sub->add_option("-i,--ib-port", f->ib_port, "device port (default: first ACTIVE)");
          sub->add_option("-x,--gid-index", f->gid_index, "GID index (default: RoCE v2 IPv4)");
          sub->add_option("-u,--qp-timeout", f->qp_timeout, "QP timeout for the pair check (12)")
              ->check(CLI::Range(1, 31));
          sub->add_option("--retry-cnt", f->retry_cnt, "QP retry count for the pair check (3)")
              ->check(CLI::Range(0, 7));
          sub->add_option("--wait", f->wait_s, "seconds to wait for the other ranks (60)");
          sub->add_flag("--json", f->json, "JSON summary on rank 0");
          return [f] { return RunDoctor(*f); };
        },
        41});

}  // namespace
}  // namespace fathom::tools
