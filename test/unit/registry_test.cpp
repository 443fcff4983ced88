// SPDX-License-Identifier: BSD-3-Clause
// The registry and what is sized by it: every list holds its own
// collective's algorithms under distinct names; the per-algorithm call counts
// and the selector take any number of algorithms per collective (more than 8
// here). No MPI calls.
#include <gtest/gtest.h>

#include <climits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/report.h"
#include "algorithms/select.h"
#include "algorithms/tuning.h"

namespace veneer::test {
namespace {

namespace alg = veneer::algorithms;
using alg::Collective;

TEST(Registry, ListsHoldTheirCollectivesAlgorithmsUnderDistinctNames) {
  for (int i = 0; i < alg::collective_count; ++i) {
    const auto c = static_cast<Collective>(i);
    std::set<std::string_view> names;
    ASSERT_FALSE(alg::algorithms_for(c).empty()) << alg::collective_name(c);
    for (const alg::Algorithm* a : alg::algorithms_for(c)) {
      ASSERT_NE(a, nullptr) << "a null entry under " << alg::collective_name(c);
      EXPECT_EQ(a->collective, c) << a->name << " listed under " << alg::collective_name(c);
      EXPECT_TRUE(names.insert(a->name).second) << a->name << " twice under " << alg::collective_name(c);
      EXPECT_NE(a->name, "library");
      EXPECT_NE(a->predicted_seconds, nullptr) << a->name;
      EXPECT_NE(a->run, nullptr) << a->name;
      EXPECT_EQ(alg::find_algorithm(c, a->name), a);
    }
  }
}

TEST(CallCounts, RowsAsLongAsTheirLists) {
  const std::vector<size_t> algorithms{12, 1, 0, 20};
  alg::CallCounts counts(algorithms);
  for (size_t c = 0; c < algorithms.size(); ++c) {
    ASSERT_EQ(counts.slots(c), algorithms[c] + 1);
    // Slot k of row c counted 100 c + k + 1 times: any overlap between slots would show.
    for (size_t k = 0; k < counts.slots(c); ++k)
      for (size_t n = 0; n < 100 * c + k + 1; ++n) counts.add(c, k);
  }
  counts.add(0, 13);  // past the row: ignored, not counted in the next row
  counts.add(4, 0);   // no such collective
  for (size_t c = 0; c < algorithms.size(); ++c)
    for (size_t k = 0; k < counts.slots(c); ++k) EXPECT_EQ(counts.calls(c, k), 100 * c + k + 1) << c << "," << k;
  EXPECT_EQ(counts.slots(4), 0u);
  EXPECT_EQ(counts.calls(4, 0), 0u);
  counts.reset();
  for (size_t c = 0; c < algorithms.size(); ++c)
    for (size_t k = 0; k < counts.slots(c); ++k) EXPECT_EQ(counts.calls(c, k), 0u);
}

// Twelve made-up allreduce algorithms, each faster than the one before and
// all far below the library: number 11, the last, is the fastest.
constexpr int kMany = 12;
double seconds_of(int i) { return (kMany - i) * 1e-9; }
template <int I>
double predicted(const alg::Shape&, const alg::CostModel&) {
  return seconds_of(I);
}
int never_run(const alg::Args&, const alg::Hierarchy&) { return MPI_ERR_INTERN; }

const std::vector<std::string>& names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (int i = 0; i < kMany; ++i) v.push_back("made_up_" + std::to_string(i));
    return v;
  }();
  return n;
}

template <int... I>
std::vector<alg::Algorithm> make(std::integer_sequence<int, I...>) {
  return {alg::Algorithm{.collective = Collective::allreduce,
                         .name = std::string_view(names()[I]),
                         .needs = {.power_of_two = I == kMany - 1},
                         .predicted_seconds = predicted<I>,
                         .run = never_run}...};
}
TEST(Selector, ChoosesAmongMoreThanEightCandidates) {
  const std::vector<alg::Algorithm> many = make(std::make_integer_sequence<int, kMany>());
  std::vector<const alg::Algorithm*> list;
  for (const alg::Algorithm& a : many) list.push_back(&a);
  alg::CostModel model = alg::default_cost_model();
  alg::Shape s;
  s.collective = Collective::allreduce;
  s.bytes = s.count = 1 << 20;
  s.ranks = 4;
  const alg::Tuning none;  // no rule: the model decides among all, the library included

  // The last, fastest one is eligible on 4 ranks (a power of two)...
  alg::Choice c = alg::choose_among(list, s, none, model);
  ASSERT_NE(c.algorithm, nullptr) << alg::reason(c, s);
  EXPECT_EQ(c.algorithm->name, "made_up_11");
  // ...but not on 6: the next fastest, number 10, past the eighth.
  s.ranks = 6;
  c = alg::choose_among(list, s, none, model);
  ASSERT_NE(c.algorithm, nullptr) << alg::reason(c, s);
  EXPECT_EQ(c.algorithm->name, "made_up_10");

  // A rule naming the tenth forces it.
  alg::Tuning forced;
  forced.user[static_cast<size_t>(Collective::allreduce)].push_back(
      alg::Rule{.lo = 0, .hi = INT64_MAX, .choices = {"made_up_9"}, .text = "0-inf:made_up_9"});
  c = alg::choose_among(list, s, forced, model);
  ASSERT_NE(c.algorithm, nullptr);
  EXPECT_EQ(c.algorithm->name, "made_up_9");
  EXPECT_EQ(c.decision, alg::Decision::forced);
}

}  // namespace
}  // namespace veneer::test
