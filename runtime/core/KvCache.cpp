//===- KvCache.cpp ----------------------------------------------------------------===//
#include "runtime/core/KvCache.h"

#include <algorithm>
#include <cstring>

namespace helm::rt {

bool ContiguousKvCache::write(int64_t layer, int32_t seq, int64_t pos, int64_t count,
                              const float *k, const float *v) {
  size_t slot = size_t(layer * sequences_ + seq);
  size_t need = size_t((pos + count) * width_);
  for (auto *store : {&k_[slot], &v_[slot]})
    if (store->size() < need) {
      if (store->capacity() < need)
        store->reserve(std::max(need, store->capacity() * 3 / 2));
      store->resize(need);
    }
  std::memcpy(k_[slot].data() + pos * width_, k, size_t(count * width_) * 4);
  std::memcpy(v_[slot].data() + pos * width_, v, size_t(count * width_) * 4);
  return true;
}

void ContiguousKvCache::forEachSpan(
    int64_t layer, int32_t seq, int64_t from, int64_t to,
    llvm::function_ref<void(const float *, const float *, int64_t, int64_t)> visit) const {
  if (from >= to)
    return;
  size_t slot = size_t(layer * sequences_ + seq);
  visit(k_[slot].data() + from * width_, v_[slot].data() + from * width_, from, to - from);
}

void ContiguousKvCache::reset(int32_t seq) {
  for (int64_t l = 0; l < layers_; ++l) {
    size_t slot = size_t(l * sequences_ + seq);
    k_[slot].clear();
    v_[slot].clear();
  }
}

uint64_t ContiguousKvCache::bytes() const {
  uint64_t total = 0;
  for (size_t i = 0; i < k_.size(); ++i)
    total += (k_[i].capacity() + v_[i].capacity()) * 4;
  return total;
}

DeviceKvCache::~DeviceKvCache() {
  for (auto &list : chunks_)
    for (float *chunk : list)
      device_.free(chunk);
}

bool DeviceKvCache::reserve(int64_t layer, int32_t seq, int64_t to) {
  auto &list = chunks_[size_t(layer * sequences_ + seq)];
  size_t chunkFloats = size_t(chunkTokens_ * width_);
  size_t chunks = size_t((to + chunkTokens_ - 1) / chunkTokens_);
  while (list.size() < chunks) {
    auto block = device_.allocate(2 * chunkFloats * 4, "the device stage's KV cache");
    if (!block) {
      error_ = llvm::toString(block.takeError());
      return false;
    }
    list.push_back(static_cast<float *>(*block));
  }
  return true;
}

bool DeviceKvCache::write(int64_t layer, int32_t seq, int64_t pos, int64_t count, const float *k,
                          const float *v) {
  if (!reserve(layer, seq, pos + count))
    return false;
  auto &list = chunks_[size_t(layer * sequences_ + seq)];
  size_t chunkFloats = size_t(chunkTokens_ * width_);
  for (int64_t i = 0; i < count;) {
    int64_t p = pos + i;
    size_t chunk = size_t(p / chunkTokens_);
    int64_t at = p % chunkTokens_, n = std::min(count - i, chunkTokens_ - at);
    std::memcpy(list[chunk] + at * width_, k + i * width_, size_t(n * width_) * 4);
    std::memcpy(list[chunk] + chunkFloats + at * width_, v + i * width_, size_t(n * width_) * 4);
    i += n;
  }
  return true;
}

void DeviceKvCache::forEachSpan(
    int64_t layer, int32_t seq, int64_t from, int64_t to,
    llvm::function_ref<void(const float *, const float *, int64_t, int64_t)> visit) const {
  const auto &list = chunks_[size_t(layer * sequences_ + seq)];
  size_t chunkFloats = size_t(chunkTokens_ * width_);
  for (int64_t p = from; p < to;) {
    size_t chunk = size_t(p / chunkTokens_);
    int64_t at = p % chunkTokens_, n = std::min(to - p, chunkTokens_ - at);
    const float *base = list[chunk];
    visit(base + at * width_, base + chunkFloats + at * width_, p, n);
    p += n;
  }
}

void DeviceKvCache::reset(int32_t seq) {
  for (int64_t l = 0; l < layers_; ++l) {
    auto &list = chunks_[size_t(l * sequences_ + seq)];
    for (float *chunk : list)
      device_.free(chunk);
    list.clear();
  }
}

uint64_t DeviceKvCache::bytes() const {
  uint64_t n = 0;
  for (const auto &list : chunks_)
    n += list.size();
  return n * uint64_t(2 * chunkTokens_ * width_) * 4;
}

} // namespace helm::rt
