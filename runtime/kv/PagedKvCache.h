//===- PagedKvCache.h - the device stage's KV cache: pages that spill to host RAM -----===//
//
// Thesis §4.2.2–4.2.3. The KV cache of a device stage is a pool of pages. A page holds
// `pageTokens` consecutive positions of one sequence for every layer of the stage: K and V rows
// of f32, laid out [layer][K|V][pageTokens][rowWidth], so one layer's K and V of a page are one
// contiguous block (what attention streams in). Each sequence has a page table (its pages in
// position order).
//
// The device holds at most `devicePages` pages (the device KV budget: --kv-watermark of the device
// memory left after the weights). When a new page needs a device slot and all are taken, the
// oldest full page (all its positions written by every layer; full pages never change again) is
// evicted: copied to a page of pinned host memory on the copy stream, after the compute stream's
// writes to it (events), and its slot reused once that copy is done. An evicted page stays on the
// host for good. Attention reads a sequence's pages in order through forEachSpan: device-resident
// pages in place, evicted ones streamed into one of two device staging buffers, one page ahead
// (the copy of page p + 1 overlaps the attention over page p; events order the copy after the
// previous reader of that buffer, and the reader after the copy). The visitor must be done with a
// streamed span's rows when it returns (on CUDA: have enqueued its reads on the compute stream):
// span pointers are valid only during the visit. Not thread-safe (forEachSpan too uses the shared
// staging buffers); a failed device copy during a visit is fatal (report_fatal_error).
//
// reserve(layer, seq, to) is for writers on the device: it counts the pages the positions up to
// `to` complete as full at once, so the caller must enqueue its writes of those positions before
// any other cache operation (which could evict a full page).
//
// The tail page of every sequence (the one being written) is never full, so it is never evicted:
// a batch of B sequences needs B device pages plus whatever the eviction order keeps. With
// offload off, running out of device pages is an error instead.
//
// Works on any Device: cpu (no link), emu (counted, synchronous copies), cuda.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_RUNTIME_KV_PAGEDKVCACHE_H
#define HELM_RUNTIME_KV_PAGEDKVCACHE_H

#include "runtime/kv/KvCache.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace helm::rt {

struct PagedKvOptions {
  int64_t pageTokens = 512;
  /// Pages the device may hold at once (>= 1).
  int64_t devicePages = 1;
  /// false: a page is never evicted; a write that needs a page beyond devicePages fails.
  bool offload = true;
  /// Host memory the evicted pages may take in total (bytes).
  uint64_t hostLimitBytes = UINT64_MAX;
};

class PagedKvCache final : public KvCache {
public:
  /// The cache, with its two staging buffers allocated on `device` (an error when they do not
  /// fit, or when the options are out of range).
  static llvm::Expected<std::unique_ptr<PagedKvCache>>
  create(Device &device, int64_t layers, int32_t sequences, int64_t rowWidth,
         const PagedKvOptions &options);
  ~PagedKvCache() override;

  /// Bytes of one page: layers x 2 x pageTokens x rowWidth x 4.
  static uint64_t pageBytes(int64_t layers, int64_t rowWidth, int64_t pageTokens) {
    return kvCacheBytes(layers, rowWidth, uint64_t(pageTokens));
  }

  int64_t rowWidth() const override { return width_; }
  int64_t layers() const override { return layers_; }
  bool write(int64_t layer, int32_t seq, int64_t pos, int64_t count, const float *k,
             const float *v) override;
  bool reserve(int64_t layer, int32_t seq, int64_t to) override;
  void forEachSpan(int64_t layer, int32_t seq, int64_t from, int64_t to,
                   llvm::function_ref<void(const void *, const void *, int64_t, int64_t)> visit)
      const override;
  void reset(int32_t seq) override;
  /// KV bytes held: the device slots taken and the evicted pages on the host (the two staging
  /// buffers, one layer of a page each, are not counted).
  uint64_t bytes() const override;
  PagingCounters paging() const override { return counters_; }
  int64_t pageTokens() const override { return options_.pageTokens; }

private:
  PagedKvCache(Device &device, int64_t layers, int32_t sequences, int64_t rowWidth,
               const PagedKvOptions &options);

  struct Page {
    float *device = nullptr; // the device slot, or null once evicted
    float *host = nullptr;   // the host copy (evicted pages)
    int32_t seq = 0;
    int64_t index = 0;       // position / pageTokens
    bool full = false;       // every layer has written all its positions
    uint64_t stamp = 0;      // creation order: the oldest full page goes first
  };
  /// Makes sure sequence `seq` has device-resident pages for positions [pos, to) to be written
  /// by `layer`, and marks pages full when the stage's last layer fills them. A full page in the
  /// range is skipped (`skipFull`) or an error.
  bool prepareWrite(int64_t layer, int32_t seq, int64_t pos, int64_t to, bool skipFull);
  /// A free device slot: a new allocation while under the budget, else an evicted page's.
  float *takeSlot();
  bool evictOldestFull();
  float *layerSlice(float *page, int64_t layer) const {
    return page + size_t(layer) * 2 * size_t(options_.pageTokens) * size_t(width_);
  }

  Device &device_;
  int64_t layers_;
  int32_t sequences_;
  int64_t width_;
  PagedKvOptions options_;
  uint64_t pageBytes_;
  std::vector<std::unique_ptr<Page>> pages_;         // every page, any order
  std::vector<std::vector<Page *>> tables_;          // per sequence: its pages by index
  std::vector<float *> freeSlots_;                   // device slots no page uses
  int64_t slots_ = 0;                                // device slots allocated
  int64_t resident_ = 0;                             // pages holding a device slot
  uint64_t hostBytes_ = 0;
  uint64_t nextStamp_ = 0;
  EventId evicted_ = 0;                              // after the last eviction copy
  // Attention's staging buffers for streamed pages, each one layer's K and V of a page.
  float *staging_[2] = {nullptr, nullptr};
  EventId stagingReady_[2] = {0, 0}, stagingFree_[2] = {0, 0}, computeDone_ = 0;
  mutable PagingCounters counters_;
};

} // namespace helm::rt

#endif
