#include "fabric/live/control_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

namespace fathom::live {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

struct ControlServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  Handler handler;

  void Accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;  // closed: the server is stopping
      Serve(std::move(socket));
      Accept();
    });
  }
  // One connection, synchronously (control traffic is light): requests
  // until the client closes.
  void Serve(tcp::socket socket) {
    boost::beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      boost::system::error_code ec;
      http::read(socket, buffer, req, ec);
      if (ec) return;
      ControlRequest r{std::string(req.method_string()), std::string(req.target()), req.body()};
      std::future<ControlReply> f = handler(std::move(r));
      ControlReply reply;
      if (f.wait_for(std::chrono::seconds(10)) == std::future_status::ready) {
        reply = f.get();
      } else {
        reply = {503, "text/plain; charset=utf-8", "the emulator's loop did not answer\n"};
      }
      http::response<http::string_body> res{static_cast<http::status>(reply.status), req.version()};
      res.set(http::field::server, "fathom-emulate");
      res.set(http::field::content_type, reply.content_type);
      res.keep_alive(req.keep_alive());
      res.body() = std::move(reply.body);
      res.prepare_payload();
      http::write(socket, res, ec);
      if (ec || !res.keep_alive()) return;
    }
  }
};

StatusOr<std::unique_ptr<ControlServer>> ControlServer::Start(const std::string& address,
                                                              uint16_t port, Handler handler) {
  std::unique_ptr<ControlServer> s(new ControlServer());
  s->impl_ = std::make_unique<Impl>();
  s->impl_->handler = std::move(handler);
  boost::system::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(address, ec);
  if (ec) return InvalidArgument("--listen " + address + ": not an IP address");
  tcp::acceptor& a = s->impl_->acceptor;
  const tcp::endpoint ep(addr, port);
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return IoError("--listen " + address + ":" + std::to_string(port) + ": " + ec.message());
  }
  s->port_ = a.local_endpoint().port();
  s->impl_->Accept();
  s->thread_ = std::thread([impl = s->impl_.get()] { impl->io.run(); });
  return s;
}

ControlServer::~ControlServer() {
  if (impl_ != nullptr) {
    asio::post(impl_->io, [impl = impl_.get()] {
      boost::system::error_code ec;
      impl->acceptor.close(ec);
      impl->io.stop();
    });
  }
  if (thread_.joinable()) thread_.join();
}

StatusOr<ControlReply> ControlRequestTo(const std::string& host, uint16_t port,
                                        const ControlRequest& request) {
  asio::io_context io;
  tcp::socket socket(io);
  boost::system::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(host, ec);
  if (ec) return InvalidArgument("--server " + host + ": not an IP address");
  socket.connect(tcp::endpoint(addr, port), ec);
  const std::string where = host + ":" + std::to_string(port);
  if (ec)
    return Unavailable("connect(" + where + "): " + ec.message() + " (is fathom emulate running?)");
  http::request<http::string_body> req{http::string_to_verb(request.method), request.target, 11};
  req.set(http::field::host, host);
  req.set(http::field::content_type, "application/yaml");
  req.body() = request.body;
  req.prepare_payload();
  http::write(socket, req, ec);
  if (ec) return IoError("write to " + where + ": " + ec.message());
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res, ec);
  if (ec) return IoError("read from " + where + ": " + ec.message());
  ControlReply reply;
  reply.status = static_cast<int>(res.result_int());
  reply.body = res.body();
  return reply;
}

}  // namespace fathom::live
