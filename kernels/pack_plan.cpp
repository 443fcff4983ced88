// SPDX-License-Identifier: BSD-3-Clause
#include "kernels/pack_plan.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace veneer::kernels {

using datatypes::Dim;
using datatypes::Layout;
using datatypes::Node;

namespace {

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max() / 4;

int64_t saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > kSaturated / b) return kSaturated;
  return a * b;
}

// Contiguous blocks of a node, saturating: a bound on the segments it can emit.
int64_t count_blocks(const Node& n) {
  int64_t reps = 1;
  for (const Dim& d : n.dims) reps = saturating_mul(reps, d.count);
  if (n.is_leaf()) return saturating_mul(reps, n.offsets.empty() ? 1 : static_cast<int64_t>(n.offsets.size()));
  int64_t inner = 0;
  for (const Node& c : n.children) inner = std::min(kSaturated, inner + count_blocks(c));
  return saturating_mul(reps, inner);
}

// Walks a node in stream order and appends its blocks as segments, merging a
// block into the previous segment where both are contiguous in user memory.
class Flattener {
 public:
  Flattener(std::vector<Segment>& out, int64_t limit) : out_(out), limit_(limit) {}

  bool node(const Node& n, int64_t origin) {
    const int nd = static_cast<int>(n.dims.size());
    std::vector<int64_t> index(static_cast<size_t>(nd), 0);
    int64_t reps = 1;
    for (const Dim& d : n.dims) reps *= d.count;
    int64_t pos = origin + n.offset;
    for (int64_t r = 0; r < reps; ++r) {
      if (n.is_leaf()) {
        if (n.offsets.empty()) {
          if (!add(pos, n.block)) return false;
        } else {
          for (int64_t o : n.offsets)
            if (!add(pos + o, n.block)) return false;
        }
      } else {
        for (const Node& c : n.children)
          if (!node(c, pos)) return false;
      }
      for (int k = nd - 1; k >= 0; --k) {
        pos += n.dims[k].stride;
        if (++index[k] < n.dims[k].count) break;
        pos -= n.dims[k].count * n.dims[k].stride;
        index[k] = 0;
      }
    }
    return true;
  }

 private:
  bool add(int64_t user, int64_t bytes) {
    if (!out_.empty() && out_.back().user + out_.back().bytes == user) {
      out_.back().bytes += bytes;
    } else {
      if (static_cast<int64_t>(out_.size()) >= limit_) return false;
      out_.push_back({user, packed_, bytes});
    }
    packed_ += bytes;
    return true;
  }

  std::vector<Segment>& out_;
  int64_t limit_;
  int64_t packed_ = 0;
};

uint64_t bits_of(int64_t v) { return static_cast<uint64_t>(v); }

// Width of the widest word (at most 16 bytes) that divides every value ORed into bits.
int word_width(uint64_t bits) {
  for (int w = 16; w > 1; w /= 2)
    if (bits % static_cast<uint64_t>(w) == 0) return w;
  return 1;
}

template <class Index>
void fill_dims(Dims<Index>& out, const Dim* outer_first, int nd) {
  out.nd = nd;
  for (int k = 0; k < nd; ++k) {
    const Dim& d = outer_first[nd - 1 - k];
    out.count[k] = Divmod<Index>(static_cast<Index>(d.count));
    out.stride[k] = d.stride;
  }
}

template <class Index>
LeafParams<Index> leaf_params(const PackPlan& plan, const Dim* dims, int nd, int64_t block, int width,
                              const int64_t* offsets, uintptr_t user, char* packed, int64_t skip, int64_t len) {
  LeafParams<Index> p;
  p.user = user;
  p.packed = packed;
  p.offset = plan.offset;
  fill_dims(p.dims, dims, nd);
  if (!plan.offsets.empty()) {
    p.offsets = offsets;
    p.noffsets = Divmod<Index>(static_cast<Index>(plan.offsets.size()));
  }
  p.block_bytes = Divmod<Index>(static_cast<Index>(block));
  p.block_words = Divmod<Index>(static_cast<Index>(block / width));
  const int64_t end = skip + len;
  const int64_t first_whole = (skip + width - 1) / width * width;
  const int64_t last_whole = end / width * width;
  p.first = static_cast<Index>(skip);
  p.first_word = static_cast<Index>(first_whole / width);
  if (first_whole <= last_whole) {
    p.words = static_cast<Index>((last_whole - first_whole) / width);
    p.head = static_cast<Index>(first_whole - skip);
    p.tail = static_cast<Index>(end - last_whole);
  } else {  // the window lies inside one word
    p.head = static_cast<Index>(len);
  }
  p.threads = std::max<Index>(p.words, p.head + p.tail);
  return p;
}

template <class Index>
SegmentParams<Index> segment_params(const PackPlan& plan, const Dim* reps, int nd, const Segment* segments,
                                    uintptr_t user, char* packed, int64_t skip, int64_t len) {
  SegmentParams<Index> p;
  p.user = user;
  p.packed = packed;
  p.segments = segments;
  const int64_t nseg = static_cast<int64_t>(plan.segments.size());
  p.nsegments = Divmod<Index>(static_cast<Index>(nseg));
  fill_dims(p.reps, reps, nd);
  p.unit = plan.unit;
  p.first = skip;
  p.last = skip + len;
  // The items that hold the window's first and last bytes.
  auto item_at = [&](int64_t byte) {
    const int64_t rep = byte / plan.unit;
    const int64_t within = byte % plan.unit;
    const auto it = std::upper_bound(plan.segments.begin(), plan.segments.end(), within,
                                     [](int64_t v, const Segment& s) { return v < s.packed; });
    return rep * nseg + (it - plan.segments.begin() - 1);
  };
  const int64_t first_item = item_at(skip);
  const int64_t last_item = item_at(skip + len - 1);
  p.first_item = static_cast<Index>(first_item);
  p.items = static_cast<Index>(last_item - first_item + 1);
  p.threads = p.items * static_cast<Index>(plan.group);
  return p;
}

}  // namespace

PlanStatus make_plan(const Layout& layout, const PlanLimits& limits, PackPlan& plan) {
  plan = PackPlan{};
  plan.size = layout.size;
  plan.extent = layout.extent;
  plan.true_lb = layout.true_lb;
  const Node& root = layout.root;
  if (layout.size <= 0 || root.bytes() <= 0) {
    plan.form = PlanForm::empty;
    return PlanStatus::ok;
  }
  if (root.bytes() != layout.size) return PlanStatus::malformed;
  if (layout.contiguous) {
    plan.form = PlanForm::contiguous;
    return PlanStatus::ok;
  }
  plan.offset = root.offset;
  if (root.is_leaf() && root.dims.size() < static_cast<size_t>(kMaxDims)) {
    plan.form = PlanForm::leaf;
    plan.dims = root.dims;
    plan.block = root.block;
    plan.offsets = root.offsets;
    uint64_t bits = bits_of(root.block) | bits_of(root.offset);
    for (const Dim& d : root.dims) bits |= bits_of(d.stride);
    for (int64_t o : root.offsets) bits |= bits_of(o);
    plan.align_bits = bits;
    return PlanStatus::ok;
  }

  // General form: the root's outer dimensions (as many as a launch carries,
  // leaving room for the instance count) repeat one flattened repetition.
  plan.form = PlanForm::segments;
  const size_t outer = std::min(root.dims.size(), static_cast<size_t>(kMaxDims - 1));
  plan.dims.assign(root.dims.begin(), root.dims.begin() + static_cast<std::ptrdiff_t>(outer));
  Node repetition = root;
  repetition.dims.erase(repetition.dims.begin(), repetition.dims.begin() + static_cast<std::ptrdiff_t>(outer));
  plan.offset = 0;  // the root's offset is in the segments
  if (count_blocks(repetition) > limits.max_segments) return PlanStatus::too_many_segments;
  std::vector<Segment> merged;
  Flattener flatten(merged, limits.max_segments);
  if (!flatten.node(repetition, 0)) return PlanStatus::too_many_segments;
  // Cut long runs so that several groups share them; pieces keep alignment.
  const int64_t piece = std::max<int64_t>(16, limits.piece_bytes / 16 * 16);
  for (const Segment& s : merged) {
    for (int64_t done = 0; done < s.bytes; done += piece) {
      if (static_cast<int64_t>(plan.segments.size()) >= limits.max_segments) return PlanStatus::too_many_segments;
      plan.segments.push_back({s.user + done, s.packed + done, std::min(piece, s.bytes - done)});
    }
  }
  plan.unit = repetition.bytes();
  if (plan.segments.empty() || plan.segments.back().packed + plan.segments.back().bytes != plan.unit)
    return PlanStatus::malformed;
  const int64_t mean = plan.unit / static_cast<int64_t>(plan.segments.size());
  plan.group = mean < 32 ? 1 : mean < 256 ? 8 : 32;
  return PlanStatus::ok;
}

int64_t window_bytes(const PackPlan& plan, int64_t count, int64_t skip, int64_t max_bytes) {
  const int64_t total = plan.size * count;
  if (plan.form == PlanForm::empty || count <= 0 || skip < 0 || skip >= total || max_bytes <= 0) return 0;
  return std::min(max_bytes, total - skip);
}

uint64_t Launch::threads() const {
  switch (kind) {
    case Kind::leaf: return wide_index ? leaf64.threads : leaf32.threads;
    case Kind::segments: return wide_index ? segments64.threads : segments32.threads;
    default: return 0;
  }
}

Launch plan_launch(const PackPlan& plan, const int64_t* device_offsets, const Segment* device_segments, int64_t count,
                   uintptr_t user, char* packed, int64_t skip, int64_t max_bytes, bool wide_index) {
  Launch l;
  const int64_t len = window_bytes(plan, count, skip, max_bytes);
  if (len == 0) return l;
  l.bytes = len;
  if (plan.form == PlanForm::contiguous) {
    l.kind = Launch::Kind::copy;
    l.user_address = address::advance(user, plan.true_lb + skip);
    l.packed = packed;
    return l;
  }

  // The instances are one more outer dimension, folded into the outermost
  // one when they continue its stride.
  Dim dims[kMaxDims];
  int nd = 0;
  int64_t block = plan.block;
  uint64_t bits = plan.align_bits;
  const bool leaf = plan.form == PlanForm::leaf;
  const bool irregular = !plan.offsets.empty();
  if (count > 1) {
    if (!plan.dims.empty() && plan.extent == plan.dims[0].count * plan.dims[0].stride) {
      for (const Dim& d : plan.dims) dims[nd++] = d;
      dims[0].count *= count;
    } else if (leaf && plan.dims.empty() && !irregular && plan.extent == plan.block) {
      block *= count;
    } else {
      dims[nd++] = {count, plan.extent};
      for (const Dim& d : plan.dims) dims[nd++] = d;
      bits |= bits_of(plan.extent);
    }
  } else {
    for (const Dim& d : plan.dims) dims[nd++] = d;
  }
  // Past 2^32 bytes of stream (or items) the indices need 64 bits.
  constexpr int64_t k32 = int64_t{1} << 32;

  if (leaf) {
    if (nd == 0 && !irregular) {  // one block: a plain copy
      l.kind = Launch::Kind::copy;
      l.user_address = address::advance(user, plan.offset + skip);
      l.packed = packed;
      return l;
    }
    l.kind = Launch::Kind::leaf;
    // Every access aligned: the word divides the layout's displacements, the
    // user's base address, and the packed address of every word (packed - skip).
    bits |= static_cast<uint64_t>(user) | address::advance(address::of(packed), -skip);
    l.width = word_width(bits);
    l.wide_index = wide_index || plan.size * count >= k32;
    if (l.wide_index) {
      l.leaf64 = leaf_params<uint64_t>(plan, dims, nd, block, l.width, device_offsets, user, packed, skip, len);
    } else {
      l.leaf32 = leaf_params<uint32_t>(plan, dims, nd, block, l.width, device_offsets, user, packed, skip, len);
    }
    return l;
  }

  l.kind = Launch::Kind::segments;
  l.group = plan.group;
  int64_t reps = 1;
  for (int k = 0; k < nd; ++k) reps *= dims[k].count;
  l.wide_index = wide_index || saturating_mul(reps, static_cast<int64_t>(plan.segments.size())) >= k32 / plan.group;
  if (l.wide_index) {
    l.segments64 = segment_params<uint64_t>(plan, dims, nd, device_segments, user, packed, skip, len);
  } else {
    l.segments32 = segment_params<uint32_t>(plan, dims, nd, device_segments, user, packed, skip, len);
  }
  return l;
}

std::string PackPlan::describe() const {
  std::ostringstream os;
  switch (form) {
    case PlanForm::empty: os << "empty"; break;
    case PlanForm::contiguous: os << "contiguous " << size << " bytes at " << true_lb; break;
    case PlanForm::leaf:
      os << "leaf @" << offset;
      for (const Dim& d : dims) os << " [" << d.count << " x " << d.stride << "]";
      if (!offsets.empty()) os << " {" << offsets.size() << " offsets}";
      os << " block " << block << " align " << word_width(align_bits);
      break;
    case PlanForm::segments:
      os << "segments";
      for (const Dim& d : dims) os << " [" << d.count << " x " << d.stride << "]";
      os << " (" << segments.size() << " segments, " << unit << " bytes, group " << group << ")";
      break;
  }
  os << "; size " << size << " extent " << extent;
  return os.str();
}

}  // namespace veneer::kernels
