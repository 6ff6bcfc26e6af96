//===- KvCache.cpp ----------------------------------------------------------------===//
#include "runtime/kv/KvCache.h"
#include "kernels/common/Numeric.h"

#include <algorithm>
#include <cstring>

namespace helm::rt {

namespace {
/// A buffer's next capacity for `need` units after `have`: half again as much (so growth stays
/// rare), but not past `limit` (0: none) unless `need` itself is.
int64_t grownCapacity(int64_t have, int64_t need, int64_t limit) {
  const int64_t grown = std::max(need, have * 3 / 2);
  return limit > 0 ? std::max(need, std::min(grown, limit)) : grown;
}
} // namespace

void ContiguousKvCache::storeRows(char *dst, const float *src, int64_t n) const {
  if (type_ == kernels::DType::f32)
    helm::kernels::copyBytes(dst, src, size_t(n) * 4);
  else
    helm::kernels::narrow(src, type_, dst, n);
}

void ContiguousKvCache::growHeadMajor(size_t slot, int64_t positions) {
  const int64_t old = capacity_[slot], head = width_ / heads_;
  const size_t headBytes = size_t(head) * elem_;
  for (auto *store : {&k_[slot], &v_[slot]}) {
    std::vector<char> grown(size_t(heads_ * positions) * headBytes);
    for (int64_t g = 0; g < heads_; ++g)
      helm::kernels::copyBytes(grown.data() + size_t(g * positions) * headBytes,
                               store->data() + size_t(g * old) * headBytes,
                               size_t(positions_[slot]) * headBytes);
    store->swap(grown);
  }
  capacity_[slot] = positions;
}

bool ContiguousKvCache::write(int64_t layer, int32_t seq, int64_t pos, int64_t count,
                              const float *k, const float *v) {
  size_t slot = size_t(layer * sequences_ + seq);
  if (heads_ > 1) {
    const int64_t need = pos + count, head = width_ / heads_;
    if (need > capacity_[slot])
      growHeadMajor(slot, grownCapacity(capacity_[slot], need, maxPositions_));
    // Row s of the input holds every head: head g's part goes to its own rows.
    const int64_t cap = capacity_[slot];
    for (auto [store, rows] : {std::pair{&k_[slot], k}, std::pair{&v_[slot], v}})
      for (int64_t g = 0; g < heads_; ++g)
        for (int64_t s = 0; s < count; ++s)
          storeRows(store->data() + size_t((g * cap + pos + s) * head) * elem_,
                    rows + s * width_ + g * head, head);
    positions_[slot] = std::max(positions_[slot], need);
    return true;
  }
  size_t need = size_t((pos + count) * width_) * elem_;
  for (auto *store : {&k_[slot], &v_[slot]})
    if (store->size() < need) {
      if (store->capacity() < need)
        store->reserve(size_t(grownCapacity(int64_t(store->capacity()), int64_t(need),
                                            maxPositions_ * width_ * int64_t(elem_))));
      store->resize(need);
    }
  storeRows(k_[slot].data() + size_t(pos * width_) * elem_, k, count * width_);
  storeRows(v_[slot].data() + size_t(pos * width_) * elem_, v, count * width_);
  return true;
}

void ContiguousKvCache::forEachSpan(
    int64_t layer, int32_t seq, int64_t from, int64_t to,
    llvm::function_ref<void(const void *, const void *, int64_t, int64_t)> visit) const {
  if (from >= to)
    return;
  size_t slot = size_t(layer * sequences_ + seq);
  size_t offset = size_t(from * positionStride()) * elem_;
  visit(k_[slot].data() + offset, v_[slot].data() + offset, from, to - from);
}

void ContiguousKvCache::reset(int32_t seq) {
  for (int64_t l = 0; l < layers_; ++l) {
    size_t slot = size_t(l * sequences_ + seq);
    // The memory goes back too: a server's slot may next hold a much shorter sequence.
    std::vector<char>().swap(k_[slot]);
    std::vector<char>().swap(v_[slot]);
    capacity_[slot] = positions_[slot] = 0;
  }
}

uint64_t ContiguousKvCache::bytes() const {
  uint64_t total = 0;
  for (size_t i = 0; i < k_.size(); ++i)
    total += k_[i].capacity() + v_[i].capacity();
  return total;
}

} // namespace helm::rt
