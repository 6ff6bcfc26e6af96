//===- ConvertScalar.cpp - widen / narrow one element at a time ---------------------===//
#include "kernels/common/ConvertImpl.h"

namespace helm::kernels::convert {
namespace {
template <DType D> void widenScalar(const void *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = loadElem<D>(src, i);
}
template <DType D> void narrowScalar(const float *src, void *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    storeAs(dst, D, i, src[i]);
}
} // namespace

const Converters &scalarConverters() {
  static const Converters scalar = {{&copyF32, &widenScalar<DType::f16>, &widenScalar<DType::bf16>},
                                    {&storeF32, &narrowScalar<DType::f16>, &narrowScalar<DType::bf16>}};
  return scalar;
}

} // namespace helm::kernels::convert
