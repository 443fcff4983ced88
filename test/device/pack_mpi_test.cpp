// SPDX-License-Identifier: BSD-3-Clause
// MPI_Pack / MPI_Unpack with a device buffer on either side or both.
// Part of device_mpi_test: the shared helpers and the fixture are in device_mpi.h.
#include "test/device/device_mpi.h"

namespace veneer::test {
namespace {

TEST_F(Device, PackAndUnpackEveryPairingOfHostAndDevice) {
  TypeSet set;
  const int me = rank_of();
  constexpr int kStart = 13;  // packing starts inside the packed buffer
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    Typed src(tt.type, tt.count, data_seed(me, 1));
    const std::vector<char> packed_ref_bytes = library_pack(src.host(), tt.count, tt.type);
    const int bytes = static_cast<int>(packed_ref_bytes.size());
    const int size = kStart + bytes + 11;
    // The library's own packed buffer: filler, then its packed bytes at kStart.
    const std::vector<char> filler = pattern(static_cast<size_t>(size), 77);
    std::vector<char> ref = filler;
    int ref_pos = kStart;
    PMPI_Pack(src.host(), tt.count, tt.type, ref.data(), size, &ref_pos, MPI_COMM_WORLD);
    ASSERT_EQ(ref_pos, kStart + bytes);

    // Device typed -> host packed.
    std::vector<char> hpacked = filler;
    int pos = kStart;
    ASSERT_EQ(MPI_Pack(src.dev(), tt.count, tt.type, hpacked.data(), size, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(pos, kStart + bytes);
    EXPECT_TRUE(same_bytes(hpacked, ref)) << "device typed -> host packed";

    // Device typed -> device packed.
    DeviceBuffer dpacked(static_cast<size_t>(size));
    dpacked.upload(filler);
    pos = kStart;
    ASSERT_EQ(MPI_Pack(src.dev(), tt.count, tt.type, dpacked.get(), size, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(pos, kStart + bytes);
    EXPECT_TRUE(same_bytes(dpacked.download(), ref)) << "device typed -> device packed";

    // Host typed -> device packed.
    dpacked.upload(filler);
    pos = kStart;
    ASSERT_EQ(MPI_Pack(src.host(), tt.count, tt.type, dpacked.get(), size, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(pos, kStart + bytes);
    EXPECT_TRUE(same_bytes(dpacked.download(), ref)) << "host typed -> device packed";

    // Unpacking into a buffer that holds other bytes: only the type's bytes change.
    Typed dst(tt.type, tt.count, sentinel_seed(me, 1));
    const std::vector<char> want = library_unpacked(dst.image(), tt.type, tt.count, packed_ref_bytes);

    // Host packed -> device typed.
    pos = kStart;
    ASSERT_EQ(MPI_Unpack(ref.data(), size, &pos, dst.dev(), tt.count, tt.type, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(pos, kStart + bytes);
    EXPECT_TRUE(same_bytes(dst.download(), want)) << "host packed -> device typed";

    // Device packed -> device typed.
    dst.sync();
    dpacked.upload(ref);
    pos = kStart;
    ASSERT_EQ(MPI_Unpack(dpacked.get(), size, &pos, dst.dev(), tt.count, tt.type, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(pos, kStart + bytes);
    EXPECT_TRUE(same_bytes(dst.download(), want)) << "device packed -> device typed";

    // Device packed -> host typed.
    Typed host_view(tt.type, tt.count, sentinel_seed(me, 1));
    pos = kStart;
    ASSERT_EQ(MPI_Unpack(dpacked.get(), size, &pos, host_view.host(), tt.count, tt.type, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(pos, kStart + bytes);
    EXPECT_TRUE(same_bytes(host_view.image(), want)) << "device packed -> host typed";
  }
}

TEST_F(Device, PackTwoBuffersOneAfterTheOther) {
  // A message built from a device part and a host part, as halo codes do.
  TypeSet set;
  const int me = rank_of();
  const TestType& a = set.types[0];  // vector
  const TestType& b = set.types[3];  // struct with gaps
  Typed da(a.type, a.count, data_seed(me, 2));
  Typed hb(b.type, b.count, data_seed(me, 3));
  int sa = 0, sb = 0;
  PMPI_Pack_size(a.count, a.type, MPI_COMM_WORLD, &sa);
  PMPI_Pack_size(b.count, b.type, MPI_COMM_WORLD, &sb);
  const int size = sa + sb;
  std::vector<char> ref(static_cast<size_t>(size), 0), got(static_cast<size_t>(size), 0);
  int rpos = 0, pos = 0;
  PMPI_Pack(da.host(), a.count, a.type, ref.data(), size, &rpos, MPI_COMM_WORLD);
  PMPI_Pack(hb.host(), b.count, b.type, ref.data(), size, &rpos, MPI_COMM_WORLD);
  ASSERT_EQ(MPI_Pack(da.dev(), a.count, a.type, got.data(), size, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(MPI_Pack(hb.host(), b.count, b.type, got.data(), size, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(pos, rpos);
  EXPECT_TRUE(same_bytes(got, ref));
}

}  // namespace
}  // namespace veneer::test
