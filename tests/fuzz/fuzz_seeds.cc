// Writes the fuzzers' seed corpora from a capture (run by ctest as a fixture
// before the fuzz tests):
//   fuzz_seeds CAPTURE PARSE_DIR PCAP_DIR
// PARSE_DIR gets one file per distinct frame of CAPTURE; PCAP_DIR gets a
// small pcap (the first frames of CAPTURE) and the same frames re-encoded as
// pcapng with several if_tsresol values (powers of 10 and of 2, absent,
// with an if_tsoffset, and huge timestamps), so that the capture-file fuzzer
// starts inside libpcap's pcapng reader and fathom's timestamp conversion
// rather than having to discover the pcapng block structure itself.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fabric/wire/pcap.h"
#include "tests/wire/pcapng_encode.h"

namespace {

__extension__ typedef unsigned __int128 Uint128;  // __extension__: -Wpedantic

struct Frame {
  int64_t timestamp_ns;
  std::vector<uint8_t> bytes;
};

// `ns` in units of the raw if_tsresol byte (10^-n or 2^-n seconds), wrapping
// like the 64-bit field does.
uint64_t InResolution(int64_t ns, std::optional<uint8_t> tsresol) {
  const uint8_t r = tsresol.value_or(6);
  const Uint128 v = static_cast<Uint128>(ns);
  if (r & 0x80) return static_cast<uint64_t>((v << (r & 0x7F)) / 1000000000);
  Uint128 scaled = v;
  for (int i = 9; i > r; --i) scaled /= 10;
  for (int i = 9; i < r; ++i) scaled *= 10;
  return static_cast<uint64_t>(scaled);
}

bool WriteFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

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
  std::vector<Frame> first;  // the first frames, for the pcapng seeds
  PcapRecord record;
  int index = 0;
  while (true) {
    auto more = (*reader)->Next(&record);
    if (!more.ok()) {
      std::fprintf(stderr, "fuzz_seeds: %s\n", more.status().message().c_str());
      return 2;
    }
    if (!*more) break;
    if (index < 12) {
      if (!(*writer)->Write(record.data, record.timestamp_ns).ok()) return 2;
      first.push_back({record.timestamp_ns, {record.data.begin(), record.data.end()}});
    }
    ++index;
    std::vector<uint8_t> bytes(record.data.begin(), record.data.end());
    if (!seen.insert(bytes).second) continue;
    if (!WriteFile(parse_dir + "/frame" + std::to_string(index),
                   std::string(bytes.begin(), bytes.end()))) {
      return 2;
    }
  }
  struct Variant {
    const char* name;
    std::optional<uint8_t> tsresol;
    std::optional<int64_t> tsoffset;
    bool huge;  // every other timestamp near 2^64
  };
  const Variant variants[] = {
      {"default_us", std::nullopt, std::nullopt, false},
      {"s", 0, std::nullopt, false},
      {"s_huge", 0, std::nullopt, true},
      {"ms", 3, std::nullopt, false},
      {"ns", 9, std::nullopt, false},
      {"ns_huge", 9, std::nullopt, true},
      {"e19", 19, std::nullopt, false},
      {"b10", 0x80 | 10, std::nullopt, false},
      {"b30", 0x80 | 30, std::nullopt, false},
      {"b63_huge", 0x80 | 63, std::nullopt, true},
      {"us_offset", 6, -1'700'000'000, false},
  };
  int pcapng = 0;
  for (const Variant& v : variants) {
    fathom::wire::testing::PcapngEncoder enc(v.tsresol, v.tsoffset);
    for (size_t i = 0; i < first.size(); ++i) {
      const uint64_t raw =
          v.huge && i % 2 == 1 ? ~uint64_t{0} - i : InResolution(first[i].timestamp_ns, v.tsresol);
      enc.AddPacket(raw, first[i].bytes);
    }
    if (!WriteFile(pcap_dir + "/seed_" + v.name + ".pcapng", enc.bytes())) return 2;
    ++pcapng;
  }
  std::printf("fuzz_seeds: %zu distinct frames of %d; %d pcapng seeds\n", seen.size(), index,
              pcapng);
  return 0;
}
