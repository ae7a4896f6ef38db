// A real TCP client that sends a bootstrap root the messages it must survive
// (transport/bootstrap/bootstrap.h): garbage, an oversized length prefix, a
// Hello of the wrong protocol version and a Hello with the wrong token. The
// vm tests run it in one VM against a root in the other while the real ranks
// bootstrap. For each message it waits for the root's answer and prints one
// line, "<kind>: root answered Error: <reason>", or "<kind>: FAILED: <why>".
// Exit 0 when the root answered every message with an Error, 1 otherwise,
// 2 on bad usage.
//
// usage: bootstrap_hostile_client ADDR PORT [garbage|oversized|claim|version|token]...
// (no kinds = garbage, oversized, version, token)
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/framing.h"

namespace {

namespace tb = fathom::transport::bootstrap;

// Connects, retrying for up to `wait` while the root is not listening yet.
int ConnectWithRetry(const std::string& addr, const std::string& port, std::chrono::seconds wait,
                     std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (const int rc = getaddrinfo(addr.c_str(), port.c_str(), &hints, &res); rc != 0) {
      *error = "getaddrinfo(" + addr + ":" + port + "): " + gai_strerror(rc);
      return -1;
    }
    int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    *error = "connect(" + addr + ":" + port + "): " + std::strerror(errno);
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

bool ReadAll(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t got = recv(fd, p, n, 0);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// Sends `bytes`, then reads one frame; the root must answer with an Error.
bool Probe(const std::string& kind, const std::string& addr, const std::string& port,
           const std::string& bytes) {
  std::string error;
  const int fd = ConnectWithRetry(addr, port, std::chrono::seconds(120), &error);
  if (fd < 0) {
    std::printf("%s: FAILED: %s\n", kind.c_str(), error.c_str());
    return false;
  }
  timeval tv{20, 0};  // the root answers at once; this only bounds a broken root
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  bool ok = false;
  if (send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    std::printf("%s: FAILED: send %zu bytes: %s\n", kind.c_str(), bytes.size(),
                std::strerror(errno));
  } else {
    std::array<uint8_t, tb::kFrameHeaderBytes> header;
    if (!ReadAll(fd, header.data(), header.size())) {
      std::printf(
          "%s: FAILED: the root closed the connection (or stayed silent for 20 s) "
          "without an Error\n",
          kind.c_str());
    } else if (auto len = tb::DecodeFrameHeader(header, tb::kDefaultMaxMessageBytes); !len.ok()) {
      std::printf("%s: FAILED: the root's answer: %s\n", kind.c_str(),
                  len.status().ToString().c_str());
    } else {
      std::vector<uint8_t> body(*len);
      auto env = ReadAll(fd, body.data(), body.size())
                     ? tb::ParseFrameBody(body)
                     : fathom::StatusOr<fathom::proto::Envelope>(
                           fathom::IoError("the root closed the connection mid-frame"));
      if (!env.ok()) {
        std::printf("%s: FAILED: %s\n", kind.c_str(), env.status().ToString().c_str());
      } else if (!env->has_error()) {
        std::printf("%s: FAILED: the root answered %s, not Error\n", kind.c_str(),
                    tb::BodyName(*env).c_str());
      } else {
        std::printf("%s: root answered Error: %s\n", kind.c_str(), env->error().reason().c_str());
        ok = true;
      }
    }
  }
  close(fd);
  std::fflush(stdout);
  return ok;
}

std::string Hello(uint32_t version, const std::string& token) {
  fathom::proto::Envelope e;
  auto* h = e.mutable_hello();
  h->set_version(version);
  h->set_rank(1);
  h->set_world_size(2);
  h->set_token(token);
  return tb::EncodeFrame(e);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s ADDR PORT [garbage|oversized|claim|version|token]... "
                 "(default: all but claim)\n",
                 argv[0]);
    return 2;
  }
  const std::string addr = argv[1], port = argv[2];
  std::vector<std::string> kinds(argv + 3, argv + argc);
  if (kinds.empty()) kinds = {"garbage", "oversized", "version", "token"};
  bool all_ok = true;
  for (const std::string& kind : kinds) {
    std::string bytes;
    if (kind == "garbage") {
      // What a port scanner or a misdirected perftest client would send.
      bytes = "GET / HTTP/1.0\r\n\r\n";
    } else if (kind == "oversized") {
      // A valid magic and a 2 GiB length: the root must not try to read it.
      bytes = {'F', 'T', 'H', 'B', '\x7f', '\xff', '\xff', '\xff'};
    } else if (kind == "claim") {
      // A valid magic and a length the root accepts from a rank (1 MiB), but
      // no Hello yet: the root must refuse it on the header (issue 24).
      bytes = {'F', 'T', 'H', 'B', '\x00', '\x10', '\x00', '\x00'};
    } else if (kind == "version") {
      bytes = Hello(tb::kProtocolVersion + 41, "");
    } else if (kind == "token") {
      bytes = Hello(tb::kProtocolVersion, "not-the-token");
    } else {
      std::fprintf(stderr, "%s: unknown kind %s\n", argv[0], kind.c_str());
      return 2;
    }
    all_ok = Probe(kind, addr, port, bytes) && all_ok;
  }
  return all_ok ? 0 : 1;
}
