// AllGatherChunked (bootstrap.h): payloads larger than one frame, in slices.
#include <algorithm>
#include <charconv>

#include "transport/bootstrap/bootstrap.h"

namespace fathom::transport::bootstrap {

StatusOr<std::vector<std::string>> AllGatherChunked(Rank& rank, const std::string& payload) {
  const int n = rank.world_size();
  const std::string me = "AllGatherChunked (rank " + std::to_string(rank.rank()) + ")";
  FATHOM_ASSIGN_OR_RETURN(auto size_texts, rank.AllGather(std::to_string(payload.size())));
  std::vector<size_t> sizes(size_texts.size());
  size_t largest = 0, nonempty = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    const std::string& t = size_texts[r];
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), sizes[r]);
    if (ec != std::errc() || end != t.data() + t.size()) {
      return InvalidArgument(me + ": rank " + std::to_string(r) + " sent size '" + t.substr(0, 32) +
                             "', not a number");
    }
    largest = std::max(largest, sizes[r]);
    if (sizes[r] > 0) ++nonempty;
  }
  std::vector<std::string> out(sizes.size());
  if (largest == 0) return out;
  // A GatherResult frame body: the Envelope's tag and length (6 bytes), seq
  // (11), and per payload a tag and a length (6) — 32 + 8 per rank covers
  // it. Only non-empty payloads share the room: the others send nothing.
  const uint64_t overhead = 32 + 8 * static_cast<uint64_t>(n);
  const uint64_t max = rank.max_message_bytes();
  if (max <= overhead + nonempty) {
    return InvalidArgument(me + ": max_message_bytes " + std::to_string(max) +
                           " leaves no room for " + std::to_string(nonempty) + " payloads of " +
                           std::to_string(n) + " ranks");
  }
  const size_t slice = static_cast<size_t>((max - overhead) / nonempty);
  const size_t rounds = (largest + slice - 1) / slice;
  for (size_t r = 0; r < out.size(); ++r) out[r].reserve(sizes[r]);
  for (size_t k = 0; k < rounds; ++k) {
    const size_t from = k * slice;
    const std::string piece = from < payload.size() ? payload.substr(from, slice) : std::string();
    FATHOM_ASSIGN_OR_RETURN(auto all, rank.AllGather(piece));
    for (size_t r = 0; r < out.size() && r < all.size(); ++r) out[r] += all[r];
  }
  for (size_t r = 0; r < out.size(); ++r) {
    if (out[r].size() != sizes[r]) {
      return InvalidArgument(me + ": rank " + std::to_string(r) + " announced " +
                             std::to_string(sizes[r]) + " bytes and sent " +
                             std::to_string(out[r].size()) + " in " + std::to_string(rounds) +
                             " rounds of " + std::to_string(slice));
    }
  }
  return out;
}

}  // namespace fathom::transport::bootstrap
