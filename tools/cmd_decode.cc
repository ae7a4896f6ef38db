// `fathom decode CAPTURE|FIFO|- [--json] [--summary] [--fifo-wait S]`:
// dissects the RoCEv2 traffic in a pcap/pcapng capture — one line per frame,
// then per-flow statistics (a flow = IP pair + destination QPN). ICRCs are
// verified, which Wireshark does not do (ROCEV2.md, "Tool conventions"). A
// capture damaged part-way is summarized up to the damage, then exits 2.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "base/json.h"
#include "base/status.h"
#include "base/units.h"
#include "fabric/wire/capture_stats.h"
#include "fabric/wire/pcap.h"
#include "fabric/wire/roce.h"
#include "tools/command.h"

namespace fathom::tools {
namespace {

using wire::AethKind;
using wire::ParseKind;
using wire::ParseResult;
using wire::RoceFrame;

std::string AethText(const wire::Aeth& a) {
  std::string s = " aeth=";
  switch (a.kind()) {
    case AethKind::kAck:
      s += "ACK credits=" + std::to_string(a.code());
      break;
    case AethKind::kRnrNak:
      s += "RNR_NAK timer=" + std::to_string(a.code());
      break;
    case AethKind::kNak:
      s += "NAK " + std::string(wire::NakCodeName(a.code()));
      break;
    case AethKind::kReserved:
      s += "RESERVED " + Hex(a.syndrome, 2);
      break;
  }
  return s + " msn=" + std::to_string(a.msn);
}

// One line per frame (after the time column): addresses, BTH and the
// extension headers' key fields, ICRC verdict.
std::string FrameLine(const ParseResult& r) {
  std::string s;
  if (r.kind == ParseKind::kNotRoce) {
    return s + "non-RoCE (" + std::string(wire::ParseErrorName(r.error)) + ")";
  }
  if (r.kind == ParseKind::kMalformed) {
    return s + "MALFORMED " + std::string(wire::ParseErrorName(r.error)) + " at byte " +
           std::to_string(r.error_offset) + ": " + std::string(r.message);
  }
  const RoceFrame& f = r.frame;
  s += wire::SourceAddress(f) + " -> " + wire::DestinationAddress(f) + " " +
       std::string(wire::OpcodeName(f.bth.opcode)) + " qpn=" + Hex(f.bth.dest_qpn, 6) +
       " psn=" + std::to_string(f.bth.psn) + " ackreq=" + (f.bth.ack_request ? "1" : "0") +
       " payload=" + std::to_string(f.payload.size());
  if (f.vlan) s += " vlan=" + std::to_string(f.vlan->vid) + "/pcp" + std::to_string(f.vlan->pcp);
  if (f.reth) {
    s += " reth=va:" + Hex(f.reth->virtual_address, 0) + ",rkey:" + Hex(f.reth->rkey, 0) +
         ",len:" + std::to_string(f.reth->dma_length);
  }
  if (f.atomic_eth) {
    s += " atomic=va:" + Hex(f.atomic_eth->virtual_address, 0) +
         ",rkey:" + Hex(f.atomic_eth->rkey, 0) + ",swap_add:" + Hex(f.atomic_eth->swap_add, 0) +
         ",compare:" + Hex(f.atomic_eth->compare, 0);
  }
  if (f.aeth) s += AethText(*f.aeth);
  if (f.atomic_ack_eth) s += " orig=" + Hex(*f.atomic_ack_eth, 0);
  if (f.immdt) s += " imm=" + Hex(*f.immdt, 8);
  if (f.ieth) s += " inv_rkey=" + Hex(*f.ieth, 0);
  const bool ecn_ce =
      f.ip_version == wire::IpVersion::kIpv4 ? f.ipv4.ecn == 3 : (f.ipv6.traffic_class & 3) == 3;
  if (ecn_ce) s += " ecn=CE";
  s += wire::IcrcOk(r) ? " icrc=ok" : " icrc=BAD";
  return s;
}

void PrintTextSummary(const wire::CaptureStats& st) {
  std::printf("frames %" PRIu64 ": roce %" PRIu64 ", non-roce %" PRIu64 ", malformed %" PRIu64
              "; icrc ok %" PRIu64 ", bad %" PRIu64 "\n",
              st.frames(), st.roce_frames(), st.non_roce_frames(), st.malformed_frames(),
              st.icrc_ok(), st.icrc_bad());
  for (const auto& [reason, count] : st.malformed_by_reason()) {
    std::printf("  malformed %.*s: %" PRIu64 "\n", static_cast<int>(reason.size()), reason.data(),
                count);
  }
  std::printf("opcodes:\n");
  for (const auto& [name, count] : st.opcodes()) {
    std::printf("  %-32.*s %" PRIu64 "\n", static_cast<int>(name.size()), name.data(), count);
  }
  std::printf("flows (%zu):\n", st.flows().size());
  for (const wire::FlowStats& f : st.flows()) {
    std::printf("  %s -> %s qpn %s: packets %" PRIu64 ", payload %" PRIu64
                " B, psn %u..%u, gaps %" PRIu64 " (%" PRIu64
                " missing), retransmitted %zu PSNs (%" PRIu64 " packets), acks %" PRIu64
                ", rnr naks %" PRIu64 ", naks",
                f.src.c_str(), f.dst.c_str(), Hex(f.key.dest_qpn, 6).c_str(), f.packets,
                f.payload_bytes, f.first_psn, f.last_psn, f.psn_gaps, f.missing_psns,
                f.retransmitted_psns.size(), f.retransmitted_packets, f.acks, f.rnr_naks);
    if (f.naks_by_code.empty()) std::printf(" 0");
    for (const auto& [code, count] : f.naks_by_code) {
      const std::string_view name = wire::NakCodeName(code);
      std::printf(" %.*s=%" PRIu64, static_cast<int>(name.size()), name.data(), count);
    }
    std::printf("\n");
    if (!f.retransmitted_psns.empty()) {
      std::printf("    retransmitted PSNs:");
      size_t shown = 0;
      for (const uint32_t psn : f.retransmitted_psns) {
        if (++shown > 32) {
          std::printf(" ... (%zu more)", f.retransmitted_psns.size() - 32);
          break;
        }
        std::printf(" %u", psn);
      }
      std::printf("\n");
    }
  }
}

// `error` is empty for a capture read to its end, else why reading stopped.
std::string JsonSummary(const std::string& path, const wire::CaptureStats& st,
                        const std::string& error) {
  std::string j = "{\"capture\":";
  j += JsonString(path);
  j += ",\"complete\":";
  j += error.empty() ? "true" : "false";
  if (!error.empty()) {
    j += ",\"error\":";
    j += JsonString(error);
  }
  auto field = [&j](std::string_view key, uint64_t v) {
    j += ",";
    j += JsonString(key);
    j += ":" + std::to_string(v);
  };
  field("frames", st.frames());
  field("roce_frames", st.roce_frames());
  field("non_roce_frames", st.non_roce_frames());
  field("malformed_frames", st.malformed_frames());
  field("icrc_ok", st.icrc_ok());
  field("icrc_bad", st.icrc_bad());
  auto counts = [&j](std::string_view key, const std::map<std::string_view, uint64_t>& m) {
    j += ",";
    j += JsonString(key);
    j += ":{";
    bool first = true;
    for (const auto& [name, count] : m) {
      if (!first) j += ",";
      first = false;
      j += JsonString(name);
      j += ":" + std::to_string(count);
    }
    j += "}";
  };
  counts("opcodes", st.opcodes());
  counts("malformed_reasons", st.malformed_by_reason());
  j += ",\"flows\":[";
  bool first_flow = true;
  for (const wire::FlowStats& f : st.flows()) {
    if (!first_flow) j += ",";
    first_flow = false;
    j += "{\"src\":";
    j += JsonString(f.src);
    j += ",\"dst\":";
    j += JsonString(f.dst);
    field("dest_qpn", f.key.dest_qpn);
    field("packets", f.packets);
    field("bytes", f.payload_bytes);
    field("first_psn", f.first_psn);
    field("last_psn", f.last_psn);
    field("psn_gaps", f.psn_gaps);
    field("missing_psns", f.missing_psns);
    field("retransmitted_psns", f.retransmitted_psns.size());
    field("retransmitted_packets", f.retransmitted_packets);
    j += ",\"retransmitted_psn_list\":[";
    for (size_t i = 0; i < f.retransmitted_psns.size(); ++i) {
      if (i != 0) j += ",";
      j += std::to_string(f.retransmitted_psns[i]);
    }
    j += "]";
    field("acks", f.acks);
    field("rnr_naks", f.rnr_naks);
    j += ",\"naks\":{";
    bool first = true;
    for (const auto& [code, count] : f.naks_by_code) {
      if (!first) j += ",";
      first = false;
      j += JsonString(wire::NakCodeName(code));
      j += ":" + std::to_string(count);
    }
    j += "}}";
  }
  j += "]}";
  return j;
}

struct DecodeFlags {
  std::string path;
  bool json = false;
  bool summary_only = false;
  double fifo_wait_seconds = 10;
};

// The time column: seconds since the first frame whose time was in range.
// Differences of two int64 nanosecond values may need 65 bits.
std::string TimeColumn(const wire::PcapRecord& record, bool have_first, int64_t first_ns) {
  if (record.timestamp_clamped) return "out-of-range";
  const Int128 delta = have_first ? static_cast<Int128>(record.timestamp_ns) - first_ns : 0;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%12.6f", static_cast<double>(delta) / 1e9);
  return buf;
}

int RunDecode(const DecodeFlags& flags) {
  const std::string& path = flags.path;
  wire::PcapOpenOptions open_options;
  open_options.fifo_wait_ms = static_cast<int>(flags.fifo_wait_seconds * 1000);
  auto reader = wire::PcapReader::Open(path, open_options);
  if (!reader.ok()) {
    std::fprintf(stderr, "fathom decode: %s\n", reader.status().message().c_str());
    return kExitUsage;
  }
  if ((*reader)->linktype() != wire::kLinktypeEthernet) {
    std::fprintf(stderr, "fathom decode: %s: link type %d is not Ethernet (1)\n", path.c_str(),
                 (*reader)->linktype());
    return kExitUsage;
  }
  wire::CaptureStats stats;
  wire::PcapRecord record;
  bool have_first = false;
  bool warned_time = false;
  int64_t first_ns = 0;
  const bool lines = !flags.json && !flags.summary_only;
  // A damaged or cut capture still gets the summary of the frames before the
  // damage; the error follows on stderr and the exit code is 2 (bad input).
  std::string read_error;
  while (true) {
    auto more = (*reader)->Next(&record);
    if (!more.ok()) {
      read_error = more.status().message();
      break;
    }
    if (!*more) break;
    if (record.timestamp_clamped && !warned_time) {
      // libpcap's seconds are an unsigned count cast to time_t (pcap.h).
      std::fprintf(stderr,
                   "fathom decode: %s record %" PRIu64 ": timestamp of %" PRIu64
                   " s since 1970 is past what 64-bit nanoseconds hold (year 2262); shown as "
                   "out-of-range\n",
                   path.c_str(), stats.frames() + 1,
                   static_cast<uint64_t>(record.timestamp_seconds));
      warned_time = true;
    }
    const ParseResult parsed = wire::Parse(record.data);
    stats.Add(parsed);
    if (lines) {
      const std::string t = TimeColumn(record, have_first, first_ns);
      std::printf("%6" PRIu64 " %s %s\n", stats.frames(), t.c_str(), FrameLine(parsed).c_str());
    }
    if (!have_first && !record.timestamp_clamped) {
      first_ns = record.timestamp_ns;
      have_first = true;
    }
  }
  if (flags.json) {
    std::printf("%s\n", JsonSummary(path, stats, read_error).c_str());
  } else {
    PrintTextSummary(stats);
  }
  if (!read_error.empty()) {
    std::fflush(stdout);
    std::fprintf(stderr, "fathom decode: %s (summary covers the %" PRIu64 " frames before it)\n",
                 read_error.c_str(), stats.frames());
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace

FATHOM_REGISTER_COMMAND(
    decode,
    Command{
        "decode",
        "summarize RoCEv2 traffic in a pcap/pcapng capture (per frame, then per flow)",
        [](CLI::App* sub) -> std::function<int()> {
          auto flags = std::make_shared<DecodeFlags>();
          sub->footer(
              "Exit status: 0 when the capture was read to its end; 2 for a bad flag, a file "
              "that is missing or not a capture, a FIFO with no writer, or a capture damaged or "
              "cut mid-record (the frames before the damage are still listed and summarized, "
              "then the error goes to stderr). Times beyond 64-bit nanoseconds (years "
              "1677..2262) show as out-of-range.");
          sub->add_option("capture", flags->path,
                          "pcap or pcapng file, a FIFO, or - for standard input")
              ->required();
          sub->add_flag("--json", flags->json,
                        "print one JSON object (counts, opcodes, flows; \"complete\": false and "
                        "\"error\" for a damaged capture)");
          sub->add_flag("--summary", flags->summary_only,
                        "print only the summary and flows, no per-frame lines");
          sub->add_option("--fifo-wait", flags->fifo_wait_seconds,
                          "seconds to wait for a FIFO's writer before giving up")
              ->default_val(10)
              ->check(CLI::Range(0.0, 86400.0));
          return [flags] { return RunDecode(*flags); };
        },
        10,
    });

}  // namespace fathom::tools
