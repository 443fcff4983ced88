// SPDX-License-Identifier: BSD-3-Clause
#include "support/staging.h"

#include <cstdlib>

#include "support/config.h"
#include "support/pool.h"

namespace veneer {
namespace {

// Buffers below this size come from malloc's own free lists, cheaply.
constexpr size_t kPoolMin = size_t{64} << 10;
constexpr size_t kMaxPooled = 16;

BestFitPool<>& pool() {
  static auto* p = new BestFitPool<>(kMaxPooled, config().staging_pool);  // outlives static destructors
  return *p;
}

void give(char* data, size_t capacity) {
  const int64_t limit = config().staging_pool;  // read on every return: reload_config() may change it
  if (capacity >= kPoolMin && static_cast<int64_t>(capacity) <= limit) {
    BestFitPool<>& p = pool();
    p.set_limit(limit);
    for (const auto& out : p.keep({{}, data, capacity})) std::free(out.data);
    return;
  }
  std::free(data);
}

}  // namespace

Staging::Staging(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes >= kPoolMin) {
    if (auto kept = pool().take({}, bytes)) {
      data_ = kept->data;
      capacity_ = kept->capacity;
      return;
    }
    pool().allocated();
  }
  data_ = static_cast<char*>(std::malloc(bytes));
  capacity_ = data_ ? bytes : 0;
}

Staging::~Staging() {
  if (data_) give(data_, capacity_);
}

Staging& Staging::operator=(Staging&& other) noexcept {
  if (this != &other) {
    if (data_) give(data_, capacity_);
    data_ = other.data_;
    capacity_ = other.capacity_;
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  return *this;
}

StagingStats staging_stats() {
  StagingStats s = pool().usage();
  s.limit = config().staging_pool;
  return s;
}

void staging_release_all() {
  for (const auto& kept : pool().drain()) std::free(kept.data);
}

}  // namespace veneer
