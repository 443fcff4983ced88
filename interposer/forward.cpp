#include "interposer/forward.h"

#include <dlfcn.h>

namespace veneer::next {

#define VENEER_DEFINE(name) decltype(&PMPI_##name) name = &PMPI_##name;
VENEER_FORWARDED(VENEER_DEFINE)
VENEER_FORWARDED_LARGE(VENEER_DEFINE)
#undef VENEER_DEFINE

void resolve() {
#define VENEER_RESOLVE(name)                                                                \
  if (void* f = dlsym(RTLD_NEXT, "MPI_" #name)) name = reinterpret_cast<decltype(name)>(f); \
  else name = &PMPI_##name;
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
