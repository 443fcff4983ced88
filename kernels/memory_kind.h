// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Where a buffer lives: host, device or managed memory.
//
// Asked on every call that Veneer might take over, so it must be cheap and
// must never change the process: it never initialises CUDA and never creates
// a context. A process that has not loaded the CUDA driver (libcuda.so.1)
// cannot hold device memory, so the answer is `host` at once; once the driver
// is loaded (by the application), the driver itself is asked through
// cuPointerGetAttributes, looked up with dlsym, so Veneer does not link
// against it. Plain C++ with no CUDA headers: built into every libveneer,
// with or without the CUDA kernels, so that even a build without CUDA sees
// device buffers and passes them through.
#include <atomic>
#include <cstdint>

namespace veneer::kernels {

enum class MemoryKind {
  host,     // ordinary, pinned or registered host memory: the CPU may touch it
  device,   // device memory: only the GPU (or a CUDA-aware MPI) may touch it
  managed,  // managed (unified) memory: either, with page migration
  unknown,  // the driver gave an answer Veneer does not understand: pass through
};

// The memory kind of `p`. If `device` is not null it receives the ordinal of
// the device holding device or managed memory (-1 for host memory).
// Thread-safe. Driver errors read as host: they come from pointers the driver
// does not know (including any pointer before the application's cuInit).
MemoryKind memory_kind(const void* p, int* device = nullptr);

namespace detail {
extern std::atomic<bool> g_driver_found;                        // the driver was found (it stays)
extern std::atomic<std::atomic<unsigned char>*> g_loaded_flag;  // see watch_loads()
extern std::atomic<bool> g_driver_missing;                      // asked, and it was not there
// One byte for the pass-through: 1 while no buffer of this process can be
// device memory, known without asking (the driver was asked and missing,
// nothing was dlopen'ed since, no runtime installed). Raised by the slow
// check; lowered by every dlopen (the watch) and by installing a runtime.
extern std::atomic<unsigned char> g_quiet;
// Bumped, when set, every time g_quiet changes (libveneer: the type cache's
// epoch, whose per-thread entries hold the send rule worked out with it).
extern std::atomic<std::atomic<uint64_t>*> g_quiet_epoch;
// Stores `value` in g_quiet, bumping g_quiet_epoch if that changed it.
void set_quiet(unsigned char value);
extern std::atomic<bool> g_runtime_installed;  // install_device_runtime() holds a runtime
extern thread_local constinit int t_calls_until_recheck [[gnu::tls_model("initial-exec")]];
bool cuda_driver_loaded_slow();
}  // namespace detail

// True only when the driver is known to be absent without asking the loader
// (false: maybe loaded; cuda_driver_loaded() tells). Never calls out.
[[gnu::always_inline]] inline bool cuda_driver_surely_absent() {
  std::atomic<unsigned char>* flag = detail::g_loaded_flag.load(std::memory_order_relaxed);
  return flag && !detail::g_driver_found.load(std::memory_order_relaxed) &&
         detail::g_driver_missing.load(std::memory_order_relaxed) && flag->load(std::memory_order_acquire) == 0 &&
         --detail::t_calls_until_recheck > 0;
}

// Whether the CUDA driver library is loaded into this process (by anyone).
// A few loads while nothing was loaded since the last answer (see watch_loads).
[[gnu::always_inline]] inline bool cuda_driver_loaded() {
  if (detail::g_driver_found.load(std::memory_order_acquire)) return true;
  std::atomic<unsigned char>* flag = detail::g_loaded_flag.load(std::memory_order_relaxed);
  if (flag && detail::g_driver_missing.load(std::memory_order_relaxed) && flag->load(std::memory_order_acquire) == 0 &&
      --detail::t_calls_until_recheck > 0)
    return false;
  return detail::cuda_driver_loaded_slow();
}

// Asking the loader whether anything was loaded (dl_iterate_phdr) takes its
// lock: about 15 ns, on every call Veneer might take over. Where the
// interposer watches dlopen (interposer/loader.cpp), it hands over a flag it
// raises on every dlopen: while the flag is down and the driver was missing,
// it is still missing, apart from objects loaded behind dlopen's back, which a
// check every few thousand calls per thread still finds. Without a watch,
// every call asks the loader.
// `next_dlopen` is the dlopen behind the watch, used for Veneer's own
// "is it loaded?" question so that asking does not raise the flag. Returns
// the byte every dlopen must also lower (store 0), after raising the flag:
// detail::g_quiet, the whole of the pass-through's question.
using DlopenFn = void* (*)(const char*, int);
std::atomic<unsigned char>* watch_loads(std::atomic<unsigned char>* loaded_flag, DlopenFn next_dlopen);

const char* to_string(MemoryKind kind);

}  // namespace veneer::kernels
