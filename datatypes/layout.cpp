// SPDX-License-Identifier: BSD-3-Clause
#include "datatypes/layout.h"

#include <algorithm>
#include <sstream>

namespace veneer::datatypes {

int64_t Node::blocks() const {
  int64_t reps = 1;
  for (const Dim& d : dims) reps *= d.count;
  if (is_leaf()) return reps * (offsets.empty() ? 1 : static_cast<int64_t>(offsets.size()));
  int64_t n = 0;
  for (const Node& c : children) n += c.blocks();
  return reps * n;
}

namespace {

bool plain_leaf(const Node& n) { return n.is_leaf() && n.dims.empty() && n.offsets.empty(); }

// Same shape, ignoring where it starts.
bool same_shape(const Node& a, const Node& b) {
  return a.dims == b.dims && a.block == b.block && a.offsets == b.offsets && a.children == b.children;
}

void simplify_leaf(Node& n) {
  for (const Dim& d : n.dims) {
    if (d.count == 0) {  // nothing at all
      n.dims.clear();
      n.offsets.clear();
      n.block = 0;
      n.unit = 0;
      return;
    }
  }
  std::erase_if(n.dims, [](const Dim& d) { return d.count == 1; });
  if (n.offsets.size() == 1) {
    n.offset += n.offsets[0];
    n.offsets.clear();
  } else if (n.offsets.size() > 1) {
    const int64_t step = n.offsets[1] - n.offsets[0];
    bool regular = true;
    for (size_t i = 2; i < n.offsets.size() && regular; ++i) regular = n.offsets[i] - n.offsets[i - 1] == step;
    if (regular) {
      n.offset += n.offsets[0];
      n.dims.push_back({static_cast<int64_t>(n.offsets.size()), step});
      n.offsets.clear();
    }
  }
  bool changed = true;
  while (changed) {
    changed = false;
    if (n.offsets.empty() && !n.dims.empty() && n.dims.back().stride == n.block) {
      n.block *= n.dims.back().count;
      n.dims.pop_back();
      changed = true;
      continue;
    }
    for (size_t i = 0; i + 1 < n.dims.size(); ++i) {
      Dim& outer = n.dims[i];
      const Dim& inner = n.dims[i + 1];
      if (outer.stride == inner.count * inner.stride) {
        outer = {outer.count * inner.count, inner.stride};
        n.dims.erase(n.dims.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        changed = true;
        break;
      }
    }
  }
  n.unit = n.block * (n.offsets.empty() ? 1 : static_cast<int64_t>(n.offsets.size()));
}

void simplify_sequence(Node& n) {
  for (Node& c : n.children) simplify(c);
  std::erase_if(n.children, [](const Node& c) { return c.bytes() == 0; });
  for (const Dim& d : n.dims)
    if (d.count == 0) n.children.clear();
  std::erase_if(n.dims, [](const Dim& d) { return d.count == 1; });

  // Flatten children that are sequences without repetitions.
  std::vector<Node> flat;
  flat.reserve(n.children.size());
  for (Node& c : n.children) {
    if (!c.is_leaf() && c.dims.empty()) {
      for (Node& g : c.children) {
        g.offset += c.offset;
        flat.push_back(std::move(g));
      }
    } else {
      flat.push_back(std::move(c));
    }
  }
  // Blocks of one size at irregular places become a leaf with offsets (before
  // merging neighbours, which would make the sizes differ).
  if (flat.size() > 1) {
    bool uniform = true;
    for (const Node& c : flat) uniform = uniform && plain_leaf(c) && c.block == flat[0].block;
    if (uniform) {
      Node leaf;
      leaf.block = flat[0].block;
      leaf.offsets.reserve(flat.size());
      for (const Node& c : flat) leaf.offsets.push_back(c.offset);
      flat.clear();
      flat.push_back(std::move(leaf));
    }
  }
  // Merge abutting plain blocks.
  std::vector<Node> merged;
  merged.reserve(flat.size());
  for (Node& c : flat) {
    if (!merged.empty() && plain_leaf(merged.back()) && plain_leaf(c) &&
        merged.back().offset + merged.back().block == c.offset) {
      merged.back().block += c.block;
      merged.back().unit = merged.back().block;
    } else {
      merged.push_back(std::move(c));
    }
  }
  n.children = std::move(merged);

  if (n.children.empty()) {
    n.dims.clear();
    n.unit = 0;
    return;
  }
  // Equally spaced copies of one shape become a dimension.
  if (n.children.size() > 1) {
    const int64_t step = n.children[1].offset - n.children[0].offset;
    bool regular = true;
    for (size_t i = 1; i < n.children.size() && regular; ++i)
      regular = same_shape(n.children[i], n.children[0]) && n.children[i].offset - n.children[i - 1].offset == step;
    if (regular) {
      Node c = std::move(n.children[0]);
      c.dims.insert(c.dims.begin(), Dim{static_cast<int64_t>(n.children.size()), step});
      n.children.clear();
      n.children.push_back(std::move(c));
    }
  }
  // Blocks of one size at irregular places become a leaf with offsets.
  if (n.children.size() > 1) {
    bool uniform = true;
    for (const Node& c : n.children) uniform = uniform && plain_leaf(c) && c.block == n.children[0].block;
    if (uniform) {
      Node leaf;
      leaf.block = n.children[0].block;
      leaf.offsets.reserve(n.children.size());
      for (const Node& c : n.children) leaf.offsets.push_back(c.offset);
      n.children.clear();
      n.children.push_back(std::move(leaf));
    }
  }
  // One child: fold it into this node.
  if (n.children.size() == 1) {
    Node c = std::move(n.children[0]);
    std::vector<Dim> dims = std::move(n.dims);
    dims.insert(dims.end(), c.dims.begin(), c.dims.end());
    const int64_t offset = n.offset + c.offset;
    n = std::move(c);
    n.offset = offset;
    n.dims = std::move(dims);
    if (n.is_leaf()) {
      simplify_leaf(n);
      return;
    }
    simplify_sequence(n);
    return;
  }
  n.unit = 0;
  for (const Node& c : n.children) n.unit += c.bytes();
}

}  // namespace

void simplify(Node& node) {
  if (node.is_leaf()) {
    simplify_leaf(node);
  } else {
    simplify_sequence(node);
  }
}

void finish(Layout& l) {
  l.block_count = l.root.bytes() ? l.root.blocks() : 0;
  l.contiguous =
      l.size == 0 || (plain_leaf(l.root) && l.root.block == l.size && l.extent == l.size && l.root.offset == l.true_lb);
}

namespace {
void describe_into(const Node& n, std::ostringstream& os) {
  os << "@" << n.offset;
  for (const Dim& d : n.dims) os << " [" << d.count << " x " << d.stride << "]";
  if (n.is_leaf()) {
    if (!n.offsets.empty()) {
      os << " {" << n.offsets.size() << " at";
      for (size_t i = 0; i < n.offsets.size() && i < 8; ++i) os << " " << n.offsets[i];
      if (n.offsets.size() > 8) os << " ...";
      os << "}";
    }
    os << " block " << n.block;
  } else {
    os << " (";
    for (size_t i = 0; i < n.children.size(); ++i) {
      if (i) os << ", ";
      if (i == 16) {
        os << "... " << n.children.size() - 16 << " more";
        break;
      }
      describe_into(n.children[i], os);
    }
    os << ")";
  }
}
}  // namespace

std::string describe(const Node& node) {
  std::ostringstream os;
  describe_into(node, os);
  return os.str();
}

std::string Layout::describe() const {
  std::ostringstream os;
  os << "size " << size << " lb " << lb << " extent " << extent << " true_lb " << true_lb << " true_extent "
     << true_extent << (contiguous ? " contiguous" : "") << " blocks " << block_count << ": "
     << datatypes::describe(root);
  return os.str();
}

}  // namespace veneer::datatypes
