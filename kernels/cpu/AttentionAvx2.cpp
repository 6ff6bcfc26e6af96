//===- AttentionAvx2.cpp - the attention kernel's primitives with AVX2 + FMA + F16C --===//
#include "kernels/cpu/AttentionImpl.h"

namespace helm::kernels::attention {
namespace {

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


} // namespace

const AttentionOps &avx2Ops(DType kvType) {
  static const AttentionOps f32{&dotManyAvx2<float>, nullptr, &weightedSumManyAvx2<float>, nullptr, &expShiftedAvx2};
  static const AttentionOps f16{&dotManyAvx2<uint16_t>, nullptr, &weightedSumManyAvx2<uint16_t>, nullptr,
                                &expShiftedAvx2};
  return kvType == DType::f16 ? f16 : f32;
}

} // namespace helm::kernels::attention
