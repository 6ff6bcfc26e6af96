//===- CudaDeviceOps.cpp - DeviceOps on a CUDA GPU: kernels/cuda and cuBLAS ----------===//
#include "runtime/core/DeviceOps.h"

#include "llvm/Support/Error.h"

namespace helm::rt {

llvm::Expected<std::unique_ptr<DeviceOps>> createCudaDeviceOps(CudaDevice &,
                                                              llvm::ArrayRef<char>) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "the CUDA device kernels are not built yet");
}

} // namespace helm::rt
