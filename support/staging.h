// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Staging buffers for packed messages, reused across calls. Fresh large
// allocations come from mmap and fault in every page on first touch, which
// costs more than packing; a small pool of recently freed buffers avoids it.
// The pool (support/pool.h: best fit, at most 16 buffers of 64 KiB or more)
// is bounded (VENEER_STAGING_POOL bytes) and emptied at MPI_Finalize.
#include <cstddef>
#include <cstdint>

#include "support/pool.h"

namespace veneer {

class Staging {
 public:
  Staging() = default;
  explicit Staging(size_t bytes);  // at least `bytes` (a 1-byte buffer for 0)
  ~Staging();
  Staging(Staging&& other) noexcept : data_(other.data_), capacity_(other.capacity_) {
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  Staging& operator=(Staging&& other) noexcept;
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  char* get() const { return data_; }
  size_t capacity() const { return capacity_; }
  // Gives up ownership without freeing (memory the library may still use).
  void leak() {
    data_ = nullptr;
    capacity_ = 0;
  }

 private:
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

using StagingStats = PoolUsage;  // support/pool.h
StagingStats staging_stats();
void staging_release_all();  // gives every pooled buffer back to the system

}  // namespace veneer
