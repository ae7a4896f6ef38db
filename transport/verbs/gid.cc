#include "transport/verbs/gid.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fathom::transport::verbs {
namespace {

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return std::string(s);
}

// Reads a one-line sysfs attribute; an unreadable file (an empty GID slot's
// type reads as EINVAL) gives an empty string.
std::string ReadAttr(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return {};
  return Trim(ss.str());
}

std::string DescribeTable(std::span<const GidEntry> table) {
  if (table.empty()) return "no GIDs";
  std::string out;
  for (const GidEntry& e : table) {
    if (!out.empty()) out += ", ";
    out += std::to_string(e.index) + "=" + FormatGid(e.gid) + " (" +
           std::string(GidTypeName(e.type)) + ")";
  }
  return out;
}

}  // namespace

std::string_view GidTypeName(GidType type) {
  switch (type) {
    case GidType::kIb:
      return "IB";
    case GidType::kRoceV1:
      return "RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
  }
  return "unknown";
}

StatusOr<GidType> ParseGidType(std::string_view text, bool is_ethernet) {
  const std::string t = Trim(text);
  if (t == "RoCE v2") return GidType::kRoceV2;
  if (t == "IB/RoCE v1") return is_ethernet ? GidType::kRoceV1 : GidType::kIb;
  if (t == "RoCE v1") return GidType::kRoceV1;
  if (t == "IB") return GidType::kIb;
  return InvalidArgument("unknown GID type \"" + t + "\" (expected \"RoCE v2\", \"IB/RoCE v1\")");
}

StatusOr<Gid> ParseGid(std::string_view text) {
  const std::string t = Trim(text);
  Gid gid{};
  if (inet_pton(AF_INET6, t.c_str(), gid.data()) == 1) return gid;
  return InvalidArgument("malformed GID \"" + t + "\" (expected 8 groups of 4 hex digits)");
}

std::string FormatGid(const Gid& gid) {
  char buf[48];
  std::snprintf(buf, sizeof(buf),
                "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", gid[0],
                gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8], gid[9], gid[10],
                gid[11], gid[12], gid[13], gid[14], gid[15]);
  return buf;
}

bool IsZeroGid(const Gid& gid) {
  for (uint8_t b : gid) {
    if (b != 0) return false;
  }
  return true;
}

bool IsIpv4MappedGid(const Gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid[static_cast<size_t>(i)] != 0) return false;
  }
  return gid[10] == 0xff && gid[11] == 0xff;
}

bool IsLinkLocalGid(const Gid& gid) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

StatusOr<GidEntry> SelectGid(std::span<const GidEntry> table, const GidPolicy& policy,
                             bool is_ethernet, std::string_view device, int port) {
  const std::string where = std::string(device) + " port " + std::to_string(port);
  GidMode mode = policy.mode;
  if (mode == GidMode::kAuto) {
    if (!is_ethernet) {
      // InfiniBand routes by LID; GID 0 (the port GUID) is the one that always exists.
      for (const GidEntry& e : table) {
        if (e.index == 0 && !IsZeroGid(e.gid)) return e;
      }
      return NotFound("no GID at index 0 on " + where + " (" + DescribeTable(table) + ")");
    }
    mode = GidMode::kRoceV2Ipv4;
  }
  switch (mode) {
    case GidMode::kIndex:
      for (const GidEntry& e : table) {
        if (e.index == policy.index && !IsZeroGid(e.gid)) return e;
      }
      return NotFound("GID index " + std::to_string(policy.index) + " is empty or absent on " +
                      where + " (" + DescribeTable(table) + ")");
    case GidMode::kRoceV2Ipv4:
      for (const GidEntry& e : table) {
        if (e.type == GidType::kRoceV2 && IsIpv4MappedGid(e.gid)) return e;
      }
      return NotFound("no RoCE v2 GID with an IPv4-mapped address on " + where +
                      " (does the netdev have an IPv4 address? " + DescribeTable(table) + ")");
    case GidMode::kRoceV2Ipv6: {
      const GidEntry* link_local = nullptr;
      for (const GidEntry& e : table) {
        if (e.type != GidType::kRoceV2 || IsZeroGid(e.gid) || IsIpv4MappedGid(e.gid)) continue;
        // A global address routes across switches; link-local only within one L2 segment
        // (CASES.md 5).
        if (!IsLinkLocalGid(e.gid)) return e;
        if (link_local == nullptr) link_local = &e;
      }
      if (link_local != nullptr) return *link_local;
      return NotFound("no RoCE v2 GID with an IPv6 address on " + where + " (" +
                      DescribeTable(table) + ")");
    }
    case GidMode::kAuto:
      break;
  }
  return Internal("SelectGid: unhandled mode");
}

StatusOr<std::vector<GidEntry>> ReadSysfsGidTable(const std::string& sysfs_root,
                                                  std::string_view device, int port,
                                                  bool is_ethernet) {
  namespace fs = std::filesystem;
  const fs::path port_dir =
      fs::path(sysfs_root) / std::string(device) / "ports" / std::to_string(port);
  const fs::path gids_dir = port_dir / "gids";
  std::error_code ec;
  if (!fs::is_directory(gids_dir, ec)) {
    return NotFound("ReadSysfsGidTable: " + gids_dir.string() + " is not a directory");
  }
  std::vector<GidEntry> table;
  for (const auto& file : fs::directory_iterator(gids_dir, ec)) {
    const std::string name = file.path().filename().string();
    int index = -1;
    if (std::sscanf(name.c_str(), "%d", &index) != 1 || std::to_string(index) != name) continue;
    const std::string text = ReadAttr(file.path());
    auto gid = ParseGid(text);
    if (!gid.ok()) {
      return InvalidArgument("ReadSysfsGidTable: " + file.path().string() + ": " +
                             gid.status().message());
    }
    if (IsZeroGid(*gid)) continue;  // an empty slot
    GidEntry entry;
    entry.index = index;
    entry.gid = *gid;
    const std::string type_text = ReadAttr(port_dir / "gid_attrs" / "types" / name);
    if (type_text.empty()) {
      entry.type = is_ethernet ? GidType::kRoceV1 : GidType::kIb;
    } else {
      auto type = ParseGidType(type_text, is_ethernet);
      if (!type.ok()) {
        return InvalidArgument(
            "ReadSysfsGidTable: " + (port_dir / "gid_attrs" / "types" / name).string() + ": " +
            type.status().message());
      }
      entry.type = *type;
    }
    entry.netdev = ReadAttr(port_dir / "gid_attrs" / "ndevs" / name);
    table.push_back(std::move(entry));
  }
  if (ec) return IoError("ReadSysfsGidTable: " + gids_dir.string() + ": " + ec.message());
  std::sort(table.begin(), table.end(),
            [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  return table;
}

}  // namespace fathom::transport::verbs
