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
  // The capture's time did not fit int64 nanoseconds (after 2262, e.g. a
  // pcapng if_tsresol 0 file with a huge timestamp); timestamp_ns is then
  // INT64_MAX. See CaptureTimeFromLibpcap.
  bool timestamp_clamped = false;
  int64_t timestamp_seconds = 0;  // the capture's seconds as libpcap gave them
};

// A capture timestamp in nanoseconds since the epoch from libpcap's
// (tv_sec, tv_usec), where tv_usec holds nanoseconds with nanosecond
// precision. libpcap computes pcapng seconds as an unsigned 64-bit value
// (timestamp / if_tsresol + if_tsoffset) and casts it to time_t, so a
// negative tv_sec means 2^63 s or more; it and anything past INT64_MAX ns
// (year 2262) saturate to INT64_MAX with `clamped` set. Never overflows.
struct CaptureTime {
  int64_t ns = 0;
  bool clamped = false;  // the true time lies beyond the int64 nanosecond range
};
CaptureTime CaptureTimeFromLibpcap(int64_t seconds, int64_t nanoseconds);

// How PcapReader::Open treats a path that is not a regular file.
struct PcapOpenOptions {
  // A FIFO is opened without blocking and then waited on for at most this
  // long for its writer's first bytes; no writer by then is Unavailable.
  // (A blocking open of a FIFO with no writer never returns.)
  int fifo_wait_ms = 10000;
};

class PcapReader {
 public:
  // Opens a pcap or pcapng file, a FIFO (see PcapOpenOptions), or "-" for
  // standard input. Errors name the file: NotFound when it does not exist,
  // InvalidArgument when it is not a capture (or a socket, device or
  // directory), Unavailable when a FIFO has no writer, IoError otherwise.
  static StatusOr<std::unique_ptr<PcapReader>> Open(const std::string& path,
                                                    const PcapOpenOptions& options = {});
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
