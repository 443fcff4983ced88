// SPDX-License-Identifier: BSD-3-Clause
// The DDTBench application layouts (/work/shared/DDTBENCH-LAYOUTS.md) at small
// sizes. Each case builds its MPI type as the application does and writes the
// same gather as a plain loop; the loop is the reference for MPI_Pack through
// Veneer, PMPI_Pack, Veneer's engine at several fragment sizes, unpacking, and
// a send/receive through Veneer.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "datatypes/decode.h"
#include "datatypes/pack.h"
#include "test/datatypes/typegen.h"

namespace vd = veneer::datatypes;
using veneer::test::fill_pattern;
using veneer::test::first_difference;
using veneer::test::Regions;
using veneer::test::shape_of;
using veneer::test::TypeHandle;

namespace {

constexpr uint64_t kData = 11, kBackground = 22, kOutBackground = 33, kStream = 44;
constexpr int kGuard = 16;

// One application layout: its type, the arrays it reads, and the hand-written
// gather loop's output as a list of blocks in pack order.
struct Case {
  std::string name;
  TypeHandle type;
  int count = 1;
  void* buf = nullptr;  // MPI_BOTTOM for the absolute-address cases
  Regions memory;
  std::vector<std::span<unsigned char>> blocks;
  std::vector<std::vector<unsigned char>> storage;
  // Set where the application receives the packed data as plain elements.
  MPI_Datatype receive_as = MPI_DATATYPE_NULL;
  int receive_count = 0;

  template <typename T>
  T* array(size_t n) {
    storage.emplace_back(n * sizeof(T) + 2 * kGuard);
    memory.add(storage.back());
    return reinterpret_cast<T*>(storage.back().data() + kGuard);
  }
  void emit(void* p, size_t bytes) { blocks.emplace_back(static_cast<unsigned char*>(p), bytes); }
  void commit(MPI_Datatype t) {
    MPI_Type_commit(&t);
    type = TypeHandle(t);
  }
  int64_t stream() const {
    int64_t n = 0;
    for (auto b : blocks) n += static_cast<int64_t>(b.size());
    return n;
  }
  std::vector<unsigned char> reference_pack() const {
    std::vector<unsigned char> out;
    for (auto b : blocks) out.insert(out.end(), b.begin(), b.end());
    return out;
  }
  void reference_unpack(std::span<const unsigned char> in) {
    size_t at = 0;
    for (auto b : blocks) {
      std::memcpy(b.data(), in.data() + at, b.size());
      at += b.size();
    }
  }
};

MPI_Aint address_of(const void* p) {
  MPI_Aint a = 0;
  MPI_Get_address(p, &a);
  return a;
}

// Distinct indices in an irregular order, as in a neighbour list.
std::vector<int> index_list(int from, int take, unsigned seed) {
  std::vector<int> all(from);
  std::iota(all.begin(), all.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(take);
  return all;
}

// NAS LU: u[n3][n2 + 2][5] doubles, a slab of 5-component points.
constexpr int kLuN2 = 5, kLuN3 = 4;
double* lu_point(double* u, int k, int j) { return u + (k * (kLuN2 + 2) + j) * 5; }

std::unique_ptr<Case> nas_lu_x() {
  auto c = std::make_unique<Case>();
  c->name = "NAS LU x";
  double* u = c->array<double>(kLuN3 * (kLuN2 + 2) * 5);
  const int k0 = 2;
  MPI_Datatype t;
  MPI_Type_contiguous(5 * kLuN2, MPI_DOUBLE, &t);
  c->commit(t);
  c->buf = lu_point(u, k0, 1);
  for (int j = 1; j <= kLuN2; ++j)
    for (int m = 0; m < 5; ++m) c->emit(lu_point(u, k0, j) + m, 8);
  return c;
}

std::unique_ptr<Case> nas_lu_y() {
  auto c = std::make_unique<Case>();
  c->name = "NAS LU y";
  double* u = c->array<double>(kLuN3 * (kLuN2 + 2) * 5);
  const int j0 = kLuN2;
  TypeHandle point;
  MPI_Type_contiguous(5, MPI_DOUBLE, point.replace());
  MPI_Datatype t;
  MPI_Type_vector(kLuN3, 1, kLuN2 + 2, point.get(), &t);
  c->commit(t);
  c->buf = lu_point(u, 0, j0);
  for (int k = 0; k < kLuN3; ++k) c->emit(lu_point(u, k, j0), 40);
  return c;
}

// NAS MG: g[n3][n2][n1] doubles; each face is the interior of one plane.
constexpr int kMgN1 = 7, kMgN2 = 6, kMgN3 = 5;
double* mg_at(double* g, int i3, int i2, int i1) { return g + (i3 * kMgN2 + i2) * kMgN1 + i1; }

std::unique_ptr<Case> nas_mg_x() {
  auto c = std::make_unique<Case>();
  c->name = "NAS MG x";
  double* g = c->array<double>(kMgN1 * kMgN2 * kMgN3);
  const int x0 = kMgN1 - 2;
  TypeHandle column;
  MPI_Type_vector(kMgN2 - 2, 1, kMgN1, MPI_DOUBLE, column.replace());
  MPI_Datatype t;
  MPI_Type_create_hvector(kMgN3 - 2, 1, kMgN1 * kMgN2 * sizeof(double), column.get(), &t);
  c->commit(t);
  c->buf = mg_at(g, 1, 1, x0);
  for (int i3 = 1; i3 < kMgN3 - 1; ++i3)
    for (int i2 = 1; i2 < kMgN2 - 1; ++i2) c->emit(mg_at(g, i3, i2, x0), 8);
  return c;
}

std::unique_ptr<Case> nas_mg_y() {
  auto c = std::make_unique<Case>();
  c->name = "NAS MG y";
  double* g = c->array<double>(kMgN1 * kMgN2 * kMgN3);
  const int y0 = 1;
  MPI_Datatype t;
  MPI_Type_vector(kMgN3 - 2, kMgN1 - 2, kMgN1 * kMgN2, MPI_DOUBLE, &t);
  c->commit(t);
  c->buf = mg_at(g, 1, y0, 1);
  for (int i3 = 1; i3 < kMgN3 - 1; ++i3)
    for (int i1 = 1; i1 < kMgN1 - 1; ++i1) c->emit(mg_at(g, i3, y0, i1), 8);
  return c;
}

std::unique_ptr<Case> nas_mg_z() {
  auto c = std::make_unique<Case>();
  c->name = "NAS MG z";
  double* g = c->array<double>(kMgN1 * kMgN2 * kMgN3);
  const int z0 = kMgN3 - 2;
  MPI_Datatype t;
  MPI_Type_vector(kMgN2 - 2, kMgN1 - 2, kMgN1, MPI_DOUBLE, &t);
  c->commit(t);
  c->buf = mg_at(g, z0, 1, 1);
  for (int i2 = 1; i2 < kMgN2 - 1; ++i2)
    for (int i1 = 1; i1 < kMgN1 - 1; ++i1) c->emit(mg_at(g, z0, i2, i1), 8);
  return c;
}

// MILC: lattice[parity][t][z][site] of su3 vectors (3 complex floats); the
// z-down face is one z plane of both parities at every t.
std::unique_ptr<Case> milc_su3_zdown() {
  auto c = std::make_unique<Case>();
  c->name = "MILC su3_zdown";
  const int nt = 4, nz = 3, sites = 3, z0 = 1;
  float* lattice = c->array<float>(2 * nt * nz * sites * 6);
  auto at = [&](int parity, int t, int z, int s) { return lattice + (((parity * nt + t) * nz + z) * sites + s) * 6; };
  TypeHandle su3, plane;
  MPI_Type_contiguous(6, MPI_FLOAT, su3.replace());
  MPI_Type_vector(nt, sites, nz * sites, su3.get(), plane.replace());
  MPI_Datatype t;
  MPI_Type_create_hvector(2, 1, nt * nz * sites * 6 * sizeof(float), plane.get(), &t);
  c->commit(t);
  c->buf = at(0, 0, z0, 0);
  for (int parity = 0; parity < 2; ++parity)
    for (int tt = 0; tt < nt; ++tt)
      for (int s = 0; s < sites; ++s) c->emit(at(parity, tt, z0, s), 24);
  return c;
}

// FFT2D transpose: a rows x n block of complex doubles sent as p column blocks;
// resizing the column type to one element makes consecutive columns start one
// element apart, so instances interleave.
MPI_Datatype fft_block_type(int rows, int n) {
  TypeHandle column, element_column;
  MPI_Type_vector(rows, 1, n, MPI_C_DOUBLE_COMPLEX, column.replace());
  MPI_Type_create_resized(column.get(), 0, 16, element_column.replace());
  MPI_Datatype t;
  MPI_Type_contiguous(rows, element_column.get(), &t);
  return t;
}

std::unique_ptr<Case> fft2d() {
  auto c = std::make_unique<Case>();
  c->name = "FFT2D transpose";
  const int p = 2, n = 8, rows = n / p;
  unsigned char* a = c->array<unsigned char>(rows * n * 16);
  c->commit(fft_block_type(rows, n));
  c->count = p;
  c->buf = a;
  for (int d = 0; d < p; ++d)
    for (int col = 0; col < rows; ++col)
      for (int r = 0; r < rows; ++r) c->emit(a + (r * n + d * rows + col) * 16, 16);
  return c;
}

// WRF halos over Fortran arrays a2(ni,nj), a3(ni,nk,nj) x3, a4(ni,nk,nj,ns):
// the x halo is a strip of i over the interior j, the y halo a strip of j over
// the interior i. One struct at MPI_BOTTOM, from vector pieces or subarrays.
std::unique_ptr<Case> wrf(bool x_halo, bool subarrays) {
  auto c = std::make_unique<Case>();
  c->name = std::string("WRF ") + (x_halo ? "x" : "y") + (subarrays ? " (subarray)" : " (vector)");
  const int ni = 8, nk = 3, nj = 7, ns = 2, w = 2;
  const int i0 = x_halo ? ni - w - 1 : 1, i1 = x_halo ? i0 + w : ni - 1;
  const int j0 = x_halo ? 1 : nj - w - 1, j1 = x_halo ? nj - 1 : j0 + w;
  float* a2 = c->array<float>(ni * nj);
  float* a3[3];
  for (auto& a : a3) a = c->array<float>(ni * nk * nj);
  float* a4 = c->array<float>(ni * nk * nj * ns);
  auto at3 = [&](float* a, int i, int k, int j) { return a + i + ni * (k + nk * j); };
  auto at4 = [&](int i, int k, int j, int s) { return a4 + i + ni * (k + nk * (j + nj * s)); };

  // The reference: Fortran loop order, i fastest.
  for (int j = j0; j < j1; ++j)
    for (int i = i0; i < i1; ++i) c->emit(a2 + i + ni * j, 4);
  for (float* a : a3)
    for (int j = j0; j < j1; ++j)
      for (int k = 0; k < nk; ++k)
        for (int i = i0; i < i1; ++i) c->emit(at3(a, i, k, j), 4);
  for (int s = 0; s < ns; ++s)
    for (int j = j0; j < j1; ++j)
      for (int k = 0; k < nk; ++k)
        for (int i = i0; i < i1; ++i) c->emit(at4(i, k, j, s), 4);

  std::vector<TypeHandle> parts(5);
  std::vector<MPI_Aint> displacements(5);
  if (subarrays) {
    int s2[] = {ni, nj}, sub2[] = {i1 - i0, j1 - j0}, st2[] = {i0, j0};
    int s3[] = {ni, nk, nj}, sub3[] = {i1 - i0, nk, j1 - j0}, st3[] = {i0, 0, j0};
    int s4[] = {ni, nk, nj, ns}, sub4[] = {i1 - i0, nk, j1 - j0, ns}, st4[] = {i0, 0, j0, 0};
    MPI_Type_create_subarray(2, s2, sub2, st2, MPI_ORDER_FORTRAN, MPI_FLOAT, parts[0].replace());
    for (int m = 0; m < 3; ++m)
      MPI_Type_create_subarray(3, s3, sub3, st3, MPI_ORDER_FORTRAN, MPI_FLOAT, parts[1 + m].replace());
    MPI_Type_create_subarray(4, s4, sub4, st4, MPI_ORDER_FORTRAN, MPI_FLOAT, parts[4].replace());
    displacements = {address_of(a2), address_of(a3[0]), address_of(a3[1]), address_of(a3[2]), address_of(a4)};
  } else {
    TypeHandle rows3, slab3;
    MPI_Type_vector(j1 - j0, i1 - i0, ni, MPI_FLOAT, parts[0].replace());
    MPI_Type_vector(nk, i1 - i0, ni, MPI_FLOAT, rows3.replace());
    MPI_Type_create_hvector(j1 - j0, 1, ni * nk * sizeof(float), rows3.get(), slab3.replace());
    for (int m = 0; m < 3; ++m) MPI_Type_dup(slab3.get(), parts[1 + m].replace());
    MPI_Type_create_hvector(ns, 1, ni * nk * nj * sizeof(float), slab3.get(), parts[4].replace());
    displacements = {address_of(a2 + i0 + ni * j0), address_of(at3(a3[0], i0, 0, j0)),
                     address_of(at3(a3[1], i0, 0, j0)), address_of(at3(a3[2], i0, 0, j0)),
                     address_of(at4(i0, 0, j0, 0))};
  }
  std::vector<int> ones(5, 1);
  std::vector<MPI_Datatype> types;
  for (auto& p : parts) types.push_back(p.get());
  MPI_Datatype t;
  MPI_Type_create_struct(5, ones.data(), displacements.data(), types.data(), &t);
  c->commit(t);
  c->buf = MPI_BOTTOM;
  return c;
}

// LAMMPS: per-atom arrays (x: 3 doubles per atom; tag, type, mask, q,
// molecule: 1), the atoms of a send list gathered from each, at MPI_BOTTOM.
std::unique_ptr<Case> lammps(bool full) {
  auto c = std::make_unique<Case>();
  c->name = full ? "LAMMPS full" : "LAMMPS atomic";
  const int atoms = 40, sends = 17;
  std::vector<int> list = index_list(atoms, sends, 2012);
  std::vector<int> widths = full ? std::vector<int>{3, 1, 1, 1, 1, 1} : std::vector<int>{3, 1, 1, 1};
  std::vector<TypeHandle> parts(widths.size());
  std::vector<MPI_Aint> displacements;
  for (size_t m = 0; m < widths.size(); ++m) {
    const int w = widths[m];
    double* a = c->array<double>(atoms * w);
    std::vector<int> offsets;
    for (int atom : list) {
      offsets.push_back(atom * w);
      c->emit(a + atom * w, w * sizeof(double));
    }
    MPI_Type_create_indexed_block(sends, w, offsets.data(), MPI_DOUBLE, parts[m].replace());
    displacements.push_back(address_of(a));
  }
  std::vector<int> ones(widths.size(), 1);
  std::vector<MPI_Datatype> types;
  for (auto& p : parts) types.push_back(p.get());
  MPI_Datatype t;
  MPI_Type_create_struct(static_cast<int>(types.size()), ones.data(), displacements.data(), types.data(), &t);
  c->commit(t);
  c->buf = MPI_BOTTOM;
  return c;
}

// SPECFEM3D outer core: a gather of single floats of a scalar field.
std::unique_ptr<Case> specfem_oc() {
  auto c = std::make_unique<Case>();
  c->name = "SPECFEM3D oc";
  const int points = 50, shared = 20;
  float* field = c->array<float>(points);
  std::vector<int> list = index_list(points, shared, 3);
  MPI_Datatype t;
  MPI_Type_create_indexed_block(shared, 1, list.data(), MPI_FLOAT, &t);
  c->commit(t);
  c->buf = field;
  for (int p : list) c->emit(field + p, 4);
  return c;
}

// SPECFEM3D crust-mantle + inner core: two gathers of 3-float vectors, one
// struct with the second field's byte offset.
std::unique_ptr<Case> specfem_cm() {
  auto c = std::make_unique<Case>();
  c->name = "SPECFEM3D cm";
  const int mantle_points = 30, core_points = 12, mantle_shared = 15, core_shared = 8;
  float* base = c->array<float>((mantle_points + core_points) * 3);
  float* mantle = base;
  float* core = base + mantle_points * 3;
  std::vector<int> mantle_list = index_list(mantle_points, mantle_shared, 5);
  std::vector<int> core_list = index_list(core_points, core_shared, 6);
  std::vector<int> mantle_offsets, core_offsets;
  for (int p : mantle_list) {
    mantle_offsets.push_back(3 * p);
    c->emit(mantle + 3 * p, 12);
  }
  for (int p : core_list) {
    core_offsets.push_back(3 * p);
    c->emit(core + 3 * p, 12);
  }
  TypeHandle mantle_type, core_type;
  MPI_Type_create_indexed_block(mantle_shared, 3, mantle_offsets.data(), MPI_FLOAT, mantle_type.replace());
  MPI_Type_create_indexed_block(core_shared, 3, core_offsets.data(), MPI_FLOAT, core_type.replace());
  int ones[2] = {1, 1};
  MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(mantle_points * 3 * sizeof(float))};
  MPI_Datatype types[2] = {mantle_type.get(), core_type.get()};
  MPI_Datatype t;
  MPI_Type_create_struct(2, ones, displacements, types, &t);
  c->commit(t);
  c->buf = base;
  return c;
}

// SPECFEM3D mesh transpose: columns of 3-float elements of a rows x cols
// matrix, one column per instance, received as contiguous floats.
std::unique_ptr<Case> specfem_mt() {
  auto c = std::make_unique<Case>();
  c->name = "SPECFEM3D mt";
  const int rows = 5, cols = 6;
  float* m = c->array<float>(rows * cols * 3);
  TypeHandle element, column;
  MPI_Type_contiguous(3, MPI_FLOAT, element.replace());
  MPI_Type_vector(rows, 1, cols, element.get(), column.replace());
  MPI_Datatype t;
  MPI_Type_create_resized(column.get(), 0, 3 * sizeof(float), &t);
  c->commit(t);
  c->count = cols;
  c->buf = m;
  for (int col = 0; col < cols; ++col)
    for (int r = 0; r < rows; ++r) c->emit(m + (r * cols + col) * 3, 12);
  c->receive_as = MPI_FLOAT;
  c->receive_count = rows * cols * 3;
  return c;
}

struct Named {
  const char* name;
  std::function<std::unique_ptr<Case>()> build;
};

const std::vector<Named>& all_cases() {
  static const std::vector<Named> list = {
      {"NasLuX", nas_lu_x},
      {"NasLuY", nas_lu_y},
      {"NasMgX", nas_mg_x},
      {"NasMgY", nas_mg_y},
      {"NasMgZ", nas_mg_z},
      {"MilcSu3Zdown", milc_su3_zdown},
      {"Fft2d", fft2d},
      {"WrfXVector", [] { return wrf(true, false); }},
      {"WrfYVector", [] { return wrf(false, false); }},
      {"WrfXSubarray", [] { return wrf(true, true); }},
      {"WrfYSubarray", [] { return wrf(false, true); }},
      {"LammpsFull", [] { return lammps(true); }},
      {"LammpsAtomic", [] { return lammps(false); }},
      {"SpecfemOc", specfem_oc},
      {"SpecfemCm", specfem_cm},
      {"SpecfemMt", specfem_mt},
  };
  return list;
}

// MPICH 4.0's MPI_Pack and MPI_Unpack reject MPI_BOTTOM ("Null pointer in
// parameter inbuf"), so the library cannot be asked about those cases there;
// Veneer still is.
bool library_takes(const Case& c) {
#ifdef MPICH_VERSION
  return c.buf != MPI_BOTTOM;
#else
  (void)c;
  return true;
#endif
}

// The engine's packing in pieces of `fragment` bytes, concatenated.
std::vector<unsigned char> engine_pack(const vd::Layout& layout, const Case& c, int64_t fragment) {
  const int64_t n = c.stream();
  std::vector<unsigned char> out(n);
  for (int64_t at = 0; at < n; at += fragment) {
    int64_t got = vd::pack(layout, c.count, c.buf, at, fragment, out.data() + at);
    EXPECT_EQ(got, std::min(fragment, n - at)) << "pack() at " << at << ", fragments of " << fragment;
    if (got <= 0) break;
  }
  return out;
}

void engine_unpack(const vd::Layout& layout, Case& c, std::span<const unsigned char> in, int64_t fragment) {
  const int64_t n = c.stream();
  for (int64_t at = 0; at < n; at += fragment) {
    int64_t got = vd::unpack(layout, c.count, c.buf, at, fragment, in.data() + at);
    EXPECT_EQ(got, std::min(fragment, n - at)) << "unpack() at " << at << ", fragments of " << fragment;
    if (got <= 0) break;
  }
}

class DDTBench : public testing::TestWithParam<Named> {
 protected:
  void SetUp() override {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  void TearDown() override { MPI_Comm_free(&comm_); }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

TEST_P(DDTBench, PackAgainstTheLoop) {
  std::unique_ptr<Case> c = GetParam().build();
  MPI_Datatype t = c->type.get();
  const int64_t n = c->stream();
  ASSERT_EQ(shape_of(t).size * c->count, n) << "the case's loop and its type disagree (test bug)";
  c->memory.fill(kData);
  const std::vector<unsigned char> reference = c->reference_pack();

  for (bool through_veneer : {true, false}) {
    if (!through_veneer && !library_takes(*c)) continue;
    SCOPED_TRACE(through_veneer ? "MPI_Pack (Veneer)" : "PMPI_Pack (library)");
    std::vector<unsigned char> out(n + kGuard);
    fill_pattern(out, kOutBackground);
    std::vector<unsigned char> expected = out;
    std::copy(reference.begin(), reference.end(), expected.begin());
    int position = 0;
    int rc = through_veneer ? MPI_Pack(c->buf, c->count, t, out.data(), static_cast<int>(n), &position, comm_)
                            : PMPI_Pack(c->buf, c->count, t, out.data(), static_cast<int>(n), &position, comm_);
    EXPECT_EQ(rc, MPI_SUCCESS);
    EXPECT_EQ(position, n);
    EXPECT_EQ(first_difference(out, expected), -1);
  }

  auto decoded = vd::decode(t);
  const auto* layout = std::get_if<vd::Layout>(&decoded);
  ASSERT_NE(layout, nullptr) << "the engine cannot describe this application layout: "
                             << std::get<vd::DecodeError>(decoded).why;
  for (int64_t fragment : {1, 7, 64, 4096, 1000}) {
    SCOPED_TRACE("engine fragments of " + std::to_string(fragment));
    EXPECT_EQ(first_difference(engine_pack(*layout, *c, fragment), reference), -1);
  }
}

TEST_P(DDTBench, UnpackAgainstTheLoop) {
  std::unique_ptr<Case> c = GetParam().build();
  MPI_Datatype t = c->type.get();
  const int64_t n = c->stream();
  std::vector<unsigned char> stream(n);
  fill_pattern(stream, kStream);
  c->memory.fill(kBackground);
  c->reference_unpack(stream);
  const std::vector<unsigned char> expected = c->memory.snapshot();

  for (bool through_veneer : {true, false}) {
    if (!through_veneer && !library_takes(*c)) continue;
    SCOPED_TRACE(through_veneer ? "MPI_Unpack (Veneer)" : "PMPI_Unpack (library)");
    c->memory.fill(kBackground);
    int position = 0;
    int rc = through_veneer ? MPI_Unpack(stream.data(), static_cast<int>(n), &position, c->buf, c->count, t, comm_)
                            : PMPI_Unpack(stream.data(), static_cast<int>(n), &position, c->buf, c->count, t, comm_);
    EXPECT_EQ(rc, MPI_SUCCESS);
    EXPECT_EQ(position, n);
    EXPECT_EQ(first_difference(c->memory.snapshot(), expected), -1);
  }

  // Round trip through Veneer: unpack the data's packing, pack it again.
  c->memory.fill(kData);
  const std::vector<unsigned char> reference = c->reference_pack();
  c->memory.fill(kBackground);
  int position = 0;
  EXPECT_EQ(MPI_Unpack(reference.data(), static_cast<int>(n), &position, c->buf, c->count, t, comm_), MPI_SUCCESS);
  std::vector<unsigned char> again(n);
  position = 0;
  EXPECT_EQ(MPI_Pack(c->buf, c->count, t, again.data(), static_cast<int>(n), &position, comm_), MPI_SUCCESS);
  EXPECT_EQ(first_difference(again, reference), -1) << "unpack then pack did not give back the stream";

  auto decoded = vd::decode(t);
  const auto* layout = std::get_if<vd::Layout>(&decoded);
  ASSERT_NE(layout, nullptr);
  for (int64_t fragment : {1, 7, 64, 4096, 1000}) {
    SCOPED_TRACE("engine fragments of " + std::to_string(fragment));
    c->memory.fill(kBackground);
    engine_unpack(*layout, *c, stream, fragment);
    EXPECT_EQ(first_difference(c->memory.snapshot(), expected), -1);
  }
}

// Rank 0 sends the layout to rank 1 (to itself with one rank) through Veneer:
// received with the same type, as bytes, and where the application does so,
// as plain elements.
TEST_P(DDTBench, SendReceiveThroughVeneer) {
  const int sender = 0, receiver = size_ > 1 ? 1 : 0;
  if (rank_ != sender && rank_ != receiver) return;
  std::unique_ptr<Case> source = GetParam().build();
  std::unique_ptr<Case> target = GetParam().build();  // separate memory for a message to self
  const int64_t n = source->stream();
  source->memory.fill(kData);
  const std::vector<unsigned char> reference = source->reference_pack();

  const int kinds = source->receive_as != MPI_DATATYPE_NULL ? 3 : 2;
  std::vector<MPI_Request> requests;
  if (rank_ == sender) {
    for (int kind = 0; kind < kinds; ++kind) {
      MPI_Request r;
      ASSERT_EQ(MPI_Isend(source->buf, source->count, source->type.get(), receiver, 20 + kind, comm_, &r), MPI_SUCCESS);
      requests.push_back(r);
    }
  }
  if (rank_ == receiver) {
    // Typed receive.
    target->memory.fill(kBackground);
    target->reference_unpack(reference);
    const std::vector<unsigned char> expected = target->memory.snapshot();
    target->memory.fill(kBackground);
    MPI_Status status;
    EXPECT_EQ(MPI_Recv(target->buf, target->count, target->type.get(), sender, 20, comm_, &status), MPI_SUCCESS);
    int count = -1;
    MPI_Get_count(&status, target->type.get(), &count);
    EXPECT_EQ(count, target->count);
    EXPECT_EQ(first_difference(target->memory.snapshot(), expected), -1) << "typed receive";

    // Byte receive.
    std::vector<unsigned char> bytes(n + kGuard);
    fill_pattern(bytes, kOutBackground);
    std::vector<unsigned char> expected_bytes = bytes;
    std::copy(reference.begin(), reference.end(), expected_bytes.begin());
    EXPECT_EQ(MPI_Recv(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, sender, 21, comm_, &status),
              MPI_SUCCESS);
    MPI_Get_count(&status, MPI_BYTE, &count);
    EXPECT_EQ(count, n);
    EXPECT_EQ(first_difference(bytes, expected_bytes), -1) << "byte receive";

    if (kinds == 3) {
      std::vector<float> plain(target->receive_count);
      EXPECT_EQ(MPI_Recv(plain.data(), target->receive_count, target->receive_as, sender, 22, comm_, &status),
                MPI_SUCCESS);
      std::span<const unsigned char> got(reinterpret_cast<const unsigned char*>(plain.data()),
                                         plain.size() * sizeof(float));
      EXPECT_EQ(first_difference(got, reference), -1) << "received as contiguous elements";
    }
  }
  if (!requests.empty()) {
    EXPECT_EQ(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DDTBench, testing::ValuesIn(all_cases()),
                         [](const testing::TestParamInfo<Named>& p) { return std::string(p.param.name); });

// The FFT2D transpose as the application runs it: MPI_Alltoall with the
// interleaving column-block type on the send side, plain complex numbers on
// the receive side; compared with a hand-written transpose and with the
// library's own Alltoall.
TEST(DDTBenchCollective, Fft2dTransposeAlltoall) {
  int rank = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  const int rows = 4, n = rows * p;
  auto local_block = [&](int owner) {
    std::vector<unsigned char> a(rows * n * 16);
    fill_pattern(a, kData + owner);
    return a;
  };
  std::vector<unsigned char> a = local_block(rank);
  std::vector<unsigned char> expected(p * rows * rows * 16);
  for (int s = 0; s < p; ++s) {
    std::vector<unsigned char> theirs = local_block(s);
    for (int col = 0; col < rows; ++col)
      for (int r = 0; r < rows; ++r)
        std::memcpy(&expected[((s * rows + col) * rows + r) * 16], &theirs[(r * n + rank * rows + col) * 16], 16);
  }
  TypeHandle block;
  MPI_Datatype t = fft_block_type(rows, n);
  MPI_Type_commit(&t);
  block = TypeHandle(t);

  std::vector<unsigned char> got(expected.size(), 0), library(expected.size(), 0);
  EXPECT_EQ(MPI_Alltoall(a.data(), 1, t, got.data(), rows * rows, MPI_C_DOUBLE_COMPLEX, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(PMPI_Alltoall(a.data(), 1, t, library.data(), rows * rows, MPI_C_DOUBLE_COMPLEX, MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_EQ(first_difference(library, expected), -1) << "the library's transpose (test bug?)";
  EXPECT_EQ(first_difference(got, expected), -1) << "Veneer's transpose";
}

}  // namespace
