// SPDX-License-Identifier: BSD-3-Clause
// Which way device data travels: managed memory takes the host path, and the
// method asked for (VENEER_DEVICE_METHOD, VENEER_CUDA_AWARE, a refusing packer)
// is the one the emulator counts.
// Part of device_mpi_test: the shared helpers and the fixture are in device_mpi.h.
#include "test/device/device_mpi.h"

namespace veneer::test {
namespace {

// Managed memory is the CPU's too: it takes the host paths, no device work.
TEST_F(Device, ManagedMemoryTakesTheHostPath) {
  TypeSet set;
  Ring r;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    const Footprint fp = footprint(tt.type, tt.count);
    const auto bytes = static_cast<size_t>(fp.span);
    char* src = static_cast<char*>(emu().alloc_managed(bytes));
    char* dst = static_cast<char*>(emu().alloc_managed(bytes));
    ASSERT_TRUE(src && dst);
    const std::vector<char> mine = pattern(bytes, data_seed(r.me, 220));
    const std::vector<char> sentinel = pattern(bytes, sentinel_seed(r.me, 220));
    std::memcpy(src, mine.data(), bytes);
    std::memcpy(dst, sentinel.data(), bytes);
    std::vector<char> left = pattern(bytes, data_seed(r.left, 220));
    const std::vector<char> want =
        library_unpacked(sentinel, tt.type, tt.count, library_pack(left.data() - fp.lo, tt.count, tt.type));
    const EmulatorCounters before = emu().counters();
    MPI_Request q[2];
    ASSERT_EQ(MPI_Irecv(dst - fp.lo, tt.count, tt.type, r.left, 16, MPI_COMM_WORLD, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Isend(src - fp.lo, tt.count, tt.type, r.right, 16, MPI_COMM_WORLD, &q[1]), MPI_SUCCESS);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    const EmulatorCounters after = emu().counters();
    EXPECT_EQ(after.launches() - before.launches(), 0);
    EXPECT_EQ(after.copies - before.copies, 0);
    EXPECT_TRUE(same_bytes(std::vector<char>(dst, dst + bytes), want));
    emu().free_managed(src);
    emu().free_managed(dst);
  }
}

// A self-exchange of `count` instances of `type`, device to device; the
// emulator's counts while it ran.
EmulatorCounters self_exchange_counts(MPI_Datatype type, int count, int salt) {
  const int me = rank_of();
  Typed src(type, count, data_seed(me, salt));
  Typed dst(type, count, sentinel_seed(me, salt));
  const std::vector<char> want = library_unpacked(dst.image(), type, count, library_pack(src.host(), count, type));
  const EmulatorCounters before = emu().counters();
  MPI_Request q[2];
  MPI_Irecv(dst.dev(), count, type, me, salt, MPI_COMM_WORLD, &q[0]);
  MPI_Isend(src.dev(), count, type, me, salt, MPI_COMM_WORLD, &q[1]);
  MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
  const EmulatorCounters after = emu().counters();
  EXPECT_TRUE(same_bytes(dst.download(), want));
  EmulatorCounters d;
  d.packs = after.packs - before.packs;
  d.unpacks = after.unpacks - before.unpacks;
  d.copies = after.copies - before.copies;
  d.copies_to_host = after.copies_to_host - before.copies_to_host;
  d.copies_from_host = after.copies_from_host - before.copies_from_host;
  d.failed_steps = after.failed_steps - before.failed_steps;
  return d;
}

TEST_F(Device, NonContiguousUsesTheMethodAskedFor) {
  // 40 KiB per message: ten 4 KiB chunks when staged, below the one-shot limit.
  MPI_Datatype column;
  MPI_Type_vector(2560, 2, 3, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  const EmulatorCounters d = self_exchange_counts(column, 1, 80);
  EXPECT_EQ(d.failed_steps, 0);
  switch (mode()) {
    case Mode::staged:
      // Ten chunks packed into device scratch and copied out; ten copied in and unpacked.
      EXPECT_GE(d.packs, 10);
      EXPECT_GE(d.copies_to_host, 10);
      EXPECT_GE(d.unpacks, 10);
      EXPECT_GE(d.copies_from_host, 10);
      break;
    case Mode::automatic:
    case Mode::oneshot:
      // The kernels write (read) pinned memory themselves: one launch each way, no copies.
      EXPECT_EQ(d.packs, 1);
      EXPECT_EQ(d.unpacks, 1);
      EXPECT_EQ(d.copies, 0);
      break;
    case Mode::cuda_aware:
      // Packed into device memory, which the library reads itself.
      EXPECT_EQ(d.packs, 1);
      EXPECT_EQ(d.unpacks, 1);
      EXPECT_EQ(d.copies_to_host, 0);
      EXPECT_EQ(d.copies_from_host, 0);
      break;
    case Mode::refused:
      // The packer refused the layout: the span went through host memory
      // (sent: read; received: read, unpacked into on the host, written back).
      EXPECT_EQ(d.packs + d.unpacks, 0);
      EXPECT_GE(d.copies_to_host, 2);
      EXPECT_GE(d.copies_from_host, 1);
      break;
    case Mode::refused_cuda_aware:
      // The packer refused the layout: the library moved the bytes itself.
      EXPECT_EQ(d.packs + d.unpacks + d.copies, 0);
      break;
  }
  MPI_Type_free(&column);
}

TEST_F(Device, LargeNonContiguousIsStagedUnlessOneshotIsForced) {
  // 320 KiB: above the default one-shot limit (256 KiB).
  MPI_Datatype column;
  MPI_Type_vector(20480, 2, 3, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  const EmulatorCounters d = self_exchange_counts(column, 1, 81);
  switch (mode()) {
    case Mode::automatic:
      EXPECT_GE(d.copies_to_host, 1);
      EXPECT_GE(d.copies_from_host, 1);
      break;
    case Mode::staged:
      EXPECT_GE(d.copies_to_host, 80);  // 4 KiB chunks
      EXPECT_GE(d.copies_from_host, 80);
      break;
    case Mode::oneshot:
    case Mode::cuda_aware: EXPECT_EQ(d.copies, 0); break;
    case Mode::refused:
      EXPECT_EQ(d.packs + d.unpacks, 0);
      EXPECT_GE(d.copies_to_host, 2);
      EXPECT_GE(d.copies_from_host, 1);
      break;
    case Mode::refused_cuda_aware: EXPECT_EQ(d.packs + d.unpacks + d.copies, 0); break;
  }
  MPI_Type_free(&column);
}

TEST_F(Device, ContiguousIsCopiedOrLeftToTheLibrary) {
  const EmulatorCounters d = self_exchange_counts(MPI_DOUBLE, 5000, 82);
  // No kernel ever runs for a contiguous type.
  EXPECT_EQ(d.packs + d.unpacks, 0);
  if (mode() == Mode::cuda_aware || mode() == Mode::refused_cuda_aware) {
    EXPECT_EQ(d.copies, 0);  // the library's business
  } else {
    EXPECT_GE(d.copies_to_host, 1);
    EXPECT_GE(d.copies_from_host, 1);
  }
}

}  // namespace
}  // namespace veneer::test
