// Capture I/O over libpcap (pcap(3PCAP), pcap_open_offline(3PCAP),
// pcap_dump_open(3PCAP)). libpcap reads both pcap and pcapng; we always ask
// for nanosecond precision so timestamps survive either resolution.
#include "fabric/wire/pcap.h"

#include <fcntl.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "base/units.h"

namespace fathom::wire {

struct PcapReader::Handle {
  pcap_t* pcap = nullptr;
};
struct PcapWriter::Handle {
  pcap_t* pcap = nullptr;
  pcap_dumper_t* dumper = nullptr;
};

namespace {
// Large enough for jumbo frames; the capture's own snaplen still applies.
constexpr int kWriteSnaplen = 262144;
}  // namespace

PcapReader::PcapReader(std::string path, Handle* handle, int linktype)
    : path_(std::move(path)), handle_(handle), linktype_(linktype) {}

PcapReader::~PcapReader() {
  if (handle_ != nullptr) pcap_close(handle_->pcap);
  delete handle_;
}

namespace {

// Opens a FIFO for reading without the blocking open(2) that waits for a
// writer forever (fifo(7)): open non-blocking, poll for the first bytes (or
// the writer's close) for at most `wait_ms`, then make reads blocking again
// for libpcap's stdio.
StatusOr<FILE*> OpenFifo(const std::string& path, int wait_ms) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return IoError("PcapReader::Open(" + path + "): " + std::strerror(errno));
  struct pollfd p = {fd, POLLIN, 0};
  int rc;
  do {
    rc = poll(&p, 1, wait_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc <= 0) {
    const std::string why = rc < 0 ? std::strerror(errno) : "";
    close(fd);
    if (rc < 0) return IoError("PcapReader::Open(" + path + "): poll: " + why);
    return Unavailable("PcapReader::Open(" + path + "): a FIFO with no writer after " +
                       std::to_string(wait_ms) + " ms (start the writer first, or pipe into -)");
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return IoError("PcapReader::Open(" + path + "): fcntl: " + why);
  }
  FILE* file = fdopen(fd, "rb");
  if (file == nullptr) {
    const std::string why = std::strerror(errno);
    close(fd);
    return IoError("PcapReader::Open(" + path + "): " + why);
  }
  return file;
}

// The FILE* libpcap will read: "-" is standard input, a FIFO waits boundedly
// for its writer, a regular file opens as usual, anything else is refused.
StatusOr<FILE*> OpenInput(const std::string& path, const PcapOpenOptions& options) {
  if (path == "-") {
    if (isatty(STDIN_FILENO)) {
      return InvalidArgument("PcapReader::Open(-): standard input is a terminal, not a capture");
    }
    // A duplicate, so that pcap_close() leaves stdin itself open.
    const int fd = dup(STDIN_FILENO);
    FILE* file = fd < 0 ? nullptr : fdopen(fd, "rb");
    if (file == nullptr) {
      const std::string why = std::strerror(errno);
      if (fd >= 0) close(fd);
      return IoError("PcapReader::Open(-): " + why);
    }
    return file;
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const std::string why = std::strerror(errno);
    if (errno == ENOENT) return NotFound("PcapReader::Open(" + path + "): " + why);
    return IoError("PcapReader::Open(" + path + "): " + why);
  }
  if (S_ISDIR(st.st_mode)) {
    return InvalidArgument("PcapReader::Open(" + path + "): is a directory, not a capture");
  }
  if (S_ISFIFO(st.st_mode)) return OpenFifo(path, options.fifo_wait_ms);
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument("PcapReader::Open(" + path +
                           "): not a regular file or FIFO (a device or socket), not a capture");
  }
  // Open the file ourselves so that an unreadable file is an I/O error and
  // everything libpcap then rejects is "not a capture".
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return IoError("PcapReader::Open(" + path + "): " + std::strerror(errno));
  }
  return file;
}

}  // namespace

StatusOr<std::unique_ptr<PcapReader>> PcapReader::Open(const std::string& path,
                                                       const PcapOpenOptions& options) {
  auto file = OpenInput(path, options);
  if (!file.ok()) return file.status();
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* pcap =
      pcap_fopen_offline_with_tstamp_precision(*file, PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (pcap == nullptr) {
    std::fclose(*file);
    return InvalidArgument("PcapReader::Open(" + path + "): not a pcap or pcapng capture (" +
                           errbuf + ")");
  }
  auto* handle = new Handle{pcap};
  return std::unique_ptr<PcapReader>(new PcapReader(path, handle, pcap_datalink(pcap)));
}

CaptureTime CaptureTimeFromLibpcap(int64_t seconds, int64_t nanoseconds) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  // A wrapped unsigned second count (see the header): not a time before 1970.
  if (seconds < 0) return {kMax, true};
  // 128 bits hold any int64 seconds times 1e9 plus any int64 fraction.
  const Int128 ns = static_cast<Int128>(seconds) * 1000000000 + nanoseconds;
  if (ns > kMax) return {kMax, true};
  if (ns < kMin) return {kMin, true};
  return {static_cast<int64_t>(ns), false};
}

StatusOr<bool> PcapReader::Next(PcapRecord* record) {
  struct pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  const int rc = pcap_next_ex(handle_->pcap, &header, &data);
  if (rc == PCAP_ERROR_BREAK) return false;  // -2: end of file
  if (rc != 1) {
    return InvalidArgument("PcapReader::Next(" + path_ + ") record " +
                           std::to_string(records_read_ + 1) + ": " + pcap_geterr(handle_->pcap));
  }
  ++records_read_;
  // libpcap converts a pcapng timestamp of any if_tsresol to seconds in a
  // time_t (up to 2^64-1 of them at if_tsresol 0) and nanoseconds; seconds
  // times 1e9 need not fit int64, so the conversion saturates.
  const CaptureTime t = CaptureTimeFromLibpcap(static_cast<int64_t>(header->ts.tv_sec),
                                               static_cast<int64_t>(header->ts.tv_usec));
  record->timestamp_ns = t.ns;
  record->timestamp_clamped = t.clamped;
  record->timestamp_seconds = static_cast<int64_t>(header->ts.tv_sec);
  record->data = std::span<const uint8_t>(data, header->caplen);
  record->original_length = header->len;
  return true;
}

PcapWriter::PcapWriter(std::string path, Handle* handle, bool nanosecond)
    : path_(std::move(path)), handle_(handle), nanosecond_(nanosecond) {}

PcapWriter::~PcapWriter() {
  if (handle_ != nullptr) {
    if (handle_->dumper != nullptr) pcap_dump_close(handle_->dumper);
    if (handle_->pcap != nullptr) pcap_close(handle_->pcap);
  }
  delete handle_;
}

StatusOr<std::unique_ptr<PcapWriter>> PcapWriter::Open(const std::string& path, bool nanosecond) {
  pcap_t* pcap = pcap_open_dead_with_tstamp_precision(
      DLT_EN10MB, kWriteSnaplen,
      nanosecond ? PCAP_TSTAMP_PRECISION_NANO : PCAP_TSTAMP_PRECISION_MICRO);
  if (pcap == nullptr) return Internal("PcapWriter::Open(" + path + "): pcap_open_dead failed");
  pcap_dumper_t* dumper = pcap_dump_open(pcap, path.c_str());
  if (dumper == nullptr) {
    Status s = IoError("PcapWriter::Open(" + path + "): " + pcap_geterr(pcap));
    pcap_close(pcap);
    return s;
  }
  auto* handle = new Handle{pcap, dumper};
  return std::unique_ptr<PcapWriter>(new PcapWriter(path, handle, nanosecond));
}

Status PcapWriter::Write(std::span<const uint8_t> frame, int64_t timestamp_ns) {
  if (timestamp_ns < 0) {
    return InvalidArgument("PcapWriter::Write(" + path_ +
                           "): timestamp_ns=" + std::to_string(timestamp_ns) + " is negative");
  }
  if (frame.size() > static_cast<size_t>(kWriteSnaplen)) {
    return InvalidArgument("PcapWriter::Write(" + path_ + "): frame of " +
                           std::to_string(frame.size()) + " bytes exceeds the snaplen " +
                           std::to_string(kWriteSnaplen));
  }
  struct pcap_pkthdr header = {};
  header.ts.tv_sec = static_cast<time_t>(timestamp_ns / 1000000000);
  const int64_t fraction = timestamp_ns % 1000000000;
  // With nanosecond precision libpcap stores tv_usec as nanoseconds.
  header.ts.tv_usec = static_cast<suseconds_t>(nanosecond_ ? fraction : fraction / 1000);
  header.caplen = static_cast<bpf_u_int32>(frame.size());
  header.len = header.caplen;
  pcap_dump(reinterpret_cast<u_char*>(handle_->dumper), &header, frame.data());
  if (std::ferror(pcap_dump_file(handle_->dumper)) != 0) {
    return IoError("PcapWriter::Write(" + path_ + "): write failed");
  }
  return Status::Ok();
}

Status PcapWriter::Flush() {
  if (pcap_dump_flush(handle_->dumper) != 0) {
    return IoError("PcapWriter::Flush(" + path_ + "): " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace fathom::wire
