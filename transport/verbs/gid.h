// GID tables and GID selection for the verbs backend. A port's GID table
// (ibv_query_gid_table, or /sys/class/infiniband/<dev>/ports/<p>/gids and
// gid_attrs/ on older stacks) lists addresses of three types; which one a QP
// uses decides whether its packets are routable at all (CASES.md 5: GID 0,
// the IPv6 link-local, between hosts under different switches times out).
// These are pure functions over a table, so selection is tested without a
// device. Values only; nothing here owns a verbs object.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace fathom::transport::verbs {

using Gid = std::array<uint8_t, 16>;

// ibv_gid_type (same order as IBV_GID_TYPE_*).
enum class GidType { kIb = 0, kRoceV1 = 1, kRoceV2 = 2 };

// "IB", "RoCE v1", "RoCE v2" (sysfs writes "IB/RoCE v1" for both of the first).
std::string_view GidTypeName(GidType type);
// Parses gid_attrs/types/<i> text ("RoCE v2", "IB/RoCE v1", "IB").
// `is_ethernet` resolves "IB/RoCE v1" to kRoceV1 on Ethernet, kIb otherwise.
StatusOr<GidType> ParseGidType(std::string_view text, bool is_ethernet);

// Accepts the sysfs form "fe80:0000:0000:0000:5054:00ff:fe12:3456" and any
// IPv6 text form ("::ffff:192.0.2.1").
StatusOr<Gid> ParseGid(std::string_view text);
// The sysfs form: eight groups of four hex digits.
std::string FormatGid(const Gid& gid);

bool IsZeroGid(const Gid& gid);
// ::ffff:a.b.c.d — the GID rxe and RoCE NICs derive from an IPv4 address.
bool IsIpv4MappedGid(const Gid& gid);
// fe80::/10.
bool IsLinkLocalGid(const Gid& gid);

struct GidEntry {
  int index = -1;
  Gid gid{};
  GidType type = GidType::kIb;
  std::string netdev;  // "eth0"; empty on InfiniBand
};

// How a port's GID is chosen.
enum class GidMode {
  kAuto,        // InfiniBand: index 0; Ethernet: RoCE v2 IPv4-mapped (kRoceV2Ipv4)
  kRoceV2Ipv4,  // RoCE v2 with an IPv4-mapped address
  kRoceV2Ipv6,  // RoCE v2 with an IPv6 address, global preferred over link-local
  kIndex,       // exactly `index` (perftest -x)
};

struct GidPolicy {
  GidMode mode = GidMode::kAuto;
  int index = -1;  // for kIndex
};

// Picks the entry `policy` asks for from a port's table (zero GIDs are empty
// slots and never chosen). Errors name the device, port, the request and the
// entries that were there.
StatusOr<GidEntry> SelectGid(std::span<const GidEntry> table, const GidPolicy& policy,
                             bool is_ethernet, std::string_view device, int port);

// Reads the GID table of `device` port `port` from a sysfs tree rooted at
// `sysfs_root` ("/sys/class/infiniband" on a real system): gids/<i>,
// gid_attrs/types/<i>, gid_attrs/ndevs/<i>. Empty slots are skipped.
StatusOr<std::vector<GidEntry>> ReadSysfsGidTable(const std::string& sysfs_root,
                                                  std::string_view device, int port,
                                                  bool is_ethernet);

}  // namespace fathom::transport::verbs
