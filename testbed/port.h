// A switch port: where Ethernet frames enter and leave the host-side switch.
// The switch sees only this interface, so a qemu UDP socket (UdpPort, here), a
// TAP device or a DPDK port can stand behind it. A Port is owned by the Switch
// it is added to and lives on that switch's io_context thread: Send and the
// receive callback run on that thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace fathom::testbed {

class Port {
 public:
  // Called once per received frame; the span is valid during the call only.
  using Receiver = std::function<void(std::span<const uint8_t> frame)>;

  virtual ~Port() = default;

  // A name for counters and messages, e.g. "vm0".
  virtual const std::string& Name() const = 0;
  // Starts delivering received frames to `receiver`.
  virtual void Start(Receiver receiver) = 0;
  // Transmits one frame. Returns false when the frame could not be handed to
  // the medium (no peer known yet, socket error); the switch counts a drop.
  virtual bool Send(std::span<const uint8_t> frame) = 0;
  // Stops receiving; pending handlers complete with an error and are ignored.
  virtual void Close() = 0;
};

// A VM's netdev (`-netdev dgram` on a socket the testbed connected to
// 127.0.0.1:SWITCH, testbed.cc VmSocket) sends each Ethernet frame as one UDP
// datagram (TESTBED.md). A UdpPort binds the SWITCH end on 127.0.0.1 (port 0 =
// allocated by the kernel, so testbeds never clash) and sends to the peer it
// last heard from, unless a fixed peer is given.
class UdpPort : public Port {
 public:
  // Binds 127.0.0.1:`local_port`. `peer_port` 0 means "learn the peer from the
  // first datagram" (the VM's socket has an ephemeral port).
  static StatusOr<std::unique_ptr<UdpPort>> Open(boost::asio::io_context& io, std::string name,
                                                 uint16_t local_port = 0, uint16_t peer_port = 0);
  ~UdpPort() override;

  uint16_t LocalPort() const { return local_port_; }
  const std::string& Name() const override { return name_; }
  void Start(Receiver receiver) override;
  bool Send(std::span<const uint8_t> frame) override;
  void Close() override;

 private:
  UdpPort(boost::asio::io_context& io, std::string name);
  void ReceiveNext();

  std::string name_;
  boost::asio::ip::udp::socket socket_;
  uint16_t local_port_ = 0;
  bool peer_known_ = false;
  bool peer_fixed_ = false;
  boost::asio::ip::udp::endpoint peer_;
  boost::asio::ip::udp::endpoint sender_;  // written by async_receive_from
  std::vector<uint8_t> buffer_;
  Receiver receiver_;
};

}  // namespace fathom::testbed
