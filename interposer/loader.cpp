// SPDX-License-Identifier: BSD-3-Clause
// Watches dlopen, so that "is the CUDA driver loaded yet?" (asked on every
// call Veneer might take over, kernels/memory_kind.h) costs a flag load
// instead of a trip through the loader's lock.
//
// Veneer's dlopen raises a flag and jumps (does not call) to the next
// dlopen. A jump leaves the caller's return address on the stack, and that is
// what dlopen reads to know who called it: the caller's RUNPATH, $ORIGIN and
// link namespace keep applying to the object it loads, as without Veneer. A
// C++ wrapper would make libveneer the caller and break those lookups, hence
// the few lines of assembly. On other architectures nothing is watched and
// every check asks the loader.
#include <dlfcn.h>

#include <atomic>
#include <cstdint>

#include "kernels/memory_kind.h"
#include "support/config.h"

namespace {
std::atomic<unsigned char> g_loaded{1};
}  // namespace

extern "C" {
// Read and written by the assembly below (hidden: reached PC-relative).
[[gnu::visibility("hidden")]] void* veneer_next_dlopen = nullptr;
[[gnu::visibility("hidden")]] unsigned char* veneer_loaded_flag = nullptr;
[[gnu::visibility("hidden")]] unsigned char* veneer_quiet_flag = nullptr;
[[gnu::visibility("hidden")]] uint64_t* veneer_quiet_epoch = nullptr;

// The next dlopen (libc's), for a dlopen that arrives before the constructor below ran.
[[gnu::visibility("hidden")]] void* veneer_resolve_dlopen() {
  if (!veneer_next_dlopen) veneer_next_dlopen = dlsym(RTLD_NEXT, "dlopen");
  return veneer_next_dlopen;
}
}

namespace {
// The type cache's per-thread send rules are worked out with the
// pass-through's device byte (interposer/switchboard.h fill_pass_rule): every
// change of the byte makes them stale.
// Registered here for both: the kernels layer's stores of the byte, and the
// assembly's (below, read PC-relative).
struct QuietEpoch {
  QuietEpoch() {
    veneer_quiet_epoch = reinterpret_cast<uint64_t*>(&veneer::g_cache_epoch);
    veneer::kernels::detail::g_quiet_epoch.store(&veneer::g_cache_epoch, std::memory_order_release);
  }
} quiet_epoch;
}  // namespace

#if defined(__x86_64__) && defined(__ELF__)
static_assert(sizeof(std::atomic<unsigned char>) == 1, "the flag is stored as one byte");
static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "the epoch is bumped as one locked quadword");
// dlopen(file, mode): raise the flag, lower the pass-through's byte (in that
// order: kernels/memory_kind.cpp relies on it) and bump the type cache's
// epoch (the per-thread send rules were worked out with the byte up), then
// jump to the next dlopen with the arguments (rdi, rsi) and the caller's
// return address untouched.
asm(R"(
        .text
        .globl  dlopen
        .type   dlopen, @function
dlopen:
        .cfi_startproc
        movq    veneer_loaded_flag(%rip), %rax
        testq   %rax, %rax
        jz      1f
        movb    $1, (%rax)
        movq    veneer_quiet_flag(%rip), %rax
        movb    $0, (%rax)
        movq    veneer_quiet_epoch(%rip), %rax
        lock incq (%rax)
1:      movq    veneer_next_dlopen(%rip), %rax
        testq   %rax, %rax
        jz      2f
        jmp     *%rax
2:      pushq   %rdi
        .cfi_adjust_cfa_offset 8
        pushq   %rsi
        .cfi_adjust_cfa_offset 8
        subq    $8, %rsp
        .cfi_adjust_cfa_offset 8
        call    veneer_resolve_dlopen
        addq    $8, %rsp
        .cfi_adjust_cfa_offset -8
        popq    %rsi
        .cfi_adjust_cfa_offset -8
        popq    %rdi
        .cfi_adjust_cfa_offset -8
        jmp     *%rax
        .cfi_endproc
        .size   dlopen, .-dlopen
)");

namespace {
struct WatchAtLoad {
  WatchAtLoad() {
    veneer_resolve_dlopen();
    if (!veneer_next_dlopen) return;  // no dlopen behind ours: nothing is watched
    std::atomic<unsigned char>* quiet =
        veneer::kernels::watch_loads(&g_loaded, reinterpret_cast<veneer::kernels::DlopenFn>(veneer_next_dlopen));
    veneer_quiet_flag = reinterpret_cast<unsigned char*>(quiet);
    veneer_loaded_flag = reinterpret_cast<unsigned char*>(&g_loaded);
  }
} watch_at_load;
}  // namespace
#endif
