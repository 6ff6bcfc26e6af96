//===- Rope.cu - helm_cuda_rope: rotary position embedding (neox or interleaved pairs) ----===//
//
// Math (runtime/device/DeviceOps.h, rope): x is [rows, heads * head_dim]; row r is a token at
// position p = positions[r]. In every head the first `rotary_dim` channels rotate in pairs
// (i0, i1) = (c, c + rotary_dim / 2) (Hugging Face `rotate_half`, "neox"), or (2c, 2c + 1) when
// `interleaved` (GPT-J), for c in [0, rotary_dim / 2):
//   f = float(1 / (theta^(2c / rotary_dim) * factor_c))
//                                            the ratio 2c / rotary_dim in f32, the power and the
//                                            product in f64; factor_c = freq_factors[c], or 1 when
//                                            freq_factors is null
//   a = float(p) * f                          in f32
//   C = round(cos a), S = round(sin a)        cos and sin in f32, rounded to the storage type
//   y[i0] = round(round(x[i0] * C) - round(x[i1] * S))
//   y[i1] = round(round(x[i1] * C) + round(x[i0] * S))
// and channels [rotary_dim, head_dim) are copied unchanged. These are the CPU lowering's steps
// (passes/codegen/LowerToLinalg.cpp), so the angle carries the same f32 error as on the host; the inner
// roundings are no-ops for f32. f is computed once per pair and block, C and S once per row and
// pair (shared by all heads).
//
// Launch: any grid (rows are grid-strided; min(rows, a few thousand) blocks is natural), any
// blockDim.x (threads stride over the pairs; rotary_dim / 2 rounded up to 32 is natural), no
// dynamic shared memory. `y` may equal `x` (in place). rotary_dim must be even and at most
// head_dim.
//
// helm_cuda_rope(const T *x, T *y, const int64_t *positions, int64_t rows, int32_t heads,
//                int32_t head_dim, int32_t rotary_dim, double theta, const float *freq_factors,
//                int32_t interleaved)
// T = float; _f16 / _bf16 variants take __half / __nv_bfloat16 for x and y.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

namespace helm_cuda {

template <typename T>
__device__ void rope(const T *x, T *y, const int64_t *positions, int64_t rows, int32_t heads,
                     int32_t headDim, int32_t rotaryDim, double theta, const float *freqFactors,
                     int32_t interleaved) {
  const int32_t half = rotaryDim / 2;
  const int64_t rowWidth = int64_t(heads) * headDim;
  for (int32_t c = threadIdx.x; c < half; c += blockDim.x) {
    const float ratio = float(2 * c) / float(rotaryDim);
    const float freq =
        float(1.0 / (pow(theta, double(ratio)) * (freqFactors ? double(freqFactors[c]) : 1.0)));
    const int32_t i0 = interleaved ? 2 * c : c, i1 = interleaved ? 2 * c + 1 : c + half;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
      const float angle = __fmul_rn(float(positions[row]), freq);
      float sinA, cosA;
      sincosf(angle, &sinA, &cosA);
      const float co = roundTo<T>(cosA), s = roundTo<T>(sinA);
      const T *xr = x + row * rowWidth;
      T *yr = y + row * rowWidth;
      for (int32_t h = 0; h < heads; ++h) {
        const int64_t base = int64_t(h) * headDim;
        const float x0 = load(xr + base + i0), x1 = load(xr + base + i1);
        store(yr + base + i0, roundTo<T>(__fmul_rn(x0, co)) - roundTo<T>(__fmul_rn(x1, s)));
        store(yr + base + i1, roundTo<T>(__fmul_rn(x1, co)) + roundTo<T>(__fmul_rn(x0, s)));
      }
    }
  }
  const int32_t pass = headDim - rotaryDim;
  if (x == y || pass == 0)
    return;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * rowWidth;
    T *yr = y + row * rowWidth;
    for (int32_t k = threadIdx.x; k < heads * pass; k += blockDim.x) {
      const int64_t at = int64_t(k / pass) * headDim + rotaryDim + k % pass;
      yr[at] = xr[at];
    }
  }
}

} // namespace helm_cuda

#define HELM_ROPE_PARAMS(T)                                                                        \
  (const T *x, T *y, const int64_t *positions, int64_t rows, int32_t heads, int32_t head_dim,      \
   int32_t rotary_dim, double theta, const float *freq_factors, int32_t interleaved)
HELM_CUDA_TYPED_KERNELS(helm_cuda_rope, helm_cuda::rope, HELM_ROPE_PARAMS,
                        (x, y, positions, rows, heads, head_dim, rotary_dim, theta, freq_factors,
                         interleaved))
