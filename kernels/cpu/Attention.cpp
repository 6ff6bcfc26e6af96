//===- Attention.cpp - causal grouped-query attention over a KV cache -------------===//
//
// Work item = (kv head g, block of up to kQueryBlock query rows). The item's queries are the
// block's rows times the `group` heads that read kv head g, so every cached key row is loaded
// from memory once per item and used for all of them (GQA sharing); pass 2 sweeps the value rows
// once per query, from L1/L2 after the first. Two passes over the cached rows:
//   1. scores[t][i] = q_i . k_t (all queries of the item against each key row), then per query
//      scale, round, causal/window mask, max, exp, sum, normalise, round;
//   2. out_i = sum_t p[t][i] v_t with out_i's head_dim accumulators held in registers while the
//      value rows stream past (from L1/L2: one item's rows are at most a few hundred KB).
// The vector primitives exist for AVX-512, AVX2+FMA+F16C and scalar, picked like the GEMV's
// (Isa.h). See docs/kernels.md, "Attention".
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Attention.h"

// GCC 12's AVX-512 headers build some intrinsics (reductions, extracts) from deliberately
// undefined vectors and then warn about them; the warnings are about the headers, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/ThreadPool.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <immintrin.h>
#include <limits>
#include <type_traits>
#include <vector>

namespace helm::kernels {
namespace {

/// Query rows per work item in prefill: 16 rows x group heads queries share each key row load,
/// and the item's score block (queries x keys) stays in L2 for prompts of a few thousand tokens.
constexpr int64_t kQueryBlock = 16;

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

// ---- scalar ------------------------------------------------------------------------------

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

template <typename Row>
void dotManyScalar(const float *q, int64_t ld, int64_t nq, const void *kRow, int64_t D,
                   float *out, int64_t outStride) {
  const Row *k = static_cast<const Row *>(kRow);
  for (int64_t i = 0; i < nq; ++i) {
    float s = 0;
    for (int64_t d = 0; d < D; ++d)
      s += q[i * ld + d] * rowAt(k, d);
    out[i * outStride] = s;
  }
}

template <typename Row>
void weightedSumScalar(const float *p, const void *vRows, int64_t vStride, int64_t T, int64_t D, float *o,
                       bool prefetch) {
  const Row *v = static_cast<const Row *>(vRows);
  for (int64_t t = 0; t < T; ++t) {
    if (prefetch && t + kPrefetchRows < T)
      prefetchRow(v + (t + kPrefetchRows) * vStride, D);
    float w = p[t];
    if (w == 0.0f)
      continue;
    for (int64_t d = 0; d < D; ++d)
      o[d] += w * rowAt(v, t * vStride + d);
  }
}

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

#define HELM_AVX2 __attribute__((target("avx2,fma,f16c")))

HELM_AVX2 inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

HELM_AVX2 inline __m256 load8(const float *row) { return _mm256_loadu_ps(row); }
HELM_AVX2 inline __m256 load8(const uint16_t *row) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row)));
}

template <typename Row>
HELM_AVX2 void dotManyAvx2(const float *q, int64_t ld, int64_t nq, const void *kRow, int64_t D,
                           float *out, int64_t outStride) {
  const Row *k = static_cast<const Row *>(kRow);
  const int64_t Dv = D / 8 * 8;
  int64_t i = 0;
  for (; i + 4 <= nq; i += 4) {
    const float *q0 = q + i * ld, *q1 = q0 + ld, *q2 = q1 + ld, *q3 = q2 + ld;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t d = 0; d < Dv; d += 8) {
      __m256 kv = load8(k + d);
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + d), kv, a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + d), kv, a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + d), kv, a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + d), kv, a3);
    }
    float s0 = hsum256(a0), s1 = hsum256(a1), s2 = hsum256(a2), s3 = hsum256(a3);
    for (int64_t d = Dv; d < D; ++d) {
      const float kd = rowAt(k, d);
      s0 += q0[d] * kd;
      s1 += q1[d] * kd;
      s2 += q2[d] * kd;
      s3 += q3[d] * kd;
    }
    out[i * outStride] = s0, out[(i + 1) * outStride] = s1, out[(i + 2) * outStride] = s2,
    out[(i + 3) * outStride] = s3;
  }
  for (; i < nq; ++i) {
    const float *qi = q + i * ld;
    __m256 a = _mm256_setzero_ps();
    for (int64_t d = 0; d < Dv; d += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(qi + d), load8(k + d), a);
    float s = hsum256(a);
    for (int64_t d = Dv; d < D; ++d)
      s += qi[d] * rowAt(k, d);
    out[i * outStride] = s;
  }
}


/// The vector exponentials' constants (e^x for the shifted scores, x <= 0): x = n ln2 + r with
/// |r| <= ln2 / 2 (ln2 split in two so that n ln2 is exact enough), e^r by its Taylor series to
/// degree 7, highest coefficient first (truncation below 6e-9 relative, under an f32 ulp). Below
/// kExpLowest, e^x is 0 in f32 (the smallest subnormal is e^-103.3).
constexpr float kExpLowest = -104.0f, kLog2e = 1.44269504088896341f;
constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;
constexpr float kExpTaylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

/// e^x for x <= 0 (the shifted scores), 8 lanes, with the constants above: 2^n
/// applied as 2^(n + 64) (built in the exponent bits: n + 64 is within the normal range for every
/// n >= -150) and then 2^-64, so that results below the normal range round once, as vscalefps does.
HELM_AVX2 inline __m256 expNonPositiveAvx2(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(kExpLowest), x); // NaN stays NaN (the second operand's rule)
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Low), _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2High), x));
  __m256 e = _mm256_set1_ps(kExpTaylor[0]);
  for (int i = 1; i < 8; ++i)
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(kExpTaylor[i]));
  const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127 + 64));
  const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
  return _mm256_mul_ps(_mm256_mul_ps(e, scale), _mm256_set1_ps(5.42101086242752217e-20f)); // 2^-64
}

HELM_AVX2 float expShiftedAvx2(float *x, int64_t n, float *maxOut) {
  const int64_t nv = n / 8 * 8;
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t t = 0; t < nv; t += 8)
    m = _mm256_max_ps(_mm256_loadu_ps(x + t), m); // a NaN x leaves m (std::max's rule)
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  float mx = _mm_cvtss_f32(h);
  for (int64_t t = nv; t < n; ++t)
    mx = std::max(mx, x[t]);
  *maxOut = mx;
  const __m256 shift = _mm256_set1_ps(mx);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t t = 0; t < nv; t += 8) {
    const __m256 e = expNonPositiveAvx2(_mm256_sub_ps(_mm256_loadu_ps(x + t), shift));
    _mm256_storeu_ps(x + t, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (nv < n) { // the tail through a zero-padded vector
    alignas(32) float tail[8];
    for (int64_t t = 0; t < 8; ++t)
      tail[t] = nv + t < n ? x[nv + t] - mx : -std::numeric_limits<float>::infinity();
    const __m256 e = expNonPositiveAvx2(_mm256_load_ps(tail));
    _mm256_store_ps(tail, e);
    for (int64_t t = nv; t < n; ++t)
      x[t] = tail[t - nv];
    sum = _mm256_add_ps(sum, e); // the padding lanes are e^-104 -> 0
  }
  return hsum256(sum);
}

/// weightedSumMany's AVX2 sweep: NQ queries per sweep over the value rows, NV vectors (8 floats each) of each
/// query's o from column d0 in registers (NV a template argument, so that the accumulators have
/// constant indices and stay in registers), each row's vectors widened once for all of them; a
/// query whose weight is 0 keeps its accumulators (a blend), as weightedSum skips the row.
template <typename Row, int NQ, int NV>
HELM_AVX2 void weightedSumSweepAvx2(const float *p, int64_t pLd, const Row *v, int64_t vStride, int64_t T,
                                    int64_t d0, float *o, int64_t oLd, bool prefetch) {
  __m256 acc[NQ][NV];
#pragma GCC unroll 3
  for (int q = 0; q < NQ; ++q)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c)
      acc[q][c] = _mm256_loadu_ps(o + q * oLd + d0 + 8 * c);
  for (int64_t t = 0; t < T; ++t) {
    if (prefetch && t + kPrefetchRows < T)
      prefetchRow(v + (t + kPrefetchRows) * vStride + d0, 8 * NV);
    __m256 wv[NQ], live[NQ];
    bool any = false;
#pragma GCC unroll 3
    for (int q = 0; q < NQ; ++q) {
      const float w = p[q * pLd + t];
      wv[q] = _mm256_set1_ps(w);
      live[q] = _mm256_castsi256_ps(_mm256_set1_epi32(w != 0.0f ? -1 : 0));
      any |= w != 0.0f;
    }
    if (!any)
      continue;
    const Row *vr = v + t * vStride + d0;
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) {
      const __m256 x = load8(vr + 8 * c);
#pragma GCC unroll 3
      for (int q = 0; q < NQ; ++q)
        acc[q][c] = _mm256_blendv_ps(acc[q][c], _mm256_fmadd_ps(wv[q], x, acc[q][c]), live[q]);
    }
  }
#pragma GCC unroll 3
  for (int q = 0; q < NQ; ++q)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c)
      _mm256_storeu_ps(o + q * oLd + d0 + 8 * c, acc[q][c]);
}

/// The sweeps of NQ queries over all of D: 32 columns (4 vectors) at a time, then the columns past
/// the last multiple of 8 one query at a time.
template <typename Row, int NQ>
HELM_AVX2 void weightedSumQueriesAvx2(const float *p, int64_t pLd, const Row *v, int64_t vStride, int64_t T,
                                      int64_t D, float *o, int64_t oLd, bool prefetch) {
  const int64_t Dv = D / 8 * 8;
  for (int64_t d0 = 0; d0 < Dv; d0 += 32) {
    switch (std::min<int64_t>(32, Dv - d0) / 8) {
    case 1: weightedSumSweepAvx2<Row, NQ, 1>(p, pLd, v, vStride, T, d0, o, oLd, prefetch); break;
    case 2: weightedSumSweepAvx2<Row, NQ, 2>(p, pLd, v, vStride, T, d0, o, oLd, prefetch); break;
    case 3: weightedSumSweepAvx2<Row, NQ, 3>(p, pLd, v, vStride, T, d0, o, oLd, prefetch); break;
    default: weightedSumSweepAvx2<Row, NQ, 4>(p, pLd, v, vStride, T, d0, o, oLd, prefetch); break;
    }
  }
  for (int64_t d = Dv; d < D; ++d)
    for (int q = 0; q < NQ; ++q)
      for (int64_t t = 0; t < T; ++t) {
        const float w = p[q * pLd + t];
        if (w != 0.0f)
          o[q * oLd + d] += w * rowAt(v, t * vStride + d);
      }
}

template <typename Row>
HELM_AVX2 void weightedSumManyAvx2(const float *p, int64_t pLd, int64_t nq, const void *vRows, int64_t vStride,
                                   int64_t T, int64_t D, float *o, int64_t oLd, bool prefetch) {
  const Row *v = static_cast<const Row *>(vRows);
  inSweepsOfThree(nq, [&](auto count, int64_t q) {
    weightedSumQueriesAvx2<Row, count>(p + q * pLd, pLd, v, vStride, T, D, o + q * oLd, oLd, prefetch && q == 0);
  });
}

// ---- AVX-512 ------------------------------------------------------------------------------

#define HELM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

HELM_AVX512 inline __m512 load16(const float *row) { return _mm512_loadu_ps(row); }
HELM_AVX512 inline __m512 load16(const uint16_t *row) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(row)));
}
HELM_AVX512 inline __m512 load16(__mmask16 m, const float *row) { return _mm512_maskz_loadu_ps(m, row); }
HELM_AVX512 inline __m512 load16(__mmask16 m, const uint16_t *row) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row));
}



/// weightedSumMany's AVX-512 sweep: NQ queries per sweep over the value rows, NV vectors (16 floats each,
/// the last one `lastMask`) of each query's o from column d0 in registers: the row's vectors are
/// widened once and multiplied into each query's accumulators, a query whose weight is 0 masked
/// off (as weightedSum skips the row: 0 times an infinite value would be NaN). NV is a
/// template argument so that every accumulator has a constant index and stays in a register
/// (with a run-time count they lived on the stack: a load and a store per multiply-add).
template <typename Row, int NQ, int NV>
HELM_AVX512 void weightedSumSweepAvx512(const float *p, int64_t pLd, const Row *v, int64_t vStride, int64_t T,
                                        int64_t d0, __mmask16 lastMask, float *o, int64_t oLd, bool prefetch) {
  __m512 acc[NQ][NV];
#pragma GCC unroll 3
  for (int q = 0; q < NQ; ++q) {
#pragma GCC unroll 8
    for (int c = 0; c + 1 < NV; ++c)
      acc[q][c] = _mm512_loadu_ps(o + q * oLd + d0 + 16 * c);
    acc[q][NV - 1] = _mm512_maskz_loadu_ps(lastMask, o + q * oLd + d0 + 16 * (NV - 1));
  }
  for (int64_t t = 0; t < T; ++t) {
    if (prefetch && t + kPrefetchRows < T)
      prefetchRow(v + (t + kPrefetchRows) * vStride + d0, 16 * NV);
    __m512 wv[NQ];
    __mmask16 live[NQ];
    bool any = false;
#pragma GCC unroll 3
    for (int q = 0; q < NQ; ++q) {
      const float w = p[q * pLd + t];
      wv[q] = _mm512_set1_ps(w);
      live[q] = w != 0.0f ? __mmask16(0xffff) : __mmask16(0);
      any |= w != 0.0f;
    }
    if (!any)
      continue;
    const Row *vr = v + t * vStride + d0;
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) {
      const __m512 x = c + 1 < NV ? load16(vr + 16 * c) : load16(lastMask, vr + 16 * c);
#pragma GCC unroll 3
      for (int q = 0; q < NQ; ++q)
        acc[q][c] = _mm512_mask3_fmadd_ps(wv[q], x, acc[q][c], live[q]);
    }
  }
#pragma GCC unroll 3
  for (int q = 0; q < NQ; ++q) {
#pragma GCC unroll 8
    for (int c = 0; c + 1 < NV; ++c)
      _mm512_storeu_ps(o + q * oLd + d0 + 16 * c, acc[q][c]);
    _mm512_mask_storeu_ps(o + q * oLd + d0 + 16 * (NV - 1), lastMask, acc[q][NV - 1]);
  }
}

/// The sweeps of NQ queries over all of D: 128 columns (8 vectors) at a time.
template <typename Row, int NQ>
HELM_AVX512 void weightedSumQueriesAvx512(const float *p, int64_t pLd, const Row *v, int64_t vStride, int64_t T,
                                          int64_t D, float *o, int64_t oLd, bool prefetch) {
  for (int64_t d0 = 0; d0 < D; d0 += 128) {
    const int64_t width = std::min<int64_t>(128, D - d0), nv = (width + 15) / 16;
    const __mmask16 last = width % 16 ? __mmask16((1u << (width % 16)) - 1u) : __mmask16(0xffff);
    switch (nv) {
    case 1: weightedSumSweepAvx512<Row, NQ, 1>(p, pLd, v, vStride, T, d0, last, o, oLd, prefetch); break;
    case 2: weightedSumSweepAvx512<Row, NQ, 2>(p, pLd, v, vStride, T, d0, last, o, oLd, prefetch); break;
    case 3: weightedSumSweepAvx512<Row, NQ, 3>(p, pLd, v, vStride, T, d0, last, o, oLd, prefetch); break;
    case 4: weightedSumSweepAvx512<Row, NQ, 4>(p, pLd, v, vStride, T, d0, last, o, oLd, prefetch); break;
    case 5: weightedSumSweepAvx512<Row, NQ, 5>(p, pLd, v, vStride, T, d0, last, o, oLd, prefetch); break;
    case 6: weightedSumSweepAvx512<Row, NQ, 6>(p, pLd, v, vStride, T, d0, last, o, oLd, prefetch); break;
    case 7: weightedSumSweepAvx512<Row, NQ, 7>(p, pLd, v, vStride, T, d0, last, o, oLd, prefetch); break;
    default: weightedSumSweepAvx512<Row, NQ, 8>(p, pLd, v, vStride, T, d0, last, o, oLd, prefetch); break;
    }
  }
}

/// Transposes the 16 x 16 block r (r[j] = 16 elements of row j) in place: r[d] becomes element d
/// of every row.
HELM_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int j = 0; j < 16; j += 2) {
    t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 16; j += 4) {
    u[j] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
    u[j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j]), _mm512_castps_pd(t[j + 2])));
    u[j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
    u[j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[j + 1]), _mm512_castps_pd(t[j + 3])));
  }
  // u[4b + c], rows 4b..4b+3: 128-bit lane l holds their column 4l + c.
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);      // cols c, 8+c of rows 0-7
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);      // cols 4+c, 12+c of rows 0-7
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88); // ... of rows 8-15
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[4 + c] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

/// Scores of Q queries (q + j * ld) against the 16 keys of a transposed tile ([D][16]): out[j *
/// outStride + key] for the keys in `keys`. One accumulator per query, summed over d in order.
template <int Q>
HELM_AVX512 inline void scoreTileQueries(const float *q, int64_t ld, const float *tile, int64_t D, float *out,
                                         int64_t outStride, __mmask16 keys) {
  __m512 acc[Q];
#pragma GCC unroll 8
  for (int j = 0; j < Q; ++j)
    acc[j] = _mm512_setzero_ps();
  for (int64_t d = 0; d < D; ++d) {
    const __m512 kd = _mm512_load_ps(tile + d * 16);
#pragma GCC unroll 8
    for (int j = 0; j < Q; ++j)
      acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(q[j * ld + d]), kd, acc[j]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < Q; ++j)
    _mm512_mask_storeu_ps(out + j * outStride, keys, acc[j]);
}

/// scoreRows on AVX-512: 16 keys at a time, transposed (widened once) into a [D][16] tile, so that
/// one multiply-add adds q_i[d] times element d of 16 keys: each lane is one (query, key) score,
/// summed over d in order, with no horizontal sums (dotMany needs one per query and key).
template <typename Row>
HELM_AVX512 void scoreRowsAvx512(const float *q, int64_t ld, int64_t nq, const void *kRows, int64_t kStride,
                                 int64_t T, int64_t D, float *out, int64_t outStride) {
  const Row *k = static_cast<const Row *>(kRows);
  thread_local std::vector<float> tileBuffer;
  const int64_t chunks = (D + 15) / 16;
  if (tileBuffer.size() < size_t(chunks * 256 + 16))
    tileBuffer.resize(size_t(chunks * 256 + 16));
  float *tile = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(tileBuffer.data()) + 63) & ~uintptr_t(63));
  for (int64_t t0 = 0; t0 < T; t0 += 16) {
    const int64_t n = std::min<int64_t>(16, T - t0);
    for (int64_t j = 0; j < n; ++j)
      if (t0 + 16 + j < T)
        prefetchRow(k + (t0 + 16 + j) * kStride, D);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t width = std::min<int64_t>(16, D - 16 * c);
      const __mmask16 m = __mmask16((1u << width) - 1u);
      __m512 r[16];
      for (int j = 0; j < 16; ++j)
        r[j] = j < n ? load16(m, k + (t0 + j) * kStride + 16 * c) : _mm512_setzero_ps();
      transpose16(r);
      for (int d = 0; d < 16; ++d)
        _mm512_store_ps(tile + (16 * c + d) * 16, r[d]);
    }
    const __mmask16 keys = __mmask16((1u << n) - 1u);
    int64_t i = 0;
    for (; i + 8 <= nq; i += 8)
      scoreTileQueries<8>(q + i * ld, ld, tile, D, out + i * outStride + t0, outStride, keys);
    // The rest (a decode step's few queries per kv head) together: independent chains.
    switch (nq - i) {
    case 1: scoreTileQueries<1>(q + i * ld, ld, tile, D, out + i * outStride + t0, outStride, keys); break;
    case 2: scoreTileQueries<2>(q + i * ld, ld, tile, D, out + i * outStride + t0, outStride, keys); break;
    case 3: scoreTileQueries<3>(q + i * ld, ld, tile, D, out + i * outStride + t0, outStride, keys); break;
    case 4: scoreTileQueries<4>(q + i * ld, ld, tile, D, out + i * outStride + t0, outStride, keys); break;
    case 5: scoreTileQueries<5>(q + i * ld, ld, tile, D, out + i * outStride + t0, outStride, keys); break;
    case 6: scoreTileQueries<6>(q + i * ld, ld, tile, D, out + i * outStride + t0, outStride, keys); break;
    case 7: scoreTileQueries<7>(q + i * ld, ld, tile, D, out + i * outStride + t0, outStride, keys); break;
    default: break;
    }
  }
}

/// e^x for x <= 0 (the shifted scores), 16 lanes, with the constants above: 2^n by vscalefps,
/// which also gives 0 below kExpLowest and keeps NaN.
HELM_AVX512 inline __m512 expNonPositiveAvx512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(kExpLowest), x); // NaN stays NaN (the second operand's rule)
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Low), _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2High), x));
  __m512 e = _mm512_set1_ps(kExpTaylor[0]);
  for (int i = 1; i < 8; ++i)
    e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(kExpTaylor[i]));
  return _mm512_scalef_ps(e, n);
}

HELM_AVX512 float expShiftedAvx512(float *x, int64_t n, float *maxOut) {
  const int64_t nv = n / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (n - nv)) - 1u);
  const __m512 minusInf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m = minusInf;
  for (int64_t t = 0; t < nv; t += 16)
    m = _mm512_max_ps(_mm512_loadu_ps(x + t), m); // a NaN x leaves m (std::max's rule)
  if (tail)
    m = _mm512_max_ps(_mm512_mask_loadu_ps(minusInf, tail, x + nv), m);
  const float mx = _mm512_reduce_max_ps(m);
  *maxOut = mx;
  const __m512 shift = _mm512_set1_ps(mx);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t t = 0; t < nv; t += 16) {
    const __m512 e = expNonPositiveAvx512(_mm512_sub_ps(_mm512_loadu_ps(x + t), shift));
    _mm512_storeu_ps(x + t, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (tail) {
    const __m512 e = expNonPositiveAvx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + nv), shift));
    _mm512_mask_storeu_ps(x + nv, tail, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(tail, e));
  }
  return _mm512_reduce_add_ps(sum);
}

template <typename Row>
HELM_AVX512 void weightedSumManyAvx512(const float *p, int64_t pLd, int64_t nq, const void *vRows, int64_t vStride,
                                       int64_t T, int64_t D, float *o, int64_t oLd, bool prefetch) {
  const Row *v = static_cast<const Row *>(vRows);
  // The first sweep streams the rows in; the others find them in cache.
  inSweepsOfThree(nq, [&](auto count, int64_t q) {
    weightedSumQueriesAvx512<Row, count>(p + q * pLd, pLd, v, vStride, T, D, o + q * oLd, oLd, prefetch && q == 0);
  });
}

/// The kernels for `isa` and cache rows of `kvType` (f32 or f16; AttentionProblem says which).
const AttentionOps &opsFor(Isa isa, DType kvType) {
  static const AttentionOps scalar{&dotManyScalar<float>, &weightedSumScalar<float>, nullptr, nullptr, nullptr};
  static const AttentionOps avx2{&dotManyAvx2<float>, nullptr, &weightedSumManyAvx2<float>, nullptr,
                                 &expShiftedAvx2};
  static const AttentionOps avx512{nullptr, nullptr,
                                   &weightedSumManyAvx512<float>, &scoreRowsAvx512<float>, &expShiftedAvx512};
  static const AttentionOps scalarF16{&dotManyScalar<uint16_t>, &weightedSumScalar<uint16_t>, nullptr, nullptr,
                                      nullptr};
  static const AttentionOps avx2F16{&dotManyAvx2<uint16_t>, nullptr,
                                    &weightedSumManyAvx2<uint16_t>, nullptr, &expShiftedAvx2};
  static const AttentionOps avx512F16{nullptr, nullptr,
                                      &weightedSumManyAvx512<uint16_t>, &scoreRowsAvx512<uint16_t>,
                                      &expShiftedAvx512};
  // The caches hold f32 or f16 rows only (KvCache's rowType); any other type would be read as f32.
  assert(kvType == DType::f32 || kvType == DType::f16);
  const bool f16 = kvType == DType::f16;
  switch (isa) {
  case Isa::avx512: return f16 ? avx512F16 : avx512;
  case Isa::avx2: return f16 ? avx2F16 : avx2;
  case Isa::scalar: break;
  }
  return f16 ? scalarF16 : scalar;
}

/// Per-thread buffers that only grow (no allocation per item once warm).
struct Scratch {
  std::vector<float> q, scores;
};
Scratch &scratch() {
  thread_local Scratch s;
  return s;
}

/// Attention of work item (kv head g, query rows [s0, s1)) over the cached keys in [k0, k1)
/// only (all keys for the one-pass kernel, one page's for the streaming one). For each of the
/// item's nq queries (i = row * group + j) it leaves in `acc` [nq, D] the output normalised over
/// those keys and not yet rounded, in `maxOut[i]` the largest (rounded) score and in `sumOut[i]`
/// the sum of exp(score - max) over them; a query that sees none of them gets sum 0.
void attendItemRange(const AttentionProblem &p, const AttentionOps &ops, int64_t g, int64_t s0,
                     int64_t s1, int64_t k0, int64_t k1, float *acc, float *maxOut,
                     float *sumOut) {
  const int64_t D = p.headDim, group = p.heads / p.kvHeads, qWidth = p.heads * D;
  const int64_t rows = s1 - s0, nq = rows * group, elem = dtypeBytes(p.dt);
  const int64_t kvElem = dtypeBytes(p.kvType), headStride = p.headStride > 0 ? p.headStride : D;
  auto firstKey = [&](int64_t pos) {
    return p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : int64_t(0);
  };
  // Keys any query of the block can see, within [k0, k1): [keyBegin, keyEnd).
  const int64_t keyBegin = std::max(k0, firstKey(p.past + s0));
  const int64_t keyEnd = std::min(k1, p.past + s1);
  const int64_t L = std::max<int64_t>(0, keyEnd - keyBegin);

  Scratch &buf = scratch();
  if (buf.q.size() < size_t(nq * D))
    buf.q.resize(size_t(nq * D));
  if (buf.scores.size() < size_t(L * nq))
    buf.scores.resize(size_t(L * nq));
  // Scores query-major, sc[i * L + t]: each query's softmax and its weights in pass 2 are one
  // contiguous row.
  float *qf = buf.q.data(), *sc = buf.scores.data();

  // Query i = (row r, head j of the group): head h = g * group + j.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < group; ++j) {
      int64_t offset = (s0 + r) * qWidth + (g * group + j) * D;
      widen(static_cast<const char *>(p.q) + offset * elem, p.dt, qf + (r * group + j) * D, D);
    }

  // Pass 1: raw scores of every query against every visible key row.
  for (int64_t si = 0; si < p.numSpans; ++si) {
    const KvSpan &span = p.spans[si];
    int64_t t0 = std::max(keyBegin, span.start), t1 = std::min(keyEnd, span.start + span.count);
    const char *k = static_cast<const char *>(span.k);
    if (ops.scoreRows) {
      if (t0 < t1)
        ops.scoreRows(qf, D, nq, k + ((t0 - span.start) * p.kvStride + g * headStride) * kvElem, p.kvStride, t1 - t0, D,
                      sc + (t0 - keyBegin), L);
      continue;
    }
    for (int64_t t = t0; t < t1; ++t) {
      if (t + kPrefetchRows < t1)
        prefetchRow(k + ((t + kPrefetchRows - span.start) * p.kvStride + g * headStride) * kvElem,
                    D * kvElem);
      ops.dotMany(qf, D, nq, k + ((t - span.start) * p.kvStride + g * headStride) * kvElem, D,
                  sc + (t - keyBegin), L);
    }
  }
  for (int64_t n = 0; n < L * nq; ++n)
    sc[n] *= p.scale;
  roundInPlace(sc, p.dt, L * nq);

  // Softmax per query over its own visible keys; everything else becomes probability 0.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = p.past + s0 + r;
    // [lo, hi): this query's visible keys within the range, relative to keyBegin.
    // A window can start after this range ends (lo > L): the query sees none of its keys.
    const int64_t lo = std::min(L, std::max(firstKey(pos), keyBegin) - keyBegin);
    const int64_t hi = std::min(L, std::max(lo, std::min(pos + 1, keyEnd) - keyBegin));
    for (int64_t j = 0; j < group; ++j) {
      const int64_t i = r * group + j;
      float *si = sc + i * L;
      float maxScore = -std::numeric_limits<float>::infinity(), sum = 0;
      if (ops.expShifted && hi > lo) {
        sum = ops.expShifted(si + lo, hi - lo, &maxScore);
      } else {
        for (int64_t t = lo; t < hi; ++t)
          maxScore = std::max(maxScore, si[t]);
        for (int64_t t = lo; t < hi; ++t) {
          float e = std::exp(si[t] - maxScore);
          si[t] = e;
          sum += e;
        }
      }
      maxOut[i] = maxScore;
      sumOut[i] = sum;
      const float inv = sum > 0 ? 1.0f / sum : 0.0f;
      std::fill(si, si + lo, 0.0f);
      for (int64_t t = lo; t < hi; ++t)
        si[t] *= inv;
      std::fill(si + hi, si + L, 0.0f);
    }
  }
  roundInPlace(sc, p.dt, L * nq);

  // Pass 2: out_i = sum_t p[i][t] v_t, span by span, accumulated in f32.
  std::fill(acc, acc + nq * D, 0.0f);
  for (int64_t si = 0; si < p.numSpans; ++si) {
    const KvSpan &span = p.spans[si];
    int64_t t0 = std::max(keyBegin, span.start), t1 = std::min(keyEnd, span.start + span.count);
    if (t0 >= t1)
      continue;
    const char *v = static_cast<const char *>(span.v) + ((t0 - span.start) * p.kvStride + g * headStride) * kvElem;
    if (ops.weightedSumMany) {
      ops.weightedSumMany(sc + (t0 - keyBegin), L, nq, v, p.kvStride, t1 - t0, D, acc, D, true);
      continue;
    }
    // The first query streams the rows in; the others find them in cache.
    for (int64_t i = 0; i < nq; ++i)
      ops.weightedSum(sc + i * L + (t0 - keyBegin), v, p.kvStride, t1 - t0, D, acc + i * D, i == 0);
  }
}

/// Per-thread output block of a work item and its per-query max and sum.
struct ItemScratch {
  std::vector<float> acc, max, sum;
  void fit(int64_t nq, int64_t D) {
    if (acc.size() < size_t(nq * D))
      acc.resize(size_t(nq * D));
    if (max.size() < size_t(nq)) {
      max.resize(size_t(nq));
      sum.resize(size_t(nq));
    }
  }
};
ItemScratch &itemScratch() {
  thread_local ItemScratch s;
  return s;
}

/// Merges one page's result for work item (kv head g, query rows [s0, s1)) -- its (m_p, l_p, o_p)
/// per query in `page` -- into the running (m, l, o) of those queries: query (row r of the item,
/// head j of the group) at index r * rowStride + first + j (StreamingAttention keeps every query
/// of the problem: rowStride = heads, first = s0 * heads + g * group; a batch item only its own:
/// rowStride = group, first = 0); o has headDim floats each:
///   m' = max(m, m_p), a = l e^(m - m'), b = l_p e^(m_p - m'), o' = (a o + b o_p) / (a + b).
/// The first page a query sees is taken as it is, so a context of one page gives exactly the
/// one-pass kernel's result.
void mergePage(const AttentionProblem &p, int64_t rows, const ItemScratch &page, int64_t rowStride, int64_t first,
               float *max, float *sum, float *out) {
  const int64_t D = p.headDim, group = p.heads / p.kvHeads;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < group; ++j) {
      const int64_t i = r * group + j;
      const float lp = page.sum[size_t(i)];
      if (!(lp > 0))
        continue;
      const int64_t q = r * rowStride + first + j;
      float &m = max[q], &l = sum[q];
      float *o = out + q * D;
      const float *op = page.acc.data() + i * D;
      const float mp = page.max[size_t(i)];
      if (!(l > 0)) {
        m = mp;
        l = lp;
        std::copy(op, op + D, o);
        continue;
      }
      const float mNew = std::max(m, mp);
      const float a = l * std::exp(m - mNew), b = lp * std::exp(mp - mNew);
      const float inv = 1.0f / (a + b);
      for (int64_t d = 0; d < D; ++d)
        o[d] = (a * o[d] + b * op[d]) * inv;
      m = mNew;
      l = a + b;
    }
}

/// Work item (kv head g, query rows [s0, s1)) of `p` streamed over p.spans as pages, exactly as
/// StreamingAttention computes it, with the running state in per-thread buffers; writes the
/// item's rows of p.out.
void streamItem(const AttentionProblem &p, const AttentionOps &ops, int64_t g, int64_t s0, int64_t s1) {
  const int64_t D = p.headDim, group = p.heads / p.kvHeads, elem = dtypeBytes(p.dt);
  const int64_t nq = (s1 - s0) * group;
  ItemScratch &buf = itemScratch();
  buf.fit(nq, D);
  // The running state of the item's nq queries, in the page scratch's order (row * group + head).
  thread_local std::vector<float> runMax, runSum, runOut;
  runMax.assign(size_t(nq), -std::numeric_limits<float>::infinity());
  runSum.assign(size_t(nq), 0.0f);
  runOut.assign(size_t(nq * D), 0.0f);
  for (int64_t si = 0; si < p.numSpans; ++si) {
    const KvSpan &page = p.spans[si];
    if (page.count <= 0)
      continue;
    AttentionProblem pageProblem = p;
    pageProblem.spans = &page;
    pageProblem.numSpans = 1;
    attendItemRange(pageProblem, ops, g, s0, s1, page.start, page.start + page.count, buf.acc.data(),
                    buf.max.data(), buf.sum.data());
    mergePage(p, s1 - s0, buf, group, 0, runMax.data(), runSum.data(), runOut.data());
  }
  for (int64_t r = 0; r < s1 - s0; ++r)
    for (int64_t j = 0; j < group; ++j) {
      const int64_t q = (s0 + r) * p.heads + g * group + j;
      narrow(runOut.data() + (r * group + j) * D, p.dt, static_cast<char *>(p.out) + q * D * elem, D);
    }
}

/// One work item of the one-pass kernel: kv head g, query rows [s0, s1), all keys.
void attendItem(const AttentionProblem &p, const AttentionOps &ops, int64_t g, int64_t s0,
                int64_t s1) {
  const int64_t D = p.headDim, group = p.heads / p.kvHeads, qWidth = p.heads * D;
  const int64_t nq = (s1 - s0) * group, elem = dtypeBytes(p.dt);
  ItemScratch &buf = itemScratch();
  buf.fit(nq, D);
  attendItemRange(p, ops, g, s0, s1, 0, p.past + p.S, buf.acc.data(), buf.max.data(),
                  buf.sum.data());
  for (int64_t r = 0; r < s1 - s0; ++r)
    for (int64_t j = 0; j < group; ++j) {
      int64_t offset = (s0 + r) * qWidth + (g * group + j) * D;
      narrow(buf.acc.data() + (r * group + j) * D, p.dt,
             static_cast<char *>(p.out) + offset * elem, D);
    }
}

/// The query block handed out k-th of `blocks`: 0, B-1, 1, B-2, ... Causal blocks cost more the
/// later they are, so the pool's contiguous halves get about equal work.
int64_t blockOfRank(int64_t k, int64_t blocks) { return k % 2 == 0 ? k / 2 : blocks - 1 - k / 2; }

/// Runs `item(g, s0, s1)` for every work item of `p` on the thread pool.
template <typename Item> void forEachItem(const AttentionProblem &p, Item item) {
  const int64_t blocks = (p.S + kQueryBlock - 1) / kQueryBlock;
  const int64_t items = p.kvHeads * blocks;
  pool().parallelFor(items, 1, [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it) {
      int64_t g = it % p.kvHeads, k = it / p.kvHeads;
      int64_t block = blockOfRank(k, blocks);
      int64_t s0 = block * kQueryBlock, s1 = std::min(p.S, s0 + kQueryBlock);
      item(g, s0, s1);
    }
  });
}

} // namespace

void attendCausal(const AttentionProblem &p) {
  if (p.S <= 0 || p.heads <= 0)
    return;
  // The caller (helm_rt_attention) checks the geometry; the spans must cover every visible key.
  assert(p.kvHeads > 0 && p.heads % p.kvHeads == 0 && p.headDim > 0);
  const AttentionOps &ops = opsFor(activeIsa(), p.kvType);
  forEachItem(p, [&](int64_t g, int64_t s0, int64_t s1) { attendItem(p, ops, g, s0, s1); });
}

void attendBatch(const AttentionProblem *problems, int64_t count) {
  const Isa isa = activeIsa();
  // Every item of every problem, kv head outermost: the pool splits the list into contiguous
  // ranges, so each thread gets whole kv heads of every sequence, whatever the sequences' lengths
  // (8 kv heads on 2 threads: 4 each). Within a problem and head, the blocks in forEachItem's order.
  struct Item {
    int64_t problem, g, s0, s1;
  };
  thread_local std::vector<Item> items;
  items.clear();
  int64_t maxKvHeads = 0;
  for (int64_t b = 0; b < count; ++b)
    if (problems[b].S > 0 && problems[b].heads > 0)
      maxKvHeads = std::max(maxKvHeads, problems[b].kvHeads);
  for (int64_t g = 0; g < maxKvHeads; ++g)
    for (int64_t b = 0; b < count; ++b) {
      const AttentionProblem &p = problems[b];
      if (p.S <= 0 || p.heads <= 0 || g >= p.kvHeads)
        continue;
      assert(p.kvHeads > 0 && p.heads % p.kvHeads == 0 && p.headDim > 0);
      const int64_t blocks = (p.S + kQueryBlock - 1) / kQueryBlock;
      for (int64_t k = 0; k < blocks; ++k) {
        const int64_t block = blockOfRank(k, blocks);
        const int64_t s0 = block * kQueryBlock;
        items.push_back({b, g, s0, std::min(p.S, s0 + kQueryBlock)});
      }
    }
  const Item *list = items.data(); // the caller's list: the pool's threads have their own `items`
  pool().parallelFor(int64_t(items.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it)
      streamItem(problems[list[it].problem], opsFor(isa, problems[list[it].problem].kvType),
                 list[it].g, list[it].s0, list[it].s1);
  });
}

void StreamingAttention::begin(const AttentionProblem &p) {
  problem_ = p;
  problem_.spans = nullptr;
  problem_.numSpans = 0;
  int64_t queries = p.S * p.heads;
  max_.assign(size_t(queries), -std::numeric_limits<float>::infinity());
  sum_.assign(size_t(queries), 0.0f);
  out_.assign(size_t(queries * p.headDim), 0.0f);
  pages_ = 0;
}

void StreamingAttention::addPage(const KvSpan &page) {
  const AttentionProblem &p = problem_;
  if (p.S <= 0 || p.heads <= 0 || page.count <= 0)
    return;
  assert(p.kvHeads > 0 && p.heads % p.kvHeads == 0 && p.headDim > 0);
  const AttentionOps &ops = opsFor(activeIsa(), p.kvType);
  AttentionProblem pageProblem = p;
  pageProblem.spans = &page;
  pageProblem.numSpans = 1;
  const int64_t D = p.headDim, group = p.heads / p.kvHeads;
  forEachItem(p, [&](int64_t g, int64_t s0, int64_t s1) {
    const int64_t nq = (s1 - s0) * group;
    ItemScratch &buf = itemScratch();
    buf.fit(nq, D);
    attendItemRange(pageProblem, ops, g, s0, s1, page.start, page.start + page.count,
                    buf.acc.data(), buf.max.data(), buf.sum.data());
    mergePage(p, s1 - s0, buf, p.heads, s0 * p.heads + g * group, max_.data(), sum_.data(), out_.data());
  });
  ++pages_;
}

void StreamingAttention::end() {
  const AttentionProblem &p = problem_;
  const int64_t D = p.headDim, elem = dtypeBytes(p.dt);
  for (int64_t q = 0; q < p.S * p.heads; ++q)
    narrow(out_.data() + q * D, p.dt, static_cast<char *>(p.out) + q * D * elem, D);
}

} // namespace helm::kernels
