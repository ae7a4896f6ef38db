// Capture file I/O through libpcap: reading pcap and pcapng (any link type; the
// caller checks linktype()), writing LINKTYPE_ETHERNET pcap with microsecond or
// nanosecond timestamps. Used by `fathom decode`, the tests and the
// simulator's per-port captures.
//
// Ownership: each reader/writer owns its libpcap handle and closes it on
// destruction. A PcapRecord's data points into the reader's buffer and is
// valid until the next call to Next() or until the reader is destroyed.
// Neither class is thread-safe; use one per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"

namespace fathom::wire {

// DLT/LINKTYPE numbers from pcap-linktype(7).
inline constexpr int kLinktypeEthernet = 1;

struct PcapRecord {
  int64_t timestamp_ns = 0;       // since the Unix epoch
  std::span<const uint8_t> data;  // the captured bytes (may be < original_length)
  uint32_t original_length = 0;   // the frame's length on the wire
};

class PcapReader {
 public:
  // Opens a pcap or pcapng file. Errors name the file: NotFound when it does
  // not exist, InvalidArgument when it is not a capture, IoError otherwise.
  static StatusOr<std::unique_ptr<PcapReader>> Open(const std::string& path);
  ~PcapReader();
  PcapReader(const PcapReader&) = delete;
  PcapReader& operator=(const PcapReader&) = delete;

  // Reads the next record. Returns false at the end of the file, an error
  // for a damaged file (naming the file and the record index).
  StatusOr<bool> Next(PcapRecord* record);

  int linktype() const { return linktype_; }
  const std::string& path() const { return path_; }

 private:
  struct Handle;
  PcapReader(std::string path, Handle* handle, int linktype);

  std::string path_;
  Handle* handle_;  // owned; a pcap_t* behind an opaque type
  int linktype_;
  uint64_t records_read_ = 0;
};

class PcapWriter {
 public:
  // Creates (truncates) `path` as a LINKTYPE_ETHERNET pcap file; with
  // `nanosecond` the file uses the nanosecond-resolution magic.
  static StatusOr<std::unique_ptr<PcapWriter>> Open(const std::string& path,
                                                    bool nanosecond = false);
  ~PcapWriter();  // flushes and closes
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Appends one frame, captured in full, at `timestamp_ns` since the epoch.
  Status Write(std::span<const uint8_t> frame, int64_t timestamp_ns);
  Status Flush();

 private:
  struct Handle;
  PcapWriter(std::string path, Handle* handle, bool nanosecond);

  std::string path_;
  Handle* handle_;  // owned
  bool nanosecond_;
};

}  // namespace fathom::wire
