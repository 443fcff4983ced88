// SPDX-License-Identifier: BSD-3-Clause
#include "support/send_rule.h"

#include <algorithm>
#include <limits>

namespace veneer {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// Indices of the axis values at or just below and at or just above x (equal
// when x is on the axis or beyond its last value); nullopt below the first.
struct Bracket {
  size_t below = 0, above = 0;
};
std::optional<Bracket> bracket(const std::vector<int64_t>& axis, double x) {
  if (axis.empty() || x < static_cast<double>(axis.front())) return std::nullopt;
  const auto first_above =
      std::find_if(axis.begin(), axis.end(), [x](int64_t v) { return static_cast<double>(v) >= x; });
  if (first_above == axis.end()) return Bracket{axis.size() - 1, axis.size() - 1};
  const size_t above = static_cast<size_t>(first_above - axis.begin());
  return Bracket{static_cast<double>(*first_above) == x ? above : above - 1, above};
}

}  // namespace

void SendTable::set(int64_t block, int64_t bytes, Outcome outcome) {
  auto slot = [](std::vector<int64_t>& axis, int64_t v, bool* fresh) {
    const auto where = std::lower_bound(axis.begin(), axis.end(), v);
    *fresh = where == axis.end() || *where != v;
    const size_t i = static_cast<size_t>(where - axis.begin());
    if (*fresh) axis.insert(where, v);
    return i;
  };
  bool new_block = false, new_size = false;
  const size_t old_sizes = sizes.size();
  const size_t b = slot(blocks, block, &new_block);
  const size_t s = slot(sizes, bytes, &new_size);
  if (new_block || new_size) {  // re-lay the grid with the new row or column empty
    std::vector<Outcome> grid(blocks.size() * sizes.size(), Outcome::none);
    for (size_t ob = 0; ob + (new_block ? 1 : 0) < blocks.size(); ++ob)
      for (size_t os = 0; os < old_sizes; ++os) {
        const size_t nb = new_block && ob >= b ? ob + 1 : ob;
        const size_t ns = new_size && os >= s ? os + 1 : os;
        grid[nb * sizes.size() + ns] = outcomes[ob * old_sizes + os];
      }
    outcomes = std::move(grid);
  }
  outcomes[b * sizes.size() + s] = outcome;
}

bool SendTable::takes(double mean_block, int64_t bytes) const {
  if (blocks.empty() || sizes.empty()) return false;
  // Mean blocks below the smallest class count as it (smaller blocks only favour packing more).
  const auto b = bracket(blocks, std::max(mean_block, static_cast<double>(blocks.front())));
  const auto s = bracket(sizes, static_cast<double>(bytes));
  if (!b || !s) return false;
  for (size_t bi : {b->below, b->above})
    for (size_t si : {s->below, s->above})
      if (at(bi, si) == Outcome::loss) return false;
  // The nearest point (in log size, each axis) must be a measured win.
  auto nearest = [](const std::vector<int64_t>& axis, const Bracket& k, double x) {
    if (k.below == k.above) return k.below;
    const double lo = static_cast<double>(axis[k.below]), hi = static_cast<double>(axis[k.above]);
    return x * x <= lo * hi ? k.below : k.above;  // log x - log lo <= log hi - log x
  };
  const Outcome near = at(nearest(blocks, *b, std::max(mean_block, static_cast<double>(blocks.front()))),
                          nearest(sizes, *s, static_cast<double>(bytes)));
  return near == Outcome::win ||
         (near == Outcome::none && mean_block <= static_cast<double>(tie_max_block) && bytes >= tie_min_bytes);
}

int64_t SendTable::max_block() const { return std::max(tie_max_block, max_winning_block()); }

int64_t SendTable::min_bytes() const {
  return std::min(tie_max_block > 0 ? std::max(tie_min_bytes, sizes.empty() ? kNever : sizes.front()) : kNever,
                  min_winning_bytes());
}

int64_t SendTable::max_winning_block() const {
  for (size_t bi = blocks.size(); bi-- > 0;)
    for (size_t si = 0; si < sizes.size(); ++si)
      if (at(bi, si) == Outcome::win) return bi + 1 == blocks.size() ? kNever : blocks[bi + 1];
  return 0;
}

int64_t SendTable::min_winning_bytes() const {
  for (size_t si = 0; si < sizes.size(); ++si)
    for (size_t bi = 0; bi < blocks.size(); ++bi)
      if (at(bi, si) == Outcome::win) return sizes[si == 0 ? 0 : si - 1];
  return kNever;
}

bool SendRules::takes(PeerLevel level, double mean_block, int64_t bytes) const {
  switch (level) {
    case PeerLevel::same_node: return same_node && same_node->takes(mean_block, bytes);
    case PeerLevel::other_node: return other_node && other_node->takes(mean_block, bytes);
    case PeerLevel::unknown:
      return !empty() && (!same_node || same_node->takes(mean_block, bytes)) &&
             (!other_node || other_node->takes(mean_block, bytes));
  }
  return false;
}

int64_t SendRules::max_block() const {
  return std::max(same_node ? same_node->max_block() : 0, other_node ? other_node->max_block() : 0);
}

int64_t SendRules::min_bytes() const {
  return std::min(same_node ? same_node->min_bytes() : kNever, other_node ? other_node->min_bytes() : kNever);
}

}  // namespace veneer
