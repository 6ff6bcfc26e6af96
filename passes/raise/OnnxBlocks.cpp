//===- OnnxBlocks.cpp - declarations for weights that arrive as ONNX blocked integers ---===//
#include "passes/raise/OnnxBlocks.h"

#include "passes/raise/OnnxMatchers.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace helm {

namespace {
WeightDeclOp declOf(WeightOp weight) {
  return weight ? SymbolTable::lookupNearestSymbolFrom<WeightDeclOp>(weight, weight.getNameAttr()) : WeightDeclOp();
}
} // namespace

FailureOr<WeightDeclOp> declareOnnxBlockedWeight(OnnxNodeOp op, SymbolTable &symbols, const OnnxBlockedWeight &w) {
  const int64_t N = w.N, K = w.K, bits = w.bits, bs = w.blockSize;
  if (K <= 0 || N <= 0 || bs <= 0)
    return nodeError(op, "needs positive sizes and block_size");
  const int64_t kMaxDim = OnnxBlocksAttr::kMaxDim;
  if (K > kMaxDim || N > kMaxDim || bs > kMaxDim)
    return nodeError(op, "N " + Twine(N) + ", K " + Twine(K) + " or block_size " + Twine(bs) + " is over 2^30");
  if (bits != 4 && bits != 8)
    return nodeError(op, "bits " + Twine(bits) + " is not supported (4 or 8)");
  if (bs < 16 || (bs & (bs - 1)) != 0)
    return nodeError(op, "block_size " + Twine(bs) + " is not a power of 2 of at least 16");
  if (bs < 32)
    return nodeError(op, "block_size " + Twine(bs) +
                             " is not supported: HELM stores blocks of 32 weights with one scale each, so an "
                             "ONNX block must hold at least 32");
  if (K % 32 != 0)
    return nodeError(op, "K = " + Twine(K) + " is not a multiple of 32, the block HELM stores");
  if (!w.codes || !w.scales)
    return nodeError(op, "the quantized data and scales must be initializers");
  WeightDeclOp codes = declOf(w.codes), scales = declOf(w.scales), zeroPoints = declOf(w.zeroPoints);
  if (!codes || !scales || (w.zeroPoints && !zeroPoints))
    return nodeError(op, "an input's weight declaration is missing");

  // The codes: uint8 bytes (4-bit values two to a byte) or packed int4 / uint4, N rows of
  // ceil(K / block) blocks of block * bits / 8 bytes (the declaration's length, which its verifier
  // ties to its type's packed size).
  const int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8;
  auto codesType = cast<RankedTensorType>(codes.getType());
  Type codeElement = codesType.getElementType();
  const bool byteCodes = codeElement.isUnsignedInteger(8);
  if ((!byteCodes && !(codeElement.isInteger(4) && bits == 4)) || int64_t(codes.getLength()) != N * blocks * blob)
    return nodeError(op, "the quantized data " + Twine(codes.getOnnxName()) + " is not " + Twine(N * blocks * blob) +
                             " bytes of uint8" + (bits == 4 ? ", int4 or uint4" : "") + " codes for " + Twine(N) +
                             " x " + Twine(K) + " " + Twine(bits) + "-bit weights in blocks of " + Twine(bs));
  auto scalesType = cast<RankedTensorType>(scales.getType());
  Type scaleElement = scalesType.getElementType();
  if (!(scaleElement.isF32() || scaleElement.isF16()))
    return nodeError(op, "scales " + Twine(scales.getOnnxName()) + " must be float or float16");
  if (scalesType.getNumElements() != N * blocks)
    return nodeError(op, "scales " + Twine(scales.getOnnxName()) + " have " + Twine(scalesType.getNumElements()) +
                             " values, " + Twine(N * blocks) + " expected (N " + Twine(N) + " x " + Twine(blocks) +
                             " blocks)");
  // Zero points: uint8 bytes with each row padded to whole bytes (MatMulNBits), packed like the
  // codes' 4-bit type, or the scales' type; one per block.
  Type zpElement;
  if (zeroPoints) {
    auto zpType = cast<RankedTensorType>(zeroPoints.getType());
    zpElement = zpType.getElementType();
    int64_t expected = zpElement.isUnsignedInteger(8) && byteCodes ? N * ((blocks * bits + 7) / 8)
                       : zpElement == codeElement || zpElement == scaleElement ? N * blocks
                                                                               : -1;
    if (expected < 0)
      return nodeError(op, "zero_points " + Twine(zeroPoints.getOnnxName()) +
                               " must have the quantized data's or the scales' type");
    if (zpType.getNumElements() != expected)
      return nodeError(op, "zero_points " + Twine(zeroPoints.getOnnxName()) + " have " +
                               Twine(zpType.getNumElements()) + " values, " + Twine(expected) + " expected");
  }

  MLIRContext *ctx = op.getContext();
  auto source = OnnxBlocksAttr::get(ctx, bits, bs, codes.getOnnxName(), codeElement, scales.getOnnxName(),
                                    scaleElement, zeroPoints ? zeroPoints.getOnnxName() : StringRef(), zpElement);
  std::optional<BlockFormat> format = source.getStorageFormat();
  if (!format) // the one case: 8-bit codes minus a zero point span -255..255
    return nodeError(op, "8-bit weights with zero points are not supported (8-bit symmetric, and 4-bit with or "
                         "without zero points, are)");
  OpBuilder detached(ctx);
  auto decl = WeightDeclOp::create(detached, codes.getLoc(), (codes.getSymName() + "_blocks").str(),
                                   RankedTensorType::get({N, K}, scaleElement), codes.getOnnxName(),
                                   codes.getLocation(), codes.getOffset(), codes.getLength(),
                                   BlocksAttr::get(ctx, *format, 0), source);
  symbols.insert(decl, std::next(Block::iterator(codes))); // renamed on a clash
  return decl;
}

} // namespace helm
