// Cold parts of the fault models: drop reason names and flap schedule
// arithmetic.
#include "faults/models.h"

#include <limits>

namespace fathom::faults {

const char* DropReasonName(DropReason r) {
  switch (r) {
    case DropReason::kTailDrop:
      return "tail_drop";
    case DropReason::kMtuExceeded:
      return "mtu_exceeded";
    case DropReason::kNoRoute:
      return "no_route";
    case DropReason::kImpairment:
      return "impairment";
    case DropReason::kBadIcrc:
      return "bad_icrc";
    case DropReason::kQpNotReady:
      return "qp_not_ready";
    case DropReason::kHostCrashed:
      return "host_crashed";
    case DropReason::kLoss:
      return "loss";
    case DropReason::kOversize:
      return "oversize";
    case DropReason::kLinkDown:
      return "link_down";
    case DropReason::kBlackHole:
      return "black_hole";
    case DropReason::kHostDown:
      return "host_down";
    case DropReason::kPfcHeadroom:
      return "pfc_headroom";
    case DropReason::kPfcWatchdog:
      return "pfc_watchdog";
    case DropReason::kNone:
      return "none";
    case DropReason::kCount:
      break;
  }
  return "unknown";
}

uint64_t FlapSchedule::OutageCount() const {
  if (until <= start) return 0;
  if (period.ps() <= 0) return 1;
  if (until == Picoseconds::Max()) return std::numeric_limits<uint64_t>::max();
  const int64_t span = (until - start).ps();
  return static_cast<uint64_t>((span + period.ps() - 1) / period.ps());
}

bool FlapSchedule::DownDuring(Picoseconds from, Picoseconds to) const {
  if (to < start) return false;
  const uint64_t count = OutageCount();
  if (count == 0) return false;
  if (period.ps() <= 0) return start <= to && OutageEnd(start) > from;
  const uint64_t k0 = from < start ? 0 : static_cast<uint64_t>((from - start).ps() / period.ps());
  // Outages are shorter than the period (validated), so only the outage in
  // progress at `from` and the ones starting in (from, to] can overlap.
  const uint64_t span = static_cast<uint64_t>((to - from).ps() / period.ps()) + 1;
  for (uint64_t k = k0; k <= k0 + span && k < count; ++k) {
    const Picoseconds s = start + period * static_cast<int64_t>(k);
    if (s > to) break;
    if (OutageEnd(s) > from) return true;
  }
  return false;
}

uint64_t FlapSchedule::DownEventsBy(Picoseconds t) const {
  if (t < start) return 0;
  const uint64_t count = OutageCount();
  if (period.ps() <= 0) return count > 0 ? 1 : 0;
  const uint64_t started = static_cast<uint64_t>((t - start).ps() / period.ps()) + 1;
  return started < count ? started : count;
}

std::optional<FlapSchedule::Transition> FlapSchedule::NextTransition(Picoseconds t) const {
  const uint64_t count = OutageCount();
  if (count == 0) return std::nullopt;
  const uint64_t k0 =
      (t < start || period.ps() <= 0) ? 0 : static_cast<uint64_t>((t - start).ps() / period.ps());
  for (uint64_t k = k0; k <= k0 + 1 && k < count; ++k) {
    const Picoseconds s = start + period * static_cast<int64_t>(k);
    if (s > t) return Transition{s, true};
    const Picoseconds e = OutageEnd(s);
    if (e == Picoseconds::Max()) return std::nullopt;  // stays down
    if (e > t) return Transition{e, false};
  }
  return std::nullopt;
}

}  // namespace fathom::faults
