// SPDX-License-Identifier: BSD-3-Clause
// More than one device.
// Part of device_mpi_test: the shared helpers and the fixture are in device_mpi.h.
#include "test/device/device_mpi.h"

namespace veneer::test {
namespace {

// Buffers on device 1 while device 0 is current: Veneer works on the
// buffer's device (its packer, scratch and streams) and gives device 0 back.
TEST_F(Device, BuffersOnAnotherDevice) {
  emu().set_device_count(2);
  Ring r;
  TypeSet set;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    ASSERT_TRUE(emu().set_device(1));
    Typed src(tt.type, tt.count, data_seed(r.me, 190));
    Typed dst(tt.type, tt.count, sentinel_seed(r.me, 190));
    Typed udst(tt.type, tt.count, sentinel_seed(r.me, 191));
    ASSERT_TRUE(emu().set_device(0));
    Typed from_left(tt.type, tt.count, data_seed(r.left, 190));
    const std::vector<char> mine = library_pack(src.host(), tt.count, tt.type);
    const std::vector<char> want =
        library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
    MPI_Request q[2];
    ASSERT_EQ(MPI_Irecv(dst.dev(), tt.count, tt.type, r.left, 14, MPI_COMM_WORLD, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Isend(src.dev(), tt.count, tt.type, r.right, 14, MPI_COMM_WORLD, &q[1]), MPI_SUCCESS);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    EXPECT_EQ(emu().current_device(), 0);
    EXPECT_TRUE(same_bytes(dst.download(), want));
    std::vector<char> packed(mine.size());
    int pos = 0;
    ASSERT_EQ(
        MPI_Pack(src.dev(), tt.count, tt.type, packed.data(), static_cast<int>(packed.size()), &pos, MPI_COMM_WORLD),
        MPI_SUCCESS);
    EXPECT_TRUE(same_bytes(packed, mine));
    pos = 0;
    ASSERT_EQ(
        MPI_Unpack(mine.data(), static_cast<int>(mine.size()), &pos, udst.dev(), tt.count, tt.type, MPI_COMM_WORLD),
        MPI_SUCCESS);
    EXPECT_TRUE(same_bytes(udst.download(), library_unpacked(udst.image(), tt.type, tt.count, mine)));
    EXPECT_EQ(emu().current_device(), 0);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // A collective staged from device 1.
  ASSERT_TRUE(emu().set_device(1));
  const auto in = values<double>(500, r.me + 1);
  DeviceArray<double> s(in), out(values<double>(500, 2));
  ASSERT_TRUE(emu().set_device(0));
  std::vector<double> want(in.size());
  PMPI_Allreduce(in.data(), want.data(), 500, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  ASSERT_EQ(MPI_Allreduce(s.dev(), out.dev(), 500, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(out.get(), want);
  EXPECT_EQ(emu().current_device(), 0);
}

}  // namespace
}  // namespace veneer::test
