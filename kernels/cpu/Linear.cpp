//===- Linear.cpp - helm_k_linear: a simple, correct, threaded GEMM/GEMV ---------===//
//
// The reference implementation of the ABI (speed is issue 5's work): inputs are widened to f32,
// products accumulate in f32 and each output is rounded once to its element type.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Numeric.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/helm_kernels.h"

#include <algorithm>
#include <vector>

using namespace helm::kernels;

extern "C" void helm_k_linear(const void *x, int32_t xDtype, const void *w, int32_t wDtype,
                              int32_t wTransposed, void *y, int32_t yDtype, int64_t M, int64_t K,
                              int64_t N) {
  if (M <= 0 || N <= 0)
    return;
  auto xd = DType(xDtype), wd = DType(wDtype), yd = DType(yDtype);
  std::vector<float> xf(static_cast<size_t>(M * K));
  widen(x, xd, xf.data(), M * K);
  size_t wElem = wd == DType::f32 ? 4 : 2;
  auto *wBytes = static_cast<const char *>(w);
  if (wTransposed) {
    // W is [N, K]: one dot product per (m, n); each thread widens its weight rows once.
    pool().parallelFor(N, 8, [&](int64_t n0, int64_t n1) {
      std::vector<float> row(static_cast<size_t>(K));
      for (int64_t n = n0; n < n1; ++n) {
        widen(wBytes + size_t(n * K) * wElem, wd, row.data(), K);
        for (int64_t m = 0; m < M; ++m) {
          const float *xr = xf.data() + m * K;
          float acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += xr[k] * row[k];
          storeAs(y, yd, m * N + n, acc);
        }
      }
    });
    return;
  }
  // W is [K, N]: each thread owns a block of columns and streams the rows of W through it.
  pool().parallelFor(N, 16, [&](int64_t n0, int64_t n1) {
    constexpr int64_t kBlock = 256;
    std::vector<float> wrow(kBlock), acc;
    for (int64_t c0 = n0; c0 < n1; c0 += kBlock) {
      int64_t cols = std::min(kBlock, n1 - c0);
      acc.assign(static_cast<size_t>(M * cols), 0.0f);
      for (int64_t k = 0; k < K; ++k) {
        widen(wBytes + size_t(k * N + c0) * wElem, wd, wrow.data(), cols);
        for (int64_t m = 0; m < M; ++m) {
          float xv = xf[size_t(m * K + k)];
          float *a = acc.data() + m * cols;
          for (int64_t c = 0; c < cols; ++c)
            a[c] += xv * wrow[c];
        }
      }
      for (int64_t m = 0; m < M; ++m)
        for (int64_t c = 0; c < cols; ++c)
          storeAs(y, yd, m * N + c0 + c, acc[size_t(m * cols + c)]);
    }
  });
}
