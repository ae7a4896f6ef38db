#include "fabric/live/emulator.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>

#include "fabric/scenario/network_config.h"
#include "fabric/wire/pcap.h"
#include "faults/spec.h"
#include "proto/yaml_loader.h"

namespace fathom::live {
namespace {

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
int64_t RealNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint64_t Mac(const uint8_t* p) {
  uint64_t m = 0;
  for (int i = 0; i < 6; ++i) m = m << 8 | p[i];
  return m;
}

// What the model needs from a frame's headers: its flow (L4 source port,
// DSCP/ECN byte, IP version), its IP length (MTU checks and faults), and
// for RoCEv2 (UDP 4791) the BTH fields fault filters look at.
struct Headers {
  size_t l3 = 14;  // offset of the IP header
  bool ip4 = false, ip6 = false;
  uint8_t tos = 0;
  uint16_t sport = 0;
  uint32_t ip_bytes = 0;
  bool roce = false;
  uint8_t opcode = 0;
  uint32_t qpn = 0, psn = 0;
  bool ack_req = false;
};

Headers Parse(const uint8_t* f, uint32_t len) {
  Headers h;
  if (len < 14) return h;
  uint16_t type = Be16(f + 12);
  if (type == 0x8100 && len >= 18) {  // 802.1Q
    type = Be16(f + 16);
    h.l3 = 18;
  }
  h.ip_bytes = len > h.l3 ? len - static_cast<uint32_t>(h.l3) : 0;
  const uint8_t* ip = f + h.l3;
  const uint32_t room = h.ip_bytes;
  uint8_t proto = 0;
  const uint8_t* l4 = nullptr;
  uint32_t l4_room = 0;
  if (type == 0x0800 && room >= 20) {
    h.ip4 = true;
    h.tos = ip[1];
    h.ip_bytes = std::min<uint32_t>(Be16(ip + 2), room);
    proto = ip[9];
    const uint32_t ihl = (ip[0] & 0xFu) * 4;
    if (ihl >= 20 && ihl < room) {
      l4 = ip + ihl;
      l4_room = room - ihl;
    }
  } else if (type == 0x86DD && room >= 40) {
    h.ip6 = true;
    h.tos = static_cast<uint8_t>((ip[0] & 0xF) << 4 | ip[1] >> 4);
    h.ip_bytes = std::min<uint32_t>(Be16(ip + 4) + 40u, room);
    proto = ip[6];
    l4 = ip + 40;
    l4_room = room - 40;
  }
  if (l4 != nullptr && (proto == 17 || proto == 6) && l4_room >= 4) {
    h.sport = Be16(l4);
    // RoCEv2: UDP destination port 4791, then the BTH (IBTA RoCEv2 annex
    // A17.4; ROCEV2.md "Frame"): opcode, flags, P_Key, reserved, DestQP (24
    // bits), AckReq + reserved, PSN (24 bits).
    if (proto == 17 && Be16(l4 + 2) == wire::kRoceV2UdpPort && l4_room >= 8 + 12) {
      const uint8_t* bth = l4 + 8;
      h.roce = true;
      h.opcode = bth[0];
      h.qpn = uint32_t{bth[5]} << 16 | uint32_t{bth[6]} << 8 | bth[7];
      h.ack_req = (bth[8] & 0x80) != 0;
      h.psn = uint32_t{bth[9]} << 16 | uint32_t{bth[10]} << 8 | bth[11];
    }
  }
  return h;
}

// Sets the IP ECN field of a delivered frame to CE (RFC 3168 section 5),
// as the model marked it, when the frame is ECN-capable; IPv4's header
// checksum is updated incrementally (RFC 1624 eqn. 3).
void MarkCe(uint8_t* f, uint32_t len) {
  const Headers h = Parse(f, len);
  if ((h.tos & 3) == 0) return;
  uint8_t* ip = f + h.l3;
  if (h.ip4) {
    const uint16_t old_word = Be16(ip);
    ip[1] |= 3;
    const uint16_t new_word = Be16(ip);
    uint32_t sum = static_cast<uint16_t>(~Be16(ip + 10)) + static_cast<uint16_t>(~old_word) +
                   uint32_t{new_word};
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    const uint16_t csum = static_cast<uint16_t>(~sum);
    ip[10] = static_cast<uint8_t>(csum >> 8);
    ip[11] = static_cast<uint8_t>(csum);
  } else if (h.ip6) {
    ip[1] |= 0x30;  // the ECN bits are bits 4-5 of the second byte
  }
}

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string UrlDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else if (s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

// The value of `key` in the target's query string ("" when absent).
std::string Query(const std::string& target, const std::string& key) {
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  std::string_view rest(target);
  rest.remove_prefix(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view kv = rest.substr(0, amp);
    const size_t eq = kv.find('=');
    if (kv.substr(0, eq) == key)
      return eq == std::string_view::npos ? "" : UrlDecode(kv.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return "";
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

struct Emulator::Host {
  Emulator* emu = nullptr;
  int32_t rank = -1;
  int32_t node = -1;
  std::string name;
  Endpoint* endpoint = nullptr;
  std::vector<std::pair<Frame*, int64_t>> tx;  // delivered by the model at (ps), not yet sent
  std::vector<Frame*> tx_batch;
  uint64_t rx_frames = 0, rx_bytes = 0, tx_frames = 0, tx_bytes = 0;
  uint64_t rx_backlog = 0;    // the host link's queue was past its bound
  uint64_t rx_no_buffer = 0;  // the frame pool was empty
  uint64_t rx_runt = 0;       // shorter than an Ethernet header
  uint64_t tx_device = 0;     // the endpoint did not take it
  uint64_t same_segment = 0;  // destination learned at the host it came from
};

struct Emulator::Capture {
  sim::PacketTap tap{};
  std::unique_ptr<wire::PcapWriter> writer;
  sim::Port* port = nullptr;
  std::string file;
  uint64_t frames = 0;
  uint64_t errors = 0;
};

Emulator::Emulator(const sim::LoadedScenario& scenario, const EmulatorOptions& options)
    : scenario_(scenario),
      options_(options),
      engine_(scenario.spec.seed() == 0 ? 1 : scenario.spec.seed()),
      frames_(options.frames) {
  lateness_ring_.reserve(kLatenessRing);
}

StatusOr<std::unique_ptr<Emulator>> Emulator::Create(
    const sim::LoadedScenario& scenario, const EmulatorOptions& options,
    std::vector<std::unique_ptr<Endpoint>> endpoints) {
  const topo::Topology& topo = scenario.topology;
  const size_t hosts = topo.hosts().size();
  if (endpoints.size() != hosts) {
    return InvalidArgument(scenario.path + ": the topology has " + std::to_string(hosts) +
                           " hosts but " + std::to_string(endpoints.size()) +
                           " endpoints are attached: attach one per host (--endpoint HOST=SPEC)");
  }
  if (!(options.time_dilation > 0) || !std::isfinite(options.time_dilation)) {
    return InvalidArgument("time dilation " + Num(options.time_dilation) + ": must be > 0");
  }
  std::unique_ptr<Emulator> e(new Emulator(scenario, options));
  FATHOM_ASSIGN_OR_RETURN(const sim::NetworkConfig config,
                          sim::ScenarioNetworkConfig(scenario.spec));
  e->net_ = std::make_unique<sim::Network>(&e->engine_, &e->scenario_.topology, config);
  e->net_->pool().set_on_free_data(&Emulator::OnPacketFreed, e.get());
  e->endpoints_ = std::move(endpoints);
  e->rank_of_node_.assign(topo.nodes().size(), -1);
  for (size_t r = 0; r < hosts; ++r) {
    auto h = std::make_unique<Host>();
    h->emu = e.get();
    h->rank = static_cast<int32_t>(r);
    h->node = topo.hosts()[r];
    h->name = topo.node(h->node).name;
    h->endpoint = e->endpoints_[r].get();
    e->rank_of_node_[static_cast<size_t>(h->node)] = h->rank;
    if (topo.PortCount(h->node) == 0) {
      return InvalidArgument(scenario.path + ": host " + h->name + " has no link");
    }
    // The switch port toward the host delivers to the host's endpoint,
    // not to the simulator's NIC.
    sim::Port& up = e->net_->port(h->node, 0);
    up.peer()->Connect(&up, &Emulator::OnDeliver, h.get());
    e->hosts_.push_back(std::move(h));
  }
  // A host's own queue (its NIC's ring, in the model the host link's
  // serializer) holds at most what a switch port's buffer holds; past that
  // the endpoint sends faster than its link and the frame is dropped,
  // counted as ingress_backlog.
  const sim::Port& first = e->net_->port(e->hosts_[0]->node, 0);
  e->backlog_limit_ps_ = first.config().rate.SerializationTime(config.switch_buffer_bytes).ps();
  // The scenario's faults, each named now so that names stay when faults
  // are added and cleared at run time.
  for (int i = 0; i < scenario.spec.faults_size(); ++i) {
    proto::FaultSpec s = scenario.spec.faults(i);
    s.set_name(faults::FaultName(s, i));
    e->fault_specs_.push_back(s);
  }
  e->fault_serial_ = scenario.spec.faults_size();
  if (!e->fault_specs_.empty()) {
    auto a = sim::FaultAttachment::Attach(e->net_.get(), scenario.spec.faults(), e->engine_.seed(),
                                          scenario.map, "faults");
    if (!a.ok()) return a.status();
    e->faults_ = std::move(a).value();
  }
  e->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (e->wake_fd_ < 0) return IoError(std::string("eventfd: ") + std::strerror(errno));
  return e;
}

Emulator::~Emulator() {
  captures_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
}

int64_t Emulator::ModelPs(int64_t wall_ns) const {
  return static_cast<int64_t>(static_cast<double>(wall_ns - start_wall_ns_) * 1000.0 /
                              options_.time_dilation);
}
int64_t Emulator::WallNs(int64_t model_ps) const {
  return start_wall_ns_ +
         static_cast<int64_t>(static_cast<double>(model_ps) * options_.time_dilation / 1000.0);
}

sim::QpFlow* Emulator::FlowFor(int32_t src, int32_t dst, uint16_t sport, uint8_t tos, bool ipv6) {
  const uint64_t key = uint64_t{static_cast<uint32_t>(src) & 0xFFFFF} << 44 |
                       uint64_t{static_cast<uint32_t>(dst) & 0xFFFFF} << 24 | uint64_t{sport} << 8 |
                       tos | (ipv6 ? uint64_t{1} << 43 : 0);
  auto it = flows_.find(key);
  if (it != flows_.end()) return it->second;
  sim::QpFlow& f = flow_storage_.emplace_back();
  const int32_t src_node = hosts_[static_cast<size_t>(src)]->node;
  const int32_t dst_node = hosts_[static_cast<size_t>(dst)]->node;
  f.src_host = src_node;
  f.dst_host = dst_node;
  f.udp_sport = sport;
  f.traffic_class = tos;
  f.ipv6 = ipv6;
  f.buffer_class = net_->qos().dscp_to_priority[tos >> 2] & 7;
  // The route the switches would pick for this flow, as a QP's (PFC's
  // lossless accounting reads it).
  net_->PathOf(src_node, dst_node, sim::FlowHash(src_node, dst_node, sport), f.path);
  flows_.emplace(key, &f);
  return &f;
}

void Emulator::Inject(Frame* f, int32_t src, int32_t dst, int64_t /*now_wall_ns*/) {
  const Headers h = Parse(f->data, f->len);
  sim::Packet* p = net_->pool().Alloc();
  p->flow = FlowFor(src, dst, h.sport, h.tos, h.ip6);
  p->buffer_class = p->flow->buffer_class;
  // Non-RoCE frames travel as SEND_ONLY (no extension header) sized so that
  // IpPacketBytes gives their IP length; never PFC's PAUSE opcode.
  p->opcode = h.roce && h.opcode != sim::kPauseOpcode ? static_cast<sim::Opcode>(h.opcode)
                                                      : sim::Opcode::kSendOnly;
  p->dest_qpn = h.qpn;
  p->psn = h.psn;
  p->ack_req = h.ack_req;
  const uint32_t overhead = sim::IpPacketBytes(p->opcode, 0, h.ip6);
  p->payload_bytes = static_cast<uint16_t>(h.ip_bytes > overhead ? h.ip_bytes - overhead : 0);
  // On the wire: the frame (padded to Ethernet's 60-byte minimum), its FCS,
  // preamble, SFD and inter-frame gap.
  p->wire_bytes =
      static_cast<uint16_t>(std::max<uint32_t>(f->len, 60) + wire::kEthernetWireExtraBytes);
  p->set_data(reinterpret_cast<const uint8_t*>(f));
  net_->port(hosts_[static_cast<size_t>(src)]->node, 0).Send(p);
}

void Emulator::Ingress(Frame* f, int32_t src, int64_t now_wall_ns) {
  Host& in = *hosts_[static_cast<size_t>(src)];
  f->in_host = src;
  f->rx_ns = now_wall_ns;
  ++in.rx_frames;
  in.rx_bytes += f->len;
  if (f->len < 14) {
    ++in.rx_runt;
    frames_.Unref(f);
    return;
  }
  const sim::Port& port = net_->port(in.node, 0);
  if (port.busy_until().ps() - engine_.Now().ps() > backlog_limit_ps_) {
    ++in.rx_backlog;
    frames_.Unref(f);
    return;
  }
  const uint64_t dst_mac = Mac(f->data);
  const uint64_t src_mac = Mac(f->data + 6);
  if ((f->data[6] & 1) == 0) mac_to_rank_[src_mac] = src;
  if ((f->data[0] & 1) == 0) {
    auto it = mac_to_rank_.find(dst_mac);
    if (it != mac_to_rank_.end()) {
      if (it->second == src) {
        ++in.same_segment;
        frames_.Unref(f);
        return;
      }
      f->refs = 1;
      Inject(f, src, it->second, now_wall_ns);
      return;
    }
  }
  // Broadcast, multicast or unknown unicast: a copy to every other host,
  // each on its own path through the fabric.
  ++flooded_frames_;
  const int32_t n = static_cast<int32_t>(hosts_.size());
  if (n < 2) {
    frames_.Unref(f);
    return;
  }
  f->refs = static_cast<uint32_t>(n - 1);
  for (int32_t d = 0; d < n; ++d) {
    if (d != src) Inject(f, src, d, now_wall_ns);
  }
}

void Emulator::OnDeliver(void* host, sim::Packet* p, int32_t /*in_port*/) {
  Host& h = *static_cast<Host*>(host);
  Emulator& e = *h.emu;
  if (!p->has_data) {  // nothing the emulator sent (none is expected)
    e.net_->pool().Free(p);
    return;
  }
  Frame* f = reinterpret_cast<Frame*>(const_cast<uint8_t*>(p->ext().data));
  if (p->ecn_ce && f->refs == 1) MarkCe(f->data, f->len);
  p->has_data = 0;  // the frame now belongs to the host's transmit queue
  e.net_->pool().Free(p);
  h.tx.emplace_back(f, e.engine_.Now().ps());
}

void Emulator::OnPacketFreed(void* emulator, sim::Packet* p) {
  auto* e = static_cast<Emulator*>(emulator);
  e->frames_.Unref(reinterpret_cast<Frame*>(const_cast<uint8_t*>(p->ext().data)));
}

void Emulator::RecordLateness(int64_t ns) {
  const double s = static_cast<double>(ns) * 1e-9;
  for (size_t i = 0; i < std::size(kLatenessBounds); ++i) {
    if (s <= kLatenessBounds[i]) ++lateness_buckets_[i];
  }
  ++lateness_count_;
  lateness_sum_s_ += s;
  lateness_max_s_ = std::max(lateness_max_s_, s);
  if (lateness_ring_.size() < kLatenessRing) {
    lateness_ring_.push_back(ns);
  } else {
    lateness_ring_[lateness_count_ % kLatenessRing] = ns;
  }
}

void Emulator::FlushTx(int64_t now_wall_ns, Status* lag) {
  for (auto& hp : hosts_) {
    Host& h = *hp;
    if (h.tx.empty()) continue;
    h.tx_batch.clear();
    for (const auto& [f, model_ps] : h.tx) {
      h.tx_batch.push_back(f);
      const int64_t late = std::max<int64_t>(0, now_wall_ns - WallNs(model_ps));
      RecordLateness(late);
      if (options_.max_lag_ns > 0 && late > options_.max_lag_ns) {
        ++late_frames_;
        if (lag->ok()) {
          *lag = FailedPrecondition(
              "time dilation " + Num(options_.time_dilation) + " cannot keep up: a frame to " +
              h.name + " left " + Num(static_cast<double>(late) / 1e3) +
              " us after the model delivered it (--max-lag " +
              Num(static_cast<double>(options_.max_lag_ns) / 1e3) + " us); raise --time-dilation");
        }
      }
    }
    const int sent = h.endpoint->Transmit(h.tx_batch.data(), static_cast<int>(h.tx_batch.size()));
    h.tx_frames += static_cast<uint64_t>(sent);
    h.tx_device += h.tx_batch.size() - static_cast<size_t>(sent);
    for (int i = 0; i < sent; ++i) h.tx_bytes += h.tx_batch[static_cast<size_t>(i)]->len;
    for (Frame* f : h.tx_batch) frames_.Unref(f);
    h.tx.clear();
  }
}

Status Emulator::Run(const std::atomic<bool>& stop) {
  // Wake from poll on time: the default 50 us of timer slack would be the
  // lateness of every frame.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  start_wall_ns_ = MonoNs();
  Log("emulator started: " + std::to_string(hosts_.size()) + " hosts, time dilation " +
      Num(options_.time_dilation));
  std::vector<pollfd> fds;
  bool polled = false;  // an endpoint without a descriptor (DPDK): spin
  for (auto& h : hosts_) {
    if (h->endpoint->fd() >= 0) {
      fds.push_back({h->endpoint->fd(), POLLIN, 0});
    } else {
      polled = true;
    }
  }
  fds.push_back({wake_fd_, POLLIN, 0});
  Frame* burst[32];
  Status lag;
  uint32_t idle_turns = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    int64_t now = MonoNs();
    engine_.Run(Picoseconds(ModelPs(now)));
    FlushTx(now, &lag);
    if (!lag.ok()) return lag;
    bool got = false;
    now = MonoNs();
    engine_.Run(Picoseconds(ModelPs(now)));
    for (auto& h : hosts_) {
      const int n = h->endpoint->Receive(frames_, burst, 32);
      for (int i = 0; i < n; ++i) Ingress(burst[i], h->rank, now);
      if (n > 0) got = true;
      if (n == 0 && frames_.in_use() == frames_.capacity()) ++h->rx_no_buffer;
    }
    ServeControl();
    ++turns_;
    const bool in_flight = net_->pool().in_use() > 0;
    if (got) {
      idle_turns = 0;
      continue;
    }
    if (polled) {
      // A polling data path: spin while traffic flows, then yield the
      // core in short sleeps (2 shared cores: a busy loop would starve
      // the endpoints).
      if (!in_flight && ++idle_turns > 1000) {
        timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
      }
      continue;
    }
    // Sleep until an endpoint has frames, a control request comes, or (with
    // packets in flight) the model's next delivery may be due.
    timespec timeout{0, in_flight ? 10000 : 50000000};
    for (pollfd& p : fds) p.revents = 0;
    if (ppoll(fds.data(), fds.size(), &timeout, nullptr) < 0 && errno != EINTR) {
      return IoError(std::string("ppoll: ") + std::strerror(errno));
    }
  }
  Log("emulator stopped");
  return Status::Ok();
}

std::future<ControlReply> Emulator::Control(ControlRequest request) {
  std::promise<ControlReply> promise;
  std::future<ControlReply> future = promise.get_future();
  {
    std::lock_guard<std::mutex> lock(control_mu_);
    control_.emplace_back(std::move(request), std::move(promise));
  }
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // The counter is at its maximum: the loop is awake anyway.
  }
  return future;
}

void Emulator::ServeControl() {
  std::vector<std::pair<ControlRequest, std::promise<ControlReply>>> work;
  {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (control_.empty()) return;
    work.swap(control_);
  }
  uint64_t drained;
  if (read(wake_fd_, &drained, sizeof(drained)) < 0) {
    // Nothing to drain: the request came after the last wake.
  }
  for (auto& [request, promise] : work) promise.set_value(Handle(request));
}

ControlReply Emulator::Handle(const ControlRequest& r) {
  const std::string path = r.target.substr(0, r.target.find('?'));
  if (r.method == "GET" && path == "/metrics") {
    ControlReply reply;
    reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
    reply.body = Metrics();
    return reply;
  }
  if (r.method == "GET" && path == "/faults") return ListFaults();
  if (r.method == "POST" && path == "/faults") return AddFault(r.body, "");
  if (path.rfind("/faults/", 0) == 0) {
    const std::string name = UrlDecode(path.substr(8));
    if (r.method == "DELETE") return ClearFault(name);
    if (r.method == "PUT") return AddFault(r.body, name);
  }
  if (path == "/capture") {
    const std::string link = Query(r.target, "link");
    if (r.method == "POST") return StartCapture(link, Query(r.target, "file"));
    if (r.method == "DELETE") return StopCapture(link);
  }
  return {404, "text/plain; charset=utf-8",
          "unknown request " + r.method + " " + path +
              " (GET /metrics, GET|POST /faults, PUT|DELETE /faults/NAME, POST|DELETE "
              "/capture?link=A->B[&file=PATH])\n"};
}

void Emulator::Log(const std::string& line) {
  const double wall_s = static_cast<double>(MonoNs() - start_wall_ns_) * 1e-9;
  const double model_us = static_cast<double>(engine_.Now().ps()) * 1e-6;
  char prefix[96];
  std::snprintf(prefix, sizeof(prefix), "[wall %.6f s, model %.3f us] ", wall_s, model_us);
  log_.push_back(prefix + line);
  std::fprintf(stderr, "fathom emulate: %s\n", log_.back().c_str());
}

Status Emulator::Reattach() {
  if (faults_ != nullptr) {
    for (sim::Port* p : net_->ports()) {
      if (faults_->FaultsAt(p) != nullptr) p->set_impairment(nullptr);
    }
    retired_.push_back(std::move(faults_));
  }
  if (fault_specs_.empty()) return Status::Ok();
  google::protobuf::RepeatedPtrField<proto::FaultSpec> specs;
  for (const proto::FaultSpec& s : fault_specs_) *specs.Add() = s;
  auto a = sim::FaultAttachment::Attach(net_.get(), specs, engine_.seed(), config::SourceMap{},
                                        "faults");
  if (!a.ok()) return a.status();
  faults_ = std::move(a).value();
  return Status::Ok();
}

ControlReply Emulator::AddFault(const std::string& yaml, const std::string& replace) {
  proto::FaultSpec spec;
  const Status parsed = config::LoadYamlString(yaml, "fault", &spec);
  if (!parsed.ok()) return {400, "text/plain; charset=utf-8", parsed.ToString() + "\n"};
  // Its times count from now.
  const double now_us = static_cast<double>(engine_.Now().ps()) * 1e-6;
  spec.set_start_us(spec.start_us() + now_us);
  if (spec.has_until_us()) spec.set_until_us(spec.until_us() + now_us);
  if (!replace.empty()) {
    spec.set_name(replace);
  } else if (spec.name().empty()) {
    spec.set_name(faults::FaultName(spec, fault_serial_));
  }
  const auto same = [&](const proto::FaultSpec& s) { return s.name() == spec.name(); };
  const auto it = std::find_if(fault_specs_.begin(), fault_specs_.end(), same);
  if (replace.empty() && it != fault_specs_.end()) {
    return {409, "text/plain; charset=utf-8", "fault " + spec.name() + " exists (PUT replaces)\n"};
  }
  if (!replace.empty() && it == fault_specs_.end()) {
    return {404, "text/plain; charset=utf-8", "no fault named " + replace + "\n"};
  }
  const std::vector<proto::FaultSpec> before = fault_specs_;
  if (it != fault_specs_.end()) {
    *it = spec;
  } else {
    fault_specs_.push_back(spec);
    ++fault_serial_;
  }
  const Status s = Reattach();
  if (!s.ok()) {
    fault_specs_ = before;
    const Status back = Reattach();
    return {400, "text/plain; charset=utf-8",
            s.ToString() + (back.ok() ? "" : "; restoring the faults: " + back.ToString()) + "\n"};
  }
  std::string text = spec.ShortDebugString();
  Log(std::string(replace.empty() ? "fault added: " : "fault changed: ") + text);
  return {replace.empty() ? 201 : 200, "text/plain; charset=utf-8", spec.name() + "\n"};
}

ControlReply Emulator::ClearFault(const std::string& name) {
  const auto it = std::find_if(fault_specs_.begin(), fault_specs_.end(),
                               [&](const proto::FaultSpec& s) { return s.name() == name; });
  if (it == fault_specs_.end())
    return {404, "text/plain; charset=utf-8", "no fault named " + name + "\n"};
  fault_specs_.erase(it);
  const Status s = Reattach();
  if (!s.ok()) return {500, "text/plain; charset=utf-8", s.ToString() + "\n"};
  Log("fault cleared: " + name);
  return {200, "text/plain; charset=utf-8", name + "\n"};
}

ControlReply Emulator::ListFaults() {
  std::string body = "# faults in force\n";
  for (const proto::FaultSpec& s : fault_specs_) body += s.ShortDebugString() + "\n";
  body += "# log\n";
  for (const std::string& l : log_) body += l + "\n";
  return {200, "text/plain; charset=utf-8", body};
}

sim::Port* Emulator::PortByName(const std::string& name, std::string* error) const {
  for (sim::Port* p : net_->ports()) {
    if (sim::ReportPortName(scenario_.topology, p->config().node, p->config().index) == name) {
      return p;
    }
  }
  *error = "no port named '" + name + "' (names as in the metrics' link label, e.g. leaf0->spine1)";
  return nullptr;
}

void Emulator::OnTap(void* capture, const sim::Packet& p, Picoseconds /*at*/) {
  auto* c = static_cast<Capture*>(capture);
  if (!p.has_data) return;
  const Frame* f = reinterpret_cast<const Frame*>(p.ext().data);
  if (c->writer->Write({f->data, f->len}, RealNs()).ok()) {
    ++c->frames;
  } else {
    ++c->errors;
  }
}

ControlReply Emulator::StartCapture(const std::string& link, const std::string& file) {
  std::string error;
  sim::Port* port = PortByName(link, &error);
  if (port == nullptr) return {404, "text/plain; charset=utf-8", error + "\n"};
  if (file.empty()) return {400, "text/plain; charset=utf-8", "capture needs file=PATH\n"};
  if (captures_.count(link) != 0) {
    return {409, "text/plain; charset=utf-8", "already capturing " + link + "\n"};
  }
  auto w = wire::PcapWriter::Open(file, /*nanosecond=*/true);
  if (!w.ok()) return {400, "text/plain; charset=utf-8", w.status().ToString() + "\n"};
  auto c = std::make_unique<Capture>();
  c->writer = std::move(w).value();
  c->port = port;
  c->file = file;
  c->tap = sim::PacketTap{&Emulator::OnTap, c.get()};
  port->set_tap(&c->tap);
  captures_[link] = std::move(c);
  Log("capture started: " + link + " -> " + file);
  return {201, "text/plain; charset=utf-8", file + "\n"};
}

ControlReply Emulator::StopCapture(const std::string& link) {
  auto it = captures_.find(link);
  if (it == captures_.end())
    return {404, "text/plain; charset=utf-8", "not capturing " + link + "\n"};
  it->second->port->set_tap(nullptr);
  const uint64_t frames = it->second->frames;
  captures_.erase(it);  // closes the file
  Log("capture stopped: " + link + " (" + std::to_string(frames) + " frames)");
  return {200, "text/plain; charset=utf-8", std::to_string(frames) + " frames\n"};
}

std::string Emulator::Metrics() {
  std::ostringstream o;
  const topo::Topology& topo = scenario_.topology;
  auto family = [&](const char* name, const char* type, const char* help) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  // Per port (one direction of a link), IB counter names in Prometheus form.
  struct PortRow {
    std::string labels;
    sim::PortCounters c;
    int64_t queued = 0;
  };
  std::vector<PortRow> rows;
  for (sim::Port* p : net_->ports()) {
    PortRow r;
    const std::string name = sim::ReportPortName(topo, p->config().node, p->config().index);
    r.labels =
        "{link=\"" + Escape(name) + "\",node=\"" + Escape(topo.node(p->config().node).name) + "\"}";
    r.c = p->counters();
    for (int tc = 0; tc < 8; ++tc) r.queued += p->queued_bytes(tc);
    rows.push_back(std::move(r));
  }
  auto port_family = [&](const char* name, const char* type, const char* help, auto value) {
    family(name, type, help);
    for (const PortRow& r : rows) o << name << r.labels << ' ' << value(r) << '\n';
  };
  port_family("fathom_port_xmit_packets_total", "counter", "Frames the port transmitted.",
              [](const PortRow& r) { return r.c.port_xmit_packets; });
  port_family("fathom_port_xmit_bytes_total", "counter",
              "Bytes the port transmitted (frames with FCS).",
              [](const PortRow& r) { return r.c.port_xmit_data; });
  port_family("fathom_port_rcv_packets_total", "counter",
              "Frames the port received over the reverse direction.",
              [](const PortRow& r) { return r.c.port_rcv_packets; });
  port_family("fathom_port_rcv_bytes_total", "counter", "Bytes the port received.",
              [](const PortRow& r) { return r.c.port_rcv_data; });
  port_family("fathom_port_xmit_discards_total", "counter",
              "Frames dropped at the port's egress: buffer full (tail drop).",
              [](const PortRow& r) { return r.c.port_xmit_discards; });
  port_family("fathom_port_mtu_discards_total", "counter",
              "Frames over the link MTU, dropped silently at the egress.",
              [](const PortRow& r) { return r.c.mtu_discards; });
  port_family("fathom_port_rcv_errors_total", "counter", "Frames received with a bad FCS/ICRC.",
              [](const PortRow& r) { return r.c.port_rcv_errors; });
  port_family("fathom_port_xmit_wait_seconds_total", "counter",
              "Model time frames waited behind others at the port.", [](const PortRow& r) {
                return Num(static_cast<double>(r.c.port_xmit_wait_ps) * 1e-12);
              });
  port_family("fathom_port_queue_bytes", "gauge", "Bytes queued at the port's egress now.",
              [](const PortRow& r) { return r.queued; });
  // Drops by reason, across the fabric.
  family("fathom_fabric_drops_total", "counter", "Frames the modelled fabric dropped, by reason.");
  const sim::DropStats& d = net_->drops();
  for (size_t i = 0; i < d.by_reason.size(); ++i) {
    o << "fathom_fabric_drops_total{reason=\""
      << sim::DropReasonName(static_cast<sim::DropReason>(i)) << "\"} " << d.by_reason[i] << '\n';
  }
  // Faults: counters since the fault set last changed (a change re-attaches
  // every fault).
  if (faults_ != nullptr) {
    const auto reports = faults_->Report(engine_.Now());
    auto fault_family = [&](const char* name, const char* help, auto value) {
      family(name, "counter", help);
      for (const auto& f : reports) {
        o << name << "{fault=\"" << Escape(f.name) << "\",kind=\"" << Escape(f.kind)
          << "\",target=\"" << Escape(f.target) << "\"} " << value(f.counters) << '\n';
      }
    };
    fault_family("fathom_fault_frames_seen_total", "Frames a fault model was asked about.",
                 [](const faults::Counters& c) { return c.frames_seen; });
    fault_family("fathom_fault_frames_dropped_total", "Frames a fault model dropped.",
                 [](const faults::Counters& c) { return c.frames_dropped; });
    fault_family("fathom_fault_frames_corrupted_total", "Frames a fault model corrupted.",
                 [](const faults::Counters& c) { return c.frames_corrupted; });
    fault_family("fathom_fault_frames_delayed_total", "Frames a fault model delayed.",
                 [](const faults::Counters& c) { return c.frames_delayed; });
    fault_family("fathom_fault_xmit_discards_total", "Oversize frames an MTU fault dropped.",
                 [](const faults::Counters& c) { return c.port_xmit_discards; });
  }
  // Endpoints.
  auto host_family = [&](const char* name, const char* help, auto value) {
    family(name, "counter", help);
    for (const auto& h : hosts_) {
      o << name << "{host=\"" << Escape(h->name) << "\",endpoint=\"" << Escape(h->endpoint->spec())
        << "\"} " << value(*h) << '\n';
    }
  };
  host_family("fathom_endpoint_rx_frames_total", "Frames received from the endpoint.",
              [](const Host& h) { return h.rx_frames; });
  host_family("fathom_endpoint_rx_bytes_total", "Bytes received from the endpoint.",
              [](const Host& h) { return h.rx_bytes; });
  host_family("fathom_endpoint_tx_frames_total", "Frames handed to the endpoint.",
              [](const Host& h) { return h.tx_frames; });
  host_family("fathom_endpoint_tx_bytes_total", "Bytes handed to the endpoint.",
              [](const Host& h) { return h.tx_bytes; });
  family("fathom_endpoint_drops_total", "counter",
         "Frames the emulator dropped at an endpoint, by reason.");
  for (const auto& h : hosts_) {
    const std::string l = "{host=\"" + Escape(h->name) + "\",reason=\"";
    o << "fathom_endpoint_drops_total" << l << "ingress_backlog\"} " << h->rx_backlog << '\n';
    o << "fathom_endpoint_drops_total" << l << "no_frame_buffer\"} " << h->rx_no_buffer << '\n';
    o << "fathom_endpoint_drops_total" << l << "runt\"} " << h->rx_runt << '\n';
    o << "fathom_endpoint_drops_total" << l << "same_segment\"} " << h->same_segment << '\n';
    o << "fathom_endpoint_drops_total" << l << "tx_device\"} " << h->tx_device << '\n';
    o << "fathom_endpoint_drops_total" << l << "rx_overflow\"} " << h->endpoint->rx_overflows()
      << '\n';
  }
  // The emulator itself.
  family("fathom_emulator_model_time_seconds", "gauge", "The model's clock.");
  o << "fathom_emulator_model_time_seconds " << Num(static_cast<double>(engine_.Now().ps()) * 1e-12)
    << '\n';
  family("fathom_emulator_time_dilation", "gauge", "Wall seconds per model second.");
  o << "fathom_emulator_time_dilation " << Num(options_.time_dilation) << '\n';
  family("fathom_emulator_flooded_frames_total", "counter",
         "Broadcast, multicast and unknown-unicast frames flooded to every other host.");
  o << "fathom_emulator_flooded_frames_total " << flooded_frames_ << '\n';
  family("fathom_emulator_frames_in_flight", "gauge", "Frames the model holds now.");
  o << "fathom_emulator_frames_in_flight " << frames_.in_use() << '\n';
  family("fathom_emulator_late_frames_total", "counter",
         "Frames handed to an endpoint later than --max-lag after the model delivered them.");
  o << "fathom_emulator_late_frames_total " << late_frames_ << '\n';
  family("fathom_emulator_lateness_seconds", "histogram",
         "Wall time between the model delivering a frame and its endpoint getting it.");
  for (size_t i = 0; i < std::size(kLatenessBounds); ++i) {
    o << "fathom_emulator_lateness_seconds_bucket{le=\"" << Num(kLatenessBounds[i]) << "\"} "
      << lateness_buckets_[i] << '\n';
  }
  o << "fathom_emulator_lateness_seconds_bucket{le=\"+Inf\"} " << lateness_count_ << '\n';
  o << "fathom_emulator_lateness_seconds_sum " << Num(lateness_sum_s_) << '\n';
  o << "fathom_emulator_lateness_seconds_count " << lateness_count_ << '\n';
  family("fathom_emulator_lateness_max_seconds", "gauge", "The largest lateness so far.");
  o << "fathom_emulator_lateness_max_seconds " << Num(lateness_max_s_) << '\n';
  return o.str();
}

Emulator::Lateness Emulator::lateness() const {
  Lateness l;
  l.frames = lateness_count_;
  if (lateness_ring_.empty()) return l;
  std::vector<int64_t> v = lateness_ring_;
  std::sort(v.begin(), v.end());
  l.p50_ns = static_cast<double>(v[v.size() / 2]);
  l.p99_ns = static_cast<double>(v[std::min(v.size() - 1, v.size() * 99 / 100)]);
  l.max_ns = lateness_max_s_ * 1e9;
  return l;
}

}  // namespace fathom::live
