// Writes little-endian pcapng files byte by byte from the format's
// definition (draft-ietf-opsawg-pcapng: SHB, IDB with if_tsresol and
// if_tsoffset, EPB), so that tests and fuzz seeds can craft any timestamp
// resolution and value without going through libpcap, which only writes
// classic pcap. Header-only, no gtest: tests/fuzz/fuzz_seeds.cc uses it too.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace fathom::wire::testing {

class PcapngEncoder {
 public:
  // One section, one Ethernet interface. `tsresol` is the raw if_tsresol
  // byte: 0..19 for 10^-n seconds, 0x80|n for 2^-n; nullopt leaves the
  // option out (the format's default is microseconds).
  explicit PcapngEncoder(std::optional<uint8_t> tsresol,
                         std::optional<int64_t> tsoffset_seconds = std::nullopt) {
    Put32(0x0A0D0D0A);  // Section Header Block
    Put32(28);
    Put32(0x1A2B3C4D);  // byte-order magic
    Put16(1);           // version 1.0
    Put16(0);
    Put64(~0ull);  // section length unknown
    Put32(28);
    uint32_t options = 4;  // opt_endofopt
    if (tsresol) options += 8;
    if (tsoffset_seconds) options += 12;
    const uint32_t idb_length = 20 + options;
    Put32(1);  // Interface Description Block
    Put32(idb_length);
    Put16(1);  // LINKTYPE_ETHERNET
    Put16(0);
    Put32(262144);  // snaplen
    if (tsresol) {
      Put16(9);  // if_tsresol
      Put16(1);
      bytes_.push_back(static_cast<char>(*tsresol));
      bytes_.append(3, '\0');
    }
    if (tsoffset_seconds) {
      Put16(14);  // if_tsoffset
      Put16(8);
      Put64(static_cast<uint64_t>(*tsoffset_seconds));
    }
    Put32(0);  // opt_endofopt
    Put32(idb_length);
  }

  // An Enhanced Packet Block on interface 0 with the raw 64-bit timestamp.
  void AddPacket(uint64_t timestamp, std::span<const uint8_t> frame) {
    const uint32_t padded = (static_cast<uint32_t>(frame.size()) + 3) & ~3u;
    const uint32_t length = 32 + padded;
    Put32(6);
    Put32(length);
    Put32(0);
    Put32(static_cast<uint32_t>(timestamp >> 32));
    Put32(static_cast<uint32_t>(timestamp));
    Put32(static_cast<uint32_t>(frame.size()));
    Put32(static_cast<uint32_t>(frame.size()));
    bytes_.append(reinterpret_cast<const char*>(frame.data()), frame.size());
    bytes_.append(padded - frame.size(), '\0');
    Put32(length);
  }

  const std::string& bytes() const { return bytes_; }

 private:
  void Put16(uint16_t v) {
    for (int i = 0; i < 2; ++i) bytes_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void Put32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void Put64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<char>(v >> (8 * i)));
  }

  std::string bytes_;
};

}  // namespace fathom::wire::testing
