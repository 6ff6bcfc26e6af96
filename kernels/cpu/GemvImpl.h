//===- GemvImpl.h - the GEMV / small-M GEMM kernels, written once over a vector type ---===//
//
// Included (only) by GemvScalar.cpp, GemvAvx2.cpp and GemvAvx512.cpp after they define:
//   HELM_GEMV_TARGET  the function attribute of the path (e.g. __attribute__((target("avx2,..."))))
//   a traits type T:  V (vector of floats), kWidth (lanes), kAccRegs (accumulators a micro-kernel
//                     may keep in registers), zero/set1/loadF32/storeF32/fma/add/hsum, and
//                     load<WD>(w, i): kWidth weights of type WD from element i, widened to f32.
// Everything here is in an anonymous namespace: each file gets its own copy, compiled for its
// target, and nothing of it is shared between files (no ODR mixing of AVX and baseline code).
//
// Products accumulate in f32 (FMA where the path has it); each output is rounded once.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CPU_GEMVIMPL_H
#define HELM_KERNELS_CPU_GEMVIMPL_H

#ifndef HELM_GEMV_TARGET
#error "define HELM_GEMV_TARGET before including GemvImpl.h"
#endif

#include "kernels/cpu/Gemv.h"
#include "kernels/common/Numeric.h"
#include "kernels/common/Scratch.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace helm::kernels {
namespace {

template <class T> struct GemvImpl {
  using V = typename T::V;
  static constexpr int VW = T::kWidth;
  static constexpr int kAcc = T::kAccRegs;
  /// Rows of x handled by one micro-kernel call; larger M loops over blocks of this many.
  static constexpr int kMaxMB = int(kGemvMaxRows);

  template <DType WD> static constexpr int64_t elemBytes() { return dtypeBytes(WD); }

  // ---- W [N, K]: dot products along contiguous K ------------------------------------------
  // R rows of W at once (R streams, each weight vector widened once and used for all MB rows of
  // x), U vectors of K per step per row: R * MB * U accumulators in registers.
  static constexpr int nkRows(int mb) {
    int r = kAcc / mb;
    return r >= 4 ? 4 : r >= 2 ? 2 : 1;
  }
  static constexpr int nkUnroll(int mb) {
    int u = kAcc / (nkRows(mb) * mb);
    return u >= 4 ? 4 : u >= 2 ? 2 : 1;
  }

  /// out[m * R + r] = x[m, :] . W[n + r * rs, :] for m < MB, r < R.
  template <DType WD, int MB, int R, int U>
  HELM_GEMV_TARGET static void nkBlock(const float *x, int64_t K, const void *w, int64_t n,
                                       int64_t rs, float *out) {
    V acc[R][MB][U];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int m = 0; m < MB; ++m)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u)
          acc[r][m][u] = T::zero();
    const int64_t row = n * K, rowStep = rs * K;
    int64_t k = 0;
    for (; k + int64_t(VW) * U <= K; k += int64_t(VW) * U) {
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) {
        V xv[MB];
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m)
          xv[m] = T::loadF32(x + m * K + k + u * VW);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          V wv = T::template load<WD>(w, row + r * rowStep + k + u * VW);
#pragma GCC unroll 8
          for (int m = 0; m < MB; ++m)
            acc[r][m][u] = T::fma(wv, xv[m], acc[r][m][u]);
        }
      }
    }
    if constexpr (U > 1) {
      for (; k + VW <= K; k += VW) {
        V xv[MB];
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m)
          xv[m] = T::loadF32(x + m * K + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          V wv = T::template load<WD>(w, row + r * rowStep + k);
#pragma GCC unroll 8
          for (int m = 0; m < MB; ++m)
            acc[r][m][0] = T::fma(wv, xv[m], acc[r][m][0]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int m = 0; m < MB; ++m) {
        V s = acc[r][m][0];
#pragma GCC unroll 4
        for (int u = 1; u < U; ++u)
          s = T::add(s, acc[r][m][u]);
        float f = T::hsum(s);
        for (int64_t kk = k; kk < K; ++kk)
          f += x[m * K + kk] * loadElem<WD>(w, row + r * rowStep + kk);
        out[m * R + r] = f;
      }
  }

  /// y[m0 : m0+MB, nb0 : nb1] for W [N, K].
  template <DType WD, int MB>
  HELM_GEMV_TARGET static void nkRowRange(const LinearProblem &p, int64_t m0, int64_t nb0,
                                          int64_t nb1) {
    constexpr int R = nkRows(MB), U = nkUnroll(MB);
    const float *x = p.x + m0 * p.K;
    float out[MB * R];
    // The R rows of one block are a 1/R of the range apart, so each of the R streams runs
    // sequentially through its part of W instead of restarting every K elements (see knChunk).
    const int64_t rs = (nb1 - nb0) / R, width = nb1 - nb0;
    // f32 results go to a per-thread row buffer first, then each row is rounded to y's type in
    // one vectorised pass (narrow) instead of one scalar conversion per output.
    float *rows = p.yd == DType::f32 ? nullptr : rowBuffer(MB * width);
    auto put = [&](int m, int64_t n, float v) {
      if (rows)
        rows[m * width + (n - nb0)] = v;
      else
        static_cast<float *>(p.y)[(m0 + m) * p.N + n] = v;
    };
    for (int64_t n = nb0; n < nb0 + rs; ++n) {
      nkBlock<WD, MB, R, U>(x, p.K, p.w, n, rs, out);
      for (int m = 0; m < MB; ++m)
        for (int r = 0; r < R; ++r)
          put(m, n + r * rs, out[m * R + r]);
    }
    for (int64_t n = nb0 + rs * R; n < nb1; ++n) {
      nkBlock<WD, MB, 1, U>(x, p.K, p.w, n, 1, out);
      for (int m = 0; m < MB; ++m)
        put(m, n, out[m]);
    }
    if (rows)
      for (int m = 0; m < MB; ++m)
        narrow(rows + m * width, p.yd, outAddress(p, m0 + m, nb0), width);
  }

  /// The calling thread's buffer of at least n floats (grows, never shrinks).
  static float *rowBuffer(int64_t n) {
    thread_local std::vector<float> buffer;
    return grownTo(buffer, n);
  }
  /// Address of y[m, n].
  static void *outAddress(const LinearProblem &p, int64_t m, int64_t n) {
    size_t elem = size_t(dtypeBytes(p.yd));
    return static_cast<char *>(p.y) + size_t(m * p.N + n) * elem;
  }

  template <DType WD>
  static void nkRange(const LinearProblem &p, int64_t n0, int64_t n1, float * /*scratch*/) {
    // M <= 8: one pass streams the rows once. Larger M (prefill): blocks of W rows small enough to
    // stay in L2 while every block of 8 rows of x passes over them.
    int64_t block = n1 - n0;
    if (p.M > kMaxMB)
      block = std::max<int64_t>(16, (256 * 1024) / std::max<int64_t>(1, p.K * elemBytes<WD>()));
    for (int64_t nb0 = n0; nb0 < n1; nb0 += block) {
      int64_t nb1 = std::min(n1, nb0 + block);
      for (int64_t m0 = 0; m0 < p.M; m0 += kMaxMB) {
        switch (std::min<int64_t>(kMaxMB, p.M - m0)) {
        case 1: nkRowRange<WD, 1>(p, m0, nb0, nb1); break;
        case 2: nkRowRange<WD, 2>(p, m0, nb0, nb1); break;
        case 3: nkRowRange<WD, 3>(p, m0, nb0, nb1); break;
        case 4: nkRowRange<WD, 4>(p, m0, nb0, nb1); break;
        case 5: nkRowRange<WD, 5>(p, m0, nb0, nb1); break;
        case 6: nkRowRange<WD, 6>(p, m0, nb0, nb1); break;
        case 7: nkRowRange<WD, 7>(p, m0, nb0, nb1); break;
        default: nkRowRange<WD, 8>(p, m0, nb0, nb1); break;
        }
      }
    }
  }

  // ---- W [K, N]: stream rows of W, accumulate into column blocks ---------------------------
  // The accumulators of a chunk of columns (MB x cols floats, in the thread's L1/L2 scratch) take
  // R rows of W per pass: R contiguous streams, each accumulator loaded and stored once per R rows.
  static constexpr int kKnRows = 4;

  /// acc[m, 0:cols] += sum_r x[m, k + r] * W[k + r, c0 : c0 + cols].
  template <DType WD, int MB, int R>
  HELM_GEMV_TARGET static void knRows(const float *x, int64_t K, const void *w, int64_t N,
                                      int64_t c0, int64_t cols, int64_t k, int64_t rs,
                                      float *acc) {
    V xb[MB][R];
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        xb[m][r] = T::set1(x[m * K + k + r * rs]);
    const int64_t colsV = cols / VW * VW;
    int64_t j = 0;
    for (; j < colsV; j += VW) {
      V wv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        wv[r] = T::template load<WD>(w, (k + r * rs) * N + c0 + j);
#pragma GCC unroll 8
      for (int m = 0; m < MB; ++m) {
        V a = T::loadF32(acc + m * cols + j);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          a = T::fma(wv[r], xb[m][r], a);
        T::storeF32(acc + m * cols + j, a);
      }
    }
    for (; j < cols; ++j)
      for (int m = 0; m < MB; ++m) {
        float a = acc[m * cols + j];
        for (int r = 0; r < R; ++r)
          a += x[m * K + k + r * rs] * loadElem<WD>(w, (k + r * rs) * N + c0 + j);
        acc[m * cols + j] = a;
      }
  }

  /// acc[0:MB, 0:cols] = x[m0:m0+MB, k0:k1] . W[k0:k1, c0:c0+cols].
  template <DType WD, int MB>
  HELM_GEMV_TARGET static void knAccumulate(const LinearProblem &p, int64_t m0, int64_t c0,
                                            int64_t cols, int64_t k0, int64_t k1, float *acc) {
    const float *x = p.x + m0 * p.K;
    std::memset(acc, 0, sizeof(float) * size_t(MB * cols));
    // The R rows of one pass are a quarter of the K range apart rather than adjacent: R separate
    // sequential streams keep more cache-line fetches in flight than one stream does, which
    // matters for the 1-8 KB rows of decode-sized matrices (measured on a 2 MB f16 [K,N] matrix
    // from DRAM: 6 -> 20 GB/s on one thread).
    const int64_t rs = (k1 - k0) / kKnRows;
    for (int64_t k = k0; k < k0 + rs; ++k)
      knRows<WD, MB, kKnRows>(x, p.K, p.w, p.N, c0, cols, k, rs, acc);
    for (int64_t k = k0 + rs * kKnRows; k < k1; ++k)
      knRows<WD, MB, 1>(x, p.K, p.w, p.N, c0, cols, k, 1, acc);
  }

  template <DType WD, int MB>
  HELM_GEMV_TARGET static void knChunk(const LinearProblem &p, int64_t m0, int64_t c0,
                                       int64_t cols, float *acc) {
    knAccumulate<WD, MB>(p, m0, c0, cols, 0, p.K, acc);
    for (int m = 0; m < MB; ++m)
      narrow(acc + m * cols, p.yd, outAddress(p, m0 + m, c0), cols);
  }

  template <DType WD>
  static void knRange(const LinearProblem &p, int64_t n0, int64_t n1, float *scratch) {
    // Column chunks whose accumulators fit the scratch (L1/L2); for M > 8 also small enough that
    // the K x chunk panel of W stays in L2 while each block of 8 rows of x passes over it.
    int64_t mbMax = std::min<int64_t>(p.M, kMaxMB);
    int64_t chunk = kGemvScratchFloats / mbMax;
    if (p.M > kMaxMB)
      chunk = std::min(chunk, (512 * 1024) / std::max<int64_t>(1, p.K * elemBytes<WD>()));
    chunk = std::max<int64_t>(64, chunk / 64 * 64);
    for (int64_t c0 = n0; c0 < n1; c0 += chunk) {
      int64_t cols = std::min(chunk, n1 - c0);
      for (int64_t m0 = 0; m0 < p.M; m0 += kMaxMB) {
        switch (std::min<int64_t>(kMaxMB, p.M - m0)) {
        case 1: knChunk<WD, 1>(p, m0, c0, cols, scratch); break;
        case 2: knChunk<WD, 2>(p, m0, c0, cols, scratch); break;
        case 3: knChunk<WD, 3>(p, m0, c0, cols, scratch); break;
        case 4: knChunk<WD, 4>(p, m0, c0, cols, scratch); break;
        case 5: knChunk<WD, 5>(p, m0, c0, cols, scratch); break;
        case 6: knChunk<WD, 6>(p, m0, c0, cols, scratch); break;
        case 7: knChunk<WD, 7>(p, m0, c0, cols, scratch); break;
        default: knChunk<WD, 8>(p, m0, c0, cols, scratch); break;
        }
      }
    }
  }

  template <DType WD>
  static void knSlice(const LinearProblem &p, int64_t k0, int64_t k1, float *acc) {
    switch (p.M) {
    case 1: knAccumulate<WD, 1>(p, 0, 0, p.N, k0, k1, acc); break;
    case 2: knAccumulate<WD, 2>(p, 0, 0, p.N, k0, k1, acc); break;
    case 3: knAccumulate<WD, 3>(p, 0, 0, p.N, k0, k1, acc); break;
    case 4: knAccumulate<WD, 4>(p, 0, 0, p.N, k0, k1, acc); break;
    case 5: knAccumulate<WD, 5>(p, 0, 0, p.N, k0, k1, acc); break;
    case 6: knAccumulate<WD, 6>(p, 0, 0, p.N, k0, k1, acc); break;
    case 7: knAccumulate<WD, 7>(p, 0, 0, p.N, k0, k1, acc); break;
    default: knAccumulate<WD, 8>(p, 0, 0, p.N, k0, k1, acc); break; // callers keep M <= 8
    }
  }

  static const LinearKernels &table() {
    static const LinearKernels t = {
        {&nkRange<DType::f32>, &nkRange<DType::f16>, &nkRange<DType::bf16>},
        {&knRange<DType::f32>, &knRange<DType::f16>, &knRange<DType::bf16>},
        {&knSlice<DType::f32>, &knSlice<DType::f16>, &knSlice<DType::bf16>}};
    return t;
  }
};

} // namespace
} // namespace helm::kernels

#endif
