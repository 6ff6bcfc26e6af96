//===- OnnxBlocks.h - declarations for weights that arrive as ONNX blocked integers ---===//
//
// MatMulNBits (helm-raise-linear) and GatherBlockQuantized (helm-raise-quantized-gather) both carry
// a weight as codes, scales and optional zero points. This checks those initializers against the
// node's shape and declares the [N, K] weight HELM computes with (`onnx_blocks` + `blocks`).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_RAISE_ONNXBLOCKS_H
#define HELM_PASSES_RAISE_ONNXBLOCKS_H

#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/SymbolTable.h"

namespace helm {

/// The node's weight: N rows of K weights, `bits`-bit codes in blocks of `blockSize` along K.
struct OnnxBlockedWeight {
  int64_t N = 0, K = 0, bits = 4, blockSize = 0;
  WeightOp codes, scales, zeroPoints; // zeroPoints may be null
};

/// Checks the initializers behind `w` (types and sizes, the bits and block size HELM stores) and
/// declares `@<codes>_blocks : tensor<N x K x scale type>` with `onnx_blocks` and `blocks` after the
/// codes' declaration. Failures are one-line errors on `op` naming it (nodeError).
mlir::FailureOr<WeightDeclOp> declareOnnxBlockedWeight(OnnxNodeOp op, mlir::SymbolTable &symbols,
                                                       const OnnxBlockedWeight &w);

} // namespace helm

#endif
