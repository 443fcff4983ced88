// SPDX-License-Identifier: BSD-3-Clause
#include "interposer/footprint.h"

#include "datatypes/cache.h"
#include "interposer/device.h"
#include "interposer/requests.h"
#include "kernels/device_transfer.h"
#include "support/config.h"
#include "support/staging.h"
#include "topology/hierarchy.h"

namespace veneer {

Footprint footprint() {
  Footprint f;
  const Config& cfg = config();
  f.type_cache_entries = datatypes::cache_stats().entries;
  f.type_cache_limit = cfg.type_cache_limit;
  const StagingStats staging = staging_stats();
  f.staging_bytes = staging.pooled_bytes;
  f.staging_buffers = staging.pooled_buffers;
  f.staging_limit = staging.limit;
  const kernels::PoolStats pools = kernels::pool_stats();
  f.pinned_bytes = pools.pinned_bytes;
  f.device_bytes = pools.device_bytes;
  f.pinned_limit = cfg.pinned_pool;
  f.device_packers = device::cached_packers();
  f.requests_tracked = requests::tracked_count();
  f.requests_detached = requests::detached_count();
  f.hierarchies = topology::live_hierarchies();
  return f;
}

}  // namespace veneer
