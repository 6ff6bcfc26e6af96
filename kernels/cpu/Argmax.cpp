//===- Argmax.cpp - the first index of the largest value: the ISA's path -----------===//
#include "kernels/cpu/Argmax.h"

#include "kernels/common/Isa.h"

namespace helm::kernels {

int64_t firstArgmax(const float *x, int64_t n) {
  if (activeIsa() != Isa::scalar)
    return argmax::firstArgmaxAvx2(x, n);
  return argmax::firstArgmaxScalar(x, n);
}

} // namespace helm::kernels
