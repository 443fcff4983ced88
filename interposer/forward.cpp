// SPDX-License-Identifier: BSD-3-Clause
#include "interposer/forward.h"

#include <dlfcn.h>

namespace veneer::next {

#define VENEER_DEFINE(name) decltype(&PMPI_##name) name = &PMPI_##name;
VENEER_FORWARDED(VENEER_DEFINE)
VENEER_FORWARDED_LARGE(VENEER_DEFINE)
#undef VENEER_DEFINE

namespace {
// `slot` becomes the next definition of `symbol` after Veneer's, else the library's own.
template <class Fn>
void bind_next(Fn& slot, const char* symbol, Fn library) {
  void* f = dlsym(RTLD_NEXT, symbol);
  slot = f ? reinterpret_cast<Fn>(f) : library;
}
}  // namespace

void resolve() {
#define VENEER_RESOLVE(name) bind_next(name, "MPI_" #name, &PMPI_##name);
  VENEER_FORWARDED(VENEER_RESOLVE)
  VENEER_FORWARDED_LARGE(VENEER_RESOLVE)
#undef VENEER_RESOLVE
}

namespace {
struct ResolveAtLoad {
  ResolveAtLoad() { resolve(); }
} resolve_at_load;
}  // namespace

}  // namespace veneer::next
