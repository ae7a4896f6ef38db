// Writes the seed corpus of bootstrap_fuzz (run by ctest as a fixture):
//   bootstrap_fuzz_seeds DIR
// Each seed is a script in bootstrap_fuzz's format: a world size byte, a
// token byte, then operations (op byte = peer + 4 * kind, then arguments):
// a whole run of two ranks, a Hello sent as raw bytes in small pieces,
// garbage, an oversized header, a rank that vanishes, and an abort.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/framing.h"

namespace {

namespace tb = fathom::transport::bootstrap;

constexpr int kPeers = 4;
enum Kind { kRaw = 0, kHello = 2, kGather = 3, kOther = 4, kGone = 5, kHelloDeadline = 6 };

std::string Op(int peer, Kind kind) {
  return std::string(1, static_cast<char>(peer + kPeers * kind));
}
std::string B(int v) { return std::string(1, static_cast<char>(v)); }

// Raw bytes for `peer`, delivered `piece` at a time (at most 255 bytes).
std::string Raw(int peer, const std::string& bytes, int piece) {
  return Op(peer, kRaw) + B(piece - 1) + B(static_cast<int>(bytes.size())) + bytes;
}
// A correct Hello of `rank` (the fuzzer's encoding: rank = b % 6 - 1).
std::string Hello(int peer, int rank) { return Op(peer, kHello) + B(rank + 1); }
std::string Gather(int peer, int seq, int payload) {
  return Op(peer, kGather) + B(seq) + B(payload);
}
std::string Goodbye(int peer) { return Op(peer, kOther) + B(0); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bootstrap_fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "bootstrap_fuzz_seeds: cannot create %s: %s\n", dir.c_str(),
                 ec.message().c_str());
    return 2;
  }
  fathom::proto::Envelope hello;
  hello.mutable_hello()->set_version(tb::kProtocolVersion);
  hello.mutable_hello()->set_rank(0);
  hello.mutable_hello()->set_world_size(1);
  fathom::proto::Envelope gather;
  gather.mutable_gather()->set_seq(0);
  gather.mutable_gather()->set_payload("endpoint");

  const std::string world2 = B(1) + B(0);
  const std::vector<std::pair<std::string, std::string>> seeds = {
      {"two_ranks", world2 + Hello(0, 0) + Hello(1, 1) + Gather(0, 0, 10) + Gather(1, 0, 20) +
                        Gather(1, 1, 0) + Gather(0, 1, 0) + Goodbye(0) + Goodbye(1)},
      {"raw_hello", B(0) + B(0) + Raw(0, tb::EncodeFrame(hello), 3) +
                        Raw(0, tb::EncodeFrame(gather), 5) + Goodbye(0)},
      {"garbage", world2 + Raw(2, "GET / HTTP/1.0\r\n\r\n", 16) + Hello(0, 0)},
      {"oversized", world2 + Raw(3, std::string("FTHB\x7f\xff\xff\xff", 8), 8) + Hello(1, 1)},
      {"vanishing_rank", world2 + Hello(0, 0) + Hello(1, 1) + Gather(0, 0, 5) + Op(1, kGone)},
      {"stranger_deadline", world2 + Raw(2, std::string("FTHB\x00\x00\x00\x40", 8), 8) +
                                Op(2, kHelloDeadline) + Hello(0, 0)},
      {"abort", B(2) + B(1) + Op(0, kHello) + B(1) + Op(0, kOther) + B(1 + 5 * 4) + "down"},
  };
  for (const auto& [name, bytes] : seeds) {
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
      std::fprintf(stderr, "bootstrap_fuzz_seeds: cannot write %s\n", path.c_str());
      return 2;
    }
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  std::printf("bootstrap_fuzz_seeds: %zu seeds in %s\n", seeds.size(), dir.c_str());
  return 0;
}
