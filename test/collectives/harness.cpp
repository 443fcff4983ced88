// SPDX-License-Identifier: BSD-3-Clause
#include "test/collectives/harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

#include "datatypes/cache.h"

namespace veneer::test {

int world_rank() {
  int r = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int p = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

bool quick() {
  const char* q = std::getenv("VENEER_TEST_QUICK");
  return q && *q && *q != '0';
}

std::vector<Layout> layouts() {
  const int rank = world_rank();
  const std::vector<int> mixed{3, 2, 3};
  const std::pair<const char*, int> keys[] = {
      {"one node", 0},
      {"one rank per node", rank},
      {"two per node", rank / 2},
      {"nodes of 3,2,3", topology::node_of_index(rank, mixed)},
      {"two interleaved nodes", rank % 2},
  };
  std::vector<Layout> out;
  std::set<std::string> seen;
  for (const auto& [name, key] : keys) {
    auto h = topology::build_hierarchy(MPI_COMM_WORLD, key);
    if (!h) {
      ADD_FAILURE() << "build_hierarchy failed for " << name;
      continue;
    }
    // Same structure as an earlier layout: nothing new to test.
    std::string shape;
    for (int r : h->node_of_rank) shape += std::to_string(r) + ",";
    if (!seen.insert(shape).second) continue;
    out.push_back(Layout{std::string(name) + " [" + h->describe() + "]", std::move(h)});
  }
  return out;
}

namespace {

// A small deterministic hash of (rank, index, salt): the same values on every run.
uint32_t mix(int rank, int64_t i, uint32_t salt) {
  uint64_t x = (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^
               (static_cast<uint64_t>(i) + 7) * 0xC2B2AE3D27D4EB4Full ^
               static_cast<uint64_t>(salt) * 0x165667B19E3779F9ull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x);
}

int64_t integer_value(uint32_t h, Values v) {
  switch (v) {
    case Values::small: return static_cast<int64_t>(h % 7) - 3;
    case Values::logical: return h % 3;  // 0, 1, 2: not just booleans
    case Values::bits: return h & 0x7F;
    case Values::near_one: return 1 + (h % 2);
    case Values::any: return static_cast<int64_t>(h % 2001) - 1000;
  }
  return 0;
}

double floating_value(uint32_t h, Values v) {
  double unit = (h % 1000003) / 1000003.0;  // [0, 1)
  if (v == Values::near_one) return 0.9 + 0.2 * unit;
  if (v == Values::small) return std::floor(unit * 5) - 2;  // ties for MAX/MIN
  return 2 * unit - 1;
}

template <class T>
ElementType integer_type(const char* name, MPI_Datatype type) {
  return ElementType{name,
                     type,
                     Kind::integer,
                     sizeof(T),
                     [](void* e, int rank, int64_t i, Values v, uint32_t salt) {
                       T value = static_cast<T>(integer_value(mix(rank, i, salt), v));
                       std::memcpy(e, &value, sizeof value);
                     },
                     nullptr};
}

template <class T>
ElementType floating_type(const char* name, MPI_Datatype type, double tolerance) {
  return ElementType{name,
                     type,
                     Kind::floating,
                     sizeof(T),
                     [](void* e, int rank, int64_t i, Values v, uint32_t salt) {
                       T value = static_cast<T>(floating_value(mix(rank, i, salt), v));
                       std::memcpy(e, &value, sizeof value);
                     },
                     [tolerance](const void* a, const void* b) {
                       T x, y;
                       std::memcpy(&x, a, sizeof x);
                       std::memcpy(&y, b, sizeof y);
                       return std::fabs(static_cast<double>(x) - static_cast<double>(y)) <=
                              tolerance * (1 + std::fabs(static_cast<double>(y)));
                     }};
}

// MINLOC/MAXLOC pairs: few distinct values and locations, so ties are common.
template <class V>
struct Pair {
  V value;
  int location;
};
template <class V>
ElementType pair_type(const char* name, MPI_Datatype type) {
  return ElementType{name,
                     type,
                     Kind::pair,
                     sizeof(Pair<V>),
                     [](void* e, int rank, int64_t i, Values, uint32_t salt) {
                       uint32_t h = mix(rank, i, salt);
                       auto* p = static_cast<Pair<V>*>(e);
                       p->value = static_cast<V>(h % 4);
                       p->location = static_cast<int>((h >> 8) % 5);
                     },
                     nullptr};
}

MPI_Datatype g_affine_dense = MPI_DATATYPE_NULL;   // contiguous(2, unsigned): (m, c)
MPI_Datatype g_affine_gapped = MPI_DATATYPE_NULL;  // vector(2, 1, 2, unsigned): (m, gap, c)

void plus_one(void* in, void* inout, int* len, MPI_Datatype* type) {
  if (*type == MPI_INT) {
    auto* a = static_cast<int*>(in);
    auto* b = static_cast<int*>(inout);
    for (int i = 0; i < *len; ++i)
      b[i] = static_cast<int>(static_cast<unsigned>(a[i]) + static_cast<unsigned>(b[i]) + 1u);
  } else if (*type == MPI_DOUBLE) {
    auto* a = static_cast<double*>(in);
    auto* b = static_cast<double*>(inout);
    for (int i = 0; i < *len; ++i) b[i] = a[i] + b[i] + 1.0;
  }
}

// (in op inout) = inout after in: x -> m_b (m_a x + c_a) + c_b. Associative, not commutative.
void affine(void* in, void* inout, int* len, MPI_Datatype* type) {
  const size_t stride = *type == g_affine_gapped ? 3 : 2, c_at = *type == g_affine_gapped ? 2 : 1;
  auto* a = static_cast<unsigned*>(in);
  auto* b = static_cast<unsigned*>(inout);
  for (int i = 0; i < *len; ++i) {
    unsigned* x = a + i * stride;
    unsigned* y = b + i * stride;
    unsigned m = y[0] * x[0], c = y[0] * x[c_at] + y[c_at];
    y[0] = m;
    y[c_at] = c;
  }
}

ElementType affine_type(const char* name, MPI_Datatype type, int64_t extent, size_t c_at) {
  return ElementType{name,
                     type,
                     Kind::affine,
                     extent,
                     [c_at](void* e, int rank, int64_t i, Values, uint32_t salt) {
                       uint32_t h = mix(rank, i, salt);
                       auto* u = static_cast<unsigned*>(e);
                       u[0] = (h | 1u) & 0xFFFFu;
                       u[c_at] = h >> 16;
                     },
                     nullptr};
}

}  // namespace

MPI_Op plus_one_op() {
  static MPI_Op op = [] {
    MPI_Op o;
    PMPI_Op_create(plus_one, 1, &o);
    return o;
  }();
  return op;
}

MPI_Op affine_op() {
  static MPI_Op op = [] {
    MPI_Op o;
    PMPI_Op_create(affine, 0, &o);
    return o;
  }();
  return op;
}

void commit(MPI_Datatype* type) {
  static const bool ready = [] {
    datatypes::cache_init();
    return true;
  }();
  (void)ready;
  ASSERT_EQ(PMPI_Type_commit(type), MPI_SUCCESS);
  datatypes::note_committed(*type);
  ASSERT_NE(datatypes::lookup(*type), nullptr) << "Veneer cannot describe a type under test";
}

std::vector<TypeCase> reduction_cases() {
  if (g_affine_dense == MPI_DATATYPE_NULL) {
    PMPI_Type_contiguous(2, MPI_UNSIGNED, &g_affine_dense);
    commit(&g_affine_dense);
    PMPI_Type_vector(2, 1, 2, MPI_UNSIGNED, &g_affine_gapped);
    commit(&g_affine_gapped);
  }
  const OpCase sum{"SUM", MPI_SUM, Values::any}, prod{"PROD", MPI_PROD, Values::near_one},
      max{"MAX", MPI_MAX, Values::small}, min{"MIN", MPI_MIN, Values::small}, land{"LAND", MPI_LAND, Values::logical},
      lor{"LOR", MPI_LOR, Values::logical}, lxor{"LXOR", MPI_LXOR, Values::logical},
      band{"BAND", MPI_BAND, Values::bits}, bor{"BOR", MPI_BOR, Values::bits}, bxor{"BXOR", MPI_BXOR, Values::bits},
      maxloc{"MAXLOC", MPI_MAXLOC, Values::any}, minloc{"MINLOC", MPI_MINLOC, Values::any},
      plus{"user a+b+1 (commutative)", plus_one_op(), Values::any},
      composition{"user affine composition (non-commutative)", affine_op(), Values::any};
  if (quick())
    return {
        {integer_type<int>("int", MPI_INT), {sum, bxor, plus}},
        {floating_type<float>("float", MPI_FLOAT, 1e-5), {prod}},
        {floating_type<double>("double", MPI_DOUBLE, 1e-12), {sum}},
        {pair_type<double>("double_int", MPI_DOUBLE_INT), {minloc}},
        {pair_type<short>("short_int", MPI_SHORT_INT), {maxloc}},
        {affine_type("affine contiguous(2,unsigned)", g_affine_dense, 8, 1), {composition}},
        {affine_type("affine vector(2,1,2,unsigned) with a gap", g_affine_gapped, 12, 2), {composition}},
    };
  return {
      {integer_type<int>("int", MPI_INT), {sum, prod, max, min, land, lor, lxor, band, bor, bxor, plus}},
      {integer_type<long>("long", MPI_LONG), {sum, max, bxor}},
      // 8-bit sums stay in range: Open MPI 4.1's AVX int8 SUM saturates in its
      // vector part and wraps in its scalar tail, so overflowing sums depend on
      // how a vector is split, even within the library.
      {integer_type<signed char>("signed char", MPI_SIGNED_CHAR), {OpCase{"SUM", MPI_SUM, Values::small}, min, bor}},
      {integer_type<unsigned char>("unsigned char", MPI_UNSIGNED_CHAR), {max, band, lor}},
      {floating_type<float>("float", MPI_FLOAT, 1e-5), {sum, prod, max, min}},
      {floating_type<double>("double", MPI_DOUBLE, 1e-12), {sum, prod, max, min, plus}},
      {pair_type<int>("2int", MPI_2INT), {maxloc, minloc}},
      {pair_type<float>("float_int", MPI_FLOAT_INT), {maxloc, minloc}},
      {pair_type<double>("double_int", MPI_DOUBLE_INT), {maxloc, minloc}},
      {pair_type<long>("long_int", MPI_LONG_INT), {minloc}},
      {pair_type<short>("short_int", MPI_SHORT_INT), {maxloc}},
      {affine_type("affine contiguous(2,unsigned)", g_affine_dense, 8, 1), {composition}},
      {affine_type("affine vector(2,1,2,unsigned) with a gap", g_affine_gapped, 12, 2), {composition}},
  };
}

std::vector<unsigned char> buffer(int64_t count, int64_t extent, unsigned char pattern) {
  return std::vector<unsigned char>(static_cast<size_t>(std::max<int64_t>(count * extent, 1)), pattern);
}

void fill(const ElementType& t, void* buf, int64_t count, int rank, Values v, uint32_t salt) {
  for (int64_t i = 0; i < count; ++i) t.set(static_cast<unsigned char*>(buf) + i * t.extent, rank, i, v, salt);
}

std::vector<unsigned char> packed(MPI_Datatype type, const void* buf, int64_t count) {
  int size = 0;
  PMPI_Pack_size(static_cast<int>(count), type, MPI_COMM_SELF, &size);
  std::vector<unsigned char> out(static_cast<size_t>(size));
  int position = 0;
  if (count > 0) PMPI_Pack(buf, static_cast<int>(count), type, out.data(), size, &position, MPI_COMM_SELF);
  out.resize(static_cast<size_t>(position));
  return out;
}

std::string compare(const ElementType& t, const void* ours, const void* reference, int64_t count) {
  if (!t.close && packed(t.type, ours, count) == packed(t.type, reference, count)) return {};
  for (int64_t i = 0; i < count; ++i) {
    const auto* a = static_cast<const unsigned char*>(ours) + i * t.extent;
    const auto* b = static_cast<const unsigned char*>(reference) + i * t.extent;
    bool same = t.close ? t.close(a, b) : packed(t.type, a, 1) == packed(t.type, b, 1);
    if (!same) return "element " + std::to_string(i) + " of " + std::to_string(count) + " differs";
  }
  return {};
}

uint64_t fingerprint(const std::vector<unsigned char>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

void Failures::add(const std::string& what) {
  if (++count <= 12) ADD_FAILURE() << "rank " << world_rank() << ": " << what;
  else if (count == 13) ADD_FAILURE() << "rank " << world_rank() << ": more failures not shown";
  else ADD_FAILURE();
}

bool same_on_all_ranks(const std::vector<uint64_t>& values) {
  const int p = world_size();
  std::vector<uint64_t> all(values.size() * static_cast<size_t>(p));
  PMPI_Allgather(values.data(), static_cast<int>(values.size()), MPI_UINT64_T, all.data(),
                 static_cast<int>(values.size()), MPI_UINT64_T, MPI_COMM_WORLD);
  for (int r = 1; r < p; ++r)
    if (!std::equal(values.begin(), values.end(), all.begin() + static_cast<long>(r * values.size()))) return false;
  return true;
}

}  // namespace veneer::test
