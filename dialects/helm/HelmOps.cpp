//===- HelmOps.cpp - HELM operations: verifiers and helpers ---------------------===//
#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace helm;

namespace {
/// Static size of the last dimension, or ShapedType::kDynamic.
int64_t lastDim(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked || ranked.getRank() == 0)
    return ShapedType::kDynamic;
  return ranked.getShape().back();
}

bool sameLeadingDims(RankedTensorType a, RankedTensorType b) {
  if (a.getRank() != b.getRank())
    return false;
  for (int64_t i = 0; i + 1 < a.getRank(); ++i)
    if (a.getDimSize(i) != b.getDimSize(i) && !a.isDynamicDim(i) && !b.isDynamicDim(i))
      return false;
  return true;
}

int64_t byteWidth(Type elementType) {
  return (elementType.getIntOrFloatBitWidth() + 7) / 8;
}

/// Bytes of a tensor as stored: 4-bit integers two to a byte (ONNX's INT4 / UINT4), every other
/// type whole bytes per element (bool included).
int64_t storageBytes(RankedTensorType type) {
  if (type.getElementType().getIntOrFloatBitWidth() == 4)
    return (type.getNumElements() + 1) / 2;
  return type.getNumElements() * byteWidth(type.getElementType());
}
} // namespace

//===----------------------------------------------------------------------===//
// Weights and constants
//===----------------------------------------------------------------------===//

LogicalResult WeightDeclOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  if (!type.getElementType().isIntOrFloat())
    return emitOpError("weight element type must be an integer or float, got ")
           << type.getElementType();
  int64_t bytes = storageBytes(type);
  int64_t length = getLengthAttr().getInt(), offset = getOffsetAttr().getInt();
  if (getPrepacked() && getOnnxBlocksAttr())
    return emitOpError("a weight is either prepacked blocks or ONNX blocks, not both");
  if (OnnxBlocksAttr onnx = getOnnxBlocksAttr()) {
    // The bytes are the codes initializer's (OnnxBlocksAttr::getCodeBytes). Without `blocks` the
    // package stores the weight dequantized (rows that are not whole blocks of 32).
    BlocksAttr blocks = getBlocksAttr();
    if ((blocks && blocks.getRowDim() != 0) || type.getRank() != 2)
      return emitOpError("a weight from ONNX blocks must be [N, K] with blocks along its rows (row_dim 0)");
    if (type.getElementType() != onnx.getScaleType())
      return emitOpError("a weight from ONNX blocks has its scales' element type ") << onnx.getScaleType()
                                                                                   << ", got " << type;
    std::optional<BlockFormat> expected = onnx.getStorageFormat();
    if (blocks && !expected)
      return emitOpError("8-bit ONNX blocks with zero points have no block format");
    if (blocks && blocks.getFormat() != *expected)
      return emitOpError("ONNX blocks of ") << onnx.getBits() << "-bit " << onnx.getCodeType() << " codes "
                                            << (onnx.getZeroPoints().empty() ? "without" : "with")
                                            << " zero points are stored as " << stringifyBlockFormat(*expected)
                                            << ", not " << stringifyBlockFormat(blocks.getFormat());
    int64_t n = type.getDimSize(0), k = type.getDimSize(1), bs = onnx.getBlockSize();
    if (n > OnnxBlocksAttr::kMaxDim || k > OnnxBlocksAttr::kMaxDim)
      return emitOpError("a weight from ONNX blocks is at most 2^30 x 2^30, got ") << type;
    int64_t codes = onnx.getCodeBytes(n, k);
    if (!onnx.getKMajor() && !onnx.getCodeType().isUnsignedInteger(8) && k % bs != 0)
      return emitOpError("element-typed ONNX blocks along rows need whole blocks: K ")
             << k << " is not a multiple of block_size " << bs;
    if (length != codes)
      return emitOpError("length ") << length << " is not the " << codes << " bytes of the codes of " << type
                                    << " in " << onnx.getBits() << "-bit blocks of " << bs;
  } else if (getPrepacked()) {
    BlocksAttr blocks = getBlocksAttr();
    if (!blocks || blocks.getRowDim() != 0 || type.getRank() != 2)
      return emitOpError("a prepacked weight must be [N, K] with blocks along its rows (row_dim 0)");
    int64_t columns = type.getDimSize(1);
    if (columns % blocks.getBlockWeights() != 0)
      return emitOpError("blocks of ") << blocks.getBlockWeights() << " ("
                                       << stringifyBlockFormat(blocks.getFormat()) << ") do not divide the "
                                       << columns << " columns of " << type;
    if (length != getStoredBytes())
      return emitOpError("length ") << length << " is not the " << getStoredBytes() << " bytes of " << type
                                    << " in " << stringifyBlockFormat(blocks.getFormat()) << " blocks";
  } else if (length != bytes)
    return emitOpError("length ") << length << " does not match " << type << " (" << bytes
                                  << " bytes)";
  if (getLocation().empty() ? offset != -1 : offset < 0)
    return emitOpError("offset ") << offset << " is invalid for "
                                  << (getLocation().empty() ? "inline" : "external") << " data";
  if (BlocksAttr blocks = getBlocksAttr()) {
    if (type.getRank() != 2 || !isa<FloatType>(type.getElementType()))
      return emitOpError("only a 2-D float weight can be stored in blocks, got ") << type;
    int64_t columns = type.getDimSize(1 - blocks.getRowDim());
    if (columns % blocks.getBlockWeights() != 0)
      return emitOpError("blocks of ") << blocks.getBlockWeights() << " ("
                                       << stringifyBlockFormat(blocks.getFormat()) << ") do not divide the "
                                       << columns << " columns of " << type;
  }
  return success();
}

int64_t WeightDeclOp::getStoredBytes() {
  if (BlocksAttr blocks = getBlocksAttr())
    return blocks.getStoredBytes(cast<RankedTensorType>(getType()));
  if (getOnnxBlocksAttr()) // dequantized into its type
    return storageBytes(cast<RankedTensorType>(getType()));
  return getLengthAttr().getInt();
}

LogicalResult WeightOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto decl = symbolTable.lookupNearestSymbolFrom<WeightDeclOp>(*this, getNameAttr());
  if (!decl)
    return emitOpError("refers to unknown weight @") << getName();
  if (decl.getType() != getResult().getType())
    return emitOpError("type ") << getResult().getType() << " differs from the declaration's "
                                << decl.getType();
  return success();
}

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getResult().getType())
    return emitOpError("value type ") << getValue().getType() << " differs from result type "
                                      << getResult().getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Generic ONNX node
//===----------------------------------------------------------------------===//

int64_t OnnxNodeOp::getIntAttr(llvm::StringRef name, int64_t dflt) const {
  auto self = const_cast<OnnxNodeOp *>(this);
  if (auto a = dyn_cast_or_null<IntegerAttr>(self->getAttrs().get(name)))
    return a.getInt();
  return dflt;
}

double OnnxNodeOp::getFloatAttr(llvm::StringRef name, double dflt) const {
  auto self = const_cast<OnnxNodeOp *>(this);
  if (auto a = dyn_cast_or_null<FloatAttr>(self->getAttrs().get(name)))
    return a.getValueAsDouble();
  return dflt;
}

namespace {
/// Input/output counts of the ONNX ops the raising passes look into. A node outside these bounds is
/// malformed; checking here means no pass ever indexes past a node's operands.
struct Arity {
  llvm::StringLiteral op, domain;
  unsigned minIn, maxIn, minOut, maxOut;
};
constexpr unsigned kAny = ~0u;
constexpr Arity kArities[] = {
    {"MatMul", "", 2, 2, 1, 1},       {"Gemm", "", 2, 3, 1, 1},
    {"Add", "", 2, 2, 1, 1},          {"Sub", "", 2, 2, 1, 1},
    {"Mul", "", 2, 2, 1, 1},          {"Div", "", 2, 2, 1, 1},
    {"Pow", "", 2, 2, 1, 1},          {"Where", "", 3, 3, 1, 1},
    {"Greater", "", 2, 2, 1, 1},      {"Less", "", 2, 2, 1, 1},
    {"Gather", "", 2, 2, 1, 1},       {"Slice", "", 3, 5, 1, 1},
    {"Concat", "", 1, kAny, 1, 1},    {"Reshape", "", 2, 2, 1, 1},
    {"Transpose", "", 1, 1, 1, 1},    {"Softmax", "", 1, 1, 1, 1},
    {"ReduceMean", "", 1, 2, 1, 1},   {"Sqrt", "", 1, 1, 1, 1},
    {"Reciprocal", "", 1, 1, 1, 1},   {"Neg", "", 1, 1, 1, 1},
    {"Sigmoid", "", 1, 1, 1, 1},      {"Cast", "", 1, 1, 1, 1},
    {"CastLike", "", 2, 2, 1, 1},     {"Identity", "", 1, 1, 1, 1},
    {"Squeeze", "", 1, 2, 1, 1},      {"Unsqueeze", "", 1, 2, 1, 1},
    {"Expand", "", 2, 2, 1, 1},       {"Flatten", "", 1, 1, 1, 1},
    {"Split", "", 1, 2, 1, kAny},     {"Shape", "", 1, 1, 1, 1},
    {"RMSNormalization", "", 2, 2, 1, 1},
    {"SimplifiedLayerNormalization", "", 2, 2, 1, 3},
    {"RotaryEmbedding", "", 3, 4, 1, 1},
    {"Attention", "", 3, 7, 1, 4},
    {"SimplifiedLayerNormalization", "com.microsoft", 2, 2, 1, 3},
    {"SkipSimplifiedLayerNormalization", "com.microsoft", 3, 5, 1, 4},
    {"RotaryEmbedding", "com.microsoft", 4, 4, 1, 1},
    {"GroupQueryAttention", "com.microsoft", 3, 14, 1, 3},
    {"MultiHeadAttention", "com.microsoft", 1, 10, 1, 3},
};
} // namespace

LogicalResult OnnxNodeOp::verify() {
  if (getNumResults() == 0)
    return emitOpError("ONNX node '") << getNode() << "' (" << getOpType() << ") has no outputs";
  for (const Arity &a : kArities) {
    if (a.op != getOpType() || a.domain != getDomain())
      continue;
    unsigned in = getInputs().size(), out = getNumResults();
    if (in < a.minIn || in > a.maxIn || out < a.minOut || out > a.maxOut)
      return emitOpError("ONNX node '")
             << getNode() << "' (" << getOpType() << ") has " << in << " input(s) and " << out
             << " output(s); the operator takes " << a.minIn << "-"
             << (a.maxIn == kAny ? std::string("n") : std::to_string(a.maxIn)) << " inputs and "
             << a.minOut << "-" << (a.maxOut == kAny ? std::string("n") : std::to_string(a.maxOut))
             << " outputs";
    break;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Block-level ops
//===----------------------------------------------------------------------===//

LogicalResult EmbedOp::verify() {
  auto table = cast<RankedTensorType>(getTable().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (table.getRank() != 2)
    return emitOpError("table must be [vocab, hidden], got ") << table;
  auto ids = dyn_cast<RankedTensorType>(getIds().getType());
  if (ids && result.getRank() != ids.getRank() + 1)
    return emitOpError("result rank ") << result.getRank() << " must be ids rank + 1";
  if (result.getShape().back() != table.getDimSize(1))
    return emitOpError("result hidden size ") << result.getShape().back()
                                              << " differs from the table's " << table.getDimSize(1);
  Type from = table.getElementType(), to = result.getElementType();
  bool widening = to.isF32() && (from.isF16() || from.isBF16());
  if (to != from && !widening)
    return emitOpError("result element type must match the table's, or be f32 from an f16 or bf16 table");
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto gamma = cast<RankedTensorType>(getGamma().getType());
  if (gamma.getRank() != 1)
    return emitOpError("gamma must be rank 1, got ") << gamma;
  int64_t n = lastDim(getInput().getType());
  if (!ShapedType::isDynamic(n) && n % gamma.getDimSize(0) != 0)
    return emitOpError("last dimension ") << n << " is not a multiple of gamma size "
                                          << gamma.getDimSize(0);
  if (getInput().getType() != getResult().getType())
    return emitOpError("result type must equal input type");
  if (getEpsilon().convertToDouble() <= 0.0)
    return emitOpError("epsilon must be positive");
  return success();
}

int64_t LinearOp::getInFeatures() {
  auto w = cast<RankedTensorType>(getWeight().getType());
  return getTransposeWeight() ? w.getDimSize(1) : w.getDimSize(0);
}

int64_t LinearOp::getOutFeatures() {
  auto w = cast<RankedTensorType>(getWeight().getType());
  return getTransposeWeight() ? w.getDimSize(0) : w.getDimSize(1);
}

LogicalResult LinearOp::verify() {
  auto w = cast<RankedTensorType>(getWeight().getType());
  if (w.getRank() != 2)
    return emitOpError("weight must be rank 2, got ") << w;
  auto in = dyn_cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (!in) // Unranked only between import and the attention rebuild; the result carries the shape.
    return success();
  if (lastDim(in) != getInFeatures())
    return emitOpError("input features ") << lastDim(in) << " differ from the weight's "
                                          << getInFeatures() << " (" << w << ")";
  if (lastDim(out) != getOutFeatures())
    return emitOpError("result features ") << lastDim(out) << " differ from the weight's "
                                           << getOutFeatures();
  if (!sameLeadingDims(in, out))
    return emitOpError("input and result leading dimensions differ");
  if (auto bias = getBias()) {
    auto b = cast<RankedTensorType>(bias.getType());
    if (b.getRank() != 1 || b.getDimSize(0) != getOutFeatures())
      return emitOpError("bias must be [") << getOutFeatures() << "], got " << b;
  }
  return success();
}

LogicalResult SplitOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  if (getSizes().size() != getNumResults())
    return emitOpError("has ") << getNumResults() << " results but " << getSizes().size()
                               << " sizes";
  int64_t total = 0;
  for (auto [size, result] : llvm::zip(getSizes(), getResults())) {
    if (size <= 0)
      return emitOpError("sizes must be positive");
    total += size;
    if (lastDim(result.getType()) != size)
      return emitOpError("result last dimension ") << lastDim(result.getType())
                                                   << " differs from size " << size;
  }
  if (lastDim(in) != total)
    return emitOpError("sizes add up to ") << total << ", input last dimension is " << lastDim(in);
  return success();
}

LogicalResult RopeOp::verify() {
  int64_t n = lastDim(getInput().getType());
  int64_t headDim = getHeadDim(), rotaryDim = getRotaryDim();
  if (headDim <= 0 || (!ShapedType::isDynamic(n) && n % headDim != 0))
    return emitOpError("last dimension ") << n << " is not a multiple of head_dim " << headDim;
  if (rotaryDim <= 0 || rotaryDim > headDim || rotaryDim % 2 != 0)
    return emitOpError("rotary_dim ") << rotaryDim << " must be even and in (0, " << headDim << "]";
  if (auto theta = getThetaAttr(); theta && theta.getValueAsDouble() <= 1.0)
    return emitOpError("theta must be > 1, got ") << theta.getValueAsDouble();
  if (std::optional<llvm::ArrayRef<float>> factors = getFreqFactors()) {
    if (int64_t(factors->size()) != rotaryDim / 2)
      return emitOpError("freq_factors has ") << factors->size() << " values, rotary_dim / 2 is " << rotaryDim / 2;
    for (float f : *factors)
      if (!(f > 0.0f) || !std::isfinite(f))
        return emitOpError("freq_factors must be positive and finite, got ") << f;
  }
  if (getInput().getType() != getResult().getType())
    return emitOpError("result type must equal input type");
  return success();
}

LogicalResult ScaleOp::verify() {
  double factor = getFactor().convertToDouble();
  if (!std::isfinite(factor) || !std::isfinite(float(factor)))
    return emitOpError("factor must be a finite f32 value, got ") << factor;
  return success();
}

LogicalResult SoftcapOp::verify() {
  double cap = getCap().convertToDouble();
  if (!(cap > 0.0) || !std::isfinite(float(cap)))
    return emitOpError("cap must be a positive finite f32 value, got ") << cap;
  return success();
}

LogicalResult AttentionOp::verify() {
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads(), headDim = getHeadDim();
  if (heads <= 0 || kvHeads <= 0 || headDim <= 0)
    return emitOpError("head counts and head_dim must be positive");
  if (heads % kvHeads != 0)
    return emitOpError("num_heads ") << heads << " is not a multiple of num_kv_heads " << kvHeads;
  if (lastDim(getQ().getType()) != heads * headDim)
    return emitOpError("q last dimension ") << lastDim(getQ().getType()) << " != num_heads * head_dim = "
                                            << heads * headDim;
  for (Value kv : {getK(), getV()})
    if (lastDim(kv.getType()) != kvHeads * headDim)
      return emitOpError("k/v last dimension ")
             << lastDim(kv.getType()) << " != num_kv_heads * head_dim = " << kvHeads * headDim;
  if (lastDim(getResult().getType()) != heads * headDim)
    return emitOpError("result last dimension must be num_heads * head_dim");
  if (getScaleAttr() && getScaleAttr().getValueAsDouble() <= 0.0)
    return emitOpError("scale must be positive");
  if (auto window = getSlidingWindow(); window && *window <= 0)
    return emitOpError("sliding_window must be positive, got ") << *window;
  if (auto cap = getSoftcapAttr(); cap && (!(cap.getValueAsDouble() > 0.0) || !std::isfinite(float(cap.getValueAsDouble()))))
    return emitOpError("softcap must be a positive finite f32 value, got ") << cap.getValueAsDouble();
  bool hasPast = static_cast<bool>(getPastKey());
  if (getPresent().size() != (hasPast ? 2u : 0u))
    return emitOpError("past_key/past_value and present_key/present_value come together");
  if (hasPast) {
    for (Value cache : {Value(getPastKey()), Value(getPastValue()), getPresentKey(), getPresentValue()}) {
      auto t = cast<RankedTensorType>(cache.getType());
      if (t.getRank() != 4 || t.getDimSize(1) != kvHeads || t.getDimSize(3) != headDim)
        return emitOpError("cache tensors must be [batch, ") << kvHeads << ", seq, " << headDim
                                                             << "], got " << t;
    }
  }
  return success();
}

LogicalResult LmHeadOp::verify() {
  auto w = cast<RankedTensorType>(getWeight().getType());
  if (w.getRank() != 2)
    return emitOpError("weight must be rank 2");
  int64_t hidden = getTransposeWeight() ? w.getDimSize(1) : w.getDimSize(0);
  int64_t vocab = getTransposeWeight() ? w.getDimSize(0) : w.getDimSize(1);
  if (lastDim(getInput().getType()) != hidden)
    return emitOpError("input hidden size ") << lastDim(getInput().getType())
                                             << " differs from the weight's " << hidden;
  if (lastDim(getResult().getType()) != vocab)
    return emitOpError("result must end in the vocabulary size ") << vocab;
  return success();
}

//===----------------------------------------------------------------------===//
// Units and transfers
//===----------------------------------------------------------------------===//

LogicalResult UnitOp::verify() {
  if (getIndexAttr().getInt() < 0)
    return emitOpError("index must be non-negative");
  Block &body = getBody().front();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in helm.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yielded types differ from the unit's result types");
  return success();
}

LogicalResult TransferOp::verify() {
  if (getFrom() == getTo())
    return emitOpError("transfer from a device to itself");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/helm/HelmOps.cpp.inc"
