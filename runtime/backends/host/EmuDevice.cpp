//===- EmuDevice.cpp - the emulated GPU: capped arena, counted (throttled) link -------===//
//
// The arena is one anonymous mapping of the target's VRAM minus its reserve, reserved but not
// committed (pages are touched as they are used), so a 7 GiB emulated GPU costs only what the
// device stage really holds. Its allocator is first fit over 256-byte granules with coalescing on
// free; nothing falls back to the host heap, so a plan that does not fit fails like it would on
// the GPU. Copies are memcpy, counted per direction; with throttling each one also takes
// latency + bytes / bandwidth of the profile's link.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/host/HostBackend.h"
#include "kernels/common/Numeric.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cstring>
#include <map>
#include <sys/mman.h>
#include <thread>

namespace helm::rt {

namespace {

class EmuDevice final : public SynchronousDevice {
public:
  explicit EmuDevice(const EmuOptions &o) : options_(o) {}
  ~EmuDevice() override {
    if (base_)
      munmap(base_, capacity_);
  }

  llvm::Error init() {
    capacity_ = options_.arenaBytes / kDeviceGranule * kDeviceGranule;
    if (capacity_ == 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "emu: the target leaves no device memory (VRAM minus reserve is 0)");
    void *p = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "emu: cannot reserve a " + formatBytes(capacity_) + " arena: " + std::strerror(errno));
    base_ = static_cast<char *>(p);
    free_[0] = capacity_;
    return llvm::Error::success();
  }

  DeviceKind kind() const override { return HELM_DEVICE_EMU; }
  std::string describe() const override {
    return llvm::formatv("emu ({0}): {1} arena, link {2:f1} GB/s + {3:f1} us{4}", options_.targetName,
                         formatBytes(capacity_), options_.linkGbs, options_.linkLatencyUs,
                         options_.throttle ? ", throttled" : "")
        .str();
  }
  uint64_t capacity() const override { return capacity_; }
  uint64_t bytesInUse() const override { return inUse_; }
  uint64_t peakBytesInUse() const override { return peak_; }

  llvm::Expected<void *> allocateHost(uint64_t bytes) override {
    uint64_t size = granuleBytes(bytes);
    void *p = size == UINT64_MAX ? nullptr : std::aligned_alloc(kDeviceGranule, size);
    if (!p)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "emu: cannot allocate " + formatBytes(bytes) + " of host staging memory");
    return p;
  }
  void freeHost(void *p) override { std::free(p); }

protected:
  llvm::Expected<void *> allocateImpl(uint64_t bytes, llvm::StringRef what) override {
    uint64_t size = granuleBytes(bytes);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size)
        continue;
      uint64_t offset = it->first, left = it->second - size;
      free_.erase(it);
      if (left)
        free_[offset + size] = left;
      used_[offset] = size;
      inUse_ += size;
      peak_ = std::max(peak_, inUse_);
      return static_cast<void *>(base_ + offset);
    }
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("emu ({0}): cannot allocate {1} ({6} bytes) for {2}: {3} of the {4} arena "
                      "free{5}",
                      options_.targetName, formatBytes(bytes), what, formatBytes(capacity_ - inUse_), formatBytes(capacity_),
                      capacity_ - inUse_ >= size ? " but fragmented" : "", bytes)
            .str());
  }

  void freeImpl(void *p) override {
    uint64_t offset = uint64_t(static_cast<char *>(p) - base_);
    auto it = used_.find(offset);
    if (static_cast<char *>(p) < base_ || it == used_.end())
      return; // not ours (the caller's bug); ignoring it keeps the arena consistent
    uint64_t size = it->second;
    used_.erase(it);
    inUse_ -= size;
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && next->first == offset + size) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += size;
        return;
      }
    }
    free_[offset] = size;
  }

  llvm::Error copyToDeviceImpl(void *dst, const void *src, uint64_t bytes, Stream, bool) override {
    if (llvm::Error e = checkInArena(dst, bytes, "copy to the device"))
      return e;
    linkDelay(bytes);
    helm::kernels::copyBytes(dst, src, bytes);
    counters_.hostToDeviceBytes += bytes;
    ++counters_.hostToDeviceTransfers;
    return llvm::Error::success();
  }
  llvm::Error copyToHostImpl(void *dst, const void *src, uint64_t bytes, Stream, bool) override {
    if (llvm::Error e = checkInArena(src, bytes, "copy from the device"))
      return e;
    linkDelay(bytes);
    helm::kernels::copyBytes(dst, src, bytes);
    counters_.deviceToHostBytes += bytes;
    ++counters_.deviceToHostTransfers;
    return llvm::Error::success();
  }

private:
  /// A copy must stay inside one live block: the same bug on a GPU is a fault.
  llvm::Error checkInArena(const void *p, uint64_t bytes, llvm::StringRef what) const {
    const char *c = static_cast<const char *>(p);
    if (c >= base_ && c + bytes <= base_ + capacity_) {
      uint64_t offset = uint64_t(c - base_);
      auto it = used_.upper_bound(offset);
      if (it != used_.begin()) {
        --it;
        if (offset + bytes <= it->first + it->second)
          return llvm::Error::success();
      }
    }
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::formatv("emu: {0} of {1} bytes is outside the device's "
                                                 "allocated memory",
                                                 what, bytes)
                                       .str());
  }

  void linkDelay(uint64_t bytes) {
    if (!options_.throttle)
      return;
    using Clock = std::chrono::steady_clock;
    double seconds = options_.linkLatencyUs * 1e-6 + double(bytes) / (options_.linkGbs * 1e9);
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds));
    // Sleep most of a long wait; spin the last stretch (sleep granularity is ~50-100 us).
    auto spinFrom = deadline - std::chrono::microseconds(150);
    if (Clock::now() < spinFrom)
      std::this_thread::sleep_until(spinFrom);
    while (Clock::now() < deadline) {
    }
  }

  EmuOptions options_;
  char *base_ = nullptr;
  uint64_t capacity_ = 0, inUse_ = 0, peak_ = 0;
  std::map<uint64_t, uint64_t> free_;           // offset -> size
  std::map<uint64_t, uint64_t> used_;           // offset -> size
};

} // namespace

llvm::Expected<std::unique_ptr<Device>> createEmuDevice(const EmuOptions &options) {
  auto device = std::make_unique<EmuDevice>(options);
  if (llvm::Error e = device->init())
    return std::move(e);
  return std::unique_ptr<Device>(std::move(device));
}

} // namespace helm::rt
