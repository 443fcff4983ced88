// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What the differential test's files share (differential_test.cpp says what the
// test does): the random type under test with its memory and reference type
// map (Subject), the tally of what was checked and what the libraries got
// wrong, and the Checker that compares Veneer with the library and the
// reference, whose pack and message checks live in differential_pack.cpp and
// differential_messages.cpp.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test/datatypes/typegen.h"

namespace veneer::test::differential {

#ifdef MPICH_VERSION
constexpr bool kMpich = true;
#else
constexpr bool kMpich = false;
#endif
// MPI-4 large-count constructors, where the library has them (MPICH 4.0).
#ifdef VENEER_HAVE_LARGE_COUNT
constexpr bool kLargeCount = true;
#else
constexpr bool kLargeCount = false;
#endif

// Salts of the byte patterns: the user's data, what a receive buffer holds
// before the receive, what an output buffer holds before packing, and the
// packed stream fed to unpack and receive.
constexpr uint64_t kData = 11, kBackground = 22, kOutBackground = 33, kStream = 44;
constexpr int kGuard = 16;
constexpr int kFailuresShown = 20;

struct Options {
  int64_t types = 10000;
  uint64_t seed = 1;
};

Options options();
int error_class(int rc);

// One random type and the memory it is used on.
struct Subject {
  uint64_t seed = 0;
  GeneratedType gen;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int count = 1;
  TypeShape shape;
  int64_t stream = 0;   // packed bytes of `count` instances
  void* buf = nullptr;  // what the MPI calls get
  int64_t lo = 0;       // offset from buf of the first byte of storage after the guard
  std::vector<unsigned char> storage;
  Regions memory;
  std::vector<Segment> map;  // the hand-written reference type map of `count` instances
  bool overlapping = false;  // some byte is in the type map twice: no receiving into it
  // The bounds of one instance by the reference type map, and whether the
  // library's MPI_Type_get_true_extent disagrees (a library bug).
  int64_t reference_true_lb = 0, reference_true_extent = 0;
  bool library_bounds_wrong = false;
  // Stream positions, within one instance, after each basic element: where a
  // message into this type may end.
  std::vector<int64_t> element_ends;

  unsigned char* at(int64_t offset) const {
    return reinterpret_cast<unsigned char*>(reinterpret_cast<intptr_t>(buf) + offset);
  }
};

std::unique_ptr<Subject> make_subject(uint64_t seed);

// Whether the reference type map has the library's size and stays inside the
// memory allocated from the library's true extent (else the test is broken).
std::string map_problem(const Subject& s);
bool map_overlaps(const Subject& s);
std::vector<unsigned char> reference_pack(const Subject& s);
// Writes the first `length` bytes of `in` where the type map says.
void reference_unpack(Subject& s, const unsigned char* in, int64_t length);
// Where byte `index` of the memory lies, in words.
std::string where(const Subject& s, int64_t index);

struct Tally {
  int64_t types = 0, at_bottom = 0, zero_size = 0, overlapping = 0, undecodable = 0, mpich_skips = 0, failures = 0,
          pack_checks = 0, unpack_checks = 0, engine_checks = 0, messages = 0, library_wrong = 0,
          reference_disputed = 0, large = 0, largest = 0, mpich_truncations_passed_on = 0, large_form = 0,
          beyond_int = 0, large_count_failures = 0;
  uint64_t last_library_wrong_seed = 0;
  std::vector<std::string> undecodable_examples, library_wrong_examples, reference_disputed_examples,
      mpich_truncation_examples;
};

// Keeps the first few examples of a kind.
void note(std::vector<std::string>& examples, const std::string& text);

using Bytes = std::span<const unsigned char>;

class Checker {
 public:
  Checker(Subject& s, Tally& tally, MPI_Comm comm) : s_(s), tally_(tally), comm_(comm) {}

  void fail(const std::string& what) {
    if (++tally_.failures <= kFailuresShown) ADD_FAILURE() << "differential mismatch: " << what << "\n  " << who();
  }
  std::string who() const {
    std::ostringstream os;
    os << "seed " << s_.seed << " (rerun with --seed=" << s_.seed << " --types=1), count " << s_.count << ", size "
       << s_.shape.size << ", extent " << s_.shape.extent << ", lb " << s_.shape.lb << ", true lb " << s_.shape.true_lb
       << ", true extent " << s_.shape.true_extent << "\n  type " << s_.gen.description;
    return os.str();
  }
  std::string differ(Bytes a, Bytes b, bool memory) const {
    int64_t at = first_difference(a, b);
    return memory ? "first differing " + where(s_, at) : "first differing byte at offset " + std::to_string(at);
  }

  // Veneer's bytes against the library's and the hand-written reference's.
  // Veneer is wrong when it differs from the reference; a library that differs
  // from the reference is noted (a library bug), and Veneer agreeing with the
  // library against the reference puts the reference in doubt (noted).
  void vote(Bytes veneer, const Bytes* library, Bytes reference, const std::string& what, bool memory) {
    bool veneer_right = first_difference(veneer, reference) < 0;
    bool library_right = library == nullptr || first_difference(*library, reference) < 0;
    if (veneer_right) {
      if (!library_right) {
        ++tally_.library_wrong;
        // One example per type.
        if (tally_.last_library_wrong_seed != s_.seed)
          note(tally_.library_wrong_examples,
               what + ": the library is wrong, " + differ(*library, reference, memory) + "; " + who());
        tally_.last_library_wrong_seed = s_.seed;
      }
      return;
    }
    if (library != nullptr && first_difference(veneer, *library) < 0) {
      ++tally_.reference_disputed;
      note(tally_.reference_disputed_examples, what + ": Veneer and the library agree against the reference, " +
                                                   differ(veneer, reference, memory) + "; " + who());
      return;
    }
    fail(what + ": Veneer differs from the reference, " + differ(veneer, reference, memory) +
         (library == nullptr ? " (no library answer)"
          : library_right    ? " (the library agrees with the reference)"
                             : " (the library differs from both)"));
  }
  // MPICH 4.0's MPI_Pack and MPI_Unpack reject MPI_BOTTOM ("Null pointer in
  // parameter inbuf"): no library answer for absolute-address types there.
  bool library_packs() const { return !(kMpich && s_.gen.at_bottom()); }

  // The library's packing of memory filled with the data pattern, if it has one.
  std::optional<std::vector<unsigned char>> library_pack() {
    if (!library_packs()) return std::nullopt;
    s_.memory.fill(kData);
    std::vector<unsigned char> out(s_.stream);
    int position = 0;
    PMPI_Pack(s_.buf, s_.count, s_.type, out.data(), static_cast<int>(s_.stream), &position, comm_);
    return out;
  }

  void same_int(int64_t veneer, int64_t library, const std::string& what) {
    if (veneer != library) fail(what + ": Veneer " + std::to_string(veneer) + ", library " + std::to_string(library));
  }

  // MPI_Pack (Veneer) against PMPI_Pack at several starting positions and
  // output sizes; whole output buffers compared, input left untouched.
  void pack(std::mt19937_64& rng);
  // MPI_Unpack (Veneer) against PMPI_Unpack and the reference, into
  // pre-filled memory. Sets the library's and the reference's memory after
  // unpacking `stream` at position 0, for the engine's checks.
  void unpack(std::mt19937_64& rng, const std::vector<unsigned char>& stream, bool library_can, bool veneer_can,
              std::optional<std::vector<unsigned char>>& library_result, std::vector<unsigned char>& reference_result);
  // The engine packs and unpacks any byte range of the stream: pieces of 1, 7,
  // 64, 4096 and a random number of bytes from a random start, concatenated,
  // must equal the whole packing (and unpacking).
  void engine(std::mt19937_64& rng, const std::vector<unsigned char>& stream, bool can_unpack,
              const std::optional<std::vector<unsigned char>>& library_unpacked,
              const std::vector<unsigned char>& reference_unpacked);

  // Sends and receives through Veneer between rank `sender` and `receiver`
  // (the same rank: a message to self). A typed send must deliver the type's
  // packing; a typed receive of a byte message must leave memory and status as
  // the library's own receive of the same message does.
  void messages(std::mt19937_64& rng, int sender, int receiver, int rank, int tag);

  // Pieces (skip, bytes) covering a stream of n bytes: [0, start) at once, then
  // at most 200 pieces of `fragment` bytes, then the rest with a request that
  // runs past the end.
  static std::vector<std::pair<int64_t, int64_t>> schedule(int64_t n, int64_t start, int64_t fragment) {
    std::vector<std::pair<int64_t, int64_t>> pieces;
    if (start > 0) pieces.emplace_back(0, start);
    int64_t at = start;
    for (int k = 0; at < n && k < 200; ++k) {
      int64_t want = std::min(fragment, n - at);
      pieces.emplace_back(at, want);
      at += want;
    }
    if (at < n) pieces.emplace_back(at, n - at + 5);
    return pieces;
  }

 private:
  Subject& s_;
  Tally& tally_;
  MPI_Comm comm_;
};

class Differential : public testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    // MPICH raises some request errors (a truncation found in MPI_Wait) on
    // MPI_COMM_WORLD or MPI_COMM_SELF instead of the request's communicator.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  void TearDown() override {
    MPI_Comm_free(&comm_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace veneer::test::differential
