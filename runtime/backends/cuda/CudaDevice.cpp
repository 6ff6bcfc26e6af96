//===- CudaDevice.cpp - the cuda device: a real NVIDIA GPU through the CUDA runtime ---===//
//
// Host C++ over the CUDA runtime API, compiled by the ordinary C++ compiler. The runtime is linked
// statically (libcudart_static) and the driver (libcuda.so.1) is never linked: cudart_static
// opens it at run time, so every binary starts on a machine without a GPU driver, where
// cudaGetDeviceCount fails and cudaAvailable() says why.
//
// GPU code is loaded with the runtime's library-management calls (cudaLibraryLoadData,
// cudaLibraryGetKernel, cudaLibraryUnload) and launched with cudaLaunchKernel, which accepts a
// cudaKernel_t in place of a function symbol. These are plain runtime API functions (CUDA 12.0+),
// so no driver entry point has to be fetched by hand. Libraries are context-independent and CUDA
// loads them lazily; loadModule forces the load onto this GPU so that bad images fail there.
//
// Memory: cudaMalloc under a byte budget (allocations are counted in 256-byte granules, as on
// emu); pinned host memory from cudaMallocHost. Two non-blocking streams (compute, copy); events
// are cudaEvents without timing. Every CUDA failure becomes a one-line llvm::Error naming the call
// and cudaGetErrorString's text; nothing aborts.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaDevice.h"
#include "runtime/backends/cuda/Cublas.h"

#include "llvm/Support/FormatVariadic.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace helm::rt {

namespace {

constexpr uint32_t kDefaultSharedBytes = 48 * 1024;


llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "cuda: " + message.str());
}

/// "cuda: <call>: <cudaGetErrorString>". Also clears the runtime's last-error state, so a
/// failure that is not sticky does not resurface from a later call.
llvm::Error cudaFail(cudaError_t status, const llvm::Twine &call) {
  (void)cudaGetLastError();
  return fail(call + ": " + cudaGetErrorString(status));
}

#define HELM_CUDA_TRY(call, what)                                                                  \
  do {                                                                                             \
    cudaError_t status_ = (call);                                                                  \
    if (status_ != cudaSuccess)                                                                    \
      return cudaFail(status_, what);                                                              \
  } while (false)

/// a + b, or UINT64_MAX where that overflows (sizes read from a foreign image).
uint64_t addSat(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

template <typename T> T readAt(llvm::ArrayRef<char> image, uint64_t offset) {
  T value{};
  if (offset <= image.size() && sizeof(T) <= image.size() - offset)
    std::memcpy(&value, image.data() + offset, sizeof(T));
  return value;
}

/// The loader trusts the sizes inside a fatbin or cubin (ELF) image and would read past the end
/// of a truncated one: check them first. PTX text needs no check (loadModule NUL-terminates it).
llvm::Error checkImageSize(llvm::ArrayRef<char> image) {
  const uint64_t size = image.size();
  auto truncated = [&](const char *kind, uint64_t needed) {
    return fail(
        llvm::formatv("truncated {0} image: it needs {1} bytes, {2} given", kind, needed, size));
  };
  // Fatbin header: u32 magic, u16 version, u16 header size, u64 size of what follows.
  if (readAt<uint32_t>(image, 0) == 0xBA55ED50u) {
    uint64_t needed = addSat(readAt<uint16_t>(image, 6), readAt<uint64_t>(image, 8));
    if (size < 16 || needed > size)
      return truncated("fatbin", std::max<uint64_t>(needed, 16));
    return llvm::Error::success();
  }
  static const char kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (size >= 4 && std::memcmp(image.data(), kElfMagic, 4) == 0) {
    if (size < 64 || image[4] != 2) // only ELF64 (what ptxas and nvcc produce)
      return fail("not a 64-bit ELF image (a cubin is ELF64)");
    const uint64_t phoff = readAt<uint64_t>(image, 0x20), shoff = readAt<uint64_t>(image, 0x28);
    const uint64_t phsize = readAt<uint16_t>(image, 0x36), phnum = readAt<uint16_t>(image, 0x38);
    const uint64_t shsize = readAt<uint16_t>(image, 0x3A), shnum = readAt<uint16_t>(image, 0x3C);
    // 16-bit counts times 16-bit sizes cannot overflow; the 64-bit offsets can.
    uint64_t needed = std::max(addSat(phoff, phsize * phnum), addSat(shoff, shsize * shnum));
    if (needed > size)
      return truncated("ELF", needed);
    for (uint64_t i = 0; shsize >= 0x28 && i < shnum; ++i) {
      const uint64_t header = shoff + i * shsize;   // inside the image (checked above)
      if (readAt<uint32_t>(image, header + 4) == 8) // SHT_NOBITS: no bytes in the file
        continue;
      needed = std::max(needed, addSat(readAt<uint64_t>(image, header + 0x18),
                                       readAt<uint64_t>(image, header + 0x20)));
    }
    if (needed > size)
      return truncated("ELF", needed);
  }
  return llvm::Error::success();
}

class CudaDeviceImpl final : public CudaDevice {
public:
  explicit CudaDeviceImpl(const CudaOptions &options) : options_(options) {}
  ~CudaDeviceImpl() override;

  llvm::Error init();

  // --- Device ---------------------------------------------------------------------------
  DeviceKind kind() const override { return HELM_DEVICE_CUDA; }
  std::string describe() const override { return description_; }
  uint64_t capacity() const override { return capacity_; }
  uint64_t bytesInUse() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return inUse_;
  }
  uint64_t peakBytesInUse() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }
  llvm::Expected<void *> allocateHost(uint64_t bytes) override;
  void freeHost(void *p) override;
  llvm::Expected<EventId> createEvent() override;
  void destroyEvent(EventId event) override;
  llvm::Error recordEvent(EventId event, Stream stream) override;
  llvm::Error streamWaitEvent(Stream stream, EventId event) override;
  /// Host stage code would get device pointers from its buffer allocations: a CUDA stage is a
  /// sequence of kernel launches (launchKernel), never host code run "on" the device.
  // runHostStage is Device's: the host code of a device-calls stage runs on the calling thread
  // and its buffers come from this device; it never dereferences them, it hands them to the
  // device's kernels (runtime/device/DeviceOps.h). A stage compiled for the host (linalg code that
  // reads its buffers) is refused by the runtime before it gets here.

  // --- CudaDevice -----------------------------------------------------------------------
  int ordinal() const override { return options_.ordinal; }
  llvm::Expected<Module> loadModule(llvm::ArrayRef<char> image) override;
  void unloadModule(Module module) override;
  llvm::Expected<Function> getFunction(Module module, llvm::StringRef name) override;
  llvm::Error launchKernel(Function fn, CudaDim grid, CudaDim block, llvm::ArrayRef<void *> args,
                           uint32_t sharedBytes, Stream stream) override;
  cublasContext *cublas() const override { return cublas_; }
  CUstream_st *cudaStream(Stream stream) const override {
    return stream == Stream::compute ? compute_ : copy_;
  }

protected:
  llvm::Expected<void *> allocateImpl(uint64_t bytes, llvm::StringRef what) override;
  void freeImpl(void *p) override;
  llvm::Error copyToDeviceImpl(void *dst, const void *src, uint64_t bytes, Stream stream,
                               bool async) override;
  llvm::Error copyToHostImpl(void *dst, const void *src, uint64_t bytes, Stream stream,
                             bool async) override;
  llvm::Error synchronizeEventImpl(EventId event) override;
  llvm::Error synchronizeStreamImpl(Stream stream) override;

private:
  /// Makes this device's GPU current on the calling thread (runtime calls act on it).
  llvm::Error activate() const {
    HELM_CUDA_TRY(cudaSetDevice(options_.ordinal),
                  llvm::formatv("cudaSetDevice({0})", options_.ordinal));
    return llvm::Error::success();
  }
  llvm::Expected<cudaEvent_t> lookupEvent(EventId event) const;
  llvm::Error copy(void *dst, const void *src, uint64_t bytes, Stream stream, bool async,
                   bool toDevice);

  CudaOptions options_;
  std::string description_;
  uint64_t capacity_ = 0;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cublasHandle_t cublas_ = nullptr;

  mutable std::mutex mutex_; // guards everything below
  uint64_t inUse_ = 0, peak_ = 0;
  std::unordered_map<void *, uint64_t> blocks_; // device block -> counted size
  std::unordered_set<void *> hostBlocks_;
  std::unordered_map<EventId, cudaEvent_t> events_;
  EventId nextEvent_ = 1;
  /// Each loaded module with its JIT error log, which the driver may write to whenever it loads
  /// the module onto a GPU, so it lives as long as the module.
  std::unordered_map<Module, std::unique_ptr<char[]>> modules_;
  struct FunctionInfo {
    std::string name;
    int params = -1; // -1: this driver cannot tell
    Module module = nullptr;
  };
  std::unordered_map<Function, FunctionInfo> functions_; // from getFunction
};

llvm::Error CudaDeviceImpl::init() {
  int count = 0;
  HELM_CUDA_TRY(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (options_.ordinal < 0 || options_.ordinal >= count)
    return fail(llvm::formatv("no GPU with ordinal {0} ({1} found)", options_.ordinal, count));
  if (llvm::Error e = activate())
    return e;

  size_t freeBytes = 0, totalBytes = 0;
  HELM_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
  if (options_.budgetBytes) {
    capacity_ = options_.budgetBytes;
  } else {
    if (options_.reserveBytes >= freeBytes)
      return fail("a reserve of " + formatBytes(options_.reserveBytes) + " leaves no device memory (" +
                  formatBytes(freeBytes) + " free)");
    capacity_ = freeBytes - options_.reserveBytes;
  }
  if (capacity_ > totalBytes)
    return fail("a budget of " + formatBytes(capacity_) + " is more than the GPU's " +
                formatBytes(totalBytes));
  capacity_ = capacity_ / kDeviceGranule * kDeviceGranule;
  if (capacity_ == 0)
    return fail("the budget leaves no device memory (less than one " +
                std::to_string(kDeviceGranule) + "-byte granule)");

  HELM_CUDA_TRY(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags (compute)");
  HELM_CUDA_TRY(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags (copy)");
  auto api = cublasApi();
  if (!api)
    return fail(llvm::toString(api.takeError()));
  cublasStatus_t status = api->create(&cublas_);
  if (status != CUBLAS_STATUS_SUCCESS) {
    cublas_ = nullptr;
    return fail(llvm::Twine("cublasCreate: ") + api->statusString(status));
  }
  status = api->setStream(cublas_, compute_);
  if (status != CUBLAS_STATUS_SUCCESS)
    return fail(llvm::Twine("cublasSetStream: ") + api->statusString(status));

  cudaDeviceProp props{};
  bool known = cudaGetDeviceProperties(&props, options_.ordinal) == cudaSuccess;
  std::string name = known ? props.name : "?";
  int major = props.major, minor = props.minor, sms = props.multiProcessorCount, driver = 0;
  cudaDriverGetVersion(&driver);
  (void)cudaGetLastError();
  description_ = llvm::formatv("cuda {0} ({1}, sm_{2}{3}, {4} SMs): {5} budget, {6} of {7} free, "
                               "CUDA driver {8}.{9}, runtime {10}.{11}",
                               options_.ordinal, name, major, minor, sms, formatBytes(capacity_),
                               formatBytes(freeBytes), formatBytes(totalBytes), driver / 1000, driver % 1000 / 10,
                               CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10)
                     .str();
  return llvm::Error::success();
}

CudaDeviceImpl::~CudaDeviceImpl() {
  // Best effort: errors here (a dead context, the runtime already torn down at exit) are ignored.
  if (cudaSetDevice(options_.ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  if (compute_)
    cudaStreamSynchronize(compute_);
  if (copy_)
    cudaStreamSynchronize(copy_);
  if (cublas_) {
    // cublas_ exists, so cuBLAS was loaded: cublasApi() returns the same table.
    if (auto api = cublasApi())
      api->destroy(cublas_);
    else
      llvm::consumeError(api.takeError());
  }
  for (auto &[id, event] : events_)
    cudaEventDestroy(event);
  for (auto &[module, log] : modules_)
    cudaLibraryUnload(module);
  for (auto &[p, size] : blocks_)
    cudaFree(p);
  for (void *p : hostBlocks_)
    cudaFreeHost(p);
  if (compute_)
    cudaStreamDestroy(compute_);
  if (copy_)
    cudaStreamDestroy(copy_);
  (void)cudaGetLastError();
}

// --- Memory -------------------------------------------------------------------------------

llvm::Expected<void *> CudaDeviceImpl::allocateImpl(uint64_t bytes, llvm::StringRef what) {
  uint64_t size = granuleBytes(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (size > capacity_ - inUse_)
      return fail(llvm::formatv("cannot allocate {0} for {1}: {2} of {3} left", formatBytes(bytes), what,
                                formatBytes(capacity_ - inUse_), formatBytes(capacity_)));
    inUse_ += size; // claimed before cudaMalloc so concurrent callers cannot overshoot
  }
  void *p = nullptr;
  cudaError_t status = cudaSetDevice(options_.ordinal);
  if (status == cudaSuccess)
    status = cudaMalloc(&p, size);
  std::lock_guard<std::mutex> lock(mutex_);
  if (status != cudaSuccess) {
    inUse_ -= size;
    (void)cudaGetLastError();
    return fail(llvm::formatv("cannot allocate {0} for {1}: cudaMalloc: {2} ({3} of the {4} "
                              "budget left)",
                              formatBytes(bytes), what, cudaGetErrorString(status), formatBytes(capacity_ - inUse_),
                              formatBytes(capacity_)));
  }
  blocks_[p] = size;
  peak_ = std::max(peak_, inUse_);
  return p;
}

void CudaDeviceImpl::freeImpl(void *p) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(p);
    if (it == blocks_.end())
      return; // not ours (the caller's bug); ignoring it keeps the accounting consistent
    inUse_ -= it->second;
    blocks_.erase(it);
  }
  // cudaFree waits for the device to finish work that may still use the block: a host wait.
  ++counters_.hostSynchronizations;
  if (cudaSetDevice(options_.ordinal) != cudaSuccess || cudaFree(p) != cudaSuccess)
    (void)cudaGetLastError();
}

llvm::Expected<void *> CudaDeviceImpl::allocateHost(uint64_t bytes) {
  if (llvm::Error e = activate())
    return e;
  void *p = nullptr;
  HELM_CUDA_TRY(cudaMallocHost(&p, std::max<uint64_t>(bytes, 1)),
                "cudaMallocHost(" + formatBytes(bytes) + " of pinned host memory)");
  std::lock_guard<std::mutex> lock(mutex_);
  hostBlocks_.insert(p);
  return p;
}

void CudaDeviceImpl::freeHost(void *p) {
  if (!p)
    return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!hostBlocks_.erase(p))
      return;
  }
  if (cudaFreeHost(p) != cudaSuccess)
    (void)cudaGetLastError();
}

// --- Copies -------------------------------------------------------------------------------

llvm::Error CudaDeviceImpl::copy(void *dst, const void *src, uint64_t bytes, Stream stream,
                                 bool async, bool toDevice) {
  if (llvm::Error e = activate())
    return e;
  const char *direction = toDevice ? "host to device" : "device to host";
  cudaStream_t s = cudaStream(stream);
  if (bytes) {
    HELM_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes,
                                  toDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s),
                  llvm::formatv("cudaMemcpyAsync ({0}, {1} bytes)", direction, bytes));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (toDevice) {
      counters_.hostToDeviceBytes += bytes;
      ++counters_.hostToDeviceTransfers;
    } else {
      counters_.deviceToHostBytes += bytes;
      ++counters_.deviceToHostTransfers;
    }
  }
  if (!async && bytes)
    HELM_CUDA_TRY(
        cudaStreamSynchronize(s),
        llvm::formatv("cudaStreamSynchronize after a copy ({0}, {1} bytes)", direction, bytes));
  return llvm::Error::success();
}

llvm::Error CudaDeviceImpl::copyToDeviceImpl(void *dst, const void *src, uint64_t bytes, Stream stream,
                                         bool async) {
  return copy(dst, src, bytes, stream, async, /*toDevice=*/true);
}

llvm::Error CudaDeviceImpl::copyToHostImpl(void *dst, const void *src, uint64_t bytes, Stream stream,
                                       bool async) {
  return copy(dst, src, bytes, stream, async, /*toDevice=*/false);
}

// --- Streams and events -------------------------------------------------------------------

llvm::Expected<EventId> CudaDeviceImpl::createEvent() {
  if (llvm::Error e = activate())
    return e;
  cudaEvent_t event = nullptr;
  HELM_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                "cudaEventCreateWithFlags");
  std::lock_guard<std::mutex> lock(mutex_);
  EventId id = nextEvent_++;
  events_[id] = event;
  return id;
}

void CudaDeviceImpl::destroyEvent(EventId event) {
  cudaEvent_t e = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(event);
    if (it == events_.end())
      return;
    e = it->second;
    events_.erase(it);
  }
  if (cudaEventDestroy(e) != cudaSuccess)
    (void)cudaGetLastError();
}

llvm::Expected<cudaEvent_t> CudaDeviceImpl::lookupEvent(EventId event) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = events_.find(event);
  if (it == events_.end())
    return fail(llvm::formatv("unknown event {0}", event));
  return it->second;
}

llvm::Error CudaDeviceImpl::recordEvent(EventId event, Stream stream) {
  auto e = lookupEvent(event);
  if (!e)
    return e.takeError();
  if (llvm::Error err = activate())
    return err;
  HELM_CUDA_TRY(cudaEventRecord(*e, cudaStream(stream)), "cudaEventRecord");
  return llvm::Error::success();
}

llvm::Error CudaDeviceImpl::streamWaitEvent(Stream stream, EventId event) {
  auto e = lookupEvent(event);
  if (!e)
    return e.takeError();
  if (llvm::Error err = activate())
    return err;
  HELM_CUDA_TRY(cudaStreamWaitEvent(cudaStream(stream), *e, 0), "cudaStreamWaitEvent");
  return llvm::Error::success();
}

llvm::Error CudaDeviceImpl::synchronizeEventImpl(EventId event) {
  auto e = lookupEvent(event);
  if (!e)
    return e.takeError();
  HELM_CUDA_TRY(cudaEventSynchronize(*e), "cudaEventSynchronize");
  return llvm::Error::success();
}

llvm::Error CudaDeviceImpl::synchronizeStreamImpl(Stream stream) {
  if (llvm::Error e = activate())
    return e;
  HELM_CUDA_TRY(cudaStreamSynchronize(cudaStream(stream)), stream == Stream::compute
                                                               ? "cudaStreamSynchronize (compute)"
                                                               : "cudaStreamSynchronize (copy)");
  return llvm::Error::success();
}

// --- Modules and kernels ------------------------------------------------------------------

llvm::Expected<CudaDevice::Module> CudaDeviceImpl::loadModule(llvm::ArrayRef<char> image) {
  if (image.empty())
    return fail("cannot load an empty GPU code image");
  if (llvm::Error e = checkImageSize(image))
    return e;
  if (llvm::Error e = activate())
    return e;
  // An 8-byte aligned copy with a NUL after it: fatbins and cubins want the alignment, PTX text
  // the terminator (checkImageSize has made sure the binary formats fit in the image).
  std::vector<uint64_t> copy(image.size() / sizeof(uint64_t) + 1, 0);
  std::memcpy(copy.data(), image.data(), image.size());

  constexpr size_t kLogBytes = 1024;
  auto log = std::make_unique<char[]>(kLogBytes);
  cudaJitOption options[] = {cudaJitErrorLogBuffer, cudaJitErrorLogBufferSizeBytes};
  void *values[] = {log.get(), reinterpret_cast<void *>(uintptr_t(kLogBytes - 1))};
  auto failure = [&](cudaError_t status, llvm::StringRef call) {
    llvm::StringRef firstLine = llvm::StringRef(log.get()).trim().split('\n').first.trim();
    return cudaFail(status, llvm::formatv("{0} ({1}-byte image{2}{3})", call, image.size(),
                                          firstLine.empty() ? "" : "; JIT: ", firstLine));
  };
  cudaLibrary_t library = nullptr;
  cudaError_t status =
      cudaLibraryLoadData(&library, copy.data(), options, values, 2, nullptr, nullptr, 0);
  if (status != cudaSuccess)
    return failure(status, "cudaLibraryLoadData");

  // With lazy loading (CUDA's default) the image has hardly been looked at yet. Load it onto this
  // GPU now, through its first kernel, so that a bad image, or one without code for this GPU,
  // fails here rather than at the first launch.
  unsigned count = 0;
  status = cudaLibraryGetKernelCount(&count, library);
  cudaKernel_t first = nullptr;
  if (status == cudaSuccess && count)
    status = cudaLibraryEnumerateKernels(&first, 1, library);
  cudaFuncAttributes attributes;
  if (status == cudaSuccess && count)
    status = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void *>(first));
  if (status != cudaSuccess || count == 0) {
    llvm::Error e = status != cudaSuccess
                        ? failure(status, "loading the module onto the GPU")
                        : fail(llvm::formatv("the {0}-byte GPU code image has no kernels (not a "
                                             "fatbin, cubin or PTX module?)",
                                             image.size()));
    cudaLibraryUnload(library);
    (void)cudaGetLastError();
    return e;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  modules_[library] = std::move(log);
  return library;
}

void CudaDeviceImpl::unloadModule(Module module) {
  if (!module)
    return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!modules_.erase(module))
      return;
    // Its kernels die with it; a later module may get the same kernel handles.
    for (auto it = functions_.begin(); it != functions_.end();)
      it = it->second.module == module ? functions_.erase(it) : std::next(it);
  }
  if (cudaLibraryUnload(module) != cudaSuccess)
    (void)cudaGetLastError();
}

llvm::Expected<CudaDevice::Function> CudaDeviceImpl::getFunction(Module module,
                                                                 llvm::StringRef name) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!modules_.count(module))
      return fail("cannot look up " + name + ": the module is not loaded");
  }
  if (llvm::Error e = activate())
    return e;
  cudaKernel_t kernel = nullptr;
  HELM_CUDA_TRY(cudaLibraryGetKernel(&kernel, module, name.str().c_str()),
                "cudaLibraryGetKernel(" + name + ")");
  // Count the parameters (the first index the driver rejects) so that launches can check their
  // argument lists; -1 where this driver cannot say.
  int params = -1;
  for (int i = 0; i <= 256; ++i) {
    size_t offset = 0, size = 0;
    cudaError_t status =
        cudaFuncGetParamInfo(reinterpret_cast<const void *>(kernel), size_t(i), &offset, &size);
    if (status == cudaSuccess)
      continue;
    (void)cudaGetLastError();
    if (status == cudaErrorInvalidValue)
      params = i;
    break;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  functions_[kernel] = FunctionInfo{name.str(), params, module};
  return kernel;
}

llvm::Error CudaDeviceImpl::launchKernel(Function fn, CudaDim grid, CudaDim block,
                                         llvm::ArrayRef<void *> args, uint32_t sharedBytes,
                                         Stream stream) {
  if (!fn)
    return fail("cannot launch a null kernel");
  FunctionInfo info;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = functions_.find(fn);
    if (it == functions_.end())
      return fail("cannot launch a kernel that getFunction did not return (or whose module was "
                  "unloaded)");
    info = it->second;
  }
  const std::string &name = info.name;
  const int params = info.params;
  if (params >= 0 && size_t(params) != args.size())
    return fail(llvm::formatv("cannot launch {0}: it takes {1} arguments, {2} given", name, params,
                              args.size()));
  if (llvm::Error e = activate())
    return e;
  if (sharedBytes > kDefaultSharedBytes)
    HELM_CUDA_TRY(cudaKernelSetAttributeForDevice(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  int(sharedBytes), options_.ordinal),
                  llvm::formatv("cudaKernelSetAttributeForDevice({0}, {1} bytes of dynamic "
                                "shared memory)",
                                name, sharedBytes));
  HELM_CUDA_TRY(
      cudaLaunchKernel(reinterpret_cast<const void *>(fn), dim3(grid.x, grid.y, grid.z),
                       dim3(block.x, block.y, block.z), const_cast<void **>(args.data()),
                       sharedBytes, cudaStream(stream)),
      llvm::formatv("cudaLaunchKernel({0}, grid {1}x{2}x{3}, block {4}x{5}x{6}, {7} bytes "
                    "of shared memory)",
                    name, grid.x, grid.y, grid.z, block.x, block.y, block.z, sharedBytes));
  return llvm::Error::success();
}

} // namespace

CudaDevice::~CudaDevice() = default;

llvm::Expected<std::unique_ptr<CudaDevice>> CudaDevice::create(const CudaOptions &options) {
  std::string reason;
  if (!cudaAvailable(&reason))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), reason);
  auto device = std::make_unique<CudaDeviceImpl>(options);
  if (llvm::Error e = device->init())
    return e;
  return std::unique_ptr<CudaDevice>(std::move(device));
}

bool cudaAvailable(std::string *reason) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (reason)
      *reason = llvm::formatv("no CUDA device found (cudaGetDeviceCount: {0})",
                              cudaGetErrorString(status))
                    .str();
    return false;
  }
  if (count == 0) {
    if (reason)
      *reason = "no CUDA device found (cudaGetDeviceCount: 0 devices)";
    return false;
  }
  if (reason)
    reason->clear();
  return true;
}

llvm::Expected<std::unique_ptr<Device>> createCudaDevice(const CudaOptions &options) {
  auto device = CudaDevice::create(options);
  if (!device)
    return device.takeError();
  return std::unique_ptr<Device>(std::move(*device));
}

} // namespace helm::rt
