// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Host packers over the canonical layout.
//
// The packed stream of `count` instances of a layout at `buf` is instance 0's
// stream, then instance 1's at buf + extent, and so on (MPI's type map order).
// pack() copies bytes [skip, skip + max_bytes) of that stream to `out` and
// returns how many it copied (fewer only at the end of the stream); unpack()
// is the inverse. Offsets are bytes, signed 64-bit; nothing is ever read or
// written outside the type map.
#include <cstdint>

#include "datatypes/layout.h"

namespace veneer::datatypes {

int64_t pack(const Layout& layout, int64_t count, const void* buf, int64_t skip, int64_t max_bytes, void* out);
int64_t unpack(const Layout& layout, int64_t count, void* buf, int64_t skip, int64_t max_bytes, const void* in);

// Whole-stream conveniences.
inline int64_t pack_all(const Layout& l, int64_t count, const void* buf, void* out) {
  return pack(l, count, buf, 0, l.size * count, out);
}
inline int64_t unpack_all(const Layout& l, int64_t count, void* buf, const void* in) {
  return unpack(l, count, buf, 0, l.size * count, in);
}

}  // namespace veneer::datatypes
