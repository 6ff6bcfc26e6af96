//===- PagedKvCache.cpp - pages of K/V that spill to host RAM and stream back -------===//
#include "runtime/kv/PagedKvCache.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstring>

namespace helm::rt {

namespace {
llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}
} // namespace

PagedKvCache::PagedKvCache(Device &device, int64_t layers, int32_t sequences, int64_t rowWidth,
                           const PagedKvOptions &options)
    : device_(device), layers_(layers), sequences_(sequences), width_(rowWidth),
      options_(options), pageBytes_(pageBytes(layers, rowWidth, options.pageTokens)),
      tables_(size_t(sequences)) {}

llvm::Expected<std::unique_ptr<PagedKvCache>>
PagedKvCache::create(Device &device, int64_t layers, int32_t sequences, int64_t rowWidth,
                     const PagedKvOptions &options) {
  if (options.pageTokens < 1 || options.pageTokens > (int64_t(1) << 20))
    return fail("--kv-page must be 1 .. 1048576 tokens, not " + llvm::Twine(options.pageTokens));
  if (options.devicePages < 1)
    return fail("the device KV budget holds no page");
  if (layers < 0 || sequences < 1 || rowWidth < 1)
    return fail("bad KV cache geometry");
  std::unique_ptr<PagedKvCache> cache(
      new PagedKvCache(device, layers, sequences, rowWidth, options));
  if (layers == 0)
    return cache;
  uint64_t sliceBytes = cache->pageBytes_ / uint64_t(layers);
  for (float *&buffer : cache->staging_) {
    auto p = device.allocate(sliceBytes, "the KV cache's attention staging buffers");
    if (!p)
      return p.takeError();
    buffer = static_cast<float *>(*p);
  }
  for (EventId *event : {&cache->stagingReady_[0], &cache->stagingReady_[1],
                         &cache->stagingFree_[0], &cache->stagingFree_[1], &cache->computeDone_,
                         &cache->evicted_}) {
    auto e = device.createEvent();
    if (!e)
      return e.takeError();
    *event = *e;
  }
  return cache;
}

PagedKvCache::~PagedKvCache() {
  // Pending copies and reads of the buffers finish before they are freed.
  llvm::consumeError(device_.synchronizeStream(Stream::copy));
  llvm::consumeError(device_.synchronizeStream(Stream::compute));
  for (auto &page : pages_) {
    device_.free(page->device);
    device_.freeHost(page->host);
  }
  for (float *slot : freeSlots_)
    device_.free(slot);
  for (float *buffer : staging_)
    device_.free(buffer);
  for (EventId event : {stagingReady_[0], stagingReady_[1], stagingFree_[0], stagingFree_[1],
                        computeDone_, evicted_})
    if (event)
      device_.destroyEvent(event);
}

bool PagedKvCache::evictOldestFull() {
  Page *victim = nullptr;
  for (auto &page : pages_)
    if (page->device && page->full && (!victim || page->stamp < victim->stamp))
      victim = page.get();
  if (!victim) {
    error_ = llvm::formatv("the device KV budget ({0} pages of {1} tokens) is taken by pages "
                           "still being written (a batch of {2} sequences needs at least {2}); "
                           "raise the budget (--emu-vram, --kv-watermark) or lower --kv-page",
                           options_.devicePages, options_.pageTokens, sequences_)
                 .str();
    return false;
  }
  if (!victim->host) {
    if (hostBytes_ + pageBytes_ > options_.hostLimitBytes) {
      error_ = llvm::formatv("the KV cache's pages in host memory would exceed {0} "
                             "({1} pages of {2} evicted)",
                             formatBytes(options_.hostLimitBytes), hostBytes_ / pageBytes_,
                             formatBytes(pageBytes_))
                   .str();
      return false;
    }
    auto host = device_.allocateHost(pageBytes_);
    if (!host) {
      error_ = llvm::toString(host.takeError());
      return false;
    }
    victim->host = static_cast<float *>(*host);
    hostBytes_ += pageBytes_;
  }
  // The copy starts after the compute stream's last writes to the page, and the slot is reused
  // (by compute work) only after the copy.
  if (llvm::Error e = device_.recordEvent(computeDone_, Stream::compute)) {
    error_ = llvm::toString(std::move(e));
    return false;
  }
  llvm::Error e = device_.streamWaitEvent(Stream::copy, computeDone_);
  if (!e)
    e = device_.copyToHost(victim->host, victim->device, pageBytes_, Stream::copy,
                           /*async=*/true);
  if (!e)
    e = device_.recordEvent(evicted_, Stream::copy);
  if (!e)
    e = device_.streamWaitEvent(Stream::compute, evicted_);
  if (e) {
    error_ = llvm::toString(std::move(e));
    return false;
  }
  freeSlots_.push_back(victim->device);
  victim->device = nullptr;
  --resident_;
  ++counters_.evicted;
  ++counters_.hostPages;
  --counters_.devicePages;
  return true;
}

float *PagedKvCache::takeSlot() {
  if (freeSlots_.empty() && slots_ < options_.devicePages) {
    auto p = device_.allocate(pageBytes_, "the device stage's KV pages");
    if (p) {
      ++slots_;
      freeSlots_.push_back(static_cast<float *>(*p));
    } else if (options_.offload && slots_ > 0) {
      // The budget was sized from the memory free when the session began; the stage's own
      // buffers may have taken some since. Live with the slots there are: evict instead.
      llvm::consumeError(p.takeError());
      options_.devicePages = slots_;
    } else {
      error_ = llvm::toString(p.takeError());
      return nullptr;
    }
  }
  if (freeSlots_.empty()) {
    if (!options_.offload) {
      error_ = llvm::formatv("the device KV budget ({0} pages of {1} tokens, {2}) is full and "
                             "KV offload is off (--kv-offload=on lets pages spill to host RAM)",
                             options_.devicePages, options_.pageTokens,
                             formatBytes(uint64_t(options_.devicePages) * pageBytes_))
                   .str();
      return nullptr;
    }
    if (!evictOldestFull())
      return nullptr;
  }
  float *slot = freeSlots_.back();
  freeSlots_.pop_back();
  return slot;
}

bool PagedKvCache::prepareWrite(int64_t layer, int32_t seq, int64_t pos, int64_t to,
                                bool skipFull) {
  if (layer < 0 || layer >= layers_ || seq < 0 || seq >= sequences_ || pos < 0 || to < pos) {
    error_ = "KV write outside the cache's layers, sequences or positions";
    return false;
  }
  auto &table = tables_[size_t(seq)];
  const int64_t T = options_.pageTokens;
  int64_t lastPage = to > 0 ? (to - 1) / T : -1;
  for (int64_t index = pos / T; index <= lastPage; ++index) {
    // New pages are made in position order, each only once it has a device slot (a failed
    // write leaves no page without memory behind).
    while (int64_t(table.size()) <= index) {
      float *slot = takeSlot();
      if (!slot)
        return false;
      auto page = std::make_unique<Page>();
      page->seq = seq;
      page->index = int64_t(table.size());
      page->stamp = nextStamp_++;
      page->device = slot;
      ++resident_;
      ++counters_.devicePages;
      counters_.devicePagesPeak = std::max(counters_.devicePagesPeak, resident_);
      table.push_back(page.get());
      pages_.push_back(std::move(page));
    }
    Page *page = table[size_t(index)];
    if (page->full && skipFull)
      continue;
    if (page->full) {
      error_ = llvm::formatv("KV write into the full page {0} of sequence {1}", index, seq).str();
      return false;
    }
  }
  // The stage's last layer writing a page's last position completes the page. Marked only now,
  // once every page of this write has its slot: a page is not evictable before it is written.
  if (layer == layers_ - 1)
    for (int64_t index = pos / T; index <= lastPage; ++index)
      if (to >= (index + 1) * T)
        table[size_t(index)]->full = true;
  return true;
}

bool PagedKvCache::write(int64_t layer, int32_t seq, int64_t pos, int64_t count, const float *k,
                         const float *v) {
  if (!prepareWrite(layer, seq, pos, pos + count, /*skipFull=*/false))
    return false;
  // The rows come from the stage's buffers in memory the host addresses (cpu, emu): copied in
  // place. (A CUDA stage writes through reserve() and its own kernel instead.)
  const int64_t T = options_.pageTokens;
  auto &table = tables_[size_t(seq)];
  for (int64_t i = 0; i < count;) {
    int64_t p = pos + i, at = p % T, n = std::min(count - i, T - at);
    float *slice = layerSlice(table[size_t(p / T)]->device, layer);
    std::memcpy(slice + at * width_, k + i * width_, size_t(n * width_) * 4);
    std::memcpy(slice + (T + at) * width_, v + i * width_, size_t(n * width_) * 4);
    i += n;
  }
  return true;
}

bool PagedKvCache::reserve(int64_t layer, int32_t seq, int64_t to) {
  // The caller writes the positions up to `to` that are not yet written before the next cache
  // operation, so the pages this completes count as full from now on.
  // Full pages form a prefix of the table: start at the first one that is not (no walk over the
  // whole sequence per layer and token).
  int64_t from = 0;
  if (seq >= 0 && seq < sequences_) {
    const auto &table = tables_[size_t(seq)];
    size_t open = table.size();
    while (open > 0 && !table[open - 1]->full)
      --open;
    from = std::min(to, int64_t(open) * options_.pageTokens);
  }
  return prepareWrite(layer, seq, from, to, /*skipFull=*/true);
}

void PagedKvCache::forEachSpan(
    int64_t layer, int32_t seq, int64_t from, int64_t to,
    llvm::function_ref<void(const void *, const void *, int64_t, int64_t)> visit) const {
  if (seq < 0 || seq >= sequences_ || layer < 0 || layer >= layers_ || from >= to)
    return;
  const auto &table = tables_[size_t(seq)];
  const int64_t T = options_.pageTokens;
  int64_t first = from / T, last = std::min<int64_t>((to - 1) / T, int64_t(table.size()) - 1);
  const uint64_t sliceBytes = pageBytes_ / uint64_t(layers_);
  // Streamed pages go through the two staging buffers in turn; the copy of the next streamed page
  // is issued before the current one is visited (one page ahead).
  auto nextStreamed = [&](int64_t after) {
    for (int64_t i = after; i <= last; ++i)
      if (!table[size_t(i)]->device)
        return i;
    return last + 1;
  };
  int buffer = 0;
  auto prefetch = [&](int64_t index, int into) {
    const Page *page = table[size_t(index)];
    // The buffer's previous reader (a visit on the compute stream) must be done with it.
    llvm::Error e = device_.streamWaitEvent(Stream::copy, stagingFree_[into]);
    if (!e)
      e = device_.copyToDevice(staging_[into], layerSlice(page->host, layer), sliceBytes,
                               Stream::copy, /*async=*/true);
    if (!e)
      e = device_.recordEvent(stagingReady_[into], Stream::copy);
    // Device copies only fail on a broken device; the attention over a stale buffer would be
    // wrong, so such a failure is fatal for the process rather than silent.
    if (e)
      llvm::report_fatal_error(llvm::Twine("KV page prefetch failed: ") +
                               llvm::toString(std::move(e)));
    ++counters_.prefetched;
  };
  int64_t streamed = nextStreamed(first);
  if (streamed <= last)
    prefetch(streamed, buffer);
  for (int64_t index = first; index <= last; ++index) {
    const Page *page = table[size_t(index)];
    int64_t start = std::max(from, index * T), end = std::min(to, (index + 1) * T);
    if (page->device) {
      const float *slice = layerSlice(page->device, layer);
      visit(slice + (start - index * T) * width_, slice + (T + start - index * T) * width_, start,
            end - start);
      continue;
    }
    // This page is in staging_[buffer]: start the next streamed page's copy into the other
    // buffer, then wait for ours and visit it.
    int64_t next = nextStreamed(index + 1);
    if (next <= last)
      prefetch(next, buffer ^ 1);
    if (llvm::Error e = device_.streamWaitEvent(Stream::compute, stagingReady_[buffer]))
      llvm::report_fatal_error(llvm::Twine("KV page prefetch failed: ") +
                               llvm::toString(std::move(e)));
    const float *slice = staging_[buffer];
    visit(slice + (start - index * T) * width_, slice + (T + start - index * T) * width_, start,
          end - start);
    if (llvm::Error e = device_.recordEvent(stagingFree_[buffer], Stream::compute))
      llvm::report_fatal_error(llvm::Twine("KV page prefetch failed: ") +
                               llvm::toString(std::move(e)));
    buffer ^= 1;
  }
}

void PagedKvCache::reset(int32_t seq) {
  if (seq < 0 || seq >= sequences_)
    return;
  auto &table = tables_[size_t(seq)];
  if (table.empty())
    return;
  // Readers and the eviction copies of these pages finish before their memory is reused.
  llvm::consumeError(device_.synchronizeStream(Stream::copy));
  llvm::consumeError(device_.synchronizeStream(Stream::compute));
  for (Page *page : table) {
    if (page->device) {
      freeSlots_.push_back(page->device);
      --resident_;
      --counters_.devicePages;
    }
    if (page->host) {
      device_.freeHost(page->host);
      hostBytes_ -= pageBytes_;
      --counters_.hostPages;
    }
    page->device = page->host = nullptr;
  }
  table.clear();
  llvm::erase_if(pages_, [&](const std::unique_ptr<Page> &p) { return p->seq == seq; });
}

uint64_t PagedKvCache::bytes() const {
  return uint64_t(slots_) * pageBytes_ + hostBytes_;
}

} // namespace helm::rt
