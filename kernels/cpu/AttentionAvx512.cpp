//===- AttentionAvx512.cpp - the attention kernel's primitives with AVX-512 ----------===//
// GCC 12's AVX-512 headers build some intrinsics (reductions, extracts) from deliberately
// undefined vectors and then warn about them; the warnings are about the headers, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "kernels/cpu/AttentionImpl.h"

#include <vector>

namespace helm::kernels::attention {
namespace {

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

} // namespace

const AttentionOps &avx512Ops(DType kvType) {
  static const AttentionOps f32{nullptr, nullptr, &weightedSumManyAvx512<float>, &scoreRowsAvx512<float>,
                                &expShiftedAvx512};
  static const AttentionOps f16{nullptr, nullptr, &weightedSumManyAvx512<uint16_t>, &scoreRowsAvx512<uint16_t>,
                                &expShiftedAvx512};
  return kvType == DType::f16 ? f16 : f32;
}

} // namespace helm::kernels::attention
