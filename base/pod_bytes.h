// Plain values as raw bytes in a std::string, for the batches the
// distributed run sends between processes (fabric/parallel/, the flow
// model's posts and ACKs): every process runs the same binary on the same
// machine type, so the in-memory layout is the wire format.
#pragma once

#include <cstring>
#include <string>
#include <type_traits>

namespace fathom {

// Appends `v`'s bytes to `out`.
template <typename T>
void AppendPod(std::string* out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Reads a T at `at` and moves past it; false (nothing read) when fewer than
// sizeof(T) bytes are left before `end`.
template <typename T>
bool ReadPod(const char*& at, const char* end, T* v) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (static_cast<size_t>(end - at) < sizeof(T)) return false;
  std::memcpy(v, at, sizeof(T));
  at += sizeof(T);
  return true;
}

}  // namespace fathom
