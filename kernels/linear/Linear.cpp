//===- Linear.cpp - helm_k_linear: the contract's linear, above the kernel libraries --===//
//
// The one entry generated code calls for y = x . W: weights in block formats go to BlockLinear
// (kernels/quant's integer GEMV, or dequantized tiles for kernels/cpu's f32 kernels), element
// weights to kernels/cpu's GEMV and GEMM (linearElements). Design: docs/kernels.md,
// docs/quantization.md.
//
//===----------------------------------------------------------------------===//
#include "contract/helm_contract.h"
#include "kernels/common/Numeric.h"
#include "kernels/cpu/Gemv.h"
#include "kernels/linear/BlockLinear.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace helm::kernels;

extern "C" void helm_k_linear(const void *x, int32_t xDtype, const void *w, int32_t wDtype,
                              int32_t wTransposed, void *y, int32_t yDtype, int64_t M, int64_t K,
                              int64_t N) {
  if (helm_dtype_block_weights(wDtype) > 0) {
    linearBlocks(x, xDtype, w, wDtype, y, yDtype, M, K, N);
    return;
  }
  if (!isDType(xDtype) || !isDType(wDtype) || !isDType(yDtype) || K < 0) {
    // Generated code never does this; a bad code would index past the kernel tables.
    std::fprintf(stderr,
                 "helm_k_linear: invalid call: dtype codes x %d, w %d, y %d (0 = f32, 1 = f16, "
                 "2 = bf16; 3-8 block formats, weights only), K = %lld\n",
                 xDtype, wDtype, yDtype, (long long)K);
    std::abort();
  }
  linearElements(x, DType(xDtype), w, DType(wDtype), wTransposed != 0, y, DType(yDtype), M, K, N);
}
