// SPDX-License-Identifier: BSD-3-Clause
// The helpers of test/device/device_mpi.h, and the test that runs last in
// device_mpi_test (this file is linked last, see CMakeLists.txt).
#include "test/device/device_mpi.h"

#include <cstdlib>

#include "kernels/device_runtime.h"
#include "kernels/device_transfer.h"

namespace veneer::test {

bool is_mpich() {
  static const bool mpich = [] {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    PMPI_Get_library_version(version, &len);
    return std::string_view(version, static_cast<size_t>(len)).find("MPICH") != std::string_view::npos;
  }();
  return mpich;
}

bool env_is(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v && std::string_view(v) == value;
}

Mode mode() {
  static const Mode m = [] {
    if (env_is("VENEER_TEST_EMULATOR_REFUSE", "1"))
      return env_is("VENEER_CUDA_AWARE", "1") ? Mode::refused_cuda_aware : Mode::refused;
    if (env_is("VENEER_CUDA_AWARE", "1")) return Mode::cuda_aware;
    if (env_is("VENEER_DEVICE_METHOD", "staged")) return Mode::staged;
    if (env_is("VENEER_DEVICE_METHOD", "oneshot")) return Mode::oneshot;
    return Mode::automatic;
  }();
  return m;
}

EmulatedRuntime& emu() {
  // Never destroyed: MPI_Finalize hands Veneer's pooled buffers back to it,
  // and Veneer's packer cache outlives static destructors.
  static EmulatedRuntime* e = [] {
    EmulatorOptions o;
    // A library that is not CUDA-aware never touches device memory: only one
    // told it is may (and is handed refused layouts).
    o.host_accessible = mode() == Mode::cuda_aware || mode() == Mode::refused_cuda_aware;
    o.refuse_layouts = mode() == Mode::refused || mode() == Mode::refused_cuda_aware;
    if (const char* d = std::getenv("VENEER_TEST_EMULATOR_DELAY_US")) o.delay_us = std::atoi(d);
    auto* r = new EmulatedRuntime(o);
    veneer::kernels::install_device_runtime(r);
    return r;
  }();
  return *e;
}
namespace {
// Installed during static initialisation: before MPI_Init and any traffic.
[[maybe_unused]] const bool g_installed = (emu(), true);
}  // namespace

int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int s = 0;
  MPI_Comm_size(c, &s);
  return s;
}

std::vector<char> pattern(size_t n, uint32_t seed) {
  std::vector<char> v(n);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<char>(x >> 24);
  }
  return v;
}

testing::AssertionResult same_bytes(const std::vector<char>& got, const std::vector<char>& want) {
  if (got.size() != want.size())
    return testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return testing::AssertionFailure() << "first difference at byte " << i << " of " << got.size() << ": "
                                         << int(static_cast<unsigned char>(got[i])) << " vs "
                                         << int(static_cast<unsigned char>(want[i]));
  return testing::AssertionSuccess();
}

Footprint footprint(MPI_Datatype type, int count) {
  MPI_Aint lb = 0, extent = 0, tlb = 0, textent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_get_true_extent(type, &tlb, &textent);
  const int64_t reach = int64_t{count - 1} * extent;
  const int64_t lo = tlb + std::min<int64_t>(0, reach);
  const int64_t hi = tlb + textent + std::max<int64_t>(0, reach);
  return {lo, std::max<int64_t>(hi - lo, 1)};
}

std::vector<char> library_pack(const void* buf, int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Pack_size(count, type, MPI_COMM_WORLD, &size);
  std::vector<char> out(static_cast<size_t>(size));
  int pos = 0;
  PMPI_Pack(buf, count, type, out.data(), size, &pos, MPI_COMM_WORLD);
  out.resize(static_cast<size_t>(pos));
  return out;
}

std::vector<char> library_unpacked(std::vector<char> image, MPI_Datatype type, int count,
                                   const std::vector<char>& packed) {
  const Footprint fp = footprint(type, count);
  int pos = 0;
  PMPI_Unpack(packed.data(), static_cast<int>(packed.size()), &pos, image.data() - fp.lo, count, type, MPI_COMM_WORLD);
  return image;
}

int type_size(MPI_Datatype t) {
  int s = 0;
  PMPI_Type_size(t, &s);
  return s;
}

TypeSet::TypeSet() {
  MPI_Datatype t;
  // NAS MG face: two doubles of every five.
  MPI_Type_vector(16, 2, 5, MPI_DOUBLE, &t);
  add("vector", t, 5);
  // LAMMPS-style indexed blocks of ints.
  const int blocks[] = {3, 1, 4, 1, 5}, displs[] = {0, 4, 7, 13, 20};
  MPI_Type_indexed(5, blocks, displs, MPI_INT, &t);
  add("indexed", t, 9);
  // A C struct {int; (4 bytes of padding) double; char[3]; (5 more)}.
  MPI_Datatype st;
  const int sblocks[] = {1, 1, 3};
  const MPI_Aint sdispls[] = {0, 8, 16};
  const MPI_Datatype stypes[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
  MPI_Type_create_struct(3, sblocks, sdispls, stypes, &st);
  MPI_Type_create_resized(st, 0, 40, &t);
  add("resized_struct", t, 12);
  MPI_Type_create_hvector(3, 2, 100, st, &t);
  add("hvector_of_struct", t, 4);
  add("struct_gaps", st, 20);
  // A 4x3x2 block inside a 6x5x4 array of doubles (MG/LU subdomain).
  const int sizes[] = {6, 5, 4}, sub[] = {4, 3, 2}, starts[] = {1, 1, 1};
  MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &t);
  add("subarray", t, 2);
  // Negative stride: the lower bound is below the buffer pointer.
  MPI_Type_vector(6, 1, -3, MPI_DOUBLE, &t);
  add("negative_stride", t, 4);
  MPI_Type_contiguous(7, MPI_INT, &t);
  add("int_x7", t, 40);
  types.push_back({"double", MPI_DOUBLE, 300, false});
}

TypeSet::~TypeSet() {
  for (TestType& t : types)
    if (t.owned) MPI_Type_free(&t.type);
}

void TypeSet::add(const char* name, MPI_Datatype t, int count) {
  MPI_Type_commit(&t);
  types.push_back({name, t, count, true});
}

void complete(Completion how, MPI_Request reqs[2], MPI_Status* st) {
  MPI_Status sts[2];
  std::memset(sts, 0x5a, sizeof sts);  // what the library leaves unset is the same each time
  switch (how) {
    case Completion::wait:
      MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
      MPI_Wait(&reqs[0], st);
      break;
    case Completion::waitall:
      MPI_Waitall(2, reqs, sts);
      *st = sts[0];
      break;
    case Completion::testall_loop: {
      int flag = 0;
      while (!flag) MPI_Testall(2, reqs, &flag, sts);
      *st = sts[0];
      break;
    }
    case Completion::waitany:
      for (int done = 0; done < 2; ++done) {
        int idx = MPI_UNDEFINED;
        MPI_Status s;
        MPI_Waitany(2, reqs, &idx, &s);
        if (idx == 0) *st = s;
      }
      break;
    case Completion::test_loop: {
      int rflag = 0, sflag = 0;
      while (!rflag || !sflag) {
        if (!rflag) MPI_Test(&reqs[0], &rflag, st);
        if (!sflag) MPI_Test(&reqs[1], &sflag, MPI_STATUS_IGNORE);
      }
      break;
    }
    case Completion::testany_loop:
      for (int done = 0; done < 2;) {
        int idx = MPI_UNDEFINED, flag = 0;
        MPI_Status s;
        MPI_Testany(2, reqs, &idx, &flag, &s);
        if (flag && idx != MPI_UNDEFINED) {
          if (idx == 0) *st = s;
          ++done;
        }
      }
      break;
    case Completion::waitsome: {
      int left = 2;
      while (left > 0) {
        int out = 0, idx[2];
        MPI_Waitsome(2, reqs, &out, idx, sts);
        for (int k = 0; k < out; ++k)
          if (idx[k] == 0) *st = sts[k];
        left -= out;
      }
      break;
    }
  }
}

namespace {

// ---------------------------------------------------------------------------
// Last: nothing Veneer took from the emulator is still out once its pools are
// emptied (MPI_Finalize does the same), and no step failed in the whole run.

TEST(DeviceZ, NothingOutstandingOncePoolsAreReleased) {
  MPI_Barrier(MPI_COMM_WORLD);
  veneer::kernels::release_pools();
  const EmulatorCounters c = emu().counters();
  EXPECT_EQ(c.device_allocations, 0);
  EXPECT_EQ(c.device_bytes, 0);
  EXPECT_EQ(c.pinned_allocations, 0);
  EXPECT_EQ(c.events, 0);
  EXPECT_EQ(c.failed_steps, 0);
}

}  // namespace
}  // namespace veneer::test
