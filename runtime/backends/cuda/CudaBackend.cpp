//===- CudaBackend.cpp - the cuda device in the backend registry ----------------------===//
#include "runtime/backends/cuda/CudaBackend.h"

#include "runtime/device/Backend.h"

#if HELM_HAVE_CUDA
#include "runtime/backends/cuda/CudaDevice.h"
#endif

namespace helm::rt {

#if HELM_HAVE_CUDA
namespace {
std::optional<std::string> cudaUnavailable() {
  std::string reason;
  if (cudaAvailable(&reason))
    return std::nullopt;
  return reason;
}

/// The GPU with the run's budget (--gpu-memory; else what the driver reports free, less the
/// target's reserve) and, for a kernel-form stage, the ops over the package's kernel image.
llvm::Expected<StageBackend> createCudaBackend(const BackendOptions &options, KernelImageSource kernels) {
  CudaOptions cuda;
  cuda.budgetBytes = options.memoryBytes;
  cuda.reserveBytes = options.reservedBytes;
  auto device = createCudaDevice(cuda);
  if (!device)
    return device.takeError();
  StageBackend backend;
  backend.device = std::move(*device);
  if (!options.deviceOps)
    return backend;
  if (!kernels)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "the CUDA stage's GPU kernels were not given");
  auto image = kernels();
  if (!image)
    return image.takeError();
  auto ops = createCudaDeviceOps(*static_cast<CudaDevice *>(backend.device.get()), *image);
  if (!ops)
    return ops.takeError();
  backend.ops = std::move(*ops);
  return backend;
}
} // namespace

void registerCudaBackend() { registerBackend({HELM_DEVICE_CUDA, "a CUDA GPU", cudaUnavailable, createCudaBackend}); }

#else

void registerCudaBackend() {
  registerBackend({HELM_DEVICE_CUDA, "a CUDA GPU",
                   [] {
                     return std::optional<std::string>(
                         "this build of HELM has no CUDA support (configure with -DHELM_ENABLE_CUDA=ON)");
                   },
                   /*create=*/nullptr});
}

#endif

} // namespace helm::rt
