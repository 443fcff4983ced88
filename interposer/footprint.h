// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What Veneer holds right now, module by module: the sizes the bounded-memory
// rule (ARCHITECTURE.md) is about. Printed in the end-of-run report and read
// by the long-run test, which checks that none of them grows with the number
// of calls once the working set is warm.
#include <cstdint>

namespace veneer {

struct Footprint {
  int64_t type_cache_entries = 0;  // types the layout cache knows (datatypes/cache)
  int64_t type_cache_limit = 0;    // VENEER_TYPE_CACHE
  int64_t staging_bytes = 0;       // freed staging buffers kept for reuse (support/staging)
  int64_t staging_buffers = 0;
  int64_t staging_limit = 0;      // VENEER_STAGING_POOL
  int64_t pinned_bytes = 0;       // pooled pinned host buffers (kernels/device_transfer)
  int64_t device_bytes = 0;       // pooled device staging buffers
  int64_t pinned_limit = 0;       // VENEER_PINNED_POOL (each of the two)
  int64_t device_packers = 0;     // device packers cached per type (interposer/device)
  int64_t requests_tracked = 0;   // nonblocking operations Veneer started, not yet completed (interposer/requests)
  int64_t requests_detached = 0;  // of those, freed by MPI_Request_free and finishing in the background
  int64_t hierarchies = 0;  // communicator hierarchies alive, each with Veneer's own communicators (topology/hierarchy)
};

Footprint footprint();

}  // namespace veneer
