//===- ArgmaxScalar.cpp - the first index of the largest value, one at a time ------===//
#include "kernels/cpu/Argmax.h"

namespace helm::kernels {

int64_t argmax::firstArgmaxScalar(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best])
      best = i;
  return best;
}

} // namespace helm::kernels
