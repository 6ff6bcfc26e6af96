//===- BlockKernels.h - the contract's dtype codes on block weights: call checks ----===//
//
// helm_k_embed_blocks (the embedding gather from a table in blocks) and the checks every kernel
// on block weights makes of a call's dtype codes. The linear on block weights is above this
// layer, with the linear entry (kernels/linear/BlockLinear.h).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_QUANT_BLOCKKERNELS_H
#define HELM_KERNELS_QUANT_BLOCKKERNELS_H

#include "kernels/common/Numeric.h"
#include "kernels/quant/BlockFormats.h"

#include <cstdint>
#include <string>

namespace helm::quant {

/// A call generated code cannot make (a format without a kernel, K not a multiple of the block, a
/// bad dtype code): prints "<kernel>: invalid call: <why>" and aborts.
[[noreturn]] void invalidCall(const char *kernel, const std::string &why);
/// The block format of a weight's dtype code, or invalidCall.
BlockFormat blockFormatOrAbort(const char *kernel, int32_t dtype);
/// The element type (f32, f16, bf16) of an activation's dtype code, or invalidCall.
kernels::DType elementDtypeOrAbort(const char *kernel, int32_t dtype);

} // namespace helm::quant

#endif
