// libFuzzer target for capture files: each input is written to a temporary
// file and read through PcapReader (libpcap: pcap and pcapng) and the codec,
// as `fathom decode` does. Errors are expected; crashes and sanitizer
// reports are not.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "fabric/wire/capture_stats.h"
#include "fabric/wire/pcap.h"
#include "fabric/wire/roce.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fathom::wire;
  static const std::string path = "/tmp/fathom_pcap_fuzz_" + std::to_string(getpid()) + ".pcap";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto reader = PcapReader::Open(path);
  if (!reader.ok()) return 0;
  CaptureStats stats;
  PcapRecord record;
  for (int i = 0; i < 10000; ++i) {
    auto more = (*reader)->Next(&record);
    if (!more.ok() || !*more) break;
    stats.Add(Parse(record.data));
  }
  return 0;
}
