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

#include "kernels/cpu/Numeric.h"
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
                             uint64_t elementBytes = 4) {
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

protected:
  std::string error_;
};

/// All layers and sequences in host memory, one growing buffer per (layer, sequence). With
/// `maxPositions` > 0 a buffer's growth never reserves room beyond that many positions, so a
/// session sized for maxPositions holds no more than it counted. `rowType` f16 stores the rows
/// rounded to half precision (half the bytes for attention to read); f32 keeps them exact.
class ContiguousKvCache final : public KvCache {
public:
  ContiguousKvCache(int64_t layers, int32_t sequences, int64_t rowWidth, int64_t maxPositions = 0,
                    kernels::DType rowType = kernels::DType::f32)
      : layers_(layers), sequences_(sequences), width_(rowWidth), maxPositions_(maxPositions),
        type_(rowType), elem_(size_t(kernels::dtypeBytes(rowType))),
        k_(size_t(layers * sequences)), v_(size_t(layers * sequences)) {
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

private:
  int64_t layers_;
  int32_t sequences_;
  int64_t width_;
  int64_t maxPositions_;
  kernels::DType type_;
  size_t elem_; // bytes per element
  std::vector<std::vector<char>> k_, v_;
};

} // namespace helm::rt

#endif
