//===- KvCache.cpp ----------------------------------------------------------------===//
#include "runtime/kv/KvCache.h"
#include "kernels/cpu/Numeric.h"

#include <algorithm>
#include <cstring>

namespace helm::rt {

bool ContiguousKvCache::write(int64_t layer, int32_t seq, int64_t pos, int64_t count,
                              const float *k, const float *v) {
  size_t slot = size_t(layer * sequences_ + seq);
  size_t need = size_t((pos + count) * width_) * elem_;
  for (auto *store : {&k_[slot], &v_[slot]})
    if (store->size() < need) {
      if (store->capacity() < need) {
        size_t grown = std::max(need, store->capacity() * 3 / 2);
        if (maxPositions_ > 0)
          grown = std::max(need, std::min(grown, size_t(maxPositions_ * width_) * elem_));
        store->reserve(grown);
      }
      store->resize(need);
    }
  char *kd = k_[slot].data() + size_t(pos * width_) * elem_;
  char *vd = v_[slot].data() + size_t(pos * width_) * elem_;
  if (type_ == kernels::DType::f32) {
    helm::kernels::copyBytes(kd, k, size_t(count * width_) * 4);
    helm::kernels::copyBytes(vd, v, size_t(count * width_) * 4);
  } else {
    helm::kernels::narrow(k, type_, kd, count * width_);
    helm::kernels::narrow(v, type_, vd, count * width_);
  }
  return true;
}

void ContiguousKvCache::forEachSpan(
    int64_t layer, int32_t seq, int64_t from, int64_t to,
    llvm::function_ref<void(const void *, const void *, int64_t, int64_t)> visit) const {
  if (from >= to)
    return;
  size_t slot = size_t(layer * sequences_ + seq);
  size_t offset = size_t(from * width_) * elem_;
  visit(k_[slot].data() + offset, v_[slot].data() + offset, from, to - from);
}

void ContiguousKvCache::reset(int32_t seq) {
  for (int64_t l = 0; l < layers_; ++l) {
    size_t slot = size_t(l * sequences_ + seq);
    // The memory goes back too: a server's slot may next hold a much shorter sequence.
    std::vector<char>().swap(k_[slot]);
    std::vector<char>().swap(v_[slot]);
  }
}

uint64_t ContiguousKvCache::bytes() const {
  uint64_t total = 0;
  for (size_t i = 0; i < k_.size(); ++i)
    total += k_[i].capacity() + v_[i].capacity();
  return total;
}

} // namespace helm::rt
