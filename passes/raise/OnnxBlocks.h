//===- OnnxBlocks.h - declarations for weights that arrive as ONNX blocked integers ---===//
//
// MatMulNBits and a block-wise DequantizeLinear feeding a MatMul (helm-raise-linear), and
// GatherBlockQuantized or a Gather of a DequantizeLinear (helm-raise-quantized-gather) all carry a
// weight as codes, scales and optional zero points. This checks those initializers against the
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
  /// From a DequantizeLinear: the block may be any multiple of 32 (not only a power of 2), and the
  /// codes are element-typed (int4, uint4, int8), never MatMulNBits' uint8 bytes.
  bool dequantizeLinear = false;
  /// Codes, scales and zero points laid out [K, N] / [blocks, N] (a DequantizeLinear whose output is
  /// the MatMul's [K, N] weight) rather than [N, K] / [N, blocks].
  bool kMajor = false;
};

/// Checks the initializers behind `w` (types and sizes, the bits and block size HELM stores) and
/// declares `@<codes>_blocks : tensor<N x K x scale type>` with `onnx_blocks` and `blocks` after the
/// codes' declaration, or returns the one an earlier node declared for the same blocks (a token
/// table shared by the embedding and the LM head). Failures are one-line errors on `op` naming it
/// (nodeError).
mlir::FailureOr<WeightDeclOp> declareOnnxBlockedWeight(OnnxNodeOp op, mlir::SymbolTable &symbols,
                                                       const OnnxBlockedWeight &w);

/// A block-wise DequantizeLinear `dq` (opset 21: int4, uint4 or int8 codes, blocks of `block_size`
/// along one axis) whose output, of shape [K, N] when `kMajor` or [N, K] otherwise, is the weight
/// of `consumer` (a MatMul, Gemm or Gather): checks the axis, types and shapes and declares it as
/// declareOnnxBlockedWeight does. Failures are one-line errors naming `dq`.
mlir::FailureOr<WeightDeclOp> declareDequantizedWeight(OnnxNodeOp dq, mlir::SymbolTable &symbols, bool kMajor);

} // namespace helm

#endif
