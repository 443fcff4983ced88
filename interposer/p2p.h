// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// One description per side of a point-to-point transfer: what a send hands
// the library (Outgoing) and where a receive lets the library write and how
// its bytes reach the user's buffer (Incoming). Each entry point builds its
// description with one function, then acts on it along one path, whatever
// the route:
//
// - pass: the user's own arguments go to the library;
// - host: the data is packed on the host (Veneer's packer) into staging and
//   moved as MPI_BYTE; a receive is unpacked from staging when it completes;
// - device: a device buffer (interposer/device.h) packed on the GPU into
//   pinned host memory (device memory for a CUDA-aware library); a receive
//   lands there and is unpacked into the device buffer.
#include <mpi.h>

#include <cstdint>
#include <memory>

#include "datatypes/layout.h"
#include "interposer/device.h"
#include "support/staging.h"

namespace veneer {

enum class Route : uint8_t { pass, host, device };

// Which routes a builder may choose (persistent requests and matched
// receives: pass or device; host data of theirs stays with the library).
// `nonblocking`: any, but host data by a calibrated profile's send tables
// only from the built-in smallest message on (see p2p_layout).
enum class Routes : uint8_t { any, nonblocking, device_only };

struct Outgoing {
  Route route = Route::pass;
  // What the library is handed.
  const void* buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  // The user's buffer (device route: packed again at every MPI_Start).
  const void* user = nullptr;
  int user_count = 0;
  Staging host;             // host route: the packed bytes
  device::Carried carried;  // device route: the buffer and its packer
  device::Packed device;    // device route: the packed bytes
};

struct Incoming {
  Route route = Route::pass;
  // Where the library receives.
  void* buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  // The user's buffer the bytes are unpacked into.
  void* user = nullptr;
  int user_count = 0;
  std::shared_ptr<const datatypes::Layout> layout;  // host route: how to unpack
  Staging host;                                     // host route: the landing zone
  int64_t capacity = 0;                             // bytes the library may write
  device::Carried carried;                          // device route
  device::Packed device;                            // device route: the landing zone
  bool unpacked = false;                            // already unpacked (MPI_Request_get_status, or done)
};

// The description of sending `count` instances of `type` at `buf` to `peer`
// on `comm` (a matched receive, whose partner is already fixed, passes 0 and
// MPI_COMM_NULL: it takes no host route, which asks the communicator). Never
// fails: what cannot be staged (no memory, the device failed) passes
// through, logged. Counts the decision (support/counters.h).
Outgoing outgoing(const void* buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, Routes routes = Routes::any);
// The same for a receive; the landing zone is allocated, nothing received yet.
Incoming incoming(void* buf, int count, MPI_Datatype type, int peer, MPI_Comm comm, Routes routes = Routes::any);

// Packs the user's buffer again into the same staging (persistent sends, at
// every MPI_Start); an MPI error code.
int repack(Outgoing& out);

// Unpacks what the library received (its status `st` and return code `rc`)
// into the user's buffer, once; returns rc, or MPI_ERR_INTERN (logged with
// its cause) if the device failed to unpack. A receive that failed for another
// reason than truncation has nothing to unpack (a cancelled one is
// requests::complete()'s to skip).
int finish(Incoming& in, const MPI_Status& st, int rc);

}  // namespace veneer
