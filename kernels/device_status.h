// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The one error convention of kernels/: every device step that can fail
// (DeviceRuntime's stream-ordered work, synchronisation, device selection,
// and the transfers of device_transfer.h) returns a DeviceStatus, a value.
// Acquisitions (memory, streams, events, packers) return their handle, null
// on failure, with the cause logged the same way. Only the CUDA-only files
// (device_pack.cu, device_reduce.cu) speak cudaError_t, which
// cuda_runtime.cpp turns into a DeviceStatus.
//
// A failure is logged with its cause (the runtime's error name and text) by
// failure(), where it happens: the interposer above turns it into an MPI
// error code or a pass-through and has no cause of its own to add. Plain C++.
#include "support/config.h"
#include "support/log.h"

namespace veneer::kernels {

class DeviceStatus {
 public:
  DeviceStatus() = default;  // success

  // A failure of `step` (what was asked: "cudaMemcpyAsync", "staged pack"),
  // `code` and `name` the runtime's (cudaErrorMemoryAllocation), `text` its
  // explanation. The strings must be static (CUDA's error strings are).
  static DeviceStatus failure(const char* step, int code, const char* name, const char* text,
                              LogLevel level = LogLevel::warn) {
    log(level, "device: %s failed: %s (%d): %s", step, name, code, text);
    DeviceStatus s;
    s.step_ = step;
    s.code_ = code;
    s.name_ = name;
    return s;
  }

  bool ok() const { return step_ == nullptr; }
  // Implicit: callers test a step as they test a bool (`if (!rt.copy(...))`).
  operator bool() const { return ok(); }  // NOLINT(google-explicit-constructor)
  const char* step() const { return step_ ? step_ : ""; }
  int code() const { return code_; }
  const char* name() const { return name_; }

 private:
  const char* step_ = nullptr;
  int code_ = 0;
  const char* name_ = "success";
};

}  // namespace veneer::kernels
