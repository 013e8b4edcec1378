#include <algorithm>
#include <numeric>

#include "tokenizer/model.h"

namespace bertrt::tokenizer {

void ByteTrie::Build(const std::vector<std::pair<std::string, int32_t>>& keys) {
  std::fill(std::begin(root_), std::end(root_), -1);
  nodes_.clear();
  edges_.clear();
  // Sorted keys put each node's children next to each other; a node is made
  // for every distinct prefix, breadth-first per parent so that a parent's
  // edges form one contiguous run.
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return keys[a].first < keys[b].first; });
  struct Range {
    size_t lo, hi, depth;
    int32_t node;
  };
  std::vector<Range> work;
  // Root children: one node per distinct first byte.
  size_t i = 0;
  while (i < order.size() && keys[order[i]].first.empty()) ++i;
  while (i < order.size()) {
    const auto b = static_cast<unsigned char>(keys[order[i]].first[0]);
    size_t j = i;
    while (j < order.size() && static_cast<unsigned char>(keys[order[j]].first[0]) == b) ++j;
    root_[b] = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
    work.push_back({i, j, 1, root_[b]});
    i = j;
  }
  while (!work.empty()) {
    const Range r = work.back();
    work.pop_back();
    size_t k = r.lo;
    // Keys ending here give the node its value; the last duplicate wins, as
    // the model's token -> id map does.
    while (k < r.hi && keys[order[k]].first.size() == r.depth) {
      nodes_[r.node].value = keys[order[k]].second;
      ++k;
    }
    nodes_[r.node].first = static_cast<uint32_t>(edges_.size());
    std::vector<Range> children;
    while (k < r.hi) {
      const auto b = static_cast<unsigned char>(keys[order[k]].first[r.depth]);
      size_t j = k;
      while (j < r.hi && static_cast<unsigned char>(keys[order[j]].first[r.depth]) == b) ++j;
      const auto child = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      edges_.push_back({b, child});
      children.push_back({k, j, r.depth + 1, child});
      k = j;
    }
    nodes_[r.node].count = static_cast<uint32_t>(edges_.size()) - nodes_[r.node].first;
    work.insert(work.end(), children.begin(), children.end());
  }
}

}  // namespace bertrt::tokenizer
