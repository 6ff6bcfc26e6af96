//===- Rope.cu - helm_cuda_rope: rotary position embedding, half ("neox") rotation --===//
//
// Math: x is [rows, heads * head_dim]; row r is a token at position p = positions[r]. In every
// head the first `rotary_dim` channels rotate in pairs (c, c + rotary_dim / 2) for
// c in [0, rotary_dim / 2) (Hugging Face `rotate_half`):
//   f = theta^(-2c / rotary_dim),  a = p * f
//   y[c]                  = x[c] * cos(a) - x[c + rotary_dim/2] * sin(a)
//   y[c + rotary_dim / 2] = x[c] * sin(a) + x[c + rotary_dim/2] * cos(a)
// and channels [rotary_dim, head_dim) are copied unchanged. The angle and its sine and cosine are
// computed in f64 (once per row and pair, shared by all heads), so large positions keep full f32
// accuracy; the rotation itself is f32.
//
// Launch: any grid (rows are grid-strided; `rows` blocks is natural), any blockDim.x (threads
// stride over the pairs; rotary_dim / 2 rounded up to 32 is natural), no dynamic shared memory.
// `y` may equal `x` (in place).
//
// helm_cuda_rope(const T *x, T *y, const int64_t *positions, int64_t rows, int32_t heads,
//                int32_t head_dim, int32_t rotary_dim, float theta)
// T = float; _f16 / _bf16 variants take __half / __nv_bfloat16 for x and y.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

namespace helm_cuda {

template <typename T>
__device__ void rope(const T *x, T *y, const int64_t *positions, int64_t rows, int32_t heads,
                     int32_t headDim, int32_t rotaryDim, float theta) {
  const int32_t half = rotaryDim / 2;
  const int64_t rowWidth = int64_t(heads) * headDim;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * rowWidth;
    T *yr = y + row * rowWidth;
    const double position = double(positions[row]);
    for (int32_t c = threadIdx.x; c < half; c += blockDim.x) {
      const double angle = position * pow(double(theta), -2.0 * c / rotaryDim);
      double sinA, cosA;
      sincos(angle, &sinA, &cosA);
      const float s = float(sinA), co = float(cosA);
      for (int32_t h = 0; h < heads; ++h) {
        const int64_t base = int64_t(h) * headDim;
        const float x0 = load(xr + base + c), x1 = load(xr + base + c + half);
        store(yr + base + c, x0 * co - x1 * s);
        store(yr + base + c + half, x0 * s + x1 * co);
      }
    }
    if (x != y) {
      const int32_t pass = headDim - rotaryDim;
      for (int32_t k = threadIdx.x; k < heads * pass; k += blockDim.x) {
        const int64_t at = int64_t(k / pass) * headDim + rotaryDim + k % pass;
        yr[at] = xr[at];
      }
    }
  }
}

} // namespace helm_cuda

#define HELM_ROPE_PARAMS(T)                                                                        \
  (const T *x, T *y, const int64_t *positions, int64_t rows, int32_t heads, int32_t head_dim,      \
   int32_t rotary_dim, float theta)
HELM_CUDA_TYPED_KERNELS(helm_cuda_rope, helm_cuda::rope, HELM_ROPE_PARAMS,
                        (x, y, positions, rows, heads, head_dim, rotary_dim, theta))
