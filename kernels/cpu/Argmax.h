//===- Argmax.h - the first index of the largest value of a row --------------------===//
#ifndef HELM_KERNELS_CPU_ARGMAX_H
#define HELM_KERNELS_CPU_ARGMAX_H

#include <cstdint>

namespace helm::kernels {

/// The first index of the largest value of x[0, n), n > 0 (greedy decoding's token). A NaN never
/// wins, except at index 0, which nothing compares greater than. The active ISA's path (Isa.h);
/// every path gives the scalar loop's index.
int64_t firstArgmax(const float *x, int64_t n);

namespace argmax {
int64_t firstArgmaxScalar(const float *x, int64_t n);
int64_t firstArgmaxAvx2(const float *x, int64_t n); // call only if isaSupported(Isa::avx2)
} // namespace argmax

} // namespace helm::kernels

#endif
