//===- Elementwise.cu - add, swiglu, geglu, scale, softcap, bias add, conversion ----===//
//
// Math, for i in [0, n) (runtime/device/DeviceOps.h), in f32 and rounded to the storage type:
//   helm_cuda_add:      y[i] = round(a[i] + b[i])
//   helm_cuda_swiglu:   y[i] = round(round(g / (1 + exp(-g))) * up[i]),  g = gate[i]
//                       (the inner rounding of silu(g) is the reference framework's; a no-op for
//                       f32)
//   helm_cuda_geglu:    y[i] = round(round(gelu_tanh(g)) * up[i]), gelu_tanh(g) =
//                       0.5 g (1 + tanh(0.7978845608 g (1 + 0.044715 g^2)))
//   helm_cuda_scale:    y[i] = round(x[i] * factor)
//   helm_cuda_softcap:  y[i] = round(tanh(x[i] * (1 / cap)) * cap)
//   helm_cuda_add_bias: y[r, c] = round(y[r, c] + bias[c]) over rows x cols (linear's bias, added
//                       to the already rounded product, as DeviceOps.h specifies)
//   helm_cuda_convert:  y[i] = x[i] converted from x_dtype to y_dtype (codes of kernels::DType:
//                       0 f32, 1 f16, 2 bf16): widened exactly to f32, then rounded once to
//                       nearest even. Unknown codes leave y untouched (the host validates them).
//
// Launch: any 1-D grid and block (grid-stride loop); e.g. block 256, grid min(ceil(n / 256),
// 65535). `y` may equal an input (not for convert between types of different sizes).
//
// helm_cuda_add(const T *a, const T *b, T *y, int64_t n)
// helm_cuda_swiglu(const T *gate, const T *up, T *y, int64_t n)
// helm_cuda_geglu(const T *gate, const T *up, T *y, int64_t n)
// helm_cuda_scale(const T *x, T *y, int64_t n, float factor)
// helm_cuda_softcap(const T *x, T *y, int64_t n, float cap)
// helm_cuda_add_bias(T *y, const T *bias, int64_t rows, int64_t cols)
// T = float; _f16 / _bf16 variants take __half / __nv_bfloat16.
// helm_cuda_convert(const void *x, void *y, int64_t n, int32_t x_dtype, int32_t y_dtype)
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"
#include "KernelParams.h"

namespace helm_cuda {

template <typename T> __device__ void add(const T *a, const T *b, T *y, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    store(y + i, load(a + i) + load(b + i));
}

template <typename T> __device__ void swiglu(const T *gate, const T *up, T *y, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    const float g = load(gate + i);
    store(y + i, __fmul_rn(roundTo<T>(g / (1.0f + expf(-g))), load(up + i)));
  }
}

template <typename T> __device__ void geglu(const T *gate, const T *up, T *y, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    const float g = load(gate + i);
    const float inner = __fadd_rn(1.0f, __fmul_rn(0.044715f, __fmul_rn(g, g)));
    const float t = __fadd_rn(1.0f, tanhf(__fmul_rn(__fmul_rn(0.7978845608028654f, g), inner)));
    store(y + i, __fmul_rn(roundTo<T>(__fmul_rn(__fmul_rn(0.5f, g), t)), load(up + i)));
  }
}

template <typename T> __device__ void scale(const T *x, T *y, int64_t n, float factor) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    store(y + i, __fmul_rn(load(x + i), factor));
}

template <typename T> __device__ void softcap(const T *x, T *y, int64_t n, float cap) {
  const float inverse = 1.0f / cap;
  for (int64_t i = gridStart(); i < n; i += gridStride())
    store(y + i, __fmul_rn(tanhf(__fmul_rn(load(x + i), inverse)), cap));
}

template <typename T> __device__ void addBias(T *y, const T *bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = gridStart(); i < n; i += gridStride())
    store(y + i, load(y + i) + load(bias + i % cols));
}

template <typename From, typename To> __device__ void convertAs(const void *x, void *y, int64_t n) {
  const From *src = static_cast<const From *>(x);
  To *dst = static_cast<To *>(y);
  for (int64_t i = gridStart(); i < n; i += gridStride())
    store(dst + i, load(src + i));
}

template <typename From>
__device__ void convertFrom(const void *x, void *y, int64_t n, int32_t yDtype) {
  switch (yDtype) {
  case kDTypeF32: convertAs<From, float>(x, y, n); return;
  case kDTypeF16: convertAs<From, __half>(x, y, n); return;
  case kDTypeBf16: convertAs<From, __nv_bfloat16>(x, y, n); return;
  }
}

} // namespace helm_cuda

#define HELM_ADD_PARAMS(T) (const T *a, const T *b, T *y, int64_t n)
HELM_CUDA_TYPED_KERNELS(helm_cuda_add, helm_cuda::add, HELM_ADD_PARAMS, (a, b, y, n))

#define HELM_SWIGLU_PARAMS(T) (const T *gate, const T *up, T *y, int64_t n)
HELM_CUDA_TYPED_KERNELS(helm_cuda_swiglu, helm_cuda::swiglu, HELM_SWIGLU_PARAMS, (gate, up, y, n))

#define HELM_GEGLU_PARAMS(T) (const T *gate, const T *up, T *y, int64_t n)
HELM_CUDA_TYPED_KERNELS(helm_cuda_geglu, helm_cuda::geglu, HELM_GEGLU_PARAMS, (gate, up, y, n))

#define HELM_SCALE_PARAMS(T) (const T *x, T *y, int64_t n, float factor)
HELM_CUDA_TYPED_KERNELS(helm_cuda_scale, helm_cuda::scale, HELM_SCALE_PARAMS, (x, y, n, factor))

#define HELM_SOFTCAP_PARAMS(T) (const T *x, T *y, int64_t n, float cap)
HELM_CUDA_TYPED_KERNELS(helm_cuda_softcap, helm_cuda::softcap, HELM_SOFTCAP_PARAMS, (x, y, n, cap))

#define HELM_ADD_BIAS_PARAMS(T) (T * y, const T *bias, int64_t rows, int64_t cols)
HELM_CUDA_TYPED_KERNELS(helm_cuda_add_bias, helm_cuda::addBias, HELM_ADD_BIAS_PARAMS,
                        (y, bias, rows, cols))

extern "C" __global__ void helm_cuda_convert(const void *x, void *y, int64_t n, int32_t x_dtype,
                                             int32_t y_dtype) {
  switch (x_dtype) {
  case helm_cuda::kDTypeF32: helm_cuda::convertFrom<float>(x, y, n, y_dtype); return;
  case helm_cuda::kDTypeF16: helm_cuda::convertFrom<__half>(x, y, n, y_dtype); return;
  case helm_cuda::kDTypeBf16: helm_cuda::convertFrom<__nv_bfloat16>(x, y, n, y_dtype); return;
  }
}
