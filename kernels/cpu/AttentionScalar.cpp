//===- AttentionScalar.cpp - the attention kernel's primitives, one element at a time ---===//
#include "kernels/cpu/AttentionImpl.h"

namespace helm::kernels::attention {
namespace {

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

} // namespace

const AttentionOps &scalarOps(DType kvType) {
  static const AttentionOps f32{&dotManyScalar<float>, &weightedSumScalar<float>, nullptr, nullptr, nullptr};
  static const AttentionOps f16{&dotManyScalar<uint16_t>, &weightedSumScalar<uint16_t>, nullptr, nullptr, nullptr};
  return kvType == DType::f16 ? f16 : f32;
}

} // namespace helm::kernels::attention
