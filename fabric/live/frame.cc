#include "fabric/live/frame.h"

namespace fathom::live {

FramePool::FramePool(size_t count)
    : frames_(count), storage_(new uint8_t[count * static_cast<size_t>(kFrameBytes)]) {
  for (size_t i = count; i-- > 0;) {
    frames_[i].storage = storage_.get() + i * kFrameBytes;
    frames_[i].next_free = free_;
    free_ = &frames_[i];
  }
}

}  // namespace fathom::live
