#include "support/staging.h"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "support/config.h"

namespace veneer {
namespace {

// Buffers below this size come from malloc's own free lists, cheaply.
constexpr size_t kPoolMin = size_t{64} << 10;
constexpr size_t kMaxPooled = 16;

struct Pool {
  std::mutex mutex;
  std::vector<std::pair<char*, size_t>> free;
  size_t bytes = 0;
  int64_t reused = 0, allocated = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // outlives static destructors
  return *p;
}

void give(char* data, size_t capacity) {
  const size_t limit = static_cast<size_t>(config().staging_pool);
  if (capacity >= kPoolMin && capacity <= limit) {
    Pool& p = pool();
    std::lock_guard lock(p.mutex);
    if (p.free.size() < kMaxPooled && p.bytes + capacity <= limit) {
      p.free.emplace_back(data, capacity);
      p.bytes += capacity;
      return;
    }
  }
  std::free(data);
}

}  // namespace

Staging::Staging(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes >= kPoolMin) {
    Pool& p = pool();
    std::lock_guard lock(p.mutex);
    // The smallest pooled buffer that fits without wasting more than half of it.
    size_t best = p.free.size();
    for (size_t i = 0; i < p.free.size(); ++i) {
      const size_t cap = p.free[i].second;
      if (cap >= bytes && cap / 2 <= bytes && (best == p.free.size() || cap < p.free[best].second)) best = i;
    }
    if (best != p.free.size()) {
      data_ = p.free[best].first;
      capacity_ = p.free[best].second;
      p.free[best] = p.free.back();
      p.free.pop_back();
      p.bytes -= capacity_;
      ++p.reused;
      return;
    }
    ++p.allocated;
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
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  return {static_cast<int64_t>(p.bytes), static_cast<int64_t>(p.free.size()), p.reused, p.allocated,
          config().staging_pool};
}

void staging_release_all() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  for (auto& [data, cap] : p.free) std::free(data);
  p.free.clear();
  p.bytes = 0;
}

}  // namespace veneer
