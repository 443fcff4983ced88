// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The layouts of the packing benchmark (bench/pack.cpp): strided byte
// vectors, subarray faces of 2-D and 3-D grids, and the DDTBench cases (the
// communication layouts of real applications, see bench/README.md) at
// benchmark sizes. Each comes with its MPI type, the arrays its type map
// covers, and a hand-written pack loop of the kind an application writer
// would write instead of a datatype; the loop produces MPI's packed order.
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace veneer::bench {

// Heap memory for one array: 64-byte aligned (as a real allocator of large
// arrays would give), freed on destruction.
class Buffer {
 public:
  explicit Buffer(int64_t bytes)
      : size_(bytes), data_(static_cast<std::byte*>(std::aligned_alloc(64, rounded(bytes)))) {
    if (!data_) throw std::bad_alloc();
  }
  std::byte* data() const { return data_.get(); }
  int64_t size() const { return size_; }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(data_.get());
  }

  // Distinct, exactly representable values, so a misplaced element shows.
  template <class T>
  void fill(uint64_t seed) {
    T* p = as<T>();
    const int64_t n = size_ / static_cast<int64_t>(sizeof(T));
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>((static_cast<uint64_t>(i) * 7 + seed) % 1000003);
  }
  void fill_bytes(unsigned char value) { std::memset(data_.get(), value, static_cast<size_t>(size_)); }

 private:
  static size_t rounded(int64_t bytes) { return static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64); }
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  int64_t size_;
  std::unique_ptr<std::byte, Free> data_;
};

// Owns a committed MPI datatype.
class Datatype {
 public:
  Datatype() = default;
  static Datatype commit(MPI_Datatype type) {
    MPI_Type_commit(&type);
    return Datatype(type);
  }
  Datatype(Datatype&& other) noexcept : type_(std::exchange(other.type_, MPI_DATATYPE_NULL)) {}
  Datatype& operator=(Datatype&& other) noexcept {
    std::swap(type_, other.type_);
    return *this;
  }
  Datatype(const Datatype&) = delete;
  Datatype& operator=(const Datatype&) = delete;
  ~Datatype() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  MPI_Datatype get() const { return type_; }

 private:
  explicit Datatype(MPI_Datatype type) : type_(type) {}
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// An intermediate type that only lives until the outer one is built.
class TypeScratch {
 public:
  MPI_Datatype* out() { return &type_; }
  MPI_Datatype get() const { return type_; }
  TypeScratch() = default;
  TypeScratch(const TypeScratch&) = delete;
  TypeScratch& operator=(const TypeScratch&) = delete;
  ~TypeScratch() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

struct PackCase {
  std::string name;
  std::string family;  // "vector", "subarray" or "ddtbench"
  Datatype type;
  int count = 1;
  const void* origin = nullptr;  // MPI_Pack's inbuf: into an array, or MPI_BOTTOM
  std::vector<Buffer> arrays;    // the memory the type map covers
  double block_bytes = 0;        // contiguous block the layout is made of (mean where they differ)
  std::function<void(std::byte* out)> hand_pack;
};

// A case is built only when it is measured, so only one set of arrays lives at a time.
struct CaseMaker {
  std::string name;
  std::function<PackCase()> make;
};

// Sizes: the ones the benchmark reports, or a small set for a quick CI run.
struct Scale {
  bool quick = false;
  // Struct layouts at MPI_BOTTOM with absolute addresses, as the
  // applications build them. MPICH 4.0.2's MPI_Pack rejects MPI_BOTTOM
  // ("Null pointer in parameter inbuf"); there the same structs are built
  // relative to their first array instead.
  bool absolute_addresses = true;
  int64_t pick(int64_t full, int64_t small) const { return quick ? small : full; }
};

inline int as_int(int64_t v) { return static_cast<int>(v); }

// Commits a struct of `members` (one instance each) at the addresses of
// `bases`: absolute (at MPI_BOTTOM) or relative to the first base. Frees
// the members.
inline void commit_struct(PackCase& c, std::vector<MPI_Datatype>& members, const std::vector<const void*>& bases,
                          bool absolute) {
  std::vector<MPI_Aint> displacements;
  std::vector<int> ones(members.size(), 1);
  MPI_Aint first = 0;
  MPI_Get_address(bases.at(0), &first);
  for (const void* base : bases) {
    MPI_Aint address;
    MPI_Get_address(base, &address);
    displacements.push_back(absolute ? address : MPI_Aint_diff(address, first));
  }
  MPI_Datatype t;
  MPI_Type_create_struct(as_int(static_cast<int64_t>(members.size())), ones.data(), displacements.data(),
                         members.data(), &t);
  for (MPI_Datatype& m : members) MPI_Type_free(&m);
  c.type = Datatype::commit(t);
  c.origin = absolute ? MPI_BOTTOM : bases[0];
}

inline PackCase byte_vector(int64_t block, int64_t total) {
  PackCase c;
  const int64_t blocks = std::max<int64_t>(1, total / block);
  c.name = "vector-bytes-b" + std::to_string(block);
  c.family = "vector";
  c.arrays.emplace_back(2 * block * blocks);
  c.arrays[0].fill<unsigned char>(3);
  MPI_Datatype t;
  MPI_Type_vector(as_int(blocks), as_int(block), as_int(2 * block), MPI_BYTE, &t);
  c.type = Datatype::commit(t);
  c.origin = c.arrays[0].data();
  c.block_bytes = static_cast<double>(block);
  const std::byte* in = c.arrays[0].data();
  c.hand_pack = [in, block, blocks](std::byte* out) {
    for (int64_t b = 0; b < blocks; ++b) std::memcpy(out + b * block, in + 2 * b * block, static_cast<size_t>(block));
  };
  return c;
}

// The first interior layer of constant coordinate `axis` (0 varies slowest)
// of a grid of n^dims interior cells with a halo of one cell, as a subarray
// of doubles: the face a stencil code sends to its neighbour.
inline std::string grid_face_name(int dims, int64_t n, int axis) {
  static const char* const kAxisNames[2][3] = {{"y", "x", ""}, {"z", "y", "x"}};
  return std::string(dims == 2 ? "face2d-" : "face3d-") + kAxisNames[dims - 2][axis] + "-n" + std::to_string(n);
}

inline PackCase grid_face(int dims, int64_t n, int axis) {
  PackCase c;
  c.name = grid_face_name(dims, n, axis);
  c.family = "subarray";
  const int64_t e = n + 2;
  int sizes[3], subsizes[3], starts[3];
  int64_t cells = 1;
  for (int k = 0; k < dims; ++k) {
    sizes[k] = as_int(e);
    subsizes[k] = k == axis ? 1 : as_int(n);
    starts[k] = 1;
    cells *= e;
  }
  c.arrays.emplace_back(cells * 8);
  c.arrays[0].fill<double>(5);
  MPI_Datatype t;
  MPI_Type_create_subarray(dims, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &t);
  c.type = Datatype::commit(t);
  c.origin = c.arrays[0].data();
  // Contiguous run: n doubles unless the face is of the fastest axis.
  c.block_bytes = axis == dims - 1 ? 8.0 : static_cast<double>(n * 8);

  // Treat a 2-D grid as a 3-D grid with one layer.
  int64_t lo[3] = {0, 1, 1}, hi[3] = {1, n + 1, n + 1}, ext[3] = {1, e, e};
  const int shift = 3 - dims;
  for (int k = 0; k < 3; ++k) {
    if (k >= shift) {
      lo[k] = 1;
      hi[k] = n + 1;
      ext[k] = e;
      if (k - shift == axis) hi[k] = 2;
    }
  }
  const double* a = c.arrays[0].as<double>();
  c.hand_pack = [a, lo0 = lo[0], hi0 = hi[0], lo1 = lo[1], hi1 = hi[1], lo2 = lo[2], hi2 = hi[2], e1 = ext[1],
                 e2 = ext[2]](std::byte* out) {
    double* o = reinterpret_cast<double*>(out);
    for (int64_t z = lo0; z < hi0; ++z)
      for (int64_t y = lo1; y < hi1; ++y)
        for (int64_t x = lo2; x < hi2; ++x) *o++ = a[(z * e1 + y) * e2 + x];
  };
  return c;
}

// NAS LU: u[n+2][n+2][5] doubles (5 unknowns per cell). The x face is the
// row j = 1 (one contiguous run of 5n doubles); the y face is the column
// i = 1: n cells of 40 bytes at a stride of n+2 cells.
inline PackCase nas_lu(bool y_face, int64_t n) {
  PackCase c;
  c.name = y_face ? "nas-lu-y" : "nas-lu-x";
  c.family = "ddtbench";
  const int64_t e = n + 2;
  c.arrays.emplace_back(e * e * 5 * 8);
  c.arrays[0].fill<double>(7);
  const double* u = c.arrays[0].as<double>();
  const double* first = u + (1 * e + 1) * 5;
  c.origin = first;
  MPI_Datatype t;
  if (!y_face) {
    MPI_Type_contiguous(as_int(5 * n), MPI_DOUBLE, &t);
    c.block_bytes = static_cast<double>(5 * n * 8);
    c.hand_pack = [first, n](std::byte* out) {
      double* o = reinterpret_cast<double*>(out);
      for (int64_t i = 0; i < 5 * n; ++i) o[i] = first[i];
    };
  } else {
    TypeScratch cell;
    MPI_Type_contiguous(5, MPI_DOUBLE, cell.out());
    MPI_Type_vector(as_int(n), 1, as_int(e), cell.get(), &t);
    c.block_bytes = 40;
    c.hand_pack = [first, n, e](std::byte* out) {
      double* o = reinterpret_cast<double*>(out);
      for (int64_t j = 0; j < n; ++j)
        for (int m = 0; m < 5; ++m) *o++ = first[j * e * 5 + m];
    };
  }
  c.type = Datatype::commit(t);
  return c;
}

// NAS MG: a[n3][n2][n1] doubles including a boundary layer on every side;
// the faces of the interior at index 1 of one dimension.
inline PackCase nas_mg(char face, int64_t n1, int64_t n2, int64_t n3) {
  PackCase c;
  c.name = std::string("nas-mg-") + face;
  c.family = "ddtbench";
  c.arrays.emplace_back(n1 * n2 * n3 * 8);
  c.arrays[0].fill<double>(11);
  const double* a = c.arrays[0].as<double>();
  const double* first = a + (1 * n2 + 1) * n1 + 1;
  c.origin = first;
  MPI_Datatype t;
  if (face == 'x') {
    // Single doubles: a column of each plane, then plane after plane.
    TypeScratch column;
    MPI_Type_vector(as_int(n2 - 2), 1, as_int(n1), MPI_DOUBLE, column.out());
    MPI_Type_create_hvector(as_int(n3 - 2), 1, n1 * n2 * 8, column.get(), &t);
    c.block_bytes = 8;
    c.hand_pack = [first, n1, n2, n3](std::byte* out) {
      double* o = reinterpret_cast<double*>(out);
      for (int64_t i3 = 0; i3 < n3 - 2; ++i3)
        for (int64_t i2 = 0; i2 < n2 - 2; ++i2) *o++ = first[(i3 * n2 + i2) * n1];
    };
  } else if (face == 'y') {
    MPI_Type_vector(as_int(n3 - 2), as_int(n1 - 2), as_int(n1 * n2), MPI_DOUBLE, &t);
    c.block_bytes = static_cast<double>((n1 - 2) * 8);
    c.hand_pack = [first, n1, n2, n3](std::byte* out) {
      double* o = reinterpret_cast<double*>(out);
      for (int64_t i3 = 0; i3 < n3 - 2; ++i3)
        for (int64_t i1 = 0; i1 < n1 - 2; ++i1) *o++ = first[i3 * n2 * n1 + i1];
    };
  } else {
    MPI_Type_vector(as_int(n2 - 2), as_int(n1 - 2), as_int(n1), MPI_DOUBLE, &t);
    c.block_bytes = static_cast<double>((n1 - 2) * 8);
    c.hand_pack = [first, n1, n2](std::byte* out) {
      double* o = reinterpret_cast<double*>(out);
      for (int64_t i2 = 0; i2 < n2 - 2; ++i2)
        for (int64_t i1 = 0; i1 < n1 - 2; ++i1) *o++ = first[i2 * n1 + i1];
    };
  }
  c.type = Datatype::commit(t);
  return c;
}

// MILC: a 4-D lattice of L^4 sites split into even and odd halves, each
// [t][z][y][x/2] sites of one su3 vector (3 complex floats, 24 bytes). The
// z-down face is the z = 0 slice of both halves.
inline PackCase milc_su3_zdown(int64_t l) {
  PackCase c;
  c.name = "milc-su3-zdown";
  c.family = "ddtbench";
  const int64_t plane = l * l / 2;     // sites of one (t, z) slice of one half
  const int64_t half = l * l * plane;  // sites of one half
  c.arrays.emplace_back(2 * half * 24);
  c.arrays[0].fill<float>(13);
  const float* sites = c.arrays[0].as<float>();
  c.origin = sites;
  TypeScratch su3, slice;
  MPI_Type_contiguous(6, MPI_FLOAT, su3.out());
  MPI_Type_vector(as_int(l), as_int(plane), as_int(l * plane), su3.get(), slice.out());
  MPI_Datatype t;
  MPI_Type_create_hvector(2, 1, half * 24, slice.get(), &t);
  c.type = Datatype::commit(t);
  c.block_bytes = static_cast<double>(plane * 24);
  c.hand_pack = [sites, l, plane, half](std::byte* out) {
    float* o = reinterpret_cast<float*>(out);
    for (int64_t parity = 0; parity < 2; ++parity)
      for (int64_t t = 0; t < l; ++t)
        for (int64_t s = 0; s < plane; ++s) {
          const float* site = sites + (parity * half + t * l * plane + s) * 6;
          for (int m = 0; m < 6; ++m) *o++ = site[m];
        }
  };
  return c;
}

// FFT2D: the local slab of rows = n/p rows of an n x n matrix of complex
// doubles, sent to p ranks by one MPI_Alltoall. The type for one rank is
// rows columns of rows elements each (a transposed block): a column, resized
// to one element's extent so the next column starts one element later.
inline PackCase fft2d(int64_t n, int64_t p) {
  PackCase c;
  c.name = "fft2d";
  c.family = "ddtbench";
  const int64_t rows = n / p;
  c.arrays.emplace_back(rows * n * 16);
  c.arrays[0].fill<double>(17);
  const double* a = c.arrays[0].as<double>();
  c.origin = a;
  TypeScratch complex, column, column_resized;
  MPI_Type_contiguous(2, MPI_DOUBLE, complex.out());
  MPI_Type_vector(as_int(rows), 1, as_int(n), complex.get(), column.out());
  MPI_Type_create_resized(column.get(), 0, 16, column_resized.out());
  MPI_Datatype t;
  MPI_Type_contiguous(as_int(rows), column_resized.get(), &t);
  c.type = Datatype::commit(t);
  c.count = as_int(p);
  c.block_bytes = 16;
  c.hand_pack = [a, n, rows](std::byte* out) {
    double* o = reinterpret_cast<double*>(out);
    for (int64_t col = 0; col < n; ++col)
      for (int64_t r = 0; r < rows; ++r) {
        *o++ = a[(r * n + col) * 2];
        *o++ = a[(r * n + col) * 2 + 1];
      }
  };
  return c;
}

// WRF: the halo of one patch of m x m columns (halo h) over many fields of
// 2-D (i, j), 3-D (i, k, j) and 4-D (i, k, j, species) floats in Fortran
// order; one struct of subarrays at absolute addresses (MPI_BOTTOM) sends
// the strip of width h of every field. x: the west strip (i fastest, so
// blocks of h floats); y: the south strip (blocks of m floats).
inline PackCase wrf_subarray(bool y_strip, int64_t m, int64_t h, int64_t levels, int64_t species, bool absolute) {
  PackCase c;
  c.name = y_strip ? "wrf-y-subarray" : "wrf-x-subarray";
  c.family = "ddtbench";
  const int64_t e = m + 2 * h;
  struct Field {
    int dims;
    int64_t extent[4];
  };
  std::vector<Field> fields;
  for (int f = 0; f < 4; ++f) fields.push_back({2, {e, e, 1, 1}});
  for (int f = 0; f < 8; ++f) fields.push_back({3, {e, levels, e, 1}});
  for (int f = 0; f < 2; ++f) fields.push_back({4, {e, levels, e, species}});

  // Box of the strip per field, in (i, k, j, s) order.
  struct Box {
    int64_t start[4], size[4], extent[4];
    const float* base;
  };
  std::vector<Box> boxes;
  std::vector<MPI_Datatype> members;
  std::vector<const void*> bases;
  for (size_t f = 0; f < fields.size(); ++f) {
    const Field& fd = fields[f];
    c.arrays.emplace_back(fd.extent[0] * fd.extent[1] * fd.extent[2] * fd.extent[3] * 4);
    c.arrays.back().fill<float>(19 + f);
    Box b{};
    b.base = c.arrays.back().as<float>();
    for (int k = 0; k < 4; ++k) {
      b.extent[k] = fd.extent[k];
      b.start[k] = 0;
      b.size[k] = fd.extent[k];
    }
    // i and j: interior range, except the strip's own dimension.
    const int i_dim = 0, j_dim = fd.dims == 2 ? 1 : 2;
    b.start[i_dim] = h;
    b.size[i_dim] = y_strip ? m : h;
    b.start[j_dim] = h;
    b.size[j_dim] = y_strip ? h : m;
    boxes.push_back(b);

    int sizes[4], subsizes[4], starts[4];
    for (int k = 0; k < fd.dims; ++k) {
      sizes[k] = as_int(b.extent[k]);
      subsizes[k] = as_int(b.size[k]);
      starts[k] = as_int(b.start[k]);
    }
    MPI_Datatype sub;
    MPI_Type_create_subarray(fd.dims, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_FLOAT, &sub);
    members.push_back(sub);
    bases.push_back(b.base);
  }
  commit_struct(c, members, bases, absolute);
  c.block_bytes = static_cast<double>((y_strip ? m : h) * 4);
  c.hand_pack = [boxes](std::byte* out) {
    float* o = reinterpret_cast<float*>(out);
    for (const Box& b : boxes)
      for (int64_t s = b.start[3]; s < b.start[3] + b.size[3]; ++s)
        for (int64_t j = b.start[2]; j < b.start[2] + b.size[2]; ++j)
          for (int64_t k = b.start[1]; k < b.start[1] + b.size[1]; ++k) {
            const float* row = b.base + ((s * b.extent[2] + j) * b.extent[1] + k) * b.extent[0];
            for (int64_t i = b.start[0]; i < b.start[0] + b.size[0]; ++i) *o++ = row[i];
          }
  };
  return c;
}

// Ascending indices of the elements an irregular exchange picks out of
// `elements`: about one in `one_in`, from a fixed pseudo-random sequence.
inline std::vector<int> pick_indices(int64_t elements, int64_t one_in, uint64_t seed) {
  std::vector<int> picked;
  uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (int64_t i = 0; i < elements; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    if ((state >> 33) % static_cast<uint64_t>(one_in) == 0) picked.push_back(as_int(i));
  }
  return picked;
}

// A gather of `width` consecutive elements at each index (in units of
// `width` elements) out of one array, as an indexed_block type.
struct Gather {
  const void* base;
  int width;
  std::vector<int> indices;
};

// A struct of indexed_block gathers (see commit_struct), or a single gather
// relative to its array.
template <class T>
PackCase gathers(std::string name, MPI_Datatype element, std::vector<Gather> parts, bool as_struct, bool absolute) {
  PackCase c;
  c.name = std::move(name);
  c.family = "ddtbench";
  std::vector<MPI_Datatype> members;
  std::vector<const void*> bases;
  int64_t blocks = 0, bytes = 0;
  for (Gather& g : parts) {
    std::vector<int> displacements(g.indices.size());
    for (size_t i = 0; i < g.indices.size(); ++i) displacements[i] = g.indices[i] * g.width;
    MPI_Datatype member;
    MPI_Type_create_indexed_block(as_int(static_cast<int64_t>(displacements.size())), g.width, displacements.data(),
                                  element, &member);
    members.push_back(member);
    bases.push_back(g.base);
    blocks += static_cast<int64_t>(g.indices.size());
    bytes += static_cast<int64_t>(g.indices.size()) * g.width * static_cast<int64_t>(sizeof(T));
  }
  if (as_struct) {
    commit_struct(c, members, bases, absolute);
  } else {
    c.type = Datatype::commit(members.at(0));
    c.origin = parts.at(0).base;
  }
  c.block_bytes = blocks ? static_cast<double>(bytes) / static_cast<double>(blocks) : 0;
  c.hand_pack = [parts = std::move(parts)](std::byte* out) {
    T* o = reinterpret_cast<T*>(out);
    for (const Gather& g : parts) {
      const T* in = static_cast<const T*>(g.base);
      for (int index : g.indices) {
        const T* element = in + static_cast<int64_t>(index) * g.width;
        for (int w = 0; w < g.width; ++w) *o++ = element[w];
      }
    }
  };
  return c;
}

// LAMMPS (atom style full): the border atoms of the send list, from six
// per-atom arrays (positions of 3 doubles, then tag, type, mask, charge and
// molecule as doubles).
inline PackCase lammps_full(int64_t atoms, bool absolute) {
  std::vector<Buffer> arrays;
  arrays.emplace_back(atoms * 3 * 8);
  for (int a = 0; a < 5; ++a) arrays.emplace_back(atoms * 8);
  for (size_t a = 0; a < arrays.size(); ++a) arrays[a].fill<double>(23 + a);
  const std::vector<int> border = pick_indices(atoms, 4, 1);
  std::vector<Gather> parts;
  for (size_t a = 0; a < arrays.size(); ++a) parts.push_back({arrays[a].data(), a == 0 ? 3 : 1, border});
  PackCase c = gathers<double>("lammps-full", MPI_DOUBLE, std::move(parts), true, absolute);
  c.arrays = std::move(arrays);
  return c;
}

// SPECFEM3D: the points on an MPI interface, gathered from the outer core's
// scalar field (oc: single floats) or from two 3-component vector fields of
// the crust-mantle (cm: 12-byte blocks).
inline PackCase specfem3d(bool vector_fields, int64_t points, bool absolute) {
  std::vector<Buffer> arrays;
  std::vector<Gather> parts;
  if (!vector_fields) {
    arrays.emplace_back(points * 4);
    arrays[0].fill<float>(29);
    parts.push_back({arrays[0].data(), 1, pick_indices(points, 8, 2)});
  } else {
    for (int f = 0; f < 2; ++f) {
      arrays.emplace_back(points * 3 * 4);
      arrays.back().fill<float>(31 + f);
    }
    parts.push_back({arrays[0].data(), 3, pick_indices(points, 8, 3)});
    parts.push_back({arrays[1].data(), 3, pick_indices(points, 8, 4)});
  }
  PackCase c = gathers<float>(vector_fields ? "specfem3d-cm" : "specfem3d-oc", MPI_FLOAT, std::move(parts),
                              vector_fields, absolute);
  c.arrays = std::move(arrays);
  return c;
}

inline std::vector<CaseMaker> pack_cases(Scale s) {
  std::vector<CaseMaker> cases;
  const int64_t vector_bytes = s.pick(8 << 20, 256 << 10);
  for (int64_t block = 1; block <= 4096; block *= 2)
    cases.push_back(
        {"vector-bytes-b" + std::to_string(block), [block, vector_bytes] { return byte_vector(block, vector_bytes); }});
  // The same in cache: 256 KiB packed from a 512 KiB span, which fits a core's
  // L2 with the output, where the 8 MiB sweep is bound by the memory system.
  if (vector_bytes != (256 << 10))
    for (int64_t block = 1; block <= 4096; block *= 2)
      cases.push_back({"vector-bytes-b" + std::to_string(block) + "-256k", [block] {
                         PackCase c = byte_vector(block, 256 << 10);
                         c.name += "-256k";
                         return c;
                       }});

  const int64_t n2d = s.pick(2048, 256), n3d = s.pick(256, 48);
  for (int axis = 0; axis < 2; ++axis)
    cases.push_back({grid_face_name(2, n2d, axis), [n2d, axis] { return grid_face(2, n2d, axis); }});
  for (int axis = 0; axis < 3; ++axis)
    cases.push_back({grid_face_name(3, n3d, axis), [n3d, axis] { return grid_face(3, n3d, axis); }});

  const int64_t lu = s.pick(1024, 64);
  cases.push_back({"nas-lu-x", [lu] { return nas_lu(false, lu); }});
  cases.push_back({"nas-lu-y", [lu] { return nas_lu(true, lu); }});
  const int64_t mg = s.pick(258, 34);
  for (char face : {'x', 'y', 'z'})
    cases.push_back({std::string("nas-mg-") + face, [mg, face] { return nas_mg(face, mg, mg, mg); }});
  cases.push_back({"milc-su3-zdown", [l = s.pick(32, 8)] { return milc_su3_zdown(l); }});
  cases.push_back({"fft2d", [n = s.pick(4096, 512), p = s.pick(16, 8)] { return fft2d(n, p); }});
  const int64_t wrf_m = s.pick(128, 16), wrf_levels = s.pick(48, 8);
  const bool absolute = s.absolute_addresses;
  cases.push_back({"wrf-x-subarray", [=] { return wrf_subarray(false, wrf_m, 3, wrf_levels, 4, absolute); }});
  cases.push_back({"wrf-y-subarray", [=] { return wrf_subarray(true, wrf_m, 3, wrf_levels, 4, absolute); }});
  cases.push_back({"lammps-full", [atoms = s.pick(100000, 4084), absolute] { return lammps_full(atoms, absolute); }});
  const int64_t points = s.pick(1000000, 20000);
  cases.push_back({"specfem3d-oc", [points, absolute] { return specfem3d(false, points, absolute); }});
  cases.push_back({"specfem3d-cm", [points, absolute] { return specfem3d(true, points, absolute); }});
  return cases;
}

}  // namespace veneer::bench
