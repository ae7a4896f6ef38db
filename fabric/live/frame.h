// A real frame's bytes while the modelled fabric carries it, and the fixed
// pool they come from. A model packet (sim::Packet) references its frame
// through Packet::ext().data (has_data), so the bytes travel with the packet
// through the same ports, switches and fault models the simulator uses; the
// egress host port hands the frame to its endpoint.
//
// Ownership: the FramePool owns every Frame and its inline storage; a frame
// taken from a DPDK port instead points into its rte_mbuf, which `release`
// gives back to the port's mempool. A flood (broadcast, unknown unicast)
// sends one frame as several model packets: `refs` counts them. One thread
// (the emulator's loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace fathom::live {

struct Frame {
  uint8_t* data = nullptr;  // the frame from its Ethernet header, no FCS
  uint32_t len = 0;
  uint32_t refs = 0;                        // model packets that reference it
  int32_t in_host = -1;                     // host rank it entered at
  int64_t rx_ns = 0;                        // wall clock (CLOCK_MONOTONIC) when it was received
  void (*release)(void* handle) = nullptr;  // external storage (an rte_mbuf); null: inline
  void* handle = nullptr;
  Frame* next_free = nullptr;
  uint8_t* storage = nullptr;  // the pool's inline buffer for this frame
};

// A fixed number of frames with inline buffers of kFrameBytes, allocated
// once: the data path takes and returns frames without allocating.
class FramePool {
 public:
  // 9216 bytes hold a 9000-byte MTU frame (rxe in the testbed runs at 9000,
  // TESTBED.md) with its Ethernet and VLAN headers.
  static constexpr uint32_t kFrameBytes = 9216;
  explicit FramePool(size_t count);
  FramePool(const FramePool&) = delete;
  FramePool& operator=(const FramePool&) = delete;

  // A frame with its inline buffer, or null when all are in use (the caller
  // counts the drop).
  Frame* Alloc() {
    Frame* f = free_;
    if (f == nullptr) return nullptr;
    free_ = f->next_free;
    f->data = f->storage;
    f->len = 0;
    f->refs = 0;
    f->release = nullptr;
    f->handle = nullptr;
    ++in_use_;
    return f;
  }
  // Drops one reference; the frame (and its external storage) goes back
  // when the last one is gone.
  void Unref(Frame* f) {
    if (f->refs > 1) {
      --f->refs;
      return;
    }
    if (f->release != nullptr) f->release(f->handle);
    f->release = nullptr;
    f->next_free = free_;
    free_ = f;
    --in_use_;
  }
  size_t in_use() const { return in_use_; }
  size_t capacity() const { return frames_.size(); }

 private:
  std::vector<Frame> frames_;
  std::unique_ptr<uint8_t[]> storage_;
  Frame* free_ = nullptr;
  size_t in_use_ = 0;
};

}  // namespace fathom::live
