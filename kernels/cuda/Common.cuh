//===- Common.cuh - element types and a block reduction shared by the CUDA kernels -===//
//
// Every kernel computes in f32 whatever its storage type: `load` widens an element to f32 and
// `store` rounds an f32 to the storage type (round to nearest even); `roundTo<T>` is the rounding
// of an intermediate (runtime/device/DeviceOps.h says which intermediates are rounded).
//
// nvcc contracts a * b + c into a fused multiply-add by default. Where DeviceOps.h rounds a
// product on its own (the host rounds it), the kernels use __fmul_rn, which is never contracted,
// so that f32 results stay close to the host's.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CUDA_COMMON_CUH
#define HELM_KERNELS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace helm_cuda {

__device__ __forceinline__ float load(const float *p) { return *p; }
__device__ __forceinline__ float load(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/// `v` rounded to T and widened back: one arithmetic step in T, where the reference framework
/// rounds an intermediate result to the storage type (the identity for f32).
template <typename T> __device__ __forceinline__ float roundTo(float v);
template <> __device__ __forceinline__ float roundTo<float>(float v) { return v; }
template <> __device__ __forceinline__ float roundTo<__half>(float v) {
  return __half2float(__float2half_rn(v));
}
template <> __device__ __forceinline__ float roundTo<__nv_bfloat16>(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

/// Sum of `v` over the warp, returned to every lane (all 32 lanes must call it).
__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// Sum of `v` over the block, returned to every thread. blockDim.x must be a multiple of 32 (at
/// most 1024) and every thread of the block must call it.
__device__ __forceinline__ float blockSum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  v = warpSum(v);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warpSum(lane < (blockDim.x >> 5) ? partial[lane] : 0.0f);
    if (lane == 0)
      total = v;
  }
  __syncthreads();
  return total;
}

/// First element index of this thread in a 1-D grid-stride loop, and the stride.
__device__ __forceinline__ int64_t gridStart() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t gridStride() { return int64_t(gridDim.x) * blockDim.x; }

} // namespace helm_cuda

/// Defines the extern "C" entry points `NAME` (f32), `NAME_f16` and `NAME_bf16`, each calling
/// `IMPL<T> ARGS`. PARAMS is a function-like macro giving the parameter list for element type T.
#define HELM_CUDA_TYPED_KERNELS(NAME, IMPL, PARAMS, ARGS)                                         \
  extern "C" __global__ void NAME PARAMS(float) { IMPL<float> ARGS; }                             \
  extern "C" __global__ void NAME##_f16 PARAMS(__half) { IMPL<__half> ARGS; }                     \
  extern "C" __global__ void NAME##_bf16 PARAMS(__nv_bfloat16) { IMPL<__nv_bfloat16> ARGS; }

#endif
