//===- RmsNorm.cu - helm_cuda_rms_norm: RMSNorm over rows ---------------------------===//
//
// Math (runtime/device/DeviceOps.h, rmsNorm): for each of `rows` rows of `width` elements, with ss
// the f32 sum of squares of the row,
//   inv     = 1 / sqrt(ss / width + eps)                  (f32, IEEE sqrt and division)
//   y[r, i] = round(round(x[r, i] * inv) * weight[i])
// where the inner rounding is to the storage type, as the reference framework rounds it (a no-op
// for f32). A row of the hidden size is the usual RMSNorm; a row of the head dimension is Qwen3's
// per-head q/k norm (helm.rms_norm with gamma of that size).
// The sum of squares is accumulated in f32 (per thread, then a block tree reduction).
//
// Launch: any grid (rows are grid-strided; `rows` blocks is natural), blockDim.x a multiple of 32
// up to 1024 (256 is a good default; the width rounded up to 32 for short rows), no dynamic
// shared memory. `y` may equal `x`.
//
// helm_cuda_rms_norm(const T *x, const T *weight, T *y, int64_t rows, int32_t width, float eps)
// T = float; _f16 / _bf16 variants take __half / __nv_bfloat16 for x, weight and y.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

namespace helm_cuda {

template <typename T>
__device__ void rmsNorm(const T *x, const T *weight, T *y, int64_t rows, int32_t width,
                        float eps) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * width;
    T *yr = y + row * width;
    float squares = 0.0f;
    for (int32_t i = threadIdx.x; i < width; i += blockDim.x) {
      float v = load(xr + i);
      squares = fmaf(v, v, squares);
    }
    const float inv = 1.0f / sqrtf(blockSum(squares) / float(width) + eps);
    for (int32_t i = threadIdx.x; i < width; i += blockDim.x)
      store(yr + i, __fmul_rn(roundTo<T>(__fmul_rn(load(xr + i), inv)), load(weight + i)));
  }
}

} // namespace helm_cuda

#define HELM_RMS_NORM_PARAMS(T)                                                                    \
  (const T *x, const T *weight, T *y, int64_t rows, int32_t width, float eps)
HELM_CUDA_TYPED_KERNELS(helm_cuda_rms_norm, helm_cuda::rmsNorm, HELM_RMS_NORM_PARAMS,
                        (x, weight, y, rows, width, eps))
