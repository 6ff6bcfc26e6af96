//===- CudaKernels.h - the GPU code image of HELM's CUDA kernels ------------------===//
//
// kernels/cuda/*.cu are built by nvcc into one fatbin (SASS for sm_86, sm_89 and sm_90 plus
// compute_90 PTX that newer GPUs JIT-compile; HELM_CUDA_KERNEL_ARCHS in CMakeLists.txt) and
// embedded here as bytes. Load it with CudaDevice::loadModule and look kernels up by name:
//
//   helm_cuda_rms_norm(const T *x, const T *weight, T *y, int64_t rows, int32_t width, float eps)
//   helm_cuda_add(const T *a, const T *b, T *y, int64_t n)
//   helm_cuda_swiglu(const T *gate, const T *up, T *y, int64_t n)
//   helm_cuda_geglu(const T *gate, const T *up, T *y, int64_t n)
//   helm_cuda_scale(const T *x, T *y, int64_t n, float factor)
//   helm_cuda_softcap(const T *x, T *y, int64_t n, float cap)
//   helm_cuda_add_bias(T *y, const T *bias, int64_t rows, int64_t cols)
//   helm_cuda_rope(const T *x, T *y, const int64_t *positions, int64_t rows, int32_t heads,
//                  int32_t head_dim, int32_t rotary_dim, double theta, const float *freq_factors,
//                  int32_t interleaved)
//   helm_cuda_embed(const T *table, const int64_t *ids, T *y, int64_t rows, int64_t vocab,
//                   int32_t width)
//   helm_cuda_kv_append(const T *k, const T *v, KvAppendBatch batch, int32_t width)
//   helm_cuda_attention(const T *q, T *out, float *state, KvSpanBatch spans, int32_t heads,
//                       int32_t group, int32_t head_dim, int32_t kv_width, int64_t past,
//                       int64_t window, float scale, int32_t flags, float softcap)
//   helm_cuda_convert(const void *x, void *y, int64_t n, int32_t x_dtype, int32_t y_dtype)
//
// T is float; each kernel but helm_cuda_convert (which takes dtype codes) also exists as NAME_f16
// (__half) and NAME_bf16 (__nv_bfloat16), which compute in f32. The by-value structs
// (KvAppendBatch, KvSpanBatch) and the attention flags are in KernelParams.h, shared with the host
// code that fills them. The math (that of runtime/device/DeviceOps.h, which CudaDeviceOps.cpp
// implements with these kernels) and the launch shapes each kernel accepts are in its .cu file.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CUDA_CUDAKERNELS_H
#define HELM_KERNELS_CUDA_CUDAKERNELS_H

#include "llvm/ADT/ArrayRef.h"

namespace helm::kernels {

/// The fatbin, 64-byte aligned, valid for the life of the program.
llvm::ArrayRef<char> cudaKernelImage();

} // namespace helm::kernels

#endif
