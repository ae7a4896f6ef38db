// Writes the fuzzers' seed corpora from a capture (run by ctest as a fixture
// before the fuzz tests):
//   fuzz_seeds CAPTURE PARSE_DIR PCAP_DIR
// PARSE_DIR gets one file per distinct frame of CAPTURE; PCAP_DIR gets a
// small pcap (the first frames of CAPTURE) to seed the capture-file fuzzer.
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "fabric/wire/pcap.h"

int main(int argc, char** argv) {
  using namespace fathom::wire;
  if (argc != 4) {
    std::fprintf(stderr, "usage: fuzz_seeds CAPTURE PARSE_DIR PCAP_DIR\n");
    return 2;
  }
  const std::string parse_dir = argv[2];
  const std::string pcap_dir = argv[3];
  std::error_code ec;
  std::filesystem::create_directories(parse_dir, ec);
  std::filesystem::create_directories(pcap_dir, ec);
  if (ec) {
    std::fprintf(stderr, "fuzz_seeds: cannot create %s: %s\n", pcap_dir.c_str(),
                 ec.message().c_str());
    return 2;
  }
  auto reader = PcapReader::Open(argv[1]);
  if (!reader.ok()) {
    std::fprintf(stderr, "fuzz_seeds: %s\n", reader.status().message().c_str());
    return 2;
  }
  auto writer = PcapWriter::Open(pcap_dir + "/seed.pcap");
  if (!writer.ok()) {
    std::fprintf(stderr, "fuzz_seeds: %s\n", writer.status().message().c_str());
    return 2;
  }
  std::set<std::vector<uint8_t>> seen;
  PcapRecord record;
  int index = 0;
  while (true) {
    auto more = (*reader)->Next(&record);
    if (!more.ok()) {
      std::fprintf(stderr, "fuzz_seeds: %s\n", more.status().message().c_str());
      return 2;
    }
    if (!*more) break;
    if (index < 12 && !(*writer)->Write(record.data, record.timestamp_ns).ok()) return 2;
    ++index;
    std::vector<uint8_t> bytes(record.data.begin(), record.data.end());
    if (!seen.insert(bytes).second) continue;
    const std::string name = parse_dir + "/frame" + std::to_string(index);
    FILE* f = std::fopen(name.c_str(), "wb");
    if (f == nullptr) return 2;
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  std::printf("fuzz_seeds: %zu distinct frames of %d\n", seen.size(), index);
  return 0;
}
