#include "testbed/port.h"

#include <fcntl.h>

#include <boost/asio/ip/address_v4.hpp>

namespace fathom::testbed {

namespace asio = boost::asio;
using asio::ip::udp;

// Jumbo frames up to MTU 9000 plus headers; qemu never sends more.
constexpr size_t kMaxDatagramBytes = 65536;

UdpPort::UdpPort(asio::io_context& io, std::string name)
    : name_(std::move(name)), socket_(io), buffer_(kMaxDatagramBytes) {}

UdpPort::~UdpPort() { Close(); }

StatusOr<std::unique_ptr<UdpPort>> UdpPort::Open(asio::io_context& io, std::string name,
                                                 uint16_t local_port, uint16_t peer_port) {
  std::unique_ptr<UdpPort> port(new UdpPort(io, std::move(name)));
  boost::system::error_code ec;
  const udp::endpoint local(asio::ip::address_v4::loopback(), local_port);
  port->socket_.open(udp::v4(), ec);
  // Not inherited by the processes the testbed starts (qemu, shells): a
  // child holding the switch's port would keep it bound after the switch
  // closes it. Asio opens sockets without SOCK_CLOEXEC.
  if (!ec && fcntl(port->socket_.native_handle(), F_SETFD, FD_CLOEXEC) != 0) {
    ec = boost::system::error_code(errno, boost::system::system_category());
  }
  if (!ec) port->socket_.bind(local, ec);
  if (ec) {
    return IoError("UdpPort::Open(" + port->name_ +
                   ") bind 127.0.0.1:" + std::to_string(local_port) + ": " + ec.message());
  }
  // Bursts from rxe (a whole message of MTU frames) must not overflow the
  // default socket buffer while the switch thread is busy.
  port->socket_.set_option(asio::socket_base::receive_buffer_size(4 << 20), ec);
  port->local_port_ = port->socket_.local_endpoint(ec).port();
  if (peer_port != 0) {
    port->peer_ = udp::endpoint(asio::ip::address_v4::loopback(), peer_port);
    port->peer_known_ = true;
    port->peer_fixed_ = true;
  }
  return port;
}

void UdpPort::Start(Receiver receiver) {
  receiver_ = std::move(receiver);
  ReceiveNext();
}

void UdpPort::ReceiveNext() {
  socket_.async_receive_from(asio::buffer(buffer_), sender_,
                             [this](const boost::system::error_code& ec, size_t n) {
                               if (ec == asio::error::operation_aborted || !socket_.is_open())
                                 return;
                               if (!ec) {
                                 if (!peer_fixed_) {
                                   peer_ = sender_;
                                   peer_known_ = true;
                                 }
                                 if (receiver_)
                                   receiver_(std::span<const uint8_t>(buffer_.data(), n));
                               }
                               // Errors on a UDP socket (e.g. ICMP port unreachable reported as
                               // ECONNREFUSED) are transient: keep receiving.
                               ReceiveNext();
                             });
}

bool UdpPort::Send(std::span<const uint8_t> frame) {
  if (!peer_known_ || !socket_.is_open()) return false;
  boost::system::error_code ec;
  // Blocking send_to on loopback: completes immediately or fails (ENOBUFS),
  // and keeps frames in order without a queue per port.
  socket_.send_to(asio::buffer(frame.data(), frame.size()), peer_, 0, ec);
  return !ec;
}

void UdpPort::Close() {
  if (socket_.is_open()) {
    boost::system::error_code ec;
    socket_.close(ec);
  }
}

}  // namespace fathom::testbed
