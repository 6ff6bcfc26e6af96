//===- WeightQuantizer.h - a weight's bytes in a block format ----------------------===//
//
// The package builder's compile-time quantization: one tensor at a time, from its source bytes
// (f32, f16 or bf16) to the rows of blocks the kernels read (docs/quantization.md).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_WEIGHTQUANTIZER_H
#define HELM_COMPILER_WEIGHTQUANTIZER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace helm {

/// Quantizes a 2-D tensor of `sourceDtype` ("f32", "f16", "bf16") with shape `sourceShape` to
/// helm_dtype `blockDtype`, rows along source dimension `rowDim` (1: the source is [K, N] and its
/// columns become the rows, transposed on the way). `out` receives rows x (K / block) blocks.
/// Errors name the tensor and the problem in one line.
llvm::Error quantizeWeight(llvm::StringRef name, llvm::ArrayRef<char> source, llvm::StringRef sourceDtype,
                           llvm::ArrayRef<int64_t> sourceShape, int64_t rowDim, int32_t blockDtype,
                           std::vector<char> &out);

/// The codes of a weight that arrives as ONNX blocked integers (MatMulNBits: `codes` uint8
/// [N, ceil(K / blockSize), blockSize * bits / 8], `scales` N * blocks values of `scaleDtype`
/// ("f32" or "f16"), `zeroPoints` empty, "u8" (4-bit values packed two to a byte, low nibble
/// first; N * ceil(blocks * bits / 8) bytes) or N * blocks values of the scales' dtype) rewritten
/// as N rows of K / 32 blocks of `blockDtype`, which holds the same codes: q4_0 (4 bits, no zero
/// points: (q - 8) d), q4_1 (4 bits with zero points: q d + m, m = -z s) or q8_0 (8 bits, no zero
/// points: codes q - 128). The scales become f16 (round to nearest even; a scale f16 cannot hold
/// is an error). Errors name the tensor and the problem in one line.
llvm::Error repackOnnxBlocks(llvm::StringRef name, int64_t N, int64_t K, int64_t bits, int64_t blockSize,
                             llvm::ArrayRef<char> codes, llvm::ArrayRef<char> scales, llvm::StringRef scaleDtype,
                             llvm::ArrayRef<char> zeroPoints, llvm::StringRef zeroPointDtype, int32_t blockDtype,
                             std::vector<char> &out);

} // namespace helm

#endif
