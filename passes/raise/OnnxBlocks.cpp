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
  if (w.dequantizeLinear) {
    if (bs % 32 != 0)
      return nodeError(op, "block_size " + Twine(bs) +
                               " is not supported: HELM stores blocks of 32 weights with one scale each, so a "
                               "block must be a multiple of 32");
  } else {
    if (bs < 16 || (bs & (bs - 1)) != 0)
      return nodeError(op, "block_size " + Twine(bs) + " is not a power of 2 of at least 16");
    if (bs < 32)
      return nodeError(op, "block_size " + Twine(bs) +
                               " is not supported: HELM stores blocks of 32 weights with one scale each, so an "
                               "ONNX block must hold at least 32");
  }
  if (!w.codes || !w.scales)
    return nodeError(op, "the quantized data and scales must be initializers");
  WeightDeclOp codes = declOf(w.codes), scales = declOf(w.scales), zeroPoints = declOf(w.zeroPoints);
  if (!codes || !scales || (w.zeroPoints && !zeroPoints))
    return nodeError(op, "an input's weight declaration is missing");

  // The codes: uint8 bytes (4-bit values two to a byte), N rows of ceil(K / block) blocks of
  // block * bits / 8 bytes; or element-typed int4 / uint4 / int8 (DequantizeLinear's, or
  // GatherBlockQuantized's 4-bit types), N x K packed values. The declaration's length is its type's
  // packed size (its verifier), so this checks the shape.
  const int64_t blocks = (K + bs - 1) / bs;
  auto codesType = cast<RankedTensorType>(codes.getType());
  Type codeElement = codesType.getElementType();
  const bool byteCodes = codeElement.isUnsignedInteger(8) && !w.dequantizeLinear;
  const bool elementCodes = bits == 4 ? codeElement.isInteger(4) : w.dequantizeLinear && codeElement.isSignlessInteger(8);
  const int64_t codeBytes = OnnxBlocksAttr::codeBytes(codeElement, bits, bs, N, K);
  if ((!byteCodes && !elementCodes) || int64_t(codes.getLength()) != codeBytes) {
    std::string types = w.dequantizeLinear ? (bits == 4 ? "int4 or uint4" : "int8")
                                           : (bits == 4 ? "uint8, int4 or uint4" : "uint8");
    return nodeError(op, "the quantized data " + Twine(codes.getOnnxName()) + " is not " + Twine(codeBytes) +
                             " bytes of " + types + " codes for " + Twine(N) + " x " + Twine(K) + " " + Twine(bits) +
                             "-bit weights in blocks of " + Twine(bs));
  }
  if (!byteCodes && !w.kMajor && K % bs != 0)
    return nodeError(op, "the row length " + Twine(K) + " is not a multiple of block_size " + Twine(bs));
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
                                    scaleElement, zeroPoints ? zeroPoints.getOnnxName() : StringRef(), zpElement,
                                    w.kMajor);
  std::optional<BlockFormat> format = source.getStorageFormat();
  if (!format) // the one case: 8-bit codes minus a zero point span -255..255
    return nodeError(op, "8-bit weights with zero points are not supported (8-bit symmetric, and 4-bit with or "
                         "without zero points, are)");
  // Rows that are not whole blocks of 32 (ONNX Runtime's quantizer pads a row's last block): no
  // block format holds them, so the package stores the weight dequantized (no `blocks`).
  BlocksAttr stored = K % 32 == 0 ? BlocksAttr::get(ctx, *format, 0) : BlocksAttr();
  auto type = RankedTensorType::get({N, K}, scaleElement);
  std::string name = (codes.getSymName() + "_blocks").str();
  if (auto earlier = symbols.lookup<WeightDeclOp>(name);
      earlier && earlier.getType() == type && earlier.getOnnxBlocksAttr() == source)
    return earlier;
  OpBuilder detached(ctx);
  auto decl = WeightDeclOp::create(detached, codes.getLoc(), name, type, codes.getOnnxName(),
                                   codes.getLocation(), codes.getOffset(), codes.getLength(),
                                   stored, source);
  symbols.insert(decl, std::next(Block::iterator(codes))); // renamed on a clash
  return decl;
}

FailureOr<WeightDeclOp> declareDequantizedWeight(OnnxNodeOp dq, SymbolTable &symbols, bool kMajor) {
  auto inputs = dq.getInputs();
  if (inputs.size() < 2)
    return nodeError(dq, "needs the inputs x and x_scale");
  WeightOp codes = traceWeight(inputs[0]), scales = traceWeight(inputs[1]);
  const bool hasZeroPoints = inputs.size() > 2 && !isa<NoneType>(inputs[2].getType());
  WeightOp zeroPoints = hasZeroPoints ? traceWeight(inputs[2]) : WeightOp();
  if (!codes || !scales || (hasZeroPoints && !zeroPoints))
    return nodeError(dq, "a quantized weight's data, scales and zero points must be initializers");
  auto codesType = cast<RankedTensorType>(codes.getType());
  if (codesType.getRank() != 2)
    return nodeError(dq, "the quantized data must be 2-D, got rank " + Twine(codesType.getRank()));
  Type codeElement = codesType.getElementType();
  int64_t bits = codeElement.isInteger(4) ? 4 : codeElement.isSignlessInteger(8) ? 8 : 0;
  if (codeElement.isUnsignedInteger(8))
    return nodeError(dq, "uint8 weights are not supported: around any zero point their values span up to "
                         "255 steps, which no 8-bit block format holds (int8 without zero points, int4 and "
                         "uint4 are supported)");
  if (!bits) {
    std::string name;
    llvm::raw_string_ostream os(name);
    os << codeElement;
    return nodeError(dq, "quantized data of type " + Twine(name) + " is not supported (int4, uint4 or int8)");
  }
  // The weight [N, K] HELM computes with; blocks must run along K (axis 0 of a K-major [K, N]).
  const int64_t rows = codesType.getDimSize(0), cols = codesType.getDimSize(1);
  const int64_t N = kMajor ? cols : rows, K = kMajor ? rows : cols;
  const int64_t kAxis = kMajor ? 0 : 1;
  int64_t axis = dq.getIntAttr("axis", 1), blockSize = dq.getIntAttr("block_size", 0);
  if (axis < 0)
    axis += 2;
  if (blockSize <= 0)
    return nodeError(dq, "per-tensor or per-axis scales (no block_size) are not supported on a weight: HELM "
                         "stores blocks along K (opset 21 block_size on axis " +
                             Twine(kAxis) + ")");
  if (axis != kAxis)
    return nodeError(dq, "blocks along axis " + Twine(axis) + " cut across the weight's " + Twine(N) +
                             " rows (outputs or tokens); HELM needs them along each row's " + Twine(K) +
                             " weights (axis " + Twine(kAxis) + ")");
  auto scalesType = cast<RankedTensorType>(scales.getType());
  if (int64_t outputDtype = dq.getIntAttr("output_dtype", 0); outputDtype != 0) {
    // ONNX's FLOAT = 1 and FLOAT16 = 10: the output must be the scales' type, which HELM computes in.
    Type element = scalesType.getElementType();
    if (!((outputDtype == 1 && element.isF32()) || (outputDtype == 10 && element.isF16())))
      return nodeError(dq, "output_dtype " + Twine(outputDtype) + " is not the scales' type");
  }
  const int64_t blocks = K > 0 && blockSize > 0 ? (K + blockSize - 1) / blockSize : 0;
  SmallVector<int64_t, 2> blockShape = kMajor ? SmallVector<int64_t, 2>{blocks, N} : SmallVector<int64_t, 2>{N, blocks};
  auto shapeText = [](ArrayRef<int64_t> shape) {
    std::string text;
    for (int64_t d : shape)
      text += (text.empty() ? "" : "x") + std::to_string(d);
    return text;
  };
  for (WeightOp w : {scales, zeroPoints}) {
    if (!w)
      continue;
    auto type = cast<RankedTensorType>(w.getType());
    if (type.getShape() != ArrayRef<int64_t>(blockShape))
      return nodeError(dq, Twine(w == scales ? "x_scale" : "x_zero_point") + " is " + shapeText(type.getShape()) +
                               ", not " + shapeText(blockShape) + " (one per block of " + Twine(blockSize) +
                               " of the " + shapeText(codesType.getShape()) + " weight)");
  }
  if (zeroPoints && cast<RankedTensorType>(zeroPoints.getType()).getElementType() != codeElement)
    return nodeError(dq, "x_zero_point must have the quantized data's type");
  OnnxBlockedWeight w{N, K, bits, blockSize, codes, scales, zeroPoints};
  w.dequantizeLinear = true;
  w.kMajor = kMajor;
  return declareOnnxBlockedWeight(dq, symbols, w);
}

} // namespace helm
