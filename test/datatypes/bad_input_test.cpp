// SPDX-License-Identifier: BSD-3-Clause
// Erroneous calls with derived datatypes, under MPI_ERRORS_RETURN: Veneer must
// return the error class the library returns for the same call (and leave the
// same position and bytes where the library succeeds partially, as MPICH does
// for a too-small pack buffer), never write outside the buffers it was given,
// and never crash.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "test/datatypes/typegen.h"

using veneer::test::fill_pattern;
using veneer::test::first_difference;

namespace {

constexpr uint64_t kData = 11, kBackground = 22;

int error_class(int rc) {
  int c = rc;
  PMPI_Error_class(rc, &c);
  return c;
}

std::string describe(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  PMPI_Error_string(rc, text, &length);
  return "class " + std::to_string(error_class(rc)) + " (" + text + ")";
}

// Receives and drops any message this rank sent itself, so that a call the
// library unexpectedly accepted does not leak into the next case.
void drain(MPI_Comm comm) {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &status);
    if (!flag) return;
    int bytes = 0;
    PMPI_Get_count(&status, MPI_BYTE, &bytes);
    std::vector<unsigned char> sink(bytes + 1);
    PMPI_Recv(sink.data(), bytes, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm, MPI_STATUS_IGNORE);
  }
}

class BadInput : public testing::Test {
 protected:
  void SetUp() override {
    // MPI-4 reports errors without a communicator on MPI_COMM_SELF, MPI-3 on
    // MPI_COMM_WORLD: both return.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    int* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    tag_ub_ = flag ? *ub : 32767;
    // 4 blocks of 2 ints, 3 ints apart: ints 0,1 3,4 6,7 9,10; 32 bytes of data.
    MPI_Type_vector(4, 2, 3, MPI_INT, &committed_);
    MPI_Type_commit(&committed_);
    MPI_Type_vector(4, 2, 3, MPI_INT, &uncommitted_);
    MPI_Type_vector(4, 2, 3, MPI_INT, &freed_);
    MPI_Type_commit(&freed_);
    MPI_Type_free(&freed_);  // leaves MPI_DATATYPE_NULL in the handle
  }
  void TearDown() override {
    MPI_Type_free(&committed_);
    MPI_Type_free(&uncommitted_);
    drain(MPI_COMM_WORLD);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
  }

  struct TypeCase {
    const char* name;
    MPI_Datatype type;
  };
  std::vector<TypeCase> bad_types() const {
    return {{"MPI_DATATYPE_NULL", MPI_DATATYPE_NULL}, {"uncommitted vector", uncommitted_}, {"freed vector", freed_}};
  }

  int rank_ = 0, size_ = 1, tag_ub_ = 32767;
  MPI_Datatype committed_ = MPI_DATATYPE_NULL, uncommitted_ = MPI_DATATYPE_NULL, freed_ = MPI_DATATYPE_NULL;
};

// One MPI_Pack call, through Veneer and through the library, from the same
// input into equally pre-filled buffers.
struct PackCall {
  std::string name;
  MPI_Datatype type;
  int count;
  int outsize;
  int position;
};

TEST_F(BadInput, Pack) {
  std::vector<PackCall> calls;
  for (const TypeCase& t : bad_types()) calls.push_back({t.name, t.type, 1, 64, 0});
  calls.push_back({"count -1", committed_, -1, 64, 0});
  calls.push_back({"outsize one byte short", committed_, 1, 31, 0});
  calls.push_back({"outsize 0", committed_, 1, 0, 0});
  calls.push_back({"two instances, outsize 5 short, position 3", committed_, 2, 64 - 5 + 3, 3});
  calls.push_back({"position past outsize", committed_, 1, 32, 40});
  calls.push_back({"position at outsize", committed_, 1, 32, 32});
  std::vector<int> memory(64);
  fill_pattern({reinterpret_cast<unsigned char*>(memory.data()), memory.size() * sizeof(int)}, kData);
  for (const PackCall& c : calls) {
    SCOPED_TRACE("MPI_Pack, " + c.name);
    std::vector<unsigned char> out_v(256), out_l(256);
    fill_pattern(out_v, kBackground);
    fill_pattern(out_l, kBackground);
    const std::vector<unsigned char> before = out_v;
    int pos_v = c.position, pos_l = c.position;
    int rc_v = MPI_Pack(memory.data(), c.count, c.type, out_v.data(), c.outsize, &pos_v, MPI_COMM_WORLD);
    int rc_l = PMPI_Pack(memory.data(), c.count, c.type, out_l.data(), c.outsize, &pos_l, MPI_COMM_WORLD);
    EXPECT_EQ(error_class(rc_v), error_class(rc_l)) << "Veneer " << describe(rc_v) << ", library " << describe(rc_l);
    EXPECT_EQ(pos_v, pos_l);
    EXPECT_EQ(first_difference(out_v, out_l), -1);
    // Nothing past outsize may be written. MPICH 4.0 itself writes past it
    // when position + packed size exceeds outsize (no bounds check); a Veneer
    // that hands the call to the library then does the same, so only a Veneer
    // overflow the library does not commit is Veneer's.
    size_t end = std::max(c.outsize, 0);
    bool library_overflows = first_difference(std::span(out_l).subspan(end), std::span(before).subspan(end)) >= 0;
    if (library_overflows) std::printf("note: the library wrote past outsize in MPI_Pack, %s\n", c.name.c_str());
    else
      EXPECT_EQ(first_difference(std::span(out_v).subspan(end), std::span(before).subspan(end)), -1)
          << "Veneer wrote past outsize";
  }
}

TEST_F(BadInput, PackSize) {
  std::vector<PackCall> calls;
  for (const TypeCase& t : bad_types()) {
#ifndef MPICH_VERSION
    // Open MPI 4.1's PMPI_Pack_size dereferences an uncommitted type's missing
    // description and crashes: there is no library answer to compare with.
    if (t.type == uncommitted_) continue;
#endif
    calls.push_back({t.name, t.type, 1, 0, 0});
  }
  calls.push_back({"count -1", committed_, -1, 0, 0});
  for (const PackCall& c : calls) {
    SCOPED_TRACE("MPI_Pack_size, " + c.name);
    int size_v = -7, size_l = -7;
    int rc_v = MPI_Pack_size(c.count, c.type, MPI_COMM_WORLD, &size_v);
    int rc_l = PMPI_Pack_size(c.count, c.type, MPI_COMM_WORLD, &size_l);
    EXPECT_EQ(error_class(rc_v), error_class(rc_l)) << "Veneer " << describe(rc_v) << ", library " << describe(rc_l);
    if (rc_l == MPI_SUCCESS) {
      EXPECT_EQ(size_v, size_l);
    }
  }
}

TEST_F(BadInput, Unpack) {
  struct UnpackCall {
    std::string name;
    MPI_Datatype type;
    int count, insize, position;
  };
  std::vector<UnpackCall> calls;
  for (const TypeCase& t : bad_types()) calls.push_back({t.name, t.type, 1, 64, 0});
  calls.push_back({"count -1", committed_, -1, 64, 0});
  calls.push_back({"insize one byte short", committed_, 1, 31, 0});
  calls.push_back({"insize 0", committed_, 1, 0, 0});
  calls.push_back({"two instances, insize 5 short, position 3", committed_, 2, 64 - 5 + 3, 3});
  calls.push_back({"position past insize", committed_, 1, 32, 40});
  std::vector<unsigned char> in(128);
  fill_pattern(in, kData);
  for (const UnpackCall& c : calls) {
    SCOPED_TRACE("MPI_Unpack, " + c.name);
    std::vector<int> memory_v(64), memory_l(64);
    fill_pattern({reinterpret_cast<unsigned char*>(memory_v.data()), 256}, kBackground);
    fill_pattern({reinterpret_cast<unsigned char*>(memory_l.data()), 256}, kBackground);
    int pos_v = c.position, pos_l = c.position;
    int rc_v = MPI_Unpack(in.data(), c.insize, &pos_v, memory_v.data(), c.count, c.type, MPI_COMM_WORLD);
    int rc_l = PMPI_Unpack(in.data(), c.insize, &pos_l, memory_l.data(), c.count, c.type, MPI_COMM_WORLD);
    EXPECT_EQ(error_class(rc_v), error_class(rc_l)) << "Veneer " << describe(rc_v) << ", library " << describe(rc_l);
    EXPECT_EQ(pos_v, pos_l);
    EXPECT_EQ(memory_v, memory_l);
  }
}

TEST_F(BadInput, TypeCommit) {
  for (const TypeCase& t : bad_types()) {
    if (t.type != MPI_DATATYPE_NULL) continue;  // only the null handle is an error to commit
    SCOPED_TRACE(std::string("MPI_Type_commit, ") + t.name);
    MPI_Datatype v = t.type, l = t.type;
    int rc_v = MPI_Type_commit(&v);
    int rc_l = PMPI_Type_commit(&l);
    EXPECT_EQ(error_class(rc_v), error_class(rc_l)) << "Veneer " << describe(rc_v) << ", library " << describe(rc_l);
  }
}

// Point-to-point calls with bad ranks, tags, counts and types. All go to this
// rank itself, so that a call accepted by mistake can be drained.
struct P2pCall {
  std::string name;
  MPI_Datatype type;
  int count, peer, tag;
};

std::vector<P2pCall> p2p_calls(MPI_Datatype committed, const std::vector<std::pair<const char*, MPI_Datatype>>& types,
                               int rank, int size, int tag_ub, bool receive) {
  std::vector<P2pCall> calls;
  for (auto [name, type] : types) calls.push_back({name, type, 1, rank, 5});
  calls.push_back({"count -1", committed, -1, rank, 5});
  calls.push_back({"rank = size", committed, 1, size, 5});
  calls.push_back({"rank -7", committed, 1, -7, 5});
  calls.push_back({receive ? "tag -5" : "tag -1", committed, 1, rank, receive ? -5 : -1});
  calls.push_back({"tag above MPI_TAG_UB", committed, 1, rank, tag_ub == INT32_MAX ? -3 : tag_ub + 1});
  return calls;
}

TEST_F(BadInput, SendAndIsend) {
  std::vector<std::pair<const char*, MPI_Datatype>> types;
  for (const TypeCase& t : bad_types()) types.emplace_back(t.name, t.type);
  std::vector<int> memory(64, 1);
  for (const P2pCall& c : p2p_calls(committed_, types, rank_, size_, tag_ub_, false)) {
    for (bool blocking : {false, true}) {
      SCOPED_TRACE(std::string(blocking ? "MPI_Send, " : "MPI_Isend, ") + c.name);
      MPI_Request r_v = MPI_REQUEST_NULL, r_l = MPI_REQUEST_NULL;
      int rc_l = blocking ? PMPI_Send(memory.data(), c.count, c.type, c.peer, c.tag, MPI_COMM_WORLD)
                          : PMPI_Isend(memory.data(), c.count, c.type, c.peer, c.tag, MPI_COMM_WORLD, &r_l);
      drain(MPI_COMM_WORLD);
      if (rc_l == MPI_SUCCESS && !blocking) PMPI_Wait(&r_l, MPI_STATUS_IGNORE);
      int rc_v = blocking ? MPI_Send(memory.data(), c.count, c.type, c.peer, c.tag, MPI_COMM_WORLD)
                          : MPI_Isend(memory.data(), c.count, c.type, c.peer, c.tag, MPI_COMM_WORLD, &r_v);
      drain(MPI_COMM_WORLD);
      if (rc_v == MPI_SUCCESS && !blocking) MPI_Wait(&r_v, MPI_STATUS_IGNORE);
      EXPECT_EQ(error_class(rc_v), error_class(rc_l)) << "Veneer " << describe(rc_v) << ", library " << describe(rc_l);
    }
  }
}

TEST_F(BadInput, RecvAndIrecv) {
  std::vector<std::pair<const char*, MPI_Datatype>> types;
  for (const TypeCase& t : bad_types()) types.emplace_back(t.name, t.type);
  std::vector<int> memory(64, 1);
  for (const P2pCall& c : p2p_calls(committed_, types, rank_, size_, tag_ub_, true)) {
    SCOPED_TRACE("MPI_Irecv, " + c.name);
    MPI_Request r_v = MPI_REQUEST_NULL, r_l = MPI_REQUEST_NULL;
    int rc_l = PMPI_Irecv(memory.data(), c.count, c.type, c.peer, c.tag, MPI_COMM_WORLD, &r_l);
    if (rc_l == MPI_SUCCESS) {  // accepted after all: take it back
      PMPI_Cancel(&r_l);
      PMPI_Wait(&r_l, MPI_STATUS_IGNORE);
    }
    int rc_v = MPI_Irecv(memory.data(), c.count, c.type, c.peer, c.tag, MPI_COMM_WORLD, &r_v);
    if (rc_v == MPI_SUCCESS) {
      MPI_Cancel(&r_v);
      MPI_Wait(&r_v, MPI_STATUS_IGNORE);
    }
    EXPECT_EQ(error_class(rc_v), error_class(rc_l)) << "Veneer " << describe(rc_v) << ", library " << describe(rc_l);
    // A blocking receive the library accepts would wait for ever: only the rejected ones.
    if (rc_l == MPI_SUCCESS) continue;
    SCOPED_TRACE("MPI_Recv, " + c.name);
    MPI_Status status;
    rc_l = PMPI_Recv(memory.data(), c.count, c.type, c.peer, c.tag, MPI_COMM_WORLD, &status);
    rc_v = MPI_Recv(memory.data(), c.count, c.type, c.peer, c.tag, MPI_COMM_WORLD, &status);
    EXPECT_EQ(error_class(rc_v), error_class(rc_l)) << "Veneer " << describe(rc_v) << ", library " << describe(rc_l);
  }
}

// A message longer than the derived-type receive: MPI_ERR_TRUNCATE from both,
// and Veneer writes nothing outside the type map (the gaps of the vector and
// the bytes past it).
TEST_F(BadInput, TruncatedTypedReceive) {
  std::vector<unsigned char> message(48);
  fill_pattern(message, kData);
  for (bool nonblocking : {false, true}) {
    SCOPED_TRACE(nonblocking ? "MPI_Irecv" : "MPI_Recv");
    MPI_Request sends[2];
    ASSERT_EQ(PMPI_Isend(message.data(), 48, MPI_BYTE, rank_, 30, MPI_COMM_WORLD, &sends[0]), MPI_SUCCESS);
    ASSERT_EQ(PMPI_Isend(message.data(), 48, MPI_BYTE, rank_, 31, MPI_COMM_WORLD, &sends[1]), MPI_SUCCESS);
    std::vector<int> memory_v(16), memory_l(16);
    fill_pattern({reinterpret_cast<unsigned char*>(memory_v.data()), 64}, kBackground);
    fill_pattern({reinterpret_cast<unsigned char*>(memory_l.data()), 64}, kBackground);
    const std::vector<int> before = memory_v;
    MPI_Status status;
    int rc_v = MPI_SUCCESS;
    if (nonblocking) {
      MPI_Request r;
      rc_v = MPI_Irecv(memory_v.data(), 1, committed_, rank_, 30, MPI_COMM_WORLD, &r);
      if (rc_v == MPI_SUCCESS) rc_v = MPI_Wait(&r, &status);
    } else {
      rc_v = MPI_Recv(memory_v.data(), 1, committed_, rank_, 30, MPI_COMM_WORLD, &status);
    }
    int rc_l = PMPI_Recv(memory_l.data(), 1, committed_, rank_, 31, MPI_COMM_WORLD, &status);
    PMPI_Waitall(2, sends, MPI_STATUSES_IGNORE);
    EXPECT_EQ(error_class(rc_l), MPI_ERR_TRUNCATE) << describe(rc_l);
    EXPECT_EQ(error_class(rc_v), error_class(rc_l)) << "Veneer " << describe(rc_v) << ", library " << describe(rc_l);
    for (int i : {2, 5, 8, 11, 12, 13, 14, 15}) EXPECT_EQ(memory_v[i], before[i]) << "int " << i << " written";
  }
}

}  // namespace
