// The emulator's HTTP endpoint (Boost.Beast): Prometheus metrics and the
// run-time controls (faults, captures) of Emulator::Control, and the client
// `fathom emulate ctl` uses. The server runs one thread of its own and
// answers one connection at a time; every request is handed to the
// emulator's loop, which answers between two turns.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "fabric/live/emulator.h"

namespace fathom::live {

class ControlServer {
 public:
  using Handler = std::function<std::future<ControlReply>(ControlRequest)>;
  // Listens on address:port (port 0: a free one; see port()). IoError naming
  // the address when it cannot bind.
  static StatusOr<std::unique_ptr<ControlServer>> Start(const std::string& address, uint16_t port,
                                                        Handler handler);
  ~ControlServer();  // stops the thread
  uint16_t port() const { return port_; }

 private:
  struct Impl;
  ControlServer() = default;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  uint16_t port_ = 0;
};

// One HTTP/1.1 request to the emulator at host:port; Unavailable naming the
// address when it cannot connect.
StatusOr<ControlReply> ControlRequestTo(const std::string& host, uint16_t port,
                                        const ControlRequest& request);

}  // namespace fathom::live
