// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The run-time switchboard: every VENEER_* environment variable, read once.
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "support/send_rule.h"

#ifndef VENEER_DEFAULT_P2P_MAX_BLOCK
#define VENEER_DEFAULT_P2P_MAX_BLOCK 64
#endif
#ifndef VENEER_DEFAULT_P2P_MIN_BYTES
#define VENEER_DEFAULT_P2P_MIN_BYTES 65536
#endif
#ifndef VENEER_DEFAULT_ALLTOALL_MAX_BLOCK
#define VENEER_DEFAULT_ALLTOALL_MAX_BLOCK VENEER_DEFAULT_P2P_MAX_BLOCK
#endif

namespace veneer {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

// How device buffers travel (VENEER_DEVICE_METHOD); see kernels/device_transfer.h.
enum class DeviceChoice { automatic, oneshot, staged };
// Where a staged collective on device buffers combines (VENEER_DEVICE_REDUCE).
enum class DeviceReduce { automatic, host, device };

// Where a take-over threshold came from: the compile-time default, the
// calibrated machine profile, or the user's variable (which always wins).
enum class ThresholdOrigin { built_in, profile, environment };

// The fields every passed-through call reads (the switches, report, the send
// thresholds) come first, so that they share one cache line.
struct alignas(64) Config {
  bool enabled = true;      // VENEER_DISABLE=1 turns everything off
  bool datatypes = true;    // VENEER_DATATYPES=0 turns the datatype engine off
  bool pack = true;         // VENEER_PACK=0: MPI_Pack/Unpack go to the library
  bool p2p = true;          // VENEER_P2P=0: sends/receives go to the library
  bool alltoall = true;     // VENEER_ALLTOALLV=0: Alltoallv/w go to the library
  bool collectives = true;  // VENEER_COLLECTIVES=0: collectives go to the library
  bool device = true;       // VENEER_DEVICE=0: device (GPU) buffers go to the library untouched
  // report == 0, kept by parse_config: collectives the library serves may
  // be marked for the interposer's quick path, which counts nothing
  // (interposer/collectives.cpp quick_path_open; switched off too).
  bool collectives_quick = true;
  LogLevel log_level = LogLevel::warn;  // VENEER_LOG=error|warn|info|debug
  int report = 0;                       // VENEER_REPORT=0|1|2 (2: per rank)
  // Send/receive take-over rule: non-contiguous data whose mean contiguous
  // block is at most this many bytes (VENEER_P2P_MAX_BLOCK). The default
  // depends on the library (measured, see docs/results.md): Open MPI's shared-memory
  // path moves larger blocks without packing, MPICH's packs them slowly.
  // A calibrated profile replaces it at MPI_Init (set_profile_thresholds).
  int64_t p2p_max_block = VENEER_DEFAULT_P2P_MAX_BLOCK;
  ThresholdOrigin p2p_max_block_origin = ThresholdOrigin::built_in;
  // Largest message (bytes) staged through a temporary buffer (VENEER_P2P_MAX_BYTES).
  int64_t p2p_max_bytes = int64_t{256} << 20;
  // Smallest message (bytes) taken over (VENEER_P2P_MIN_BYTES). Below it the
  // cost per message of staging and tracking a request outweighs the faster
  // packing. Halo exchanges of single-double faces (26 neighbours, 2 ranks)
  // taken over: 4.6 KB faces 0.5-0.8x of the library on both MPIs; 18 KB
  // faces 1.04-1.37x on Open MPI but 0.82-0.85x on MPICH; 32 KB faces 1.15-1.19x
  // on Open MPI; 73 KB faces 1.33-1.39x on MPICH. Hence 16 KiB / 64 KiB.
  int64_t p2p_min_bytes = VENEER_DEFAULT_P2P_MIN_BYTES;
  // The same two bounds for nonblocking sends and receives (Isend, Irecv,
  // ...): equal to them, except under a profile, whose tables time one
  // blocking message at a time: there nonblocking calls keep the built-in
  // bounds, measured on halo exchanges, as well (interposer/switchboard.h).
  int64_t p2p_nonblocking_min_bytes = VENEER_DEFAULT_P2P_MIN_BYTES;
  int64_t p2p_nonblocking_max_block = VENEER_DEFAULT_P2P_MAX_BLOCK;
  ThresholdOrigin p2p_min_bytes_origin = ThresholdOrigin::built_in;
  // The calibrated profile's per-peer-level send tables (support/send_rule.h),
  // when it has them and the user set neither VENEER_P2P_MAX_BLOCK nor
  // VENEER_P2P_MIN_BYTES; null: the two thresholds above are the whole rule.
  // Installed, they decide in p2p_layout, and the two thresholds become the
  // tables' loosest bounds (what the pass-through fast path tests).
  std::shared_ptr<const SendRules> send_rules;
  // Without tables and with both thresholds built in, the rule holds in a job
  // on one host only: on several, every send and receive goes to the
  // library. The built-in bounds were measured on halo exchanges within one
  // host. Across hosts the network bounds the exchange, so packing the
  // within-host faces cannot shorten it, and taking over the others lost
  // (halo3d's ring of 1 MiB faces on the 2-host namespace cluster, placed in
  // blocks: 0.81-0.85x of the library with every face taken over, 0.89-0.92x
  // with the within-host faces taken over, 1.00x with none). Pretend nodes
  // (VENEER_RANKS_PER_NODE) are one host. A threshold the user sets, or a
  // profile's tables, are the rule in any job.
  bool p2p_one_host_only = true;
  // Alltoallv/w take-over rule per block, same meaning (VENEER_ALLTOALL_MAX_BLOCK);
  // its own default per library (support/CMakeLists.txt: the halo exchange measured).
  int64_t alltoall_max_block = VENEER_DEFAULT_ALLTOALL_MAX_BLOCK;
  ThresholdOrigin alltoall_max_block_origin = ThresholdOrigin::built_in;
  // Smallest Alltoallv/w block (bytes) that Veneer packs (VENEER_ALLTOALL_MIN_BYTES).
  int64_t alltoall_min_bytes = 0;
  // MPI_Pack/MPI_Unpack take-over rule for types of several contiguous runs:
  // a mean block of at most this many bytes (VENEER_PACK_MAX_BLOCK). Without
  // a profile, every decoded type (Veneer's packer was measured as fast or
  // faster at every block size: README's packing table); a calibrated
  // profile's "pack" section replaces it. One contiguous run is always copied
  // by Veneer (a memcpy without the library's fixed cost).
  int64_t pack_max_block = std::numeric_limits<int64_t>::max();
  ThresholdOrigin pack_max_block_origin = ThresholdOrigin::built_in;
  // Bytes of freed staging buffers kept for reuse (VENEER_STAGING_POOL).
  int64_t staging_pool = int64_t{64} << 20;
  // Packing uses streaming (non-temporal) stores when the bytes it touches,
  // source lines plus output, reach this many (VENEER_PACK_STREAM_MIN);
  // -1: three quarters of the last-level cache, as glibc's memcpy does.
  int64_t pack_stream_min = -1;
  // Device (GPU) buffers (VENEER_DEVICE: above).
  DeviceChoice device_method = DeviceChoice::automatic;  // VENEER_DEVICE_METHOD=auto|oneshot|staged
  // VENEER_DEVICE_REDUCE=auto|host|device: where Veneer's reduction algorithms
  // combine when a reduction collective is staged from device buffers (auto:
  // host, until measured on a GPU; see interposer/device_reduce.cpp).
  DeviceReduce device_reduce = DeviceReduce::automatic;
  // Whether the MPI library can read and write device memory itself
  // (VENEER_CUDA_AWARE=0|1; unset: asked from the library at MPI_Init).
  int cuda_aware = -1;
  // Automatic method without a CUDA-aware library: one-shot up to this many
  // bytes, the staged pipeline above (VENEER_DEVICE_ONESHOT_MAX).
  int64_t device_oneshot_max = int64_t{256} << 10;
  int64_t device_chunk = int64_t{1} << 20;   // VENEER_DEVICE_CHUNK: staged pipeline chunk
  int64_t pinned_pool = int64_t{256} << 20;  // VENEER_PINNED_POOL: pinned/device buffers kept for reuse
  // Most layouts kept in the per-type cache (VENEER_TYPE_CACHE); freed types leave it at once.
  int64_t type_cache_limit = 100000;
  // Calls of each side (Veneer's algorithm, the library) run on the
  // application's own calls before a collective choice is kept, in blocks
  // of four (VENEER_TRIAL; 0: no trials). See algorithms/trial.h. Unset,
  // the choices on a communicator whose rank count the profile did not
  // time are tried, and on the counts it timed those with a thin lead
  // (trial_timed false); set to N > 0, also every other model choice on the
  // counts it timed.
  int trial_calls = 32;
  bool trial_timed = false;
  std::string report_file;  // VENEER_REPORT_FILE=path (default stderr)
};

// Parses the environment (pure function of its argument for tests).
Config parse_config(const char* (*env)(const char*));
// The process-wide configuration: read from the environment when the library
// loads and again at MPI_Init. A plain global, so asking costs nothing.
extern Config g_config;
inline const Config& config() { return g_config; }
// Re-read the environment (used at MPI_Init); thresholds a profile set stay
// (set_profile_thresholds), unless the variable is now set.
void reload_config();

// The send/receive and Alltoallv/w take-over thresholds from a calibrated
// profile (nullopt: back to the built-in default), each unless the user set
// its variable; remembered across reload_config(). Called at MPI_Init (after
// reload_config()) on every rank with the same values; not while other
// threads make MPI calls.
void set_profile_thresholds(std::optional<int64_t> p2p_max_block, std::optional<int64_t> alltoall_max_block,
                            std::optional<int64_t> pack_max_block = std::nullopt);
// The profile's per-peer-level send tables (null or empty: none), each time
// the configuration is read unless the user set VENEER_P2P_MAX_BLOCK or
// VENEER_P2P_MIN_BYTES; remembered across reload_config(). Same calling rules
// as set_profile_thresholds.
void set_profile_send_rules(std::shared_ptr<const SendRules> rules);
inline constexpr int64_t kTypesRecount = int64_t{1} << 40;
// The words every send and receive that passes reads, in one cache line
// (a passed call touches no other line of Veneer's for them).
struct alignas(64) CacheWords {
  // Bumped whenever something that per-thread caches copy changes: a type
  // leaving the layout cache (datatypes/cache.h), or the configuration being
  // re-read or given a profile's thresholds (the type cache's front entries
  // hold the send rule's thresholds per type). Entries of another epoch are
  // stale.
  std::atomic<uint64_t> epoch{1};
  // For blocking [0] and nonblocking [1] sends and receives: how many
  // committed derived types are not known to go to the library in every such
  // call of host data, plus one while passes are counted (at 0, every such
  // call skips the type lookup: lean_below below). The
  // configuration changing adds kTypesRecount to both: the type cache then
  // counts again under the new rules at its next miss. Starts so.
  std::atomic<int64_t> types_unsettled[2]{kTypesRecount, kTypesRecount};
  // For the same two kinds: sends and receives of host data with fewer
  // elements than this go to the library whatever their type, without a
  // lookup (datatypes/cache.h every_type_passes): the least count at which
  // a counted type may be taken over, the largest int while none is
  // counted, 0 while the types are to be counted again or passes are
  // counted one by one. Every change of the configuration sets it to 0.
  std::atomic<int32_t> lean_below[2]{0, 0};
};
extern CacheWords g_cache_words;
inline constexpr std::atomic<uint64_t>& g_cache_epoch = g_cache_words.epoch;
inline constexpr std::atomic<int64_t> (&g_types_unsettled)[2] = g_cache_words.types_unsettled;
inline constexpr std::atomic<int32_t> (&g_lean_below)[2] = g_cache_words.lean_below;

// "profile", "built-in default" or the variable's name, for the report.
std::string_view origin_name(ThresholdOrigin origin, std::string_view variable);

// "64k", "1M", "inf", "123" -> bytes; nullopt on junk.
std::optional<int64_t> parse_size(std::string_view text);

}  // namespace veneer
