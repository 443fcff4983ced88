// SPDX-License-Identifier: BSD-3-Clause
// The pack kernels' thread functions run on the host, thread index by thread
// index, against the host packer (datatypes::pack). This checks the plans,
// the index arithmetic, the word widths and that no access is misaligned, on
// any machine: no GPU needed. device_pack_test.cpp runs the same on a GPU.
#define VENEER_KERNELS_CHECK_ALIGNMENT 1

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "datatypes/pack.h"
#include "kernels/fast_divmod.h"
#include "kernels/pack_items.h"
#include "kernels/pack_plan.h"
#include "test/kernels/test_layouts.h"

namespace vk = veneer::kernels;
namespace vd = veneer::datatypes;
using veneer::test::Layout;

namespace {

// Runs a launch's threads one after another on the host; remembers what ran.
struct HostThreads {
  vk::Launch::Kind kind = vk::Launch::Kind::none;
  int width = 0;
  int group = 0;

  int nothing() { return 0; }
  template <bool Pack>
  int copy(uintptr_t user, char* packed, int64_t n) {
    kind = vk::Launch::Kind::copy;
    if (Pack) std::memcpy(packed, reinterpret_cast<void*>(user), static_cast<size_t>(n));
    else std::memcpy(reinterpret_cast<void*>(user), packed, static_cast<size_t>(n));
    return 0;
  }
  template <int W, bool Pack, class Index>
  int leaf(const vk::LeafParams<Index>& p) {
    kind = vk::Launch::Kind::leaf;
    width = W;
    for (uint64_t t = 0; t < p.threads; ++t) vk::leaf_thread<W, Pack, Index>(p, static_cast<Index>(t));
    return 0;
  }
  template <int G, bool Pack, class Index>
  int segments(const vk::SegmentParams<Index>& p) {
    kind = vk::Launch::Kind::segments;
    group = G;
    for (uint64_t t = 0; t < p.threads; ++t) vk::segment_thread<G, Pack, Index>(p, static_cast<Index>(t));
    return 0;
  }
};

// device_pack() / device_unpack() with the host standing in for the GPU.
template <bool Pack>
int64_t emulate(const vk::PackPlan& plan, int64_t count, const void* user, int64_t skip, int64_t max_bytes,
                void* packed, bool wide, HostThreads* ran = nullptr) {
  const vk::Launch l =
      vk::plan_launch(plan, plan.offsets.data(), plan.segments.data(), count, reinterpret_cast<uintptr_t>(user),
                      static_cast<char*>(packed), skip, max_bytes, wide);
  HostThreads threads;
  vk::dispatch<Pack>(l, threads);
  if (ran) *ran = threads;
  return l.bytes;
}

vk::PackPlan plan_of(const Layout& l) {
  vk::PackPlan plan;
  EXPECT_EQ(vk::make_plan(l, {}, plan), vk::PlanStatus::ok) << l.describe();
  return plan;
}

// Memory for the `span` of a layout, with the buffer pointer (which the
// layout's offsets are relative to) `shift` bytes past a 64-byte boundary, as
// an application's arrays are.
class Arena {
 public:
  Arena(veneer::test::Span span, int64_t shift, unsigned char fill_from)
      : storage_(static_cast<size_t>(span.bytes() + 128)) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(storage_.data()) - static_cast<uintptr_t>(span.lo);
    base_ = reinterpret_cast<unsigned char*>((start + 63) / 64 * 64 + static_cast<uintptr_t>(shift));
    first_ = reinterpret_cast<unsigned char*>(reinterpret_cast<uintptr_t>(base_) + static_cast<uintptr_t>(span.lo));
    for (int64_t i = 0; i < span.bytes(); ++i) first_[i] = static_cast<unsigned char>(i * 131 + fill_from);
    span_ = span;
  }
  unsigned char* base() const { return base_; }
  std::vector<unsigned char> bytes() const { return {first_, first_ + span_.bytes()}; }
  void clear() { std::memset(first_, 0, static_cast<size_t>(span_.bytes())); }

 private:
  std::vector<unsigned char> storage_;
  unsigned char* first_ = nullptr;
  unsigned char* base_ = nullptr;
  veneer::test::Span span_;
};

constexpr unsigned char kGuard = 0xEE;
constexpr int64_t kGuardBytes = 64;

// A window of packed bytes with guard bytes on both sides; the window's first
// byte is `shift` bytes past a 64-byte boundary.
class Packed {
 public:
  Packed(int64_t bytes, int64_t shift) : storage_(static_cast<size_t>(bytes + 3 * kGuardBytes), kGuard) {
    data_ = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(storage_.data()) + 2 * kGuardBytes - 1) /
                                                 kGuardBytes * kGuardBytes +
                                             static_cast<uintptr_t>(shift));
    bytes_ = bytes;
  }
  unsigned char* data() const { return data_; }
  std::vector<unsigned char> bytes() const { return {data_, data_ + bytes_}; }
  // Whether nothing outside the window was written.
  bool guards_intact() const {
    for (const unsigned char* p = storage_.data(); p < data_; ++p)
      if (*p != kGuard) return false;
    for (const unsigned char* p = data_ + bytes_; p < storage_.data() + storage_.size(); ++p)
      if (*p != kGuard) return false;
    return true;
  }

 private:
  std::vector<unsigned char> storage_;
  unsigned char* data_;
  int64_t bytes_;
};

// Packs and unpacks `count` instances with the emulated kernels, whole and in
// fragments, and compares every byte with the host packer. Each fragment has
// a buffer of its own, guarded on both sides, at the alignment it would have
// inside one packed buffer: so a write outside a fragment's window shows even
// where it would write the right value. *ran receives what the whole pack launched.
void check_layout(const Layout& l, int64_t count, int64_t user_shift, int64_t packed_shift, bool wide,
                  const std::vector<int64_t>& fragments, const std::string& what, HostThreads* ran = nullptr) {
  const vk::PackPlan plan = plan_of(l);
  const veneer::test::Span span = veneer::test::span_of(l, count);
  Arena user(span, user_shift, 7);
  const int64_t total = l.size * count;
  std::vector<unsigned char> expect(static_cast<size_t>(total));
  EXPECT_EQ(vd::pack_all(l, count, user.base(), expect.data()), total);

  HostThreads whole;
  Packed out(total, packed_shift);
  EXPECT_NO_THROW(EXPECT_EQ(emulate<true>(plan, count, user.base(), 0, total, out.data(), wide, &whole), total))
      << what;
  EXPECT_EQ(out.bytes(), expect) << what << " whole; plan " << plan.describe();
  EXPECT_TRUE(out.guards_intact()) << what << " whole; plan " << plan.describe();

  for (int64_t fragment : fragments) {
    if (total / fragment > 4096) continue;  // keeps the slowest (byte by byte) runs short
    for (int64_t done = 0; done < total;) {
      const int64_t len = std::min(fragment, total - done);
      Packed piece(len, (packed_shift + done) % kGuardBytes);
      int64_t n = 0;
      EXPECT_NO_THROW(n = emulate<true>(plan, count, user.base(), done, fragment, piece.data(), wide)) << what;
      ASSERT_EQ(n, len) << what;
      ASSERT_TRUE(std::equal(expect.begin() + done, expect.begin() + done + len, piece.data()))
          << what << " fragment at " << done << " of " << fragment << "; plan " << plan.describe();
      ASSERT_TRUE(piece.guards_intact()) << what << " fragment at " << done << " of " << fragment
                                         << " wrote outside its window; plan " << plan.describe();
      done += n;
    }
  }

  // Unpack: exactly the bytes the host unpacker writes, whole and in
  // fragments; each fragment's input is guarded by garbage, and the fragments
  // go forwards and then backwards, so that a read outside a window shows.
  Arena reference(span, user_shift, 0), emulated(span, user_shift, 0);
  reference.clear();
  vd::unpack_all(l, count, reference.base(), expect.data());
  const int64_t fragment = fragments.empty() ? total : fragments.front();
  for (int64_t size : {total, fragment, -fragment}) {
    const int64_t step = std::abs(size);
    std::vector<int64_t> starts;
    for (int64_t at = 0; at < total; at += step) starts.push_back(at);
    if (size < 0) std::reverse(starts.begin(), starts.end());
    emulated.clear();
    for (int64_t at : starts) {
      const int64_t len = std::min(step, total - at);
      Packed piece(len, (packed_shift + at) % kGuardBytes);
      std::copy(expect.begin() + at, expect.begin() + at + len, piece.data());
      int64_t n = 0;
      EXPECT_NO_THROW(n = emulate<false>(plan, count, emulated.base(), at, step, piece.data(), wide)) << what;
      ASSERT_EQ(n, len) << what;
    }
    EXPECT_EQ(emulated.bytes(), reference.bytes()) << what << " unpacked in fragments of " << size;
  }
  if (ran) *ran = whole;
}

TEST(FastDivmod, MatchesDivision) {
  std::mt19937_64 rng(31);
  std::vector<uint32_t> divisors = {1,     2,     3,           5,           7,           10,          12,
                                    24,    40,    255,         256,         257,         1000003,     65535,
                                    65536, 65537, 0x7fffffffu, 0x80000000u, 0x80000001u, 0xfffffffeu, 0xffffffffu};
  for (int i = 0; i < 300; ++i) divisors.push_back(static_cast<uint32_t>(rng() >> (32 + rng() % 32)) | 1u);
  for (uint32_t d : divisors) {
    const vk::FastDivmod32 fast(d);
    std::vector<uint32_t> numerators = {
        0,           1,           d - 1,       d,           d + 1,           2 * d - 1,          2 * d,
        0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu, 0xffffffffu - d, 0xffffffffu / d * d};
    for (int j = 0; j < 2000; ++j) numerators.push_back(static_cast<uint32_t>(rng()));
    for (uint32_t n : numerators) {
      uint32_t q = 0, r = 0;
      fast.divmod(n, q, r);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(r, n % d) << n << " % " << d;
    }
  }
}

TEST(EmulatedPack, RandomLayoutsMatchHostPacker) {
  std::mt19937_64 rng(4242);
  std::map<vk::PlanForm, int> forms;
  std::map<int, int> widths;
  int checked = 0;
  for (int iter = 0; iter < 1200; ++iter) {
    veneer::test::Node raw = veneer::test::random_node(rng, 0, rng() % 4 == 0 ? 16 : 0);
    Layout probe = veneer::test::make_layout(raw);
    if (probe.size == 0 || probe.size > (32 << 10)) continue;
    const int64_t extent = std::uniform_int_distribution<int64_t>(1, 2 * probe.true_extent)(rng);
    const bool aligned_extent = rng() % 2;
    const Layout l = veneer::test::make_layout(raw, aligned_extent ? (extent + 15) / 16 * 16 : extent);
    const int64_t count = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    const int64_t shifts[] = {0, 0, 1, 2, 4, 8};
    const int64_t user_shift = shifts[rng() % 6];
    const int64_t packed_shift = shifts[rng() % 6];
    const bool wide = rng() % 4 == 0;
    const std::string what = "iteration " + std::to_string(iter) + ": " + l.describe() + " count " +
                             std::to_string(count) + " shifts " + std::to_string(user_shift) + "/" +
                             std::to_string(packed_shift) + (wide ? " wide" : "");
    HostThreads ran;
    check_layout(l, count, user_shift, packed_shift, wide, {1, 3, 7, 16, 64, 1000}, what, &ran);
    if (HasFatalFailure() || HasFailure()) FAIL() << what;
    ++forms[plan_of(l).form];
    if (ran.kind == vk::Launch::Kind::leaf) ++widths[ran.width];
    ++checked;
  }
  EXPECT_GT(checked, 800);
  // Every form and every word width came up.
  EXPECT_GT(forms[vk::PlanForm::leaf], 100);
  EXPECT_GT(forms[vk::PlanForm::segments], 100);
  EXPECT_GT(forms[vk::PlanForm::contiguous], 5);
  for (int w : {1, 2, 4, 8, 16}) EXPECT_GT(widths[w], 5) << "word width " << w;
}

TEST(EmulatedPack, DdtbenchShapesMatchHostPacker) {
  for (const veneer::test::Shape& shape : veneer::test::ddtbench_shapes()) {
    for (bool wide : {false, true}) {
      Layout l = shape.layout;
      const veneer::test::Span span = veneer::test::span_of(l, shape.count);
      const std::string what = shape.name + (wide ? " wide: " : ": ") + l.describe();
      if (!shape.absolute) {
        check_layout(l, shape.count, 0, 0, wide, {1, 5, 16, 100, 4096}, what);
        continue;
      }
      // At MPI_BOTTOM: the offsets are absolute addresses and the buffer is null.
      Arena memory(span, 0, 3);
      const uintptr_t base = reinterpret_cast<uintptr_t>(memory.base());
      l.root.offset += static_cast<int64_t>(base);
      l.true_lb += static_cast<int64_t>(base);
      l.lb += static_cast<int64_t>(base);
      const vk::PackPlan plan = plan_of(l);
      const int64_t total = l.size * shape.count;
      std::vector<unsigned char> expect(static_cast<size_t>(total)), got(static_cast<size_t>(total));
      ASSERT_EQ(vd::pack_all(l, shape.count, nullptr, expect.data()), total);
      for (int64_t fragment : {int64_t{3}, int64_t{64}, total}) {
        std::fill(got.begin(), got.end(), 0);
        for (int64_t done = 0; done < total;)
          done += emulate<true>(plan, shape.count, nullptr, done, fragment, got.data() + done, wide);
        EXPECT_EQ(got, expect) << what << " fragment " << fragment;
      }
    }
  }
}

// The word width follows the alignment of everything a word touches.
TEST(EmulatedPack, WordWidthFollowsAlignment) {
  // vector(20, 16-byte block, stride 48): 16-byte words when both buffers allow.
  const Layout l = veneer::test::make_layout(veneer::test::leaf(0, {{20, 48}}, 16));
  const auto width = [&](int64_t user_shift, int64_t packed_shift, int64_t skip) {
    const veneer::test::Span span = veneer::test::span_of(l, 1);
    Arena user(span, user_shift, 1);
    Packed out(l.size, packed_shift);
    HostThreads ran;
    emulate<true>(plan_of(l), 1, user.base(), skip, l.size, out.data(), false, &ran);
    EXPECT_EQ(ran.kind, vk::Launch::Kind::leaf);
    return ran.width;
  };
  EXPECT_EQ(width(0, 0, 0), 16);
  EXPECT_EQ(width(8, 0, 0), 8);
  EXPECT_EQ(width(0, 4, 0), 4);
  EXPECT_EQ(width(2, 0, 0), 2);
  EXPECT_EQ(width(0, 1, 0), 1);
  // A window from byte 1 written to a buffer at shift 1: every word still aligned.
  EXPECT_EQ(width(0, 1, 1), 16);
  EXPECT_EQ(width(0, 0, 1), 1);
  // Block length and strides count too: 12-byte blocks give 4-byte words.
  const Layout twelve = veneer::test::make_layout(veneer::test::leaf(0, {{9, 32}}, 12));
  HostThreads ran;
  std::vector<unsigned char> out(static_cast<size_t>(twelve.size));
  Arena user(veneer::test::span_of(twelve, 1), 0, 1);
  emulate<true>(plan_of(twelve), 1, user.base(), 0, twelve.size, out.data(), false, &ran);
  EXPECT_EQ(ran.width, 4);
}

TEST(PackPlan, ChoosesTheForm) {
  using veneer::test::leaf;
  using veneer::test::make_layout;
  using veneer::test::sequence;
  EXPECT_EQ(plan_of(make_layout(leaf(0, {}, 64))).form, vk::PlanForm::contiguous);
  EXPECT_EQ(plan_of(make_layout(leaf(0, {{4, 16}}, 8))).form, vk::PlanForm::leaf);
  const vk::PackPlan indexed = plan_of(make_layout(leaf(0, {}, 8, {0, 40, 24})));
  EXPECT_EQ(indexed.form, vk::PlanForm::leaf);
  EXPECT_EQ(indexed.offsets.size(), 3u);
  const vk::PackPlan mixed = plan_of(make_layout(sequence(0, {{10, 32}}, {leaf(0, {}, 8), leaf(16, {}, 4)})));
  EXPECT_EQ(mixed.form, vk::PlanForm::segments);
  ASSERT_EQ(mixed.dims.size(), 1u);  // the repetition stays a dimension
  EXPECT_EQ(mixed.segments.size(), 2u);
  EXPECT_EQ(mixed.unit, 12);
  EXPECT_EQ(plan_of(make_layout(leaf(0, {}, 0))).form, vk::PlanForm::empty);
  // Long runs are cut into pieces that keep their alignment.
  const vk::PackPlan long_runs = plan_of(make_layout(sequence(0, {}, {leaf(0, {}, 10000), leaf(20000, {}, 3)})));
  ASSERT_EQ(long_runs.form, vk::PlanForm::segments);
  EXPECT_EQ(long_runs.segments.size(), 4u);
  EXPECT_EQ(long_runs.segments[1].user, 4096);
  EXPECT_EQ(long_runs.segments[3].packed, 10000);
}

TEST(PackPlan, RefusesWhatItCannotDo) {
  using veneer::test::leaf;
  using veneer::test::sequence;
  // More segments than the limit: refused, without building them all.
  std::vector<int64_t> many;
  for (int64_t i = 0; i < 100; ++i) many.push_back(i * 24);
  const Layout big = veneer::test::make_layout(sequence(0, {}, {leaf(0, {}, 8, many), leaf(7, {{100, 24}}, 4)}));
  vk::PackPlan plan;
  vk::PlanLimits limits;
  limits.max_segments = 150;
  EXPECT_EQ(vk::make_plan(big, limits, plan), vk::PlanStatus::too_many_segments);
  limits.max_segments = 200;
  EXPECT_EQ(vk::make_plan(big, limits, plan), vk::PlanStatus::ok);
  // Sizes that disagree with the tree.
  Layout wrong = veneer::test::make_layout(leaf(0, {{4, 16}}, 8));
  wrong.size += 1;
  EXPECT_EQ(vk::make_plan(wrong, {}, plan), vk::PlanStatus::malformed);
}

TEST(PackPlan, WindowsFollowTheHostPacker) {
  const vk::PackPlan plan = plan_of(veneer::test::make_layout(veneer::test::leaf(0, {{4, 16}}, 8)));
  EXPECT_EQ(vk::window_bytes(plan, 3, 0, 1000), 96);
  EXPECT_EQ(vk::window_bytes(plan, 3, 90, 1000), 6);
  EXPECT_EQ(vk::window_bytes(plan, 3, 96, 1000), 0);
  EXPECT_EQ(vk::window_bytes(plan, 3, -1, 1000), 0);
  EXPECT_EQ(vk::window_bytes(plan, 0, 0, 1000), 0);
  EXPECT_EQ(vk::window_bytes(plan, 3, 10, 0), 0);
  EXPECT_EQ(vk::plan_launch(plan, nullptr, nullptr, 3, 0, nullptr, 96, 10).kind, vk::Launch::Kind::none);
}

}  // namespace
