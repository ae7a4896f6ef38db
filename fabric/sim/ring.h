// Ring<T>: a FIFO (with indexing) in one power-of-two array, for the NIC's
// work queues and round-robin list.
//
// Why not std::deque: reaching element i of a deque goes through its map of
// blocks, one more dependent load on every packet a QP sends or receives;
// here the element is one load from the pointer held in the owner's line,
// which is what the simulator's fetch hints can bring in ahead of time. The
// ring doubles when full and never shrinks (a queue's depth is bounded by
// what the user posts). Elements are plain data (trivially copyable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

namespace fathom::sim {

template <typename T>
class Ring {
  static_assert(std::is_trivially_copyable_v<T>, "Ring holds plain data");

 public:
  Ring() = default;
  Ring(Ring&&) noexcept = default;
  Ring& operator=(Ring&&) noexcept = default;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[(head_ + i) & mask_]; }
  const T& operator[](size_t i) const { return data_[(head_ + i) & mask_]; }
  T& front() { return data_[head_]; }
  const T& front() const { return data_[head_]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }
  // Where element i lives (for fetch hints): valid while i < size().
  const T* at_address(size_t i) const { return &data_[(head_ + i) & mask_]; }

  void push_back(const T& v) {
    if (size_ == capacity()) Grow();
    data_[(head_ + size_) & mask_] = v;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & mask_;
    --size_;
  }
  void pop_back() { --size_; }
  // Makes room for n elements without growing (a queue's first storage, at
  // setup rather than on its first packet).
  void reserve(size_t n) {
    while (capacity() < n) Grow();
  }
  void clear() {
    head_ = 0;
    size_ = 0;
  }

  // Oldest first, for range-for.
  class const_iterator {
   public:
    const_iterator(const Ring* r, size_t i) : r_(r), i_(i) {}
    const T& operator*() const { return (*r_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    const Ring* r_;
    size_t i_;
  };
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

 private:
  size_t capacity() const { return data_ == nullptr ? 0 : size_t{mask_} + 1; }
  void Grow() {
    const size_t cap = capacity() == 0 ? 8 : capacity() * 2;
    std::unique_ptr<T[]> bigger(new T[cap]);
    for (size_t i = 0; i < size_; ++i) bigger[i] = (*this)[i];
    data_ = std::move(bigger);
    mask_ = static_cast<uint32_t>(cap - 1);
    head_ = 0;
  }

  std::unique_ptr<T[]> data_;
  uint32_t head_ = 0;
  uint32_t size_ = 0;
  uint32_t mask_ = 0;  // capacity - 1 once allocated
};

}  // namespace fathom::sim
