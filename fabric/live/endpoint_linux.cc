// The non-DPDK endpoints: TAP (/dev/net/tun), AF_PACKET raw sockets and the
// testbed's UDP sockets. All three are non-blocking descriptors read and
// written one frame per system call.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

#include "fabric/live/endpoint.h"

namespace fathom::live {
namespace {

std::string Errno(const std::string& call) { return call + ": " + std::strerror(errno); }

// Writes the full TCP or UDP checksum (RFC 768, RFC 793, RFC 8200 section
// 8.1: over the pseudo-header and the segment) of an IPv4 or IPv6 frame
// whose sender left it to offload. Frames of other kinds are left alone.
void CompleteL4Checksum(uint8_t* f, size_t len) {
  if (len < 14) return;
  size_t l3 = 14;
  uint16_t type = static_cast<uint16_t>(f[12] << 8 | f[13]);
  if (type == 0x8100 && len >= 18) {
    type = static_cast<uint16_t>(f[16] << 8 | f[17]);
    l3 = 18;
  }
  uint64_t sum = 0;
  auto add = [&sum](const uint8_t* p, size_t n) {
    for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
    if (n & 1) sum += static_cast<uint32_t>(p[n - 1] << 8);
  };
  const uint8_t* ip = f + l3;
  size_t l4 = 0, l4_len = 0;
  uint8_t proto = 0;
  if (type == 0x0800 && len >= l3 + 20) {
    const size_t ihl = (ip[0] & 0xFu) * 4;
    const size_t total = static_cast<size_t>(ip[2] << 8 | ip[3]);
    if (ihl < 20 || total < ihl || l3 + total > len) return;
    proto = ip[9];
    l4 = l3 + ihl;
    l4_len = total - ihl;
    add(ip + 12, 8);  // source and destination addresses
  } else if (type == 0x86DD && len >= l3 + 40) {
    const size_t payload = static_cast<size_t>(ip[4] << 8 | ip[5]);
    if (l3 + 40 + payload > len) return;
    proto = ip[6];
    l4 = l3 + 40;
    l4_len = payload;
    add(ip + 8, 32);
  } else {
    return;
  }
  size_t at;  // the checksum field's offset in the segment
  if (proto == 17 && l4_len >= 8) {
    at = 6;
  } else if (proto == 6 && l4_len >= 20) {
    at = 16;
  } else {
    return;
  }
  sum += proto;
  sum += l4_len;
  f[l4 + at] = 0;
  f[l4 + at + 1] = 0;
  add(f + l4, l4_len);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  uint16_t c = static_cast<uint16_t>(~sum);
  if (c == 0 && proto == 17) c = 0xFFFF;  // UDP: 0 means "no checksum"
  f[l4 + at] = static_cast<uint8_t>(c >> 8);
  f[l4 + at + 1] = static_cast<uint8_t>(c);
}

// A non-blocking descriptor that carries one Ethernet frame per read/write.
class FdEndpoint : public Endpoint {
 public:
  FdEndpoint(std::string spec, int fd) : spec_(std::move(spec)), fd_(fd) {}
  ~FdEndpoint() override {
    if (fd_ >= 0) close(fd_);
  }
  const std::string& spec() const override { return spec_; }
  int fd() const override { return fd_; }
  int Receive(FramePool& pool, Frame** out, int max) override {
    int n = 0;
    while (n < max) {
      Frame* f = pool.Alloc();
      if (f == nullptr) break;
      const ssize_t got = ReadOne(f->data, FramePool::kFrameBytes);
      if (got <= 0) {
        pool.Unref(f);
        break;
      }
      f->len = static_cast<uint32_t>(got);
      out[n++] = f;
    }
    return n;
  }
  int Transmit(Frame* const* frames, int n) override {
    int sent = 0;
    for (int i = 0; i < n; ++i) {
      if (WriteOne(frames[i]->data, frames[i]->len) == static_cast<ssize_t>(frames[i]->len)) {
        ++sent;
      }
    }
    return sent;
  }

 protected:
  virtual ssize_t ReadOne(uint8_t* buf, size_t cap) { return read(fd_, buf, cap); }
  virtual ssize_t WriteOne(const uint8_t* buf, size_t len) { return write(fd_, buf, len); }
  // Reads the kernel's count of frames this socket's queue dropped, which
  // rides on every datagram (SO_RXQ_OVFL, socket(7)).
  void NoteOverflow(msghdr& msg) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
        uint32_t dropped;
        std::memcpy(&dropped, CMSG_DATA(c), sizeof(dropped));
        overflows_ = dropped;
      }
    }
  }
  uint64_t rx_overflows() const override { return overflows_; }
  std::string spec_;
  int fd_;
  uint64_t overflows_ = 0;
};

StatusOr<std::unique_ptr<Endpoint>> OpenTap(const std::string& spec, const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) {
    return InvalidArgument("endpoint " + spec + ": interface name must be 1.." +
                           std::to_string(IFNAMSIZ - 1) + " characters");
  }
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return IoError("endpoint " + spec + ": " + Errno("open(/dev/net/tun)"));
  ifreq ifr{};
  // IFF_NO_PI: plain Ethernet frames, no packet-information prefix. Not
  // persistent: the device goes away when the descriptor closes, whatever
  // namespace it was moved to, so an exit leaves no TAP behind.
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
    const std::string e = Errno("ioctl(TUNSETIFF, " + name + ")");
    close(fd);
    return IoError("endpoint " + spec + ": " + e);
  }
  return std::unique_ptr<Endpoint>(new FdEndpoint(spec, fd));
}

StatusOr<std::unique_ptr<Endpoint>> OpenRaw(const std::string& spec, const std::string& name) {
  const unsigned index = if_nametoindex(name.c_str());
  if (index == 0) return IoError("endpoint " + spec + ": " + Errno("if_nametoindex(" + name + ")"));
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) return IoError("endpoint " + spec + ": " + Errno("socket(AF_PACKET)"));
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(index);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) < 0) {
    const std::string e = Errno("bind(AF_PACKET, " + name + ")");
    close(fd);
    return IoError("endpoint " + spec + ": " + e);
  }
  // The kernel says, per frame, when a local sender left its L4 checksum to
  // offload (a veth does): the frame then holds only the partial sum, which
  // its receiver would reject, so the endpoint completes it (packet(7)
  // PACKET_AUXDATA, TP_STATUS_CSUMNOTREADY).
  const int one = 1;
  setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
  // A deep receive queue, as for the UDP endpoints.
  const int bytes = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }
  // The socket also sees what it sends itself (PACKET_OUTGOING): ReadOne
  // skips those, or every frame would loop back into the fabric.
  class Raw : public FdEndpoint {
   public:
    using FdEndpoint::FdEndpoint;
    ssize_t ReadOne(uint8_t* buf, size_t cap) override {
      for (;;) {
        sockaddr_ll from{};
        iovec iov{buf, cap};
        alignas(cmsghdr) char
            control[CMSG_SPACE(sizeof(tpacket_auxdata)) + CMSG_SPACE(sizeof(uint32_t))];
        msghdr msg{};
        msg.msg_name = &from;
        msg.msg_namelen = sizeof(from);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        const ssize_t got = recvmsg(fd_, &msg, 0);
        if (got <= 0) return got;
        NoteOverflow(msg);
        if (from.sll_pkttype == PACKET_OUTGOING) continue;
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
          if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
          tpacket_auxdata aux;
          std::memcpy(&aux, CMSG_DATA(c), sizeof(aux));
          if ((aux.tp_status & TP_STATUS_CSUMNOTREADY) != 0) {
            CompleteL4Checksum(buf, static_cast<size_t>(got));
          }
        }
        return got;
      }
    }
  };
  return std::unique_ptr<Endpoint>(new Raw(spec, fd));
}

StatusOr<std::unique_ptr<Endpoint>> OpenUdp(const std::string& spec, std::string_view args) {
  const size_t colon = args.find(':');
  uint16_t ports[2] = {0, 0};
  std::string_view parts[2] = {args.substr(0, colon),
                               colon == std::string_view::npos ? "" : args.substr(colon + 1)};
  for (int i = 0; i < 2; ++i) {
    const auto [end, ec] =
        std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), ports[i]);
    if (ec != std::errc() || end != parts[i].data() + parts[i].size() || ports[i] == 0) {
      return InvalidArgument("endpoint " + spec +
                             ": expected udp:LISTEN_PORT:PEER_PORT (1..65535)");
    }
  }
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return IoError("endpoint " + spec + ": " + Errno("socket(AF_INET)"));
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  local.sin_port = htons(ports[0]);
  // A deep receive queue: a VM's burst waits here for the loop's next turn
  // rather than overflowing the default (about 200 KiB).
  const int bytes = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }
  sockaddr_in peer = local;
  peer.sin_port = htons(ports[1]);
  // Connected: the socket sends to the VM's port and receives only from it.
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) < 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) < 0) {
    const std::string e = Errno("bind/connect(127.0.0.1:" + std::to_string(ports[0]) + ")");
    close(fd);
    return IoError("endpoint " + spec + ": " + e);
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
  class Udp : public FdEndpoint {
   public:
    using FdEndpoint::FdEndpoint;
    ssize_t ReadOne(uint8_t* buf, size_t cap) override {
      iovec iov{buf, cap};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint32_t))];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      const ssize_t got = recvmsg(fd_, &msg, 0);
      if (got > 0) NoteOverflow(msg);
      return got;
    }
  };
  return std::unique_ptr<Endpoint>(new Udp(spec, fd));
}

}  // namespace

StatusOr<std::unique_ptr<Endpoint>> OpenEndpoint(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string args = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "tap") return OpenTap(spec, args);
  if (kind == "raw") return OpenRaw(spec, args);
  if (kind == "udp") return OpenUdp(spec, args);
  if (kind == "dpdk") return OpenDpdkEndpoint(spec, args);
  return InvalidArgument("endpoint " + spec + ": unknown kind '" + kind +
                         "' (tap:IFNAME, raw:IFNAME, udp:LISTEN:PEER, dpdk:VDEV)");
}

}  // namespace fathom::live
