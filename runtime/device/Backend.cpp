//===- Backend.cpp - DeviceKind -> the device and device ops of a stage --------------===//
#include "runtime/device/Backend.h"

#include "contract/manifest_schema.h"
#include "runtime/backends/cuda/CudaDevice.h"

namespace helm::rt {

std::optional<DeviceKind> parseTargetDevice(llvm::StringRef name) {
  // A GPU stage runs on one of these; "cpu" is no GPU stage's device.
  for (DeviceKind kind : {DeviceKind::emu, DeviceKind::cuda})
    if (name == deviceKindName(kind))
      return kind;
  return std::nullopt;
}

std::optional<std::string> missingDevice(DeviceKind kind, llvm::StringRef targetName) {
  std::string reason;
  if (kind != DeviceKind::cuda || cudaAvailable(&reason))
    return std::nullopt;
  return "the package's GPU stage runs on a CUDA GPU ('" + targetName.str() +
         "'), and there is none here: " + reason +
         " (compile with --target=emu:<name> to run it on the emulated GPU)";
}

namespace {

llvm::Expected<StageBackend> hostBackend(std::unique_ptr<Device> device, bool deviceOps) {
  StageBackend backend;
  backend.device = std::move(device);
  if (deviceOps)
    backend.ops = createHostDeviceOps();
  return backend;
}

llvm::Expected<StageBackend> cudaBackend(const BackendOptions &options,
                                         KernelImageSource cudaKernels) {
  if (std::optional<std::string> missing = missingDevice(DeviceKind::cuda, options.targetName))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), *missing);
  auto device = createCudaDevice(options.cuda);
  if (!device)
    return device.takeError();
  StageBackend backend;
  backend.device = std::move(*device);
  if (options.deviceOps) {
    if (!cudaKernels)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "the CUDA stage's GPU kernels were not given");
    auto image = cudaKernels();
    if (!image)
      return image.takeError();
    auto ops = createCudaDeviceOps(*static_cast<CudaDevice *>(backend.device.get()), *image);
    if (!ops)
      return ops.takeError();
    backend.ops = std::move(*ops);
  }
  return backend;
}

} // namespace

llvm::Expected<StageBackend> createStageBackend(DeviceKind kind, const BackendOptions &options,
                                                KernelImageSource cudaKernels) {
  switch (kind) {
  case DeviceKind::cpu:
    return hostBackend(createCpuDevice(), options.deviceOps);
  case DeviceKind::emu: {
    auto device = createEmuDevice(options.emu);
    if (!device)
      return device.takeError();
    return hostBackend(std::move(*device), options.deviceOps);
  }
  case DeviceKind::cuda:
    return cudaBackend(options, cudaKernels);
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "unknown device kind");
}

} // namespace helm::rt
