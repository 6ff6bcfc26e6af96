//===- AttentionImpl.h - the per-ISA vector primitives of the attention kernel ----===//
//
// Attention.cpp runs the two passes over the cached rows with the AttentionOps of the active ISA
// (Isa.h) and the cache's row type; each ISA fills its table in its own file (AttentionScalar.cpp,
// AttentionAvx2.cpp, AttentionAvx512.cpp). Shared here: the table's shape, the hand prefetch of
// rows, the value sweeps' grouping and the vector exponentials' constants.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CPU_ATTENTIONIMPL_H
#define HELM_KERNELS_CPU_ATTENTIONIMPL_H

#include "kernels/common/Numeric.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <immintrin.h>
#include <limits>
#include <type_traits>

namespace helm::kernels::attention {

/// The kernels of one ISA for cache rows of one type (f32, or f16 widened as they are loaded).
struct AttentionOps {
  /// Each pass of the kernel takes the many-row op where the ISA has one (scoreRows,
  /// weightedSumMany), else the one-row op (dotMany, weightedSum); an ISA fills one of each pair.
  /// out[i * outStride] = q_i . k over d < D, for the nq queries q_i = q + i * ld.
  void (*dotMany)(const float *q, int64_t ld, int64_t nq, const void *k, int64_t D, float *out,
                  int64_t outStride);
  /// o[d] += sum_t p[t] * v[t * vStride + d] over t < T, d < D; a zero p[t] skips its row (0
  /// times an infinite value would be NaN). With `prefetch`, the rows kPrefetchRows ahead are
  /// fetched by hand (the first pass over rows not yet in cache).
  void (*weightedSum)(const float *p, const void *v, int64_t vStride, int64_t T, int64_t D, float *o,
                      bool prefetch);
  /// weightedSum for queries q < nq at once, query q's weights at p + q * pLd and output at
  /// o + q * oLd: each value row is loaded (and widened) once for all of them, and a zero weight
  /// skips its row for that query only.
  void (*weightedSumMany)(const float *p, int64_t pLd, int64_t nq, const void *v, int64_t vStride,
                          int64_t T, int64_t D, float *o, int64_t oLd, bool prefetch);
  /// out[i * outStride + t] = q_i . k_t for the nq queries q_i = q + i * ld and the T key rows
  /// k_t = k + t * kStride (elements): dotMany over many rows at once.
  void (*scoreRows)(const float *q, int64_t ld, int64_t nq, const void *k, int64_t kStride, int64_t T,
                    int64_t D, float *out, int64_t outStride);
  /// Over x[0, n), n > 0: *max = the largest x (NaNs ignored, as std::max does), x[t] =
  /// exp(x[t] - *max) in place; returns the sum of the new x. Null: the scalar loop with std::exp.
  float (*expShifted)(float *x, int64_t n, float *max);
};

/// Key and value rows of one head are a cache row apart (the whole row of every kv head), so each
/// is on its own 4 KiB page for most models and the hardware prefetchers, which stop at page
/// boundaries, miss the first lines of every row. Rows this far ahead are fetched by hand.
constexpr int64_t kPrefetchRows = 8;
template <typename Row> inline void prefetchRow(const Row *row, int64_t elements) {
  const char *c = reinterpret_cast<const char *>(row);
  for (int64_t b = 0; b < elements * int64_t(sizeof(Row)); b += 64)
    _mm_prefetch(c + b, _MM_HINT_T0);
}

/// A cache row element as f32: f32 rows as they are, f16 rows (uint16_t bits) widened.
inline float rowAt(const float *row, int64_t i) { return row[i]; }
inline float rowAt(const uint16_t *row, int64_t i) { return halfToFloat(row[i]); }

/// The value sweeps' grouping of nq queries: sweep(count, q) for queries [q, q + count), three at a
/// time, then the last two or one (count a std::integral_constant, for the sweeps' templates).
template <class Sweep> inline void inSweepsOfThree(int64_t nq, Sweep &&sweep) {
  int64_t q = 0;
  for (; q + 3 <= nq; q += 3)
    sweep(std::integral_constant<int, 3>{}, q);
  if (nq - q == 2)
    sweep(std::integral_constant<int, 2>{}, q);
  else if (nq - q == 1)
    sweep(std::integral_constant<int, 1>{}, q);
}

// ---- AVX2 + FMA + F16C --------------------------------------------------------------------

/// The vector exponentials' constants (e^x for the shifted scores, x <= 0): x = n ln2 + r with
/// |r| <= ln2 / 2 (ln2 split in two so that n ln2 is exact enough), e^r by its Taylor series to
/// degree 7, highest coefficient first (truncation below 6e-9 relative, under an f32 ulp). Below
/// kExpLowest, e^x is 0 in f32 (the smallest subnormal is e^-103.3).
constexpr float kExpLowest = -104.0f, kLog2e = 1.44269504088896341f;
constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;
constexpr float kExpTaylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

/// The tables of each ISA, for cache rows of `kvType` (f32 or f16).
const AttentionOps &scalarOps(DType kvType);
const AttentionOps &avx2Ops(DType kvType);   // call only if isaSupported(Isa::avx2)
const AttentionOps &avx512Ops(DType kvType); // call only if isaSupported(Isa::avx512)

} // namespace helm::kernels::attention

#endif
