//===- Device.cpp - device basics, the cpu device, stage buffer allocation -----------===//
#include "runtime/device/Device.h"
#include "contract/manifest_schema.h"
#include "kernels/common/Numeric.h"
#include "runtime/device/StageMemory.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace helm::rt {

llvm::StringRef deviceKindName(DeviceKind kind) {
  return helm_device_kind_name(kind);
}

namespace {
thread_local Device *stageDevice = nullptr;
/// The first allocation a stage's code could not get from its device (reported after the stage).
thread_local std::string stageAllocationError;
/// Blocks handed out from the C heap after such a failure, so the stage can finish harmlessly.
thread_local std::unordered_set<void *> heapFallbacks;

void *heapFallback(size_t bytes) {
  void *p = std::malloc(bytes ? bytes : 1);
  heapFallbacks.insert(p);
  return p;
}
} // namespace

Device *currentStageDevice() { return stageDevice; }

uint64_t granuleBytes(uint64_t bytes) {
  if (bytes > UINT64_MAX - kDeviceGranule)
    return UINT64_MAX;
  return (std::max<uint64_t>(bytes, 1) + kDeviceGranule - 1) / kDeviceGranule * kDeviceGranule;
}

std::string formatBytes(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30))
    return llvm::formatv("{0:f2} GiB", double(bytes) / double(uint64_t(1) << 30)).str();
  if (bytes >= (uint64_t(1) << 20))
    return llvm::formatv("{0:f1} MiB", double(bytes) / double(1 << 20)).str();
  if (bytes >= 1024)
    return llvm::formatv("{0:f1} KiB", double(bytes) / 1024.0).str();
  return llvm::formatv("{0} B", bytes).str();
}

llvm::Error Device::runHostStage(StageCode code, llvm::function_ref<llvm::Error()> body) {
  if (code == StageCode::touchesBuffers)
    if (llvm::Error e = synchronizeStream(Stream::compute))
      return e;
  Device *outer = stageDevice;
  stageDevice = this;
  stageAllocationError.clear();
  llvm::Error e = body();
  stageDevice = outer;
  if (!stageAllocationError.empty()) {
    llvm::consumeError(std::move(e));
    return llvm::createStringError(llvm::inconvertibleErrorCode(), stageAllocationError);
  }
  return e;
}

uint64_t Device::availableBytes() const {
  uint64_t held = bytesInUse() - std::min(bytesInUse(), keptStageBytes());
  return capacity() - std::min(capacity(), held);
}

llvm::Expected<void *> Device::allocate(uint64_t bytes, llvm::StringRef what) {
  auto p = allocateImpl(bytes, what);
  if (!p && keptStageBytes() > 0) {
    // The kept stage buffers are memory nobody uses now: give it back and try once more.
    llvm::consumeError(p.takeError());
    releaseKeptStageBuffers();
    p = allocateImpl(bytes, what);
  }
  if (p)
    ++counters_.allocations;
  return p;
}

void Device::free(void *p) {
  if (!p)
    return;
  {
    // A stage buffer given back this way leaves the kept list too, so it is not handed out again.
    std::lock_guard<std::mutex> lock(stageBuffersMutex_);
    if (auto it = stageBuffers_.find(p); it != stageBuffers_.end()) {
      if (it->second.kept) {
        auto [first, last] = keptStageBuffers_.equal_range(it->second.size);
        for (auto kept = first; kept != last; ++kept)
          if (kept->second == p) {
            keptStageBuffers_.erase(kept);
            keptStageBytes_ -= it->second.size;
            break;
          }
      }
      stageBuffers_.erase(it);
    }
  }
  freeImpl(p);
}

namespace {
/// The size class of a stage buffer: whole granules up to 4 KiB, then 8 classes per power of two
/// (at most 12.5% more than asked for). A kept block serves only requests of its class, so the
/// blocks of each class never outnumber the most a step holds at once: a step that repeats the
/// previous one's requests allocates nothing. UINT64_MAX when the request is too large.
uint64_t stageBufferClass(uint64_t bytes) {
  uint64_t size = granuleBytes(bytes);
  if (size <= 4096 || size == UINT64_MAX)
    return size;
  uint64_t step = (uint64_t(1) << (63 - __builtin_clzll(size))) / 8;
  return size > UINT64_MAX - step ? UINT64_MAX : (size + step - 1) / step * step;
}
} // namespace

llvm::Expected<void *> Device::allocateStageBuffer(uint64_t bytes, llvm::StringRef what) {
  const uint64_t size = stageBufferClass(bytes);
  if (size == UINT64_MAX)
    return allocate(bytes, what); // refused by the device, in its words
  {
    std::lock_guard<std::mutex> lock(stageBuffersMutex_);
    auto it = keptStageBuffers_.find(size);
    if (it != keptStageBuffers_.end()) {
      void *block = it->second;
      keptStageBuffers_.erase(it);
      keptStageBytes_ -= size;
      stageBuffers_[block].kept = false;
      return block;
    }
  }
  uint64_t held = size;
  auto p = allocate(size, what);
  if (!p && granuleBytes(bytes) < size) {
    // Near the budget the class's extra bytes may be what does not fit (allocate has given the
    // kept buffers back already): the request's own granules, kept under that size.
    llvm::consumeError(p.takeError());
    held = granuleBytes(bytes);
    p = allocate(bytes, what);
  }
  if (!p)
    return p;
  std::lock_guard<std::mutex> lock(stageBuffersMutex_);
  stageBuffers_[*p] = StageBuffer{held, /*kept=*/false};
  return p;
}

void Device::freeStageBuffer(void *p) {
  if (!p)
    return;
  {
    std::lock_guard<std::mutex> lock(stageBuffersMutex_);
    auto it = stageBuffers_.find(p);
    if (it != stageBuffers_.end()) {
      // Freed twice: it is kept already (the second free must not hand it to the device while
      // the next request may take it).
      if (it->second.kept)
        return;
      it->second.kept = true;
      // Most recently freed first among equal sizes (the warmest memory).
      keptStageBuffers_.emplace_hint(keptStageBuffers_.lower_bound(it->second.size),
                                     it->second.size, p);
      keptStageBytes_ += it->second.size;
      return;
    }
  }
  free(p);
}

void Device::releaseKeptStageBuffers() {
  std::multimap<uint64_t, void *> kept;
  {
    std::lock_guard<std::mutex> lock(stageBuffersMutex_);
    kept.swap(keptStageBuffers_);
    keptStageBytes_ = 0;
    for (auto &[size, block] : kept)
      stageBuffers_.erase(block);
  }
  for (auto &[size, block] : kept)
    freeImpl(block);
}

uint64_t Device::keptStageBytes() const {
  std::lock_guard<std::mutex> lock(stageBuffersMutex_);
  return keptStageBytes_;
}

llvm::Error Device::copyToDevice(void *dst, const void *src, uint64_t bytes, Stream stream,
                                 bool async) {
  if (!async && bytes)
    ++counters_.hostSynchronizations;
  return copyToDeviceImpl(dst, src, bytes, stream, async);
}

llvm::Error Device::copyToHost(void *dst, const void *src, uint64_t bytes, Stream stream,
                               bool async) {
  if (!async && bytes)
    ++counters_.hostSynchronizations;
  return copyToHostImpl(dst, src, bytes, stream, async);
}

llvm::Error Device::synchronizeEvent(EventId event) {
  ++counters_.hostSynchronizations;
  return synchronizeEventImpl(event);
}

llvm::Error Device::synchronizeStream(Stream stream) {
  ++counters_.hostSynchronizations;
  return synchronizeStreamImpl(stream);
}

namespace {
/// Host memory; the budget is the machine's.
class CpuDevice final : public SynchronousDevice {
public:
  ~CpuDevice() override {
    for (auto &[p, size] : sizes_)
      std::free(p);
  }
  DeviceKind kind() const override { return HELM_DEVICE_CPU; }
  std::string describe() const override { return "cpu (host memory)"; }
  uint64_t capacity() const override { return UINT64_MAX; }
  uint64_t bytesInUse() const override { return inUse_; }
  uint64_t peakBytesInUse() const override { return peak_; }
  // Host memory is this device's memory too, but not an allocation a step is counted for.
  llvm::Expected<void *> allocateHost(uint64_t bytes) override { return allocateImpl(bytes, "host staging"); }
  void freeHost(void *p) override { freeImpl(p); }

protected:
  llvm::Expected<void *> allocateImpl(uint64_t bytes, llvm::StringRef what) override {
    uint64_t size = granuleBytes(bytes);
    void *p = size == UINT64_MAX ? nullptr : std::aligned_alloc(kDeviceGranule, size);
    if (!p)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("cpu: cannot allocate {0} ({1} bytes) for {2}", formatBytes(bytes), bytes, what)
              .str());
    sizes_[p] = bytes;
    inUse_ += bytes;
    peak_ = std::max(peak_, inUse_);
    return p;
  }
  void freeImpl(void *p) override {
    auto it = sizes_.find(p);
    if (it == sizes_.end())
      return;
    inUse_ -= it->second;
    sizes_.erase(it);
    std::free(p);
  }
  llvm::Error copyToDeviceImpl(void *dst, const void *src, uint64_t bytes, Stream, bool) override {
    helm::kernels::copyBytes(dst, src, bytes);
    return llvm::Error::success();
  }
  llvm::Error copyToHostImpl(void *dst, const void *src, uint64_t bytes, Stream, bool) override {
    helm::kernels::copyBytes(dst, src, bytes);
    return llvm::Error::success();
  }

private:
  std::unordered_map<void *, uint64_t> sizes_;
  uint64_t inUse_ = 0, peak_ = 0;
};
} // namespace

std::unique_ptr<Device> createCpuDevice() { return std::make_unique<CpuDevice>(); }

bool stageAllocationFailed() { return !stageAllocationError.empty(); }


} // namespace helm::rt

using helm::rt::stageDevice;

// Stage code's buffers (finalize-memref-to-llvm with use-generic-functions): served by the device
// the stage runs on, or by the C heap outside a device stage.
extern "C" void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  if (!stageDevice)
    return std::malloc(bytes ? bytes : 1);
  auto p = stageDevice->allocateStageBuffer(bytes, "a buffer of the stage's code");
  if (p)
    return *p;
  std::string message = llvm::toString(p.takeError());
  if (helm::rt::stageAllocationError.empty())
    helm::rt::stageAllocationError = message;
  return helm::rt::heapFallback(bytes);
}

extern "C" void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  // Device blocks are 256-byte aligned, which covers every alignment the lowering asks for.
  if (!stageDevice || alignment > 256)
    return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  return _mlir_memref_to_llvm_alloc(bytes);
}

extern "C" void _mlir_memref_to_llvm_free(void *p) {
  if (!p)
    return;
  if (!helm::rt::heapFallbacks.empty() && helm::rt::heapFallbacks.erase(p)) {
    std::free(p);
    return;
  }
  if (stageDevice)
    stageDevice->freeStageBuffer(p);
  else
    std::free(p);
}
