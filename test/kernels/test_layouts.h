// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Canonical layouts for the kernel tests, built by hand (no MPI): random trees
// of every shape the decoder can produce, and the DDTBench application
// layouts at test sizes. A Layout here is what datatypes/decode.cpp would
// make: the raw tree is simplified and its sizes and bounds are filled in.
#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "datatypes/layout.h"

namespace veneer::test {

using datatypes::Dim;
using datatypes::Layout;
using datatypes::Node;

inline Node leaf(int64_t offset, std::vector<Dim> dims, int64_t block, std::vector<int64_t> offsets = {}) {
  Node n;
  n.offset = offset;
  n.dims = std::move(dims);
  n.block = block;
  n.offsets = std::move(offsets);
  return n;
}

inline Node sequence(int64_t offset, std::vector<Dim> dims, std::vector<Node> children) {
  Node n;
  n.offset = offset;
  n.dims = std::move(dims);
  n.children = std::move(children);
  return n;
}

// Every byte offset of the node's stream, in order: the reference.
inline void expand(const Node& n, int64_t base, std::vector<int64_t>& out) {
  int64_t reps = 1;
  for (const Dim& d : n.dims) reps *= d.count;
  for (int64_t r = 0; r < reps; ++r) {
    int64_t pos = base + n.offset;
    int64_t rest = r;
    for (size_t k = n.dims.size(); k-- > 0;) {
      pos += (rest % n.dims[k].count) * n.dims[k].stride;
      rest /= n.dims[k].count;
    }
    if (n.is_leaf()) {
      if (n.offsets.empty()) {
        for (int64_t b = 0; b < n.block; ++b) out.push_back(pos + b);
      } else {
        for (int64_t o : n.offsets)
          for (int64_t b = 0; b < n.block; ++b) out.push_back(pos + o + b);
      }
    } else {
      for (const Node& c : n.children) expand(c, pos, out);
    }
  }
}

// The unit fields of a raw tree (simplify() recomputes them; a tree left raw needs them too).
inline void fill_units(Node& n) {
  if (n.is_leaf()) {
    n.unit = n.block * (n.offsets.empty() ? 1 : static_cast<int64_t>(n.offsets.size()));
    return;
  }
  n.unit = 0;
  for (Node& c : n.children) {
    fill_units(c);
    n.unit += c.bytes();
  }
}

// A layout from a raw tree: simplified (unless `raw`), with size and bounds
// from its expansion; extent 0 means the true extent.
inline Layout make_layout(Node root, int64_t extent = 0, bool raw = false) {
  Layout l;
  fill_units(root);
  if (!raw) datatypes::simplify(root);
  l.root = std::move(root);
  std::vector<int64_t> offs;
  expand(l.root, 0, offs);
  l.size = static_cast<int64_t>(offs.size());
  if (!offs.empty()) {
    const int64_t lo = *std::min_element(offs.begin(), offs.end());
    const int64_t hi = *std::max_element(offs.begin(), offs.end());
    l.true_lb = lo;
    l.true_extent = hi - lo + 1;
  }
  l.lb = l.true_lb;
  l.extent = extent ? extent : l.true_extent;
  datatypes::finish(l);
  return l;
}

// The bytes [lo, hi] that `count` instances touch, relative to the buffer.
struct Span {
  int64_t lo = 0;
  int64_t hi = -1;
  int64_t bytes() const { return hi - lo + 1; }
};

inline Span span_of(const Layout& l, int64_t count) {
  std::vector<int64_t> offs;
  expand(l.root, 0, offs);
  Span s;
  if (offs.empty() || count <= 0) return s;
  const int64_t lo = *std::min_element(offs.begin(), offs.end());
  const int64_t hi = *std::max_element(offs.begin(), offs.end());
  s.lo = std::min(lo, lo + (count - 1) * l.extent);
  s.hi = std::max(hi, hi + (count - 1) * l.extent);
  return s;
}

// A random raw tree: leaves with and without irregular offsets, sequences,
// negative strides and offsets, zero counts, mixed block sizes. Bytes may
// overlap (legal for packing; unpacking writes each byte its own value back).
// With `grain` > 0 every displacement and block is a multiple of it, as in
// layouts of aligned elements (so the widest words come up).
inline Node random_node(std::mt19937_64& rng, int depth, int64_t grain = 0) {
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  // Without a grain, a mix: mostly aligned displacements, some odd ones.
  auto scale = [&] { return grain ? grain : std::array<int64_t, 4>{1, 4, 8, 16}[static_cast<size_t>(uniform(0, 3))]; };
  Node n;
  n.offset = uniform(-8, 8) * scale();
  const int nd = static_cast<int>(uniform(0, 2));
  for (int k = 0; k < nd; ++k) n.dims.push_back({uniform(0, 4), uniform(-20, 20) * scale()});
  if (depth >= 3 || uniform(0, 9) < 5) {
    static const int64_t blocks[] = {1, 2, 3, 4, 8, 12, 16, 24, 32, 40, 64, 100, 128, 256};
    n.block = grain ? grain * uniform(1, 8) : blocks[uniform(0, 13)];
    if (uniform(0, 9) < 3) {
      const int64_t m = uniform(1, 6);
      for (int64_t i = 0; i < m; ++i) n.offsets.push_back(uniform(-12, 12) * scale());
    }
  } else {
    const int64_t m = uniform(1, 4);
    for (int64_t i = 0; i < m; ++i) n.children.push_back(random_node(rng, depth + 1, grain));
  }
  return n;
}

// One application layout at test size. `absolute`: the layout's offsets are
// meant as absolute addresses (MPI_BOTTOM); tests add their buffer's address.
struct Shape {
  std::string name;
  Layout layout;
  int64_t count = 1;
  bool absolute = false;
};

// Indices of `n` atoms out of `total`, sorted, as LAMMPS's send lists are.
inline std::vector<int64_t> atom_list(std::mt19937_64& rng, int64_t n, int64_t total) {
  std::vector<int64_t> all(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) all[static_cast<size_t>(i)] = i;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(n));
  std::sort(all.begin(), all.end());
  return all;
}

inline std::vector<int64_t> scaled(std::vector<int64_t> v, int64_t by, int64_t plus = 0) {
  for (int64_t& x : v) x = x * by + plus;
  return v;
}

// The DDTBench layouts (/work/shared/DDTBENCH-LAYOUTS.md) at test sizes.
inline std::vector<Shape> ddtbench_shapes() {
  std::mt19937_64 rng(2012);
  std::vector<Shape> s;
  const int64_t d = 8, f = 4;  // double, float
  {                            // NAS LU x: a contiguous run of 5 N doubles
    s.push_back({"nas_lu_x", make_layout(leaf(0, {}, 5 * 33 * d)), 1});
  }
  {  // NAS LU y: vector(N3, 1, N2 + 2) of a 5-double element
    const int64_t n2 = 17, n3 = 19;
    s.push_back({"nas_lu_y", make_layout(leaf(5 * d, {{n3, (n2 + 2) * 5 * d}}, 5 * d)), 1});
  }
  const int64_t n1 = 14, n2 = 11, n3 = 9;  // NAS MG grid, x fastest
  {                                        // NAS MG x: one plane of constant x, single doubles in 2-D
    s.push_back(
        {"nas_mg_x", make_layout(leaf((1 + n1 + n1 * n2) * d, {{n3 - 2, n1 * n2 * d}, {n2 - 2, n1 * d}}, d)), 1});
  }
  {  // NAS MG y: vector(N3 - 2, N1 - 2, N1 N2)
    s.push_back({"nas_mg_y", make_layout(leaf((1 + n1) * d, {{n3 - 2, n1 * n2 * d}}, (n1 - 2) * d)), 2});
  }
  {  // NAS MG z: vector(N2 - 2, N1 - 2, N1)
    s.push_back({"nas_mg_z", make_layout(leaf((1 + n1 * n2) * d, {{n2 - 2, n1 * d}}, (n1 - 2) * d)), 1});
  }
  {  // MILC su3_zdown: hvector(2, 1, .) of vector(N, ., .) of a 6-float element, in a 4-D lattice
    const int64_t site = 6 * f, row = 8 * 2 * site;
    s.push_back({"milc_su3_zdown", make_layout(leaf(site, {{2, 4 * 6 * row}, {6, 4 * row}, {8, 2 * site}}, site)), 1});
  }
  {  // FFT2D: resized(vector(n/p, 1, n) of complex double, extent 16), p instances
    const int64_t n = 24, p = 4, z = 16;
    s.push_back({"fft2d_transpose", make_layout(leaf(0, {{n / p, n * z}}, z), z), p});
  }
  {  // WRF x (vector): struct of pieces of 2-D, 3-D and 4-D float arrays at MPI_BOTTOM
    const int64_t a = 0, b = 4096, c = 16384;  // three arrays in one allocation
    const int64_t nx = 12, ny = 10, nz = 5;
    s.push_back({"wrf_x_vector",
                 make_layout(sequence(0, {},
                                      {leaf(a + 2 * f, {{ny - 4, nx * f}}, 3 * f),
                                       leaf(b + 2 * f, {{nz, nx * ny * f}, {ny - 4, nx * f}}, 3 * f),
                                       leaf(c + f, {{2, nx * ny * nz * f}, {nz, nx * ny * f}, {ny - 4, nx * f}}, 2 * f),
                                       leaf(b + 7 * f, {{nz, nx * ny * f}}, 5 * f)})),
                 1, true});
  }
  {  // WRF y (subarray): struct of float subarrays at MPI_BOTTOM, rows of differing lengths
    const int64_t a = 0, b = 2048, c = 8192;
    const int64_t nx = 16, ny = 8, nz = 4;
    s.push_back({"wrf_y_subarray",
                 make_layout(sequence(
                     0, {},
                     {leaf(a + (2 * nx + 1) * f, {{3, nx * f}}, (nx - 2) * f),
                      leaf(b + (nx + 1) * f, {{nz, nx * ny * f}, {2, nx * f}}, (nx - 2) * f),
                      leaf(c + f, {{2, nx * ny * nz * f}, {nz - 1, nx * ny * f}, {2, nx * f}}, (nx - 3) * f)})),
                 1, true});
  }
  {  // LAMMPS full: struct of 6 indexed_block over per-atom arrays at MPI_BOTTOM
    const int64_t atoms = 300, sent = 57;
    const std::vector<int64_t> list = atom_list(rng, sent, atoms);
    std::vector<Node> parts;
    const int64_t widths[] = {3 * d, 3 * d, d, d, d, 3 * d};  // x, v, tag, type, mask, image...
    int64_t at = 0;
    for (int64_t w : widths) {
      parts.push_back(leaf(at, {}, w, scaled(list, w)));
      at += atoms * w + 64;
    }
    s.push_back({"lammps_full", make_layout(sequence(0, {}, parts)), 1, true});
  }
  {  // LAMMPS atomic: 4 arrays
    const int64_t atoms = 200, sent = 41;
    const std::vector<int64_t> list = atom_list(rng, sent, atoms);
    std::vector<Node> parts;
    const int64_t widths[] = {3 * d, d, d, d};
    int64_t at = 0;
    for (int64_t w : widths) {
      parts.push_back(leaf(at, {}, w, scaled(list, w)));
      at += atoms * w + 8;
    }
    s.push_back({"lammps_atomic", make_layout(sequence(0, {}, parts)), 1, true});
  }
  {  // SPECFEM3D oc: indexed_block(., 1, float)
    s.push_back({"specfem3d_oc", make_layout(leaf(0, {}, f, scaled(atom_list(rng, 150, 1000), f))), 1});
  }
  {  // SPECFEM3D cm: struct of 2 indexed_block(., 3, float)
    const int64_t points = 400;
    s.push_back(
        {"specfem3d_cm",
         make_layout(sequence(0, {},
                              {leaf(0, {}, 3 * f, scaled(atom_list(rng, 70, points), 3 * f)),
                               leaf(points * 3 * f + 4, {}, 3 * f, scaled(atom_list(rng, 50, points), 3 * f))})),
         1});
  }
  {  // SPECFEM3D mt: vector of contiguous, a transpose
    const int64_t n = 20, m = 7;
    s.push_back({"specfem3d_mt", make_layout(leaf(0, {{n, m * 3 * f}}, 3 * f), 3 * f), m});
  }
  {  // A struct whose members differ in size and alignment: the segments form at its worst
    s.push_back(
        {"struct_mixed",
         make_layout(sequence(0, {{50, 40}},
                              {leaf(0, {}, 8), leaf(8, {}, 1), leaf(12, {}, 4), leaf(17, {}, 3), leaf(24, {}, 16)})),
         3});
  }
  {  // More strided dimensions than a launch carries: falls back to segments
    std::vector<Dim> dims;
    for (int k = 0; k < 9; ++k) dims.push_back({2, (int64_t{1} << (k + 5)) * 3});
    s.push_back({"nine_dims", make_layout(leaf(0, dims, 8)), 1});
  }
  return s;
}

}  // namespace veneer::test
