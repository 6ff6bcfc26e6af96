//===- KvCache.h - the runtime's KV-cache interface and the contiguous host cache -===//
//
// Generated stages never see the cache: `helm_rt_attention` writes the new keys/values through
// this interface and reads them back span by span. A span is a run of consecutive positions stored
// contiguously ([count, kv_width] rows of the cache's rowType() for K and for V: f32, or f16 for a
// host cache that halves its bytes); the contiguous cache hands out one span per sequence, the
// paged cache (PagedKvCache.h) one per page.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_KV_KVCACHE_H
#define HELM_RUNTIME_KV_KVCACHE_H

#include "contract/helm_contract.h"
#include "kernels/common/Numeric.h"
#include "runtime/device/Device.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cassert>

#include <cstdint>
#include <string>
#include <vector>

namespace helm::rt {

/// What a paged cache did since it was created (zero for caches that do not page).
struct PagingCounters {
  uint64_t evicted = 0;        // pages copied to host memory to free a device slot
  uint64_t prefetched = 0;     // page-layers streamed back to the device for attention
  int64_t devicePagesPeak = 0; // most pages resident on the device at once
  int64_t devicePages = 0;     // pages resident now
  int64_t hostPages = 0;       // evicted pages (held in host memory)
};

/// Bytes of keys and values for `tokens` positions of `layers` layers of `rowWidth` elements of
/// `elementBytes` (4: f32, 2: f16): the one size formula of every cache, planner and check.
/// Saturating, so a hostile manifest or batch cannot wrap around to a size that fits.
inline uint64_t kvCacheBytes(int64_t layers, int64_t rowWidth, uint64_t tokens,
                             uint64_t elementBytes = HELM_DEVICE_KV_ELEMENT_BYTES) {
  return llvm::SaturatingMultiply(
      llvm::SaturatingMultiply(uint64_t(std::max<int64_t>(layers, 0)) * 2 * elementBytes,
                               uint64_t(std::max<int64_t>(rowWidth, 0))),
      tokens);
}

class KvCache {
public:
  virtual ~KvCache() = default;
  /// Elements per token per layer for K (and for V): kv_heads * head_dim.
  virtual int64_t rowWidth() const = 0;
  /// The element type of the rows forEachSpan hands out (write() always takes f32 rows).
  virtual kernels::DType rowType() const { return kernels::DType::f32; }
  /// Layers it holds (valid `layer` arguments are 0 .. layers() - 1).
  virtual int64_t layers() const = 0;
  /// Stores `count` rows of K and V for positions [pos, pos + count) of sequence `seq`. Returns
  /// false when the cache cannot grow (its device is full); `error()` then says why.
  virtual bool write(int64_t layer, int32_t seq, int64_t pos, int64_t count, const float *k,
                     const float *v) = 0;
  /// Makes room for positions [0, to) of `seq` in `layer` without writing them, for a cache whose
  /// rows are written on its device (the caller then writes through forEachSpan's spans, which
  /// point into device memory). False when the cache cannot grow; `error()` says why. Host caches
  /// are written through `write` only and refuse.
  virtual bool reserve(int64_t layer, int32_t seq, int64_t to) {
    (void)layer, (void)seq, (void)to;
    error_ = "this KV cache is written through write() only";
    return false;
  }
  /// Why the last write failed (one line).
  virtual const std::string &error() const { return error_; }
  /// Visits positions [from, to) in order as contiguous spans: visit(k, v, firstPos, count), the
  /// rows of rowType().
  virtual void forEachSpan(int64_t layer, int32_t seq, int64_t from, int64_t to,
                           llvm::function_ref<void(const void *, const void *, int64_t, int64_t)>
                               visit) const = 0;
  /// Forgets every token of `seq` and releases the memory (host buffers, device pages) they held.
  virtual void reset(int32_t seq) = 0;
  /// Bytes currently held.
  virtual uint64_t bytes() const = 0;
  /// Paging activity (paged caches only).
  virtual PagingCounters paging() const { return {}; }
  /// Positions per page of a paged cache; 0 for a cache that does not page.
  virtual int64_t pageTokens() const { return 0; }
  /// How forEachSpan's rows are laid out, in elements (kernels/cpu/Attention.h's kvStride and
  /// headStride): from one position to the next, and from kv head g to g + 1 at the same position
  /// in `layer` of `seq` (0: the heads side by side in one row of rowWidth()).
  virtual int64_t positionStride() const { return rowWidth(); }
  virtual int64_t headStride(int64_t layer, int32_t seq) const {
    (void)layer, (void)seq;
    return 0;
  }

protected:
  std::string error_;
};

/// All layers and sequences in host memory, one growing buffer per (layer, sequence). With
/// `maxPositions` > 0 a buffer's growth never reserves room beyond that many positions, so a
/// session sized for maxPositions holds no more than it counted. `rowType` f16 stores the rows
/// rounded to half precision (half the bytes for attention to read); f32 keeps them exact.
///
/// With `kvHeads` > 1 the buffer is head-major: kv head g's rows of all positions together
/// ([kvHeads][capacity][rowWidth / kvHeads]), so that a decode step reads each head's keys and
/// values as one sequential stream. In the position-major layout (every head side by side in a
/// position's row) a head's rows are short slices a row apart, which this machine's memory serves
/// at about half the rate (a decode step's attention at 2048 positions, 8 kv heads of 128 f16:
/// 25 ms -> 10.5 ms per token on 1 thread, 13.5 -> 6.6 ms on 2). Growing the buffer then moves each
/// head's rows to their new place (capacity grows by half each time, so that stays rare).
class ContiguousKvCache final : public KvCache {
public:
  ContiguousKvCache(int64_t layers, int32_t sequences, int64_t rowWidth, int64_t maxPositions = 0,
                    kernels::DType rowType = kernels::DType::f32, int64_t kvHeads = 1)
      : layers_(layers), sequences_(sequences), width_(rowWidth), maxPositions_(maxPositions),
        type_(rowType), elem_(size_t(kernels::dtypeBytes(rowType))),
        heads_(kvHeads > 1 && rowWidth % kvHeads == 0 ? kvHeads : 1),
        k_(size_t(layers * sequences)), v_(size_t(layers * sequences)),
        capacity_(size_t(layers * sequences), 0), positions_(size_t(layers * sequences), 0) {
    // Attention reads f32 and f16 rows (kernels/cpu/Attention.h's kvType).
    assert(rowType == kernels::DType::f32 || rowType == kernels::DType::f16);
  }
  int64_t rowWidth() const override { return width_; }
  kernels::DType rowType() const override { return type_; }
  int64_t layers() const override { return layers_; }
  bool write(int64_t layer, int32_t seq, int64_t pos, int64_t count, const float *k,
             const float *v) override;
  void forEachSpan(int64_t layer, int32_t seq, int64_t from, int64_t to,
                   llvm::function_ref<void(const void *, const void *, int64_t, int64_t)> visit)
      const override;
  void reset(int32_t seq) override;
  uint64_t bytes() const override;
  int64_t positionStride() const override { return heads_ > 1 ? width_ / heads_ : width_; }
  int64_t headStride(int64_t layer, int32_t seq) const override {
    return heads_ > 1 ? capacity_[size_t(layer * sequences_ + seq)] * (width_ / heads_) : 0;
  }

private:
  /// Makes slot's buffers hold `positions` positions (head-major layout).
  void growHeadMajor(size_t slot, int64_t positions);
  /// n f32 values to `dst` as rowType() elements.
  void storeRows(char *dst, const float *src, int64_t n) const;

  int64_t layers_;
  int32_t sequences_;
  int64_t width_;
  int64_t maxPositions_;
  kernels::DType type_;
  size_t elem_; // bytes per element
  int64_t heads_; // > 1: head-major buffers
  std::vector<std::vector<char>> k_, v_;
  // Head-major only: positions each slot's buffers have room for, and positions written.
  std::vector<int64_t> capacity_, positions_;
};

} // namespace helm::rt

#endif
