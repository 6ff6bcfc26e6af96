//===- Elementwise.cu - helm_cuda_add (residual add) and helm_cuda_swiglu -----------===//
//
// Math, for i in [0, n):
//   helm_cuda_add:    y[i] = a[i] + b[i]
//   helm_cuda_swiglu: y[i] = silu(gate[i]) * up[i],  silu(g) = g / (1 + exp(-g))
// computed in f32 and rounded once to the storage type.
//
// Launch: any 1-D grid and block (grid-stride loop); e.g. block 256, grid min(ceil(n / 256),
// 4 * multiprocessors * 8). `y` may equal an input.
//
// helm_cuda_add(const T *a, const T *b, T *y, int64_t n)
// helm_cuda_swiglu(const T *gate, const T *up, T *y, int64_t n)
// T = float; _f16 / _bf16 variants take __half / __nv_bfloat16.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

namespace helm_cuda {

template <typename T> __device__ void add(const T *a, const T *b, T *y, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    store(y + i, load(a + i) + load(b + i));
}

template <typename T> __device__ void swiglu(const T *gate, const T *up, T *y, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    const float g = load(gate + i);
    store(y + i, g / (1.0f + expf(-g)) * load(up + i));
  }
}

} // namespace helm_cuda

#define HELM_ADD_PARAMS(T) (const T *a, const T *b, T *y, int64_t n)
HELM_CUDA_TYPED_KERNELS(helm_cuda_add, helm_cuda::add, HELM_ADD_PARAMS, (a, b, y, n))

#define HELM_SWIGLU_PARAMS(T) (const T *gate, const T *up, T *y, int64_t n)
HELM_CUDA_TYPED_KERNELS(helm_cuda_swiglu, helm_cuda::swiglu, HELM_SWIGLU_PARAMS, (gate, up, y, n))
