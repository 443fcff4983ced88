#pragma once
// The per-type layout cache. Built lazily on first use; an entry leaves when
// its type is freed (a type attribute with a delete callback), so handle reuse
// is safe. Only types known to be committed are described: predefined types,
// and derived types seen by MPI_Type_commit (note_committed). Anything else
// returns null and the caller passes through to the library.
#include <mpi.h>

#include <cstdint>
#include <memory>

#include "datatypes/layout.h"

namespace veneer::datatypes {

// Call once after MPI_Init (creates the type keyval).
void cache_init();
// Call at MPI_Finalize (frees the keyval, drops every entry).
void cache_finalize();
// Record that `type` was just committed successfully.
void note_committed(MPI_Datatype type);
// The layout of `type`, or null if Veneer cannot or must not describe it.
std::shared_ptr<const Layout> lookup(MPI_Datatype type);

// The same, without taking a reference: the pointer is valid until the type
// is freed or this thread looks up another type. For quick checks on the
// pass-through path.
const Layout* peek(MPI_Datatype type);

struct CacheStats {
  int64_t entries = 0, hits = 0, misses = 0, decoded = 0, unsupported = 0, evicted = 0;
};
CacheStats cache_stats();

}  // namespace veneer::datatypes
