// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A bounded, best-fit pool of freed buffers: the one policy behind the host
// staging pool (support/staging.cpp) and the pinned and device pools
// (kernels/device_transfer.cpp). Allocating and freeing are the owner's; the
// pool only decides which buffer a request reuses and which freed buffers it
// keeps. Thread-safe.
//
// - best fit: a request takes the smallest kept buffer of its key that holds
//   it without wasting more than half of itself;
// - bounded: at most `max_buffers` buffers and `limit` bytes are kept. A
//   freed buffer that would pass either bound pushes the longest-kept ones
//   out (the owner frees them): the pool follows the sizes a job asks for
//   now. One that alone passes the byte limit is refused (the owner frees it);
// - drain() hands every kept buffer back to the owner (MPI_Finalize, a
//   runtime going away).
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace veneer {

struct PoolUsage {
  int64_t pooled_bytes = 0;    // kept for reuse now
  int64_t pooled_buffers = 0;  // how many buffers that is
  int64_t reused = 0;          // requests served from the pool
  int64_t allocated = 0;       // requests the owner had to allocate for
  int64_t evicted = 0;         // kept buffers pushed out by newer ones
  int64_t limit = 0;           // the byte limit
};

// `Key` tells buffers apart that are not interchangeable (the runtime and
// device that own them); the empty struct for a pool of one kind.
struct NoKey {
  bool operator==(const NoKey&) const = default;
};

template <class Key = NoKey>
class BestFitPool {
 public:
  struct Buffer {
    Key key{};
    char* data = nullptr;
    size_t capacity = 0;
  };

  BestFitPool(size_t max_buffers, int64_t limit) : max_buffers_(max_buffers), limit_(limit) {}

  // The best-fitting kept buffer of `key` for `bytes`, taken out of the pool,
  // or nullopt: the owner allocates, and says so with allocated().
  std::optional<Buffer> take(const Key& key, size_t bytes) {
    std::lock_guard lock(mutex_);
    size_t best = kept_.size();
    for (size_t i = 0; i < kept_.size(); ++i) {
      const Buffer& b = kept_[i];
      if (!(b.key == key) || b.capacity < bytes || b.capacity / 2 > bytes) continue;
      if (best == kept_.size() || b.capacity < kept_[best].capacity) best = i;
    }
    if (best == kept_.size()) return std::nullopt;
    Buffer found = kept_[best];
    kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));  // the rest stay in the order they came back
    bytes_ -= static_cast<int64_t>(found.capacity);
    ++reused_;
    return found;
  }

  // Counts a buffer the owner allocated after take() found none.
  void allocated() {
    std::lock_guard lock(mutex_);
    ++allocated_;
  }

  // Keeps a freed buffer for reuse. Returns the buffers the owner must free
  // now: none; the longest-kept ones, pushed out to make room when the pool
  // is full (a pool full of sizes no longer asked for would otherwise turn
  // every new buffer away, and each call would allocate and free afresh:
  // with glibc, map and fault in every page again); or `buffer` itself when
  // it alone passes the byte limit.
  [[nodiscard]] std::vector<Buffer> keep(const Buffer& buffer) {
    std::vector<Buffer> out;
    std::lock_guard lock(mutex_);
    const auto size = static_cast<int64_t>(buffer.capacity);
    if (size > limit_ || max_buffers_ == 0) {
      out.push_back(buffer);
      return out;
    }
    size_t drop = 0;
    int64_t bytes = bytes_;
    while (drop < kept_.size() && (kept_.size() - drop >= max_buffers_ || bytes + size > limit_))
      bytes -= static_cast<int64_t>(kept_[drop++].capacity);
    out.assign(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(drop));
    kept_.erase(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(drop));
    evicted_ += static_cast<int64_t>(drop);
    kept_.push_back(buffer);
    bytes_ = bytes + size;
    return out;
  }

  // Every kept buffer, for the owner to free; the pool is empty after.
  std::vector<Buffer> drain() {
    std::vector<Buffer> taken;
    std::lock_guard lock(mutex_);
    taken.swap(kept_);
    bytes_ = 0;
    return taken;
  }

  // A new byte limit for what is kept from now on (already kept buffers stay).
  void set_limit(int64_t limit) {
    std::lock_guard lock(mutex_);
    limit_ = limit < 0 ? 0 : limit;
  }

  PoolUsage usage() const {
    std::lock_guard lock(mutex_);
    return {bytes_, static_cast<int64_t>(kept_.size()), reused_, allocated_, evicted_, limit_};
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Buffer> kept_;
  const size_t max_buffers_;
  int64_t limit_;
  int64_t bytes_ = 0, reused_ = 0, allocated_ = 0, evicted_ = 0;
};

}  // namespace veneer
