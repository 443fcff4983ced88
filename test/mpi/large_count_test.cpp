// SPDX-License-Identifier: BSD-3-Clause
// MPI-4 large-count types and entry points under Veneer (issue 14). Types
// built by every _c constructor, with counts, strides, displacements, extents
// and pack positions beyond 2^31, live on sparse memory (an anonymous mapping
// of which only the touched pages are ever backed), so they fit any machine.
// Each type is committed under the default error handler (MPICH aborted that
// commit inside Veneer), decoded (Veneer's layout must report the library's
// _c size and bounds), packed and unpacked with MPI_Pack_c / MPI_Unpack_c,
// and sent and received with the _c sends and receives, at positions and
// counts that fit an int and that do not. Bytes must equal a hand-written
// reference (each case lists its type map) and the library's (PMPI_*_c).
// Without the _c functions (Open MPI 4.1) the tests skip.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "datatypes/decode.h"
#include "test/mpi/ranks.h"

#ifndef VENEER_HAVE_LARGE_COUNT

TEST(LargeCount, NeedsTheMpi4LargeCountFunctions) {
  GTEST_SKIP() << "this MPI has no MPI-4 large-count (_c) functions";
}

#else

namespace vd = veneer::datatypes;

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kWindow = 32;  // bytes checked on either side of every block
constexpr int64_t kPage = 4096;

// Anonymous memory that is reserved but backed only where touched.
class Sparse {
 public:
  explicit Sparse(int64_t bytes) : bytes_(static_cast<size_t>(bytes)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
  }
  ~Sparse() {
    if (base_) munmap(base_, bytes_);
  }
  Sparse(const Sparse&) = delete;
  Sparse& operator=(const Sparse&) = delete;
  unsigned char* get() const { return base_; }

 private:
  size_t bytes_;
  unsigned char* base_ = nullptr;
};

struct Segment {
  int64_t offset, length;
};

// A type, what it is made of by hand, and how many instances the tests use.
struct Case {
  std::string name;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::vector<Segment> map;  // one instance's type map, in order (bytes from the buffer pointer)
  int64_t extent = 0;        // by the constructors' definitions
  int64_t count = 1;
};

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
unsigned char pattern(int64_t offset, uint64_t salt) {
  return static_cast<unsigned char>(mix(static_cast<uint64_t>(offset) * 31 + salt));
}

// A case's memory: a sparse mapping holding every instance's blocks, with
// windows of kWindow bytes around each block (what the checks compare).
class Memory {
 public:
  explicit Memory(const Case& c) {
    for (int64_t k = 0; k < c.count; ++k)
      for (const Segment& s : c.map) map_.push_back({s.offset + k * c.extent, s.length});
    int64_t lo = 0, hi = 0;
    for (size_t i = 0; i < map_.size(); ++i) {
      lo = i ? std::min(lo, map_[i].offset) : map_[i].offset;
      hi = i ? std::max(hi, map_[i].offset + map_[i].length) : map_[i].offset + map_[i].length;
    }
    sparse_ = std::make_unique<Sparse>(hi - lo + 2 * kPage);
    lo_ = lo;
    if (sparse_->get()) buf_ = reinterpret_cast<void*>(reinterpret_cast<intptr_t>(sparse_->get()) + kPage - lo);
  }
  bool ok() const { return sparse_->get() != nullptr; }
  void* buf() const { return buf_; }
  unsigned char* at(int64_t offset) const {
    return reinterpret_cast<unsigned char*>(reinterpret_cast<intptr_t>(buf_) + offset);
  }
  int64_t bytes() const {
    int64_t n = 0;
    for (const Segment& s : map_) n += s.length;
    return n;
  }
  // Every window gets the pattern of `salt` (a function of the offset, so
  // overlapping windows agree).
  void fill(uint64_t salt) const {
    for (const Segment& s : map_)
      for (int64_t o = s.offset - kWindow; o < s.offset + s.length + kWindow; ++o) *at(o) = pattern(o, salt);
  }
  std::vector<unsigned char> windows() const {
    std::vector<unsigned char> out;
    for (const Segment& s : map_) out.insert(out.end(), at(s.offset - kWindow), at(s.offset + s.length + kWindow));
    return out;
  }
  // The reference: the type map's bytes in order.
  std::vector<unsigned char> packed() const {
    std::vector<unsigned char> out;
    for (const Segment& s : map_) out.insert(out.end(), at(s.offset), at(s.offset + s.length));
    return out;
  }
  // The reference: `stream` written over the type map in order.
  void unpack(const unsigned char* stream) const {
    for (const Segment& s : map_) {
      std::memcpy(at(s.offset), stream, static_cast<size_t>(s.length));
      stream += s.length;
    }
  }

 private:
  std::vector<Segment> map_;
  std::unique_ptr<Sparse> sparse_;
  int64_t lo_ = 0;
  void* buf_ = nullptr;
};

std::vector<unsigned char> stream_of(int64_t n, uint64_t salt) {
  std::vector<unsigned char> s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = pattern(i, salt);
  return s;
}

// Builds and commits (through Veneer) each case's type; frees them at the end.
class Cases {
 public:
  Cases() {
    MPI_Datatype t = MPI_DATATYPE_NULL, inner = MPI_DATATYPE_NULL;
    const int64_t two31 = int64_t{1} << 31, two32 = int64_t{1} << 32, two33 = int64_t{1} << 33;

    MPI_Type_contiguous_c(5, MPI_INT, &t);
    add("contiguous_c(5, MPI_INT)", t, {{0, 20}}, 20, 3);

    MPI_Type_vector_c(3, 2, two31 + 1, MPI_INT, &t);
    const int64_t vs = 4 * (two31 + 1);
    add("vector_c(3, 2, 2^31+1, MPI_INT)", t, {{0, 8}, {vs, 8}, {2 * vs, 8}}, 2 * vs + 8, 1);

    MPI_Type_create_hvector_c(2, 3, two32 + 5, MPI_SHORT, &t);
    add("create_hvector_c(2, 3, 2^32+5, MPI_SHORT)", t, {{0, 6}, {two32 + 5, 6}}, two32 + 11, 2);

    {
      MPI_Count bl[3] = {1, 2, 1}, d[3] = {two31 + 9, 0, -two31};
      MPI_Type_indexed_c(3, bl, d, MPI_DOUBLE, &t);
      add("indexed_c(3, [1,2,1], [2^31+9, 0, -2^31], MPI_DOUBLE)", t, {{8 * (two31 + 9), 8}, {0, 16}, {-8 * two31, 8}},
          8 * (two31 + 10) + 8 * two31, 1);
    }
    {
      MPI_Count bl[2] = {2, 1}, d[2] = {two32 + 1, 3};
      MPI_Type_create_hindexed_c(2, bl, d, MPI_INT, &t);
      add("create_hindexed_c(2, [2,1], [2^32+1, 3], MPI_INT)", t, {{two32 + 1, 8}, {3, 4}}, two32 + 6, 2);
    }
    {
      MPI_Count d[2] = {0, two31 + 1};
      MPI_Type_create_indexed_block_c(2, 3, d, MPI_FLOAT, &t);
      add("create_indexed_block_c(2, 3, [0, 2^31+1], MPI_FLOAT)", t, {{0, 12}, {4 * (two31 + 1), 12}},
          4 * (two31 + 1) + 12, 1);
    }
    {
      MPI_Count d[3] = {two33, two32, 7};
      MPI_Type_create_hindexed_block_c(3, 1, d, MPI_CHAR, &t);
      add("create_hindexed_block_c(3, 1, [2^33, 2^32, 7], MPI_CHAR)", t, {{two33, 1}, {two32, 1}, {7, 1}},
          two33 + 1 - 7, 1);
    }
    {
      MPI_Count bl[2] = {1, 2}, d[2] = {two32 + 16, 0};
      MPI_Datatype members[2] = {MPI_DOUBLE, MPI_INT};
      MPI_Type_create_struct_c(2, bl, d, members, &t);
      add("create_struct_c(2, [1,2], [2^32+16, 0], [MPI_DOUBLE, MPI_INT])", t, {{two32 + 16, 8}, {0, 8}}, two32 + 24,
          2);
    }
    {
      MPI_Count sizes[2] = {3, two32}, subsizes[2] = {2, 3}, starts[2] = {1, two32 - 5};
      MPI_Type_create_subarray_c(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_CHAR, &t);
      add("create_subarray_c(2, [3, 2^32], [2, 3], [1, 2^32-5], C, MPI_CHAR)", t,
          {{two32 + two32 - 5, 3}, {2 * two32 + two32 - 5, 3}}, 3 * two32, 1);
    }
    {
      MPI_Count sizes[1] = {two33}, subsizes[1] = {4}, starts[1] = {two33 - 4};
      MPI_Type_create_subarray_c(1, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_SHORT, &t);
      add("create_subarray_c(1, [2^33], [4], [2^33-4], Fortran, MPI_SHORT)", t, {{2 * (two33 - 4), 8}}, 2 * two33, 1);
    }
    {
      // Rank 2 of 3 owns the last block: global indices [2^31, 2^31+2).
      MPI_Count gsizes[1] = {two31 + 2};
      int distribs[1] = {MPI_DISTRIBUTE_BLOCK}, dargs[1] = {1 << 30}, psizes[1] = {3};
      MPI_Type_create_darray_c(3, 2, 1, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t);
      add("create_darray_c(3, 2, 1, [2^31+2], block, [2^30], [3], C, MPI_INT)", t, {{4 * two31, 8}}, 4 * (two31 + 2),
          1);
    }
    MPI_Type_vector(2, 1, 3, MPI_INT, &inner);
    MPI_Type_create_resized_c(inner, -two33, int64_t{1} << 34, &t);
    MPI_Type_free(&inner);
    add("create_resized_c(vector(2, 1, 3, MPI_INT), lb -2^33, extent 2^34)", t, {{0, 4}, {12, 4}}, int64_t{1} << 34, 2);

    MPI_Type_create_hvector_c(2, 1, two32, MPI_INT, &inner);
    MPI_Type_contiguous_c(2, inner, &t);
    MPI_Type_free(&inner);
    add("contiguous_c(2, create_hvector_c(2, 1, 2^32, MPI_INT))", t,
        {{0, 4}, {two32, 4}, {two32 + 4, 4}, {two32 + 4 + two32, 4}}, 2 * (two32 + 4), 1);

    MPI_Type_vector_c(1, 3, int64_t{1} << 40, MPI_INT, &t);
    add("vector_c(1, 3, 2^40, MPI_INT)", t, {{0, 12}}, 12, 4);

    MPI_Type_vector_c(3, 2, two31 + 1, MPI_INT, &inner);
    MPI_Type_dup(inner, &t);
    MPI_Type_free(&inner);
    add("dup(vector_c(3, 2, 2^31+1, MPI_INT))", t, {{0, 8}, {vs, 8}, {2 * vs, 8}}, 2 * vs + 8, 1);

    MPI_Type_contiguous(0, MPI_INT, &inner);
    MPI_Type_contiguous_c(two33 + 1, inner, &t);
    MPI_Type_free(&inner);
    add("contiguous_c(2^33+1, contiguous(0, MPI_INT))", t, {}, 0, 1);
  }
  ~Cases() {
    for (Case& c : list) MPI_Type_free(&c.type);
  }
  Cases(const Cases&) = delete;
  Cases& operator=(const Cases&) = delete;

  std::vector<Case> list;

 private:
  void add(std::string name, MPI_Datatype type, std::vector<Segment> map, int64_t extent, int64_t count) {
    MPI_Type_commit(&type);  // the commit that aborted (issue 14)
    list.push_back({std::move(name), type, std::move(map), extent, count});
  }
};

struct Shape {
  MPI_Count size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
};
Shape shape_of(MPI_Datatype t) {
  Shape s;
  PMPI_Type_size_c(t, &s.size);
  PMPI_Type_get_extent_c(t, &s.lb, &s.extent);
  PMPI_Type_get_true_extent_c(t, &s.true_lb, &s.true_extent);
  return s;
}

int64_t bytes_of(const Case& c) {
  int64_t n = 0;
  for (const Segment& s : c.map) n += s.length;
  return n * c.count;
}

// Calls `fn(memory)` with the case's memory, or fails if it cannot be mapped.
void with_memory(const Case& c, const std::function<void(const Memory&)>& fn) {
  Memory m(c);
  ASSERT_TRUE(m.ok()) << "could not map the sparse memory of " << c.name;
  fn(m);
}

}  // namespace

// The regression of issue 14: committing (above, in Cases) and using a type
// from MPI_Type_contiguous_c under the default error handler, where MPICH
// refuses the int query Veneer used to make.
TEST(LargeCount, CommitOfAContiguousCTypeDoesNotAbort) {
  MPI_Datatype t = MPI_DATATYPE_NULL;
  ASSERT_EQ(MPI_Type_contiguous_c(4, MPI_DOUBLE, &t), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&t), MPI_SUCCESS);
  MPI_Datatype d = MPI_DATATYPE_NULL;
  ASSERT_EQ(MPI_Type_dup(t, &d), MPI_SUCCESS);
  const double in[4] = {1.5, -2.0, 3.25, 4.0};
  double out[4] = {0, 0, 0, 0};
  int position = 0;
  char packed[64];
  ASSERT_EQ(MPI_Pack(in, 1, d, packed, sizeof packed, &position, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(position, 32);
  position = 0;
  ASSERT_EQ(MPI_Unpack(packed, sizeof packed, &position, out, 1, t, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);
  MPI_Type_free(&d);
  MPI_Type_free(&t);
}

TEST(LargeCount, DecodedLayoutsAgreeWithTheLibrary) {
  Cases cases;
  for (const Case& c : cases.list) {
    SCOPED_TRACE(c.name);
    const Shape s = shape_of(c.type);
    // The hand-written references agree with the library's own description.
    int64_t size = 0;
    for (const Segment& g : c.map) size += g.length;
    EXPECT_EQ(s.size, size);
    EXPECT_EQ(s.extent, c.extent);
    auto decoded = vd::decode(c.type);
    const auto* layout = std::get_if<vd::Layout>(&decoded);
    ASSERT_NE(layout, nullptr) << std::get<vd::DecodeError>(decoded).why;
    EXPECT_EQ(layout->size, s.size);
    EXPECT_EQ(layout->lb, s.lb);
    EXPECT_EQ(layout->extent, s.extent);
    EXPECT_EQ(layout->true_lb, s.true_lb);
    EXPECT_EQ(layout->true_extent, s.true_extent);
  }
}

// MPI_Pack_c through Veneer against PMPI_Pack_c and the reference, at a
// position that fits an int and at one past 2^32 (in a sparse output buffer).
TEST(LargeCount, PackCMatchesTheLibrary) {
  Cases cases;
  for (const Case& c : cases.list) {
    SCOPED_TRACE(c.name);
    with_memory(c, [&](const Memory& m) {
      m.fill(11);
      const std::vector<unsigned char> before = m.windows();
      const std::vector<unsigned char> reference = m.packed();
      const int64_t n = static_cast<int64_t>(reference.size());
      for (int64_t start : {int64_t{3}, 4 * kGiB + 3}) {
        SCOPED_TRACE("position " + std::to_string(start));
        const int64_t outsize = start + n + 16;
        Sparse out_v(outsize + kPage), out_l(outsize + kPage);
        ASSERT_TRUE(out_v.get() && out_l.get());
        MPI_Count pos_v = start, pos_l = start;
        ASSERT_EQ(MPI_Pack_c(m.buf(), c.count, c.type, out_v.get(), outsize, &pos_v, MPI_COMM_WORLD), MPI_SUCCESS);
        ASSERT_EQ(PMPI_Pack_c(m.buf(), c.count, c.type, out_l.get(), outsize, &pos_l, MPI_COMM_WORLD), MPI_SUCCESS);
        EXPECT_EQ(pos_v, start + n);
        EXPECT_EQ(pos_l, start + n);
        // The packed bytes and 16 untouched bytes on either side.
        const auto window = [&](const Sparse& s) {
          return std::vector<unsigned char>(s.get() + start - 3, s.get() + start + n + 16);
        };
        std::vector<unsigned char> expected(static_cast<size_t>(n + 19), 0);
        std::copy(reference.begin(), reference.end(), expected.begin() + 3);
        EXPECT_EQ(window(out_v), expected) << "Veneer against the reference";
        EXPECT_EQ(window(out_l), expected) << "the library against the reference";
      }
      EXPECT_EQ(m.windows(), before) << "MPI_Pack_c changed its input";
    });
  }
}

// MPI_Unpack_c through Veneer against PMPI_Unpack_c and the reference.
TEST(LargeCount, UnpackCMatchesTheLibrary) {
  Cases cases;
  for (const Case& c : cases.list) {
    SCOPED_TRACE(c.name);
    with_memory(c, [&](const Memory& m) {
      const int64_t n = m.bytes();
      for (int64_t start : {int64_t{5}, 4 * kGiB + 5}) {
        SCOPED_TRACE("position " + std::to_string(start));
        const int64_t insize = start + n + 7;
        Sparse in(insize + kPage);
        ASSERT_NE(in.get(), nullptr);
        const std::vector<unsigned char> stream = stream_of(n, 44);
        std::copy(stream.begin(), stream.end(), in.get() + start);
        m.fill(22);
        m.unpack(stream.data());
        const std::vector<unsigned char> reference = m.windows();

        m.fill(22);
        MPI_Count pos_v = start;
        ASSERT_EQ(MPI_Unpack_c(in.get(), insize, &pos_v, m.buf(), c.count, c.type, MPI_COMM_WORLD), MPI_SUCCESS);
        EXPECT_EQ(pos_v, start + n);
        EXPECT_EQ(m.windows(), reference) << "Veneer against the reference";
        // MPICH 4.0's own unpack divides by zero on a zero-size type.
        if (n == 0) continue;
        m.fill(22);
        MPI_Count pos_l = start;
        ASSERT_EQ(PMPI_Unpack_c(in.get(), insize, &pos_l, m.buf(), c.count, c.type, MPI_COMM_WORLD), MPI_SUCCESS);
        EXPECT_EQ(pos_l, start + n);
        EXPECT_EQ(m.windows(), reference) << "the library against the reference";
      }
    });
  }
}

// A count beyond an int of a zero-size type: nothing packed or unpacked,
// position unchanged, as the library does (it packs; it cannot unpack these).
TEST(LargeCount, CountsBeyondAnIntOfAZeroSizeType) {
  Cases cases;
  const Case& c = cases.list.back();
  ASSERT_EQ(shape_of(c.type).size, 0);
  const MPI_Count count = (MPI_Count{1} << 32) + 3;
  unsigned char buf[16], out_v[16], out_l[16];
  std::memset(buf, 7, sizeof buf);
  std::memset(out_v, 9, sizeof out_v);
  std::memset(out_l, 9, sizeof out_l);
  MPI_Count pos_v = 2, pos_l = 2;
  EXPECT_EQ(MPI_Pack_c(buf, count, c.type, out_v, 16, &pos_v, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(PMPI_Pack_c(buf, count, c.type, out_l, 16, &pos_l, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(pos_v, 2);
  EXPECT_EQ(pos_l, 2);
  EXPECT_EQ(std::memcmp(out_v, out_l, 16), 0);
  pos_v = 2;
  EXPECT_EQ(MPI_Unpack_c(out_v, 16, &pos_v, buf, count, c.type, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(pos_v, 2);
  for (unsigned char b : buf) EXPECT_EQ(b, 7);

  // A message of no bytes, sent and received with that count.
  const int me = rank_of(), p = size_of();
  const int to = (me + 1) % p, from = (me + p - 1) % p;
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Status st;
  ASSERT_EQ(MPI_Isend_c(buf, count, c.type, to, 5, MPI_COMM_WORLD, &r), MPI_SUCCESS);
  ASSERT_EQ(MPI_Recv_c(buf, count, c.type, from, 5, MPI_COMM_WORLD, &st), MPI_SUCCESS);
  ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
  MPI_Count received = -1;
  PMPI_Get_count_c(&st, MPI_BYTE, &received);
  EXPECT_EQ(received, 0);
  for (unsigned char b : buf) EXPECT_EQ(b, 7);
}

// Typed _c sends through Veneer deliver the reference's bytes; typed _c
// receives of those bytes leave memory as the reference (and the library's
// own receive) does. Each rank sends to the next and receives from the one
// before (itself on one rank); every form is used.
TEST(LargeCount, SendsAndReceivesMatchTheLibrary) {
  Cases cases;
  const int me = rank_of(), p = size_of();
  const int to = (me + 1) % p, from = (me + p - 1) % p;
  int tag = 100;
  for (const Case& c : cases.list) {
    SCOPED_TRACE(c.name);
    const int64_t n = bytes_of(c);
    with_memory(c, [&](const Memory& m) {
      for (int form = 0; form < 3; ++form) {
        SCOPED_TRACE(form == 0 ? "Isend_c / Recv_c" : form == 1 ? "Send_c / Irecv_c" : "Sendrecv_c");
        tag += 2;
        // Typed send, byte receive.
        m.fill(11);
        const std::vector<unsigned char> reference = m.packed();
        std::vector<unsigned char> got(static_cast<size_t>(n) + 1, 0);
        MPI_Status st;
        if (form == 0) {
          MPI_Request r;
          ASSERT_EQ(MPI_Isend_c(m.buf(), c.count, c.type, to, tag, MPI_COMM_WORLD, &r), MPI_SUCCESS);
          ASSERT_EQ(PMPI_Recv_c(got.data(), n + 1, MPI_BYTE, from, tag, MPI_COMM_WORLD, &st), MPI_SUCCESS);
          ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
        } else if (form == 1) {
          MPI_Request r;
          ASSERT_EQ(PMPI_Irecv_c(got.data(), n + 1, MPI_BYTE, from, tag, MPI_COMM_WORLD, &r), MPI_SUCCESS);
          ASSERT_EQ(MPI_Send_c(m.buf(), c.count, c.type, to, tag, MPI_COMM_WORLD), MPI_SUCCESS);
          ASSERT_EQ(PMPI_Wait(&r, &st), MPI_SUCCESS);
        } else {
          ASSERT_EQ(MPI_Sendrecv_c(m.buf(), c.count, c.type, to, tag, got.data(), n + 1, MPI_BYTE, from, tag,
                                   MPI_COMM_WORLD, &st),
                    MPI_SUCCESS);
        }
        MPI_Count received = -1;
        PMPI_Get_count_c(&st, MPI_BYTE, &received);
        EXPECT_EQ(received, n);
        got.resize(static_cast<size_t>(n));
        EXPECT_EQ(got, reference) << "typed send";
        EXPECT_EQ(m.packed(), reference) << "the send changed its buffer";

        // Byte send, typed receive: Veneer's, then the library's, of the same stream.
        const std::vector<unsigned char> stream = stream_of(n, 44 + form);
        m.fill(22);
        m.unpack(stream.data());
        const std::vector<unsigned char> expected = m.windows();
        std::vector<std::vector<unsigned char>> results;
        MPI_Count counts[2] = {-1, -1};
        for (int who = 0; who < 2; ++who) {
          m.fill(22);
          if (who == 0 && form == 2) {
            // The byte message travels in the same call (a Sendrecv's send may
            // wait for its match: MPICH's to itself does).
            ASSERT_EQ(MPI_Sendrecv_c(stream.data(), n, MPI_BYTE, to, tag + 1, m.buf(), c.count, c.type, from, tag + 1,
                                     MPI_COMM_WORLD, &st),
                      MPI_SUCCESS);
          } else {
            MPI_Request r;
            ASSERT_EQ(PMPI_Isend_c(stream.data(), n, MPI_BYTE, to, tag + 1, MPI_COMM_WORLD, &r), MPI_SUCCESS);
            if (who == 1) {
              ASSERT_EQ(PMPI_Recv_c(m.buf(), c.count, c.type, from, tag + 1, MPI_COMM_WORLD, &st), MPI_SUCCESS);
            } else if (form == 0) {
              ASSERT_EQ(MPI_Recv_c(m.buf(), c.count, c.type, from, tag + 1, MPI_COMM_WORLD, &st), MPI_SUCCESS);
            } else {
              MPI_Request rr;
              ASSERT_EQ(MPI_Irecv_c(m.buf(), c.count, c.type, from, tag + 1, MPI_COMM_WORLD, &rr), MPI_SUCCESS);
              ASSERT_EQ(MPI_Wait(&rr, &st), MPI_SUCCESS);
            }
            ASSERT_EQ(PMPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
          }
          PMPI_Get_count_c(&st, c.type, &counts[who]);
          results.push_back(m.windows());
        }
        EXPECT_EQ(results[0], expected) << "Veneer's typed receive against the reference";
        EXPECT_EQ(results[1], expected) << "the library's typed receive against the reference";
        EXPECT_EQ(counts[0], counts[1]) << "MPI_Get_count_c";
      }
    });
  }
}

// Collectives with types from _c constructors (Veneer reads each type's shape
// to choose an algorithm, and takes over Alltoallv of small blocks): the data
// of a hand-written reference.
TEST(LargeCount, CollectivesWithLargeCountTypes) {
  const int me = rank_of(), p = size_of();
  MPI_Datatype quad = MPI_DATATYPE_NULL, column = MPI_DATATYPE_NULL;
  ASSERT_EQ(MPI_Type_contiguous_c(4, MPI_INT, &quad), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&quad), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_vector_c(3, 1, 2, MPI_INT, &column), MPI_SUCCESS);  // ints 0, 2, 4 of 5
  ASSERT_EQ(MPI_Type_commit(&column), MPI_SUCCESS);

  // Allgather of 2 quads from each rank (MPICH has no MPI_SUM on derived types).
  std::vector<int> in(8), out(static_cast<size_t>(8 * p), -1);
  for (int i = 0; i < 8; ++i) in[static_cast<size_t>(i)] = me * 100 + i;
  ASSERT_EQ(MPI_Allgather(in.data(), 2, quad, out.data(), 2, quad, MPI_COMM_WORLD), MPI_SUCCESS);
  for (int r = 0; r < p; ++r)
    for (int i = 0; i < 8; ++i) EXPECT_EQ(out[static_cast<size_t>(8 * r + i)], r * 100 + i) << r << ", " << i;

  // Bcast of 2 columns (extent 5 ints, so 2 instances span 10): gaps untouched.
  std::vector<int> cols(10);
  for (int i = 0; i < 10; ++i) cols[static_cast<size_t>(i)] = me == 0 ? i : -1 - i;
  ASSERT_EQ(MPI_Bcast(cols.data(), 2, column, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  for (int i = 0; i < 10; ++i) {
    const bool data = i % 5 % 2 == 0;
    EXPECT_EQ(cols[static_cast<size_t>(i)], data || me == 0 ? i : -1 - i) << i;
  }

  // Alltoallv of one column to and from each rank.
  std::vector<int> send(static_cast<size_t>(5 * p)), recv(static_cast<size_t>(5 * p), -7);
  for (int i = 0; i < 5 * p; ++i) send[static_cast<size_t>(i)] = me * 1000 + i;
  std::vector<int> counts(static_cast<size_t>(p), 1), displs(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) displs[static_cast<size_t>(r)] = r;
  ASSERT_EQ(MPI_Alltoallv(send.data(), counts.data(), displs.data(), column, recv.data(), counts.data(), displs.data(),
                          column, MPI_COMM_WORLD),
            MPI_SUCCESS);
  for (int r = 0; r < p; ++r)
    for (int k = 0; k < 5; ++k) {
      const int got = recv[static_cast<size_t>(5 * r + k)];
      EXPECT_EQ(got, k % 2 == 0 ? r * 1000 + 5 * me + k : -7) << "from rank " << r << ", int " << k;
    }
  MPI_Type_free(&column);
  MPI_Type_free(&quad);
}

#endif  // VENEER_HAVE_LARGE_COUNT
