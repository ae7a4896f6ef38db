#include "testbed/host_switch.h"

#include <chrono>
#include <sstream>

#include "fabric/wire/pcap.h"

namespace fathom::testbed {

namespace {
constexpr size_t kEthHeaderBytes = 14;
constexpr std::array<std::string_view, kNumDropReasons> kDropNames = {
    "over_mtu", "random", "size_filter", "hook", "no_peer", "same_segment", "runt"};

uint64_t Mac(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 6; ++i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

std::string_view DropReasonName(DropReason reason) {
  return kDropNames[static_cast<size_t>(reason)];
}

uint64_t PortCounters::TotalDrops() const {
  uint64_t total = 0;
  for (uint64_t d : drops) total += d;
  return total;
}

Switch::Switch() = default;

Switch::~Switch() { (void)Stop(); }

int Switch::AddPort(std::unique_ptr<Port> port, PortImpairments impairments) {
  auto slot = std::make_unique<Slot>();
  slot->port = std::move(port);
  slot->rng.seed(impairments.seed);
  slot->impairments = impairments;
  ports_.push_back(std::move(slot));
  return static_cast<int>(ports_.size()) - 1;
}

Status Switch::SetImpairments(int port, PortImpairments impairments) {
  if (port < 0 || port >= NumPorts() || running_) {
    return FailedPrecondition("Switch::SetImpairments port=" + std::to_string(port) + " ports=" +
                              std::to_string(NumPorts()) + (running_ ? " (switch running)" : ""));
  }
  ports_[port]->impairments = impairments;
  ports_[port]->rng.seed(impairments.seed);
  return Status::Ok();
}

Status Switch::SetHook(int port, ImpairmentHook hook) {
  if (port < 0 || port >= NumPorts() || running_) {
    return FailedPrecondition("Switch::SetHook port=" + std::to_string(port) + " ports=" +
                              std::to_string(NumPorts()) + (running_ ? " (switch running)" : ""));
  }
  ports_[port]->hook = std::move(hook);
  return Status::Ok();
}

Status Switch::EnableCapture(const std::string& path) {
  if (running_) return FailedPrecondition("Switch::EnableCapture(" + path + "): switch running");
  auto writer = wire::PcapWriter::Open(path, /*nanosecond=*/true);
  if (!writer.ok()) return writer.status().WithContext("Switch::EnableCapture");
  capture_ = std::move(writer).value();
  return Status::Ok();
}

void Switch::Start() {
  if (running_) return;
  running_ = true;
  for (int i = 0; i < NumPorts(); ++i) {
    ports_[i]->port->Start([this, i](std::span<const uint8_t> frame) { OnFrame(i, frame); });
  }
  thread_ = std::thread([this] { io_.run(); });
}

Status Switch::Stop() {
  if (running_) {
    // Close the ports on the io thread (their handlers live there), then stop.
    boost::asio::post(io_, [this] {
      for (auto& slot : ports_) slot->port->Close();
      io_.stop();
    });
    thread_.join();
    running_ = false;
  }
  Status status = capture_status_;
  if (capture_) {
    Status flushed = capture_->Flush();
    if (status.ok()) status = flushed;
    capture_.reset();
  }
  return status;
}

void Switch::OnFrame(int ingress, std::span<const uint8_t> frame) {
  Slot& in = *ports_[ingress];
  in.rx_frames.fetch_add(1, std::memory_order_relaxed);
  in.rx_bytes.fetch_add(frame.size(), std::memory_order_relaxed);
  if (capture_ && capture_status_.ok()) {
    const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    capture_status_ = capture_->Write(frame, now_ns);
  }
  if (frame.size() < kEthHeaderBytes) {
    Drop(in, DropReason::kRunt);
    return;
  }
  const uint64_t dst = Mac(frame.data());
  const uint64_t src = Mac(frame.data() + 6);
  const bool group = (frame[0] & 0x01) != 0;  // broadcast or multicast (I/G bit)
  if ((frame[6] & 0x01) == 0) mac_table_[src] = ingress;
  if (!group) {
    auto it = mac_table_.find(dst);
    if (it != mac_table_.end()) {
      if (it->second == ingress) {
        Drop(in, DropReason::kSameSegment);
      } else {
        Egress(it->second, frame);
      }
      return;
    }
  }
  // Broadcast, multicast (IPv6 ND, MLD) and unknown unicast: flood.
  for (int p = 0; p < NumPorts(); ++p) {
    if (p != ingress) Egress(p, frame);
  }
}

void Switch::Egress(int port, std::span<const uint8_t> frame) {
  Slot& out = *ports_[port];
  const PortImpairments& imp = out.impairments;
  const int len = static_cast<int>(frame.size());
  if (imp.max_frame_bytes > 0 && len > imp.max_frame_bytes) {
    Drop(out, DropReason::kOverMtu);
    return;
  }
  if (imp.filter_max_bytes > 0 && len >= imp.filter_min_bytes && len <= imp.filter_max_bytes) {
    Drop(out, DropReason::kSizeFilter);
    return;
  }
  if (imp.drop_probability > 0.0 && out.uniform(out.rng) < imp.drop_probability) {
    Drop(out, DropReason::kRandom);
    return;
  }
  if (out.hook && out.hook(frame)) {
    Drop(out, DropReason::kHook);
    return;
  }
  if (!out.port->Send(frame)) {
    Drop(out, DropReason::kNoPeer);
    return;
  }
  out.tx_frames.fetch_add(1, std::memory_order_relaxed);
  out.tx_bytes.fetch_add(frame.size(), std::memory_order_relaxed);
}

void Switch::Drop(Slot& slot, DropReason reason) {
  slot.drops[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

PortCounters Switch::Counters(int port) const {
  PortCounters c;
  const Slot& s = *ports_[port];
  c.rx_frames = s.rx_frames.load(std::memory_order_relaxed);
  c.rx_bytes = s.rx_bytes.load(std::memory_order_relaxed);
  c.tx_frames = s.tx_frames.load(std::memory_order_relaxed);
  c.tx_bytes = s.tx_bytes.load(std::memory_order_relaxed);
  for (int r = 0; r < kNumDropReasons; ++r) {
    c.drops[r] = s.drops[r].load(std::memory_order_relaxed);
  }
  return c;
}

uint64_t Switch::ForwardedFrames() const {
  uint64_t total = 0;
  for (const auto& s : ports_) total += s->tx_frames.load(std::memory_order_relaxed);
  return total;
}

std::string Switch::CountersText() const {
  std::ostringstream os;
  for (int p = 0; p < NumPorts(); ++p) {
    const PortCounters c = Counters(p);
    os << PortName(p) << " rx_frames=" << c.rx_frames << " rx_bytes=" << c.rx_bytes
       << " tx_frames=" << c.tx_frames << " tx_bytes=" << c.tx_bytes;
    for (int r = 0; r < kNumDropReasons; ++r) {
      if (c.drops[r] != 0) {
        os << " drop[" << DropReasonName(static_cast<DropReason>(r)) << "]=" << c.drops[r];
      }
    }
    os << "\n";
  }
  return os.str();
}

std::string Switch::CountersJson() const {
  std::ostringstream os;
  os << "{";
  for (int p = 0; p < NumPorts(); ++p) {
    const PortCounters c = Counters(p);
    os << (p ? "," : "") << "\"" << PortName(p) << "\":{\"rx_frames\":" << c.rx_frames
       << ",\"rx_bytes\":" << c.rx_bytes << ",\"tx_frames\":" << c.tx_frames
       << ",\"tx_bytes\":" << c.tx_bytes << ",\"drops\":{";
    for (int r = 0; r < kNumDropReasons; ++r) {
      os << (r ? "," : "") << "\"" << DropReasonName(static_cast<DropReason>(r))
         << "\":" << c.drops[r];
    }
    os << "}}";
  }
  os << "}";
  return os.str();
}

}  // namespace fathom::testbed
