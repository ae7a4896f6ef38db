#include "tools/perf_session.h"

#include <cstdio>

#include "tools/perf_output.h"

namespace fathom::tools::perf {

volatile std::sig_atomic_t g_interrupted = 0;

uint8_t PatternByte(uint64_t size, uint64_t i) {
  return static_cast<uint8_t>((i * 131 + size * 7 + (i >> 9)) & 0xff);
}
void FillPattern(uint8_t* p, uint64_t size) {
  for (uint64_t i = 0; i < size; ++i) p[i] = PatternByte(size, i);
}
Status CheckPattern(const uint8_t* p, uint64_t size, uint64_t check_bytes, const char* where) {
  for (uint64_t i = 0; i < check_bytes; ++i) {
    if (p[i] != PatternByte(size, i)) {
      char buf[200];
      std::snprintf(buf, sizeof(buf),
                    "data mismatch in %s: byte %llu of a %llu-byte message is 0x%02x, expected "
                    "0x%02x",
                    where, static_cast<unsigned long long>(i),
                    static_cast<unsigned long long>(size), p[i], PatternByte(size, i));
      return Aborted(buf);
    }
  }
  return Status::Ok();
}

transport::SendWr MakeWr(Session& s, int q, WrOpcode op, uint64_t size) {
  transport::SendWr wr;
  wr.opcode = op;
  const uint64_t off = static_cast<uint64_t>(q) * s.region;
  if (op == WrOpcode::kRdmaRead) {
    wr.sge = {Addr(s.src.data() + off), static_cast<uint32_t>(size), s.src_mr->lkey()};
  } else {
    wr.sge = {Addr(s.src.data() + off), static_cast<uint32_t>(size), s.src_mr->lkey()};
  }
  wr.remote_addr = s.remote.addr + off;
  wr.rkey = s.remote.rkey;
  return wr;
}

Status PostRecvs(Session& s, int q, uint64_t size, int count) {
  const uint64_t off = static_cast<uint64_t>(q) * s.region;
  for (int i = 0; i < count; ++i) {
    FATHOM_RETURN_IF_ERROR(s.qps[static_cast<size_t>(q)]->PostRecv(
        {static_cast<uint64_t>(q),
         {Addr(s.local.data() + off), static_cast<uint32_t>(size), s.local_mr->lkey()}}));
  }
  return Status::Ok();
}

Status Setup(Session& s, const PerfFlags& f, uint64_t max_size) {
  s.client = !f.server.empty();
  s.events = f.events;
  tv::DeviceOptions d;
  d.cq_mode = f.events ? tv::CqMode::kEvents : tv::CqMode::kBusyPoll;
  d.name = f.device;
  d.port = f.ib_port;
  d.rank = s.client ? 1 : 0;
  if (f.gid_index >= 0)
    d.gid = {tv::GidMode::kIndex, f.gid_index};
  else if (f.gid_ipv6)
    d.gid = {tv::GidMode::kRoceV2Ipv6, -1};
  FATHOM_ASSIGN_OR_RETURN(s.device, tv::OpenDevice(d));
  const Picoseconds op_timeout = Picoseconds::FromSeconds(600 + f.duration * 40);
  if (!s.client) {
    tb::RootOptions ro;
    ro.bind_address = f.bind;
    ro.port = static_cast<uint16_t>(f.tcp_port);
    ro.world_size = 2;
    ro.accept_timeout = Picoseconds::FromSeconds(600);
    FATHOM_ASSIGN_OR_RETURN(s.root, tb::Root::Start(ro));
  }
  tb::RankOptions r;
  r.root_address = s.client ? f.server : "127.0.0.1";
  if (!s.client && f.bind != "0.0.0.0") r.root_address = f.bind;
  r.root_port = static_cast<uint16_t>(f.tcp_port);
  r.rank = s.client ? 1 : 0;
  r.world_size = 2;
  r.connect_timeout = Picoseconds::FromSeconds(s.client ? 30 : 600);
  r.op_timeout = op_timeout;
  FATHOM_ASSIGN_OR_RETURN(s.rank, tb::Rank::Connect(r));
  // The flags both sides must share (perftest's SYMMETRIC ones): with a -b or
  // --run_infinitely on one side only, the other would wait for traffic or a
  // window that never comes. Checked once, before any QP is connected.
  char shape[160];
  std::snprintf(shape, sizeof(shape), "%s -s %llu%s -n %llu -D %g -q %d%s%s", f.test.c_str(),
                static_cast<unsigned long long>(f.size), f.all_sizes ? " -a" : "",
                static_cast<unsigned long long>(f.iters), f.duration, f.qps,
                f.bidirectional ? " -b" : "", f.run_infinitely ? " --run_infinitely" : "");
  FATHOM_ASSIGN_OR_RETURN(auto shapes, s.rank->AllGather(shape));
  if (shapes.size() == 2 && shapes[0] != shapes[1]) {
    return InvalidArgument("the two sides disagree: server \"" + shapes[0] + "\", client \"" +
                           shapes[1] +
                           "\" (the test, -s, -a, -n, -D, -q, -b and --run_infinitely must be "
                           "the same on both sides)");
  }

  s.region = max_size;
  const uint64_t bytes = max_size * static_cast<uint64_t>(f.qps);
  s.local.assign(bytes, 0);
  s.src.assign(bytes, 0);
  FATHOM_ASSIGN_OR_RETURN(s.local_mr,
                          s.device->RegisterMemory(s.local.data(), bytes, transport::kAccessAll));
  FATHOM_ASSIGN_OR_RETURN(s.src_mr,
                          s.device->RegisterMemory(s.src.data(), bytes, transport::kAccessAll));
  const int rx_depth = 512;
  FATHOM_ASSIGN_OR_RETURN(s.cq, s.device->CreateCq((f.tx_depth + rx_depth + 8) * f.qps));
  transport::QpOptions qo;
  qo.max_send_wr = f.tx_depth + 2;
  qo.max_recv_wr = rx_depth;
  qo.timeout = f.timeout;
  qo.retry_cnt = f.retry_cnt;
  qo.path_mtu = f.mtu;
  qo.service_level = f.sl;
  if (f.tclass >= 0) qo.traffic_class = f.tclass;
  if (f.inline_size >= 0 && !f.test.starts_with("read")) qo.max_inline_data = f.inline_size;
  const int peer = s.client ? 0 : 1;
  for (int q = 0; q < f.qps; ++q) {
    FATHOM_ASSIGN_OR_RETURN(auto qp, s.device->CreateQp(peer, qo, s.cq.get()));
    s.qp_index[qp->qp_num()] = q;
    s.qps.push_back(std::move(qp));
  }
  proto::EndpointRecord mine = tb::MakeEndpointRecord(s.qps[0]->LocalInfo());
  for (auto& qp : s.qps) tb::AddQp(&mine, peer, qp->LocalInfo());
  tb::AddBuffer(&mine, *s.local_mr);
  FATHOM_ASSIGN_OR_RETURN(auto all, s.rank->ExchangeEndpoints(mine));
  const auto& theirs = all[static_cast<size_t>(peer)];
  FATHOM_ASSIGN_OR_RETURN(s.remote, tb::RemoteBufferOf(theirs, 0));
  for (int q = 0; q < f.qps; ++q) {
    FATHOM_ASSIGN_OR_RETURN(auto remote, tb::RemoteEndpoint(theirs, d.rank, q));
    FATHOM_RETURN_IF_ERROR(s.qps[static_cast<size_t>(q)]->Connect(remote));
  }
  if (!f.json) PrintBanner(s, f);
  return Status::Ok();
}

}  // namespace fathom::tools::perf
