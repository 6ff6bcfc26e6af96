//===- CudaBackend.h - the cuda device in the backend registry ------------------------===//
#ifndef HELM_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H
#define HELM_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H

namespace helm::rt {

/// Registers the cuda backend: CudaDevice and CudaDeviceOps, which load the GPU kernels the stage
/// launches (the package's kernel image). In a build without CUDA it registers the kind with the
/// reason no device can be made, so that a package for a CUDA GPU is refused by name.
void registerCudaBackend();

} // namespace helm::rt

#endif
