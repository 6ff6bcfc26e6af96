//===- Device.cpp - device basics, the cpu device, stage buffer allocation -----------===//
#include "runtime/device/Device.h"
#include "contract/manifest_schema.h"
#include "kernels/common/Numeric.h"
#include "runtime/device/StageMemory.h"

#include "llvm/Support/FormatVariadic.h"

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

llvm::Error Device::runHostStage(llvm::function_ref<llvm::Error()> body) {
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

namespace {
/// Host memory; the budget is the machine's.
class CpuDevice final : public SynchronousDevice {
public:
  DeviceKind kind() const override { return HELM_DEVICE_CPU; }
  std::string describe() const override { return "cpu (host memory)"; }
  uint64_t capacity() const override { return UINT64_MAX; }
  uint64_t bytesInUse() const override { return inUse_; }
  uint64_t peakBytesInUse() const override { return peak_; }
  llvm::Expected<void *> allocate(uint64_t bytes, llvm::StringRef what) override {
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
  void free(void *p) override {
    auto it = sizes_.find(p);
    if (it == sizes_.end())
      return;
    inUse_ -= it->second;
    sizes_.erase(it);
    std::free(p);
  }
  llvm::Expected<void *> allocateHost(uint64_t bytes) override { return allocate(bytes, "host staging"); }
  void freeHost(void *p) override { free(p); }
  llvm::Error copyToDevice(void *dst, const void *src, uint64_t bytes, Stream, bool) override {
    helm::kernels::copyBytes(dst, src, bytes);
    return llvm::Error::success();
  }
  llvm::Error copyToHost(void *dst, const void *src, uint64_t bytes, Stream, bool) override {
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
  auto p = stageDevice->allocate(bytes, "a buffer of the stage's code");
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
    stageDevice->free(p);
  else
    std::free(p);
}
