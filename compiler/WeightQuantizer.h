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

/// A weight that arrives as ONNX blocked integers (MatMulNBits, GatherBlockQuantized, a block-wise
/// DequantizeLinear): N rows of K `bits`-bit codes in blocks of `blockSize` along each row.
/// `codes`: `codeDtype` "u8" (bytes; 4-bit codes two to a byte, low nibble first; each row
/// ceil(K / blockSize) * blockSize * bits / 8 bytes), "i4" / "u4" (ONNX's packing over the whole
/// tensor) or "i8" (one signed code a byte). `scales`: N * blocks values of `scaleDtype` ("f32" or
/// "f16"). `zeroPoints`: empty, "u8" (4-bit values two to a byte, each row padded to whole bytes),
/// the codes' element type (packed over the whole tensor) or the scales' dtype; absent zero points
/// are 2^(bits-1) for "u8" codes and 0 for "i4" / "u4" / "i8". With `kMajor` the codes are the
/// [K, N] tensor (code (n, k) is element k * N + n) and the scales and zero points [blocks, N].
struct OnnxBlockedSource {
  int64_t N = 0, K = 0, bits = 0, blockSize = 0;
  bool kMajor = false;
  llvm::ArrayRef<char> codes;
  llvm::StringRef codeDtype;
  llvm::ArrayRef<char> scales;
  llvm::StringRef scaleDtype;
  llvm::ArrayRef<char> zeroPoints;
  llvm::StringRef zeroPointDtype;
};

/// `source` rewritten as N rows of K / 32 blocks of `blockDtype`, which holds the same codes: q4_0
/// ((q - 8) d: u8 codes without zero points, or i4 codes + 8), q4_1 (q d + m, m = -z s: with zero
/// points, or u4 codes) or q8_0 (8-bit codes without zero points: u8 q - 128, or i8 as they are).
/// The scales become f16 (round to nearest even; a scale f16 cannot hold is an error), m is
/// computed in f32 and rounded to f16. Errors name the tensor and the problem in one line.
llvm::Error repackOnnxBlocks(llvm::StringRef name, const OnnxBlockedSource &source, int32_t blockDtype,
                             std::vector<char> &out);

/// `source` dequantized into N x K values of its scales' dtype: (code - zero point) * scale in f32,
/// then rounded to f16 for f16 scales. For rows that are no whole number of HELM's blocks of 32
/// (ONNX Runtime's quantizer pads the last block of such a row), which no block format can hold.
/// Errors name the tensor and the problem in one line.
llvm::Error dequantizeOnnxBlocks(llvm::StringRef name, const OnnxBlockedSource &source, std::vector<char> &out);

} // namespace helm

#endif
