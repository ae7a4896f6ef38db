// Capture I/O over libpcap (pcap(3PCAP), pcap_open_offline(3PCAP),
// pcap_dump_open(3PCAP)). libpcap reads both pcap and pcapng; we always ask
// for nanosecond precision so timestamps survive either resolution.
#include "fabric/wire/pcap.h"

#include <pcap/pcap.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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

StatusOr<std::unique_ptr<PcapReader>> PcapReader::Open(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const std::string why = std::strerror(errno);
    if (errno == ENOENT) return NotFound("PcapReader::Open(" + path + "): " + why);
    return IoError("PcapReader::Open(" + path + "): " + why);
  }
  if (S_ISDIR(st.st_mode)) {
    return InvalidArgument("PcapReader::Open(" + path + "): is a directory, not a capture");
  }
  // Open the file ourselves so that an unreadable file is an I/O error and
  // everything libpcap then rejects is "not a capture".
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return IoError("PcapReader::Open(" + path + "): " + std::strerror(errno));
  }
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* pcap = pcap_fopen_offline_with_tstamp_precision(file, PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (pcap == nullptr) {
    std::fclose(file);
    return InvalidArgument("PcapReader::Open(" + path + "): not a pcap or pcapng capture (" +
                           errbuf + ")");
  }
  auto* handle = new Handle{pcap};
  return std::unique_ptr<PcapReader>(new PcapReader(path, handle, pcap_datalink(pcap)));
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
  record->timestamp_ns = static_cast<int64_t>(header->ts.tv_sec) * 1000000000 +
                         static_cast<int64_t>(header->ts.tv_usec);
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
