// Internals of ReadEvidence (evidence.h): the file a parser reads, the
// parsers' entry points (one evidence_*.cc per family of formats) and the
// text helpers they share. Not for use outside replay/.
//
// Times: parsers store what the source says: a Unix time (anything past
// kWallClockS) for wall-clock sources, seconds of virtual or relative time
// otherwise. ReadEvidence then moves the wall-clock ones to the bundle's
// time origin (the earliest wall-clock time) and sets Evidence::last_s.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "replay/evidence.h"

namespace fathom::replay::internal {

// A time larger than this (seconds) is a Unix time (after 1973), not a
// relative one.
inline constexpr double kWallClockS = 1e8;

// One file of the bundle, read whole.
struct FileInput {
  std::string rel;   // relative to the bundle's root
  std::string path;  // on disk (a temporary copy for tarballs)
  std::string text;  // its bytes
  std::string host;  // from the directory or file name, empty when neither says
};

// What a file holds, judged from its content first and its name second;
// SourceReport::kind names (evidence.h), "unknown" when nothing matches.
std::string Classify(const FileInput& file);

// The parsers: each fills `ev` and the file's report (`src`: kind, host,
// use, reason, line counts). None fails: what they cannot read they report.
void ParseNcclLog(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseFathomWatchdog(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseJobTimes(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseFathomReport(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseRdmaStatistic(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseHwCounters(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseIbvDevinfo(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseIpLink(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseGids(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseEthtool(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseTopology(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseNeighbors(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseSwitchCounters(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseLinkEvents(const FileInput& file, Evidence* ev, SourceReport* src);
void ParseCapture(const FileInput& file, Evidence* ev, SourceReport* src);

// Checks across sources once everything is read: the neighbour table
// against the topology (a contradiction marks the neighbour table's report
// partly used, naming the rows).
void CheckFabricConsistency(Evidence* ev);

// hw_counters names of the drivers fathom knows; a counter outside both
// lists is kept but marks its source partly used.
bool IsRxeCounter(std::string_view name);
bool IsMlx5Counter(std::string_view name);
// "mlx5", "rxe" or "" from counter names seen together.
std::string DriverFromCounters(const std::vector<std::string>& names);
// From a device name: "mlx5_0" -> "mlx5", "rxe0" -> "rxe", else "".
std::string DriverFromDevice(std::string_view device);

// The IBV_WC_* name of a completion status number ("IBV_WC_RETRY_EXC_ERR"
// for 12), or "status <n>" for numbers verbs does not define.
std::string WcStatusNameOf(int status);

// Text helpers.
std::vector<std::string_view> SplitLines(std::string_view text);
std::string_view Trim(std::string_view s);
std::vector<std::string> SplitFields(std::string_view line, char sep);  // trimmed
std::vector<std::string> SplitWords(std::string_view line);             // on blanks
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);
bool Contains(std::string_view s, std::string_view part);
std::optional<long long> ParseInt(std::string_view s);  // decimal or 0x hex, whole string
std::optional<double> ParseDouble(std::string_view s);  // whole string
// A leading timestamp: "[2026-12-05 11:00:00.5] ", "2026-12-05T11:00:00.5Z ",
// "1764932400.5 " or "[1764932400.5] " (UTC). Returns the Unix time and
// strips it from `line`; nullopt (line untouched) when there is none.
std::optional<double> TakeTimestamp(std::string_view* line);
// A time field of a table: a Unix time, an ISO time, or relative seconds.
std::optional<double> ParseTimeField(std::string_view s);
// The host a file name or path names: "bundle/h3/..." or "h3.ibv_devinfo.txt".
std::string HostFromPath(std::string_view rel);

// Appends "line N: why" to a report's reason (first few only) and marks it
// partly used.
void NoteProblem(SourceReport* src, int line, const std::string& why);

HostState& Host(Evidence* ev, const std::string& name);

// Records a wall-clock time a source showed (lines without an event still
// move the origin and last_s).
void SeeWallTime(Evidence* ev, double unix_s);

}  // namespace fathom::replay::internal
