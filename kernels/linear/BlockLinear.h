//===- BlockLinear.h - helm_k_linear on weights in block formats -------------------===//
#ifndef HELM_KERNELS_LINEAR_BLOCKLINEAR_H
#define HELM_KERNELS_LINEAR_BLOCKLINEAR_H

#include <cstdint>

namespace helm::kernels {

/// helm_k_linear for W of block dtype `wDtype` (N rows of K weights in blocks): x of xDtype and y of
/// yDtype are converted to and from f32 around the kernels. A call generated code cannot make (a
/// format without a kernel, K not a multiple of the block) prints why and aborts, as helm_k_linear
/// does for a bad dtype code.
void linearBlocks(const void *x, int32_t xDtype, const void *w, int32_t wDtype, void *y, int32_t yDtype,
                  int64_t M, int64_t K, int64_t N);

/// How linearBlocks computes more rows of x than a decode step has (prefill): `integer` quantizes
/// them per block of 32 and runs quant::quantLinear (the default, as llama.cpp does); `dequantize`
/// dequantizes W in tiles for the f32 kernels and keeps x in f32. HELM_QUANT_PREFILL=dequantize
/// selects the latter for a process; HELM_QUANT_EXACT=1 dequantizes every call.
enum class BlockPrefillPath { integer, dequantize };
void linearBlocksWith(BlockPrefillPath path, const void *x, int32_t xDtype, const void *w, int32_t wDtype, void *y,
                      int32_t yDtype, int64_t M, int64_t K, int64_t N);

} // namespace helm::kernels

#endif
