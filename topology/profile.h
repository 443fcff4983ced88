// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The machine profile: what `veneer-calibrate` measured on this machine, as
// versioned JSON, keyed by a fingerprint of the machine and the software, so
// a profile is only ever applied where it was measured.
//
//   {
//     "format": "veneer-profile",
//     "version": 1,
//     "fingerprint": {"topology": "<hex digest of hwloc's view>", "cpu": "<model name>",
//                     "mpi": "<first line of MPI_Get_library_version>",
//                     "transport": "<Open MPI: pml (OMPI_MCA_pml, default ob1); MPICH: its device>",
//                     "veneer": "<VENEER_VERSION>"},
//     "created": "2025-01-31T12:00:00Z",
//     "machine": "<hwloc summary, for people>",                                 (optional)
//     "calibration": {"ranks": 4, "nodes": 1, "seconds": 95.2, ...},             (optional, for people)
//     "levels": {                                                                (optional, each level too)
//       "intra": {"alpha": s, "beta": s/byte, "gamma": s/byte, "fit_error": relative,
//                 "points": [{"bytes": b, "pairs": k, "seconds": s}, ...]},     ("points": optional)
//       "inter": {...}
//     },
//     "nic_streams": 4,                                                          (optional)
//     "collectives": [                                                           (optional)
//       {"collective": "allreduce", "ranks": 4, "nodes": 1, "ranks_per_node": 4,
//        "min_ranks_per_node": 4, "node_consecutive": true,                      (optional: = ranks_per_node, true)
//        "bytes": 4096,
//        "times": {"library": {"median": s, "spread": relative,
//                              "returned": s, "patterns": s, "rotating": s},    (the last three optional)
//                  "two_level": {...}, ...}},
//       ...
//     ],
//     "p2p": {                                                                   (optional, each part too)
//       "intra": {"max_block": 64,
//                 "points": [{"block": 8, "bytes": 65536,
//                             "library": {"median": s, "spread": relative},
//                             "veneer": {"median": s, "spread": relative}}, ...]},
//       "inter": {...},
//       "pack": {...}
//     }
//   }
//
// Times are seconds per call: the maximum over ranks of each rank's median
// over n interleaved repeats. "spread" says how far such a median may be off,
// relative to it: the standard error of a median estimated from the
// inter-quartile range, 1.858 x (IQR / 2) / sqrt(n) / median, the largest over
// ranks. "fit_error" is the relative root-mean-square error of the
// alpha + beta * bytes fit.
// "p2p" compares, per block class (the contiguous block of a strided vector,
// in bytes) and message size, the library's typed transfer with Veneer's
// (pack, send bytes, unpack): "intra" and "inter" are one-way ping-pong times
// with a peer on the same node and on another one, "pack" is MPI_Pack against
// Veneer's packer on one rank. "max_block" is the derived take-over threshold
// (p2p_max_block below), in bytes; 0: never take over. A profile without the
// section (written before it existed) loads, and the built-in thresholds stay.
// Readers ignore members they do not know; members they know must have the
// right type, or the profile is rejected as corrupt.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/json.h"

namespace veneer::topology {

inline constexpr std::string_view profile_format = "veneer-profile";
inline constexpr int profile_version = 1;

struct Fingerprint {
  // Digest of hwloc's machine (packages, NUMA nodes, cores, PUs, caches, GPUs,
  // NICs), not of the binding, which depends on the launcher's options.
  std::string topology;
  std::string cpu;        // model name from /proc/cpuinfo
  std::string mpi;        // first line of MPI_Get_library_version
  std::string transport;  // Open MPI: its pml; MPICH: its device
  std::string veneer;     // VENEER_VERSION
  bool operator==(const Fingerprint&) const = default;
  // 16 hex digits over all fields, for report lines.
  std::string digest() const;
};

// This process's fingerprint (discovers the machine with hwloc on first use;
// MPI_Get_library_version may be called before MPI_Init).
Fingerprint current_fingerprint();

struct LevelFit {
  double alpha = 0;      // seconds per message
  double beta = 0;       // seconds per byte
  double gamma = 0;      // seconds per byte reduced (MPI_SUM of doubles)
  double fit_error = 0;  // relative RMS error of the fit
  struct Point {
    int64_t bytes = 0;
    int pairs = 1;       // concurrent ping-pong pairs
    double seconds = 0;  // one-way time
  };
  std::vector<Point> points;  // the measurements behind the fit (for people; optional)
};

struct Timing {
  double median = 0;  // seconds
  double spread = 0;  // relative
  // Collectives of 128 KiB and up: the median again with the heap handing
  // large freed blocks back to the system (glibc: fixed 128 KiB mmap and trim
  // thresholds), where `median` is taken with the heap keeping them. A
  // library that allocates a temporary per call maps and faults it in afresh
  // every call in the first state: a 1 MiB reduce_scatter_block on 4 ranks
  // ran 200 us in one and 1,480 us in the other. Which state a job's heap is
  // in depends on its history, so the model scores a choice by the slower of
  // the two (0: not measured; the median alone counts).
  double returned = 0;
  // Applications' call patterns, where `median` times back-to-back calls
  // with root 0. `patterns`: one call between barriers. A library's small
  // broadcast from a fixed root pipelines in a loop (0.25 us per call) and
  // costs 3-5x that once each call starts afresh; an algorithm is taken only
  // where it wins both ways (0: not measured). Profiles written before
  // `rotating` was stored hold the slower of the two patterns here.
  double patterns = 0;
  // Bcast and reduce: back to back with the root moving to the next rank on
  // every call (0: not measured). A call whose root differs from the
  // previous one's on its communicator is decided by this time instead of
  // the fixed-root ones: MPICH's own 16 B broadcast took 0.6 us from a fixed
  // root between barriers and 8 us with the root rotating, where a binomial
  // tree took 0.7 and 3.7.
  double rotating = 0;
  // The time a fixed-root call is scored by: the slowest fixed-root condition.
  double worst() const { return std::max({median, returned, patterns}); }
  // How much slower back-to-back calls ran with the heap handing blocks
  // back than keeping them (at least 1; 1 where not measured).
  double heap_factor() const { return returned > 0 && median > 0 ? std::max(1.0, returned / median) : 1.0; }
  // The time a call whose root moved is scored by: the rotating time, made
  // slower by the heap state as the fixed-root calls were (the fixed-root
  // one where the rotation was not timed). `returned` is a fixed-root time:
  // taken as it is, it scored MPICH's 1 MiB binomial reduce on 3 ranks,
  // 368 us with the root moving, by its 679 us from root 0, and the moving
  // root went to reduce_scatter_gather (460 us), which ran at 1.3-3.6x of
  // binomial in the model check.
  double worst_moving() const { return rotating > 0 ? rotating * heap_factor() : worst(); }
  // The time a call made first on its communicator since a barrier there is
  // scored by: one call between barriers (the back-to-back median where the
  // pattern was not timed) and the heap state that hands blocks back.
  double worst_after_barrier() const { return std::max(patterns > 0 ? patterns : median, returned); }
};

struct CollectivePoint {
  std::string collective;  // "allreduce", ...
  int ranks = 0;
  int nodes = 0;
  int ranks_per_node = 0;      // the largest node
  int min_ranks_per_node = 0;  // the smallest node
  bool node_consecutive = true;
  int64_t bytes = 0;                                  // as the tuning rules count them (algorithms/tuning.h)
  std::vector<std::pair<std::string, Timing>> times;  // "library" and algorithm names
};

// Library against Veneer at one block class and message size.
struct P2pPoint {
  int64_t block = 0;  // contiguous block, bytes
  int64_t bytes = 0;  // message (packed) bytes
  Timing library, veneer;
};

struct P2pLevel {
  int64_t max_block = 0;  // derived take-over threshold (bytes); 0: never
  std::vector<P2pPoint> points;
};

// Veneer against the library at one point, beyond both measured spreads.
enum class P2pOutcome { win, tie, loss };
P2pOutcome p2p_outcome(const P2pPoint& p);

// The take-over threshold a table supports, in bytes of mean contiguous block.
// At each (block, bytes) point Veneer wins when it is faster beyond both
// spreads (veneer x (1 + its spread) < library x (1 - its spread)) and loses
// when the library is, the other way round; otherwise a tie. A block class
// hurts when Veneer loses at half of its message sizes or more, or loses by
// more than `small_loss` (veneer median > (1 + small_loss) x library median)
// at any; it pays when it wins at a strict majority of its sizes and does not
// hurt. The threshold is the largest paying class with no hurting class at or
// below it (ties in between are taken over: they cost nothing measurable); 0
// when there is none. The threshold is one block size for every message size,
// so a small loss at one size (typically 4 KiB, where a copy more costs a few
// percent) is accepted where the same blocks win, often severalfold, at most
// sizes; a larger one is not.
inline constexpr double p2p_small_loss = 0.05;
int64_t p2p_max_block(const std::vector<P2pPoint>& points, double small_loss = p2p_small_loss);

struct P2pProfile {
  std::optional<P2pLevel> intra, inter, pack;
  // The threshold for sends and receives (and Alltoallv/w): between nodes when
  // measured (the costlier level, where most bytes of a multi-node job go),
  // else within a node; nullopt when neither was measured.
  std::optional<int64_t> takeover_max_block() const;
};

// NOLINTNEXTLINE(bugprone-exception-escape): calibration's destructor (support/json.h)
struct Profile {
  Fingerprint fingerprint;
  std::string created;      // ISO 8601, UTC
  std::string machine;      // hwloc summary (informational)
  json::Value calibration;  // how it was measured (informational, kept as written)
  std::optional<LevelFit> intra, inter;
  int nic_streams = 0;  // 0: not measured
  std::vector<CollectivePoint> collectives;
  std::optional<P2pProfile> p2p;  // absent in profiles written before it existed
};

// Why a profile was or was not taken.
enum class ProfileStatus {
  loaded,
  missing,     // no file
  unreadable,  // a file that cannot be read
  corrupt,     // not JSON, or members of the wrong type
  outdated,    // another format version, or written by another Veneer version
  foreign,     // measured on another machine, MPI library or transport
  off,         // VENEER_PROFILE=off, Veneer or its collectives disabled
};
std::string_view status_name(ProfileStatus s);

struct ProfileCheck {
  ProfileStatus status = ProfileStatus::missing;
  std::string why;                 // one line for logs and the report
  std::optional<Profile> profile;  // when loaded
};

json::Document to_json(const Profile& p);
std::string profile_text(const Profile& p);  // pretty-printed JSON

// Validates and reads a profile. With `expected`, the fingerprint must equal
// it (foreign otherwise; outdated when only the Veneer version differs).
ProfileCheck profile_from_text(std::string_view text, const Fingerprint* expected);
// The same from a file (missing / unreadable when it cannot be opened).
ProfileCheck read_profile(const std::string& path, const Fingerprint* expected);

// Where the profile lives: VENEER_PROFILE, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/veneer/profile.json. `explicit_path` says
// whether VENEER_PROFILE named it. Empty when VENEER_PROFILE is "off".
std::string profile_path(bool* explicit_path = nullptr);

// Writes atomically (a temporary file renamed over the old one), creating
// missing directories; an error message, or nullopt on success.
std::optional<std::string> write_profile(const Profile& p, const std::string& path);

// "2025-01-31T12:00:00Z" for now.
std::string utc_timestamp();

}  // namespace veneer::topology
