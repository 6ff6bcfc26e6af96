//===- OnnxMatchers.cpp - use-def matching helpers over generic ONNX nodes -------===//
#include "passes/raise/OnnxMatchers.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace helm {

OnnxNodeOp producer(Value v, llvm::StringRef opType, llvm::StringRef domain) {
  auto op = v ? v.getDefiningOp<OnnxNodeOp>() : OnnxNodeOp();
  if (op && op.getOpType() == opType && op.getDomain() == domain)
    return op;
  return {};
}

OnnxNodeOp anyProducer(Value v) { return v ? v.getDefiningOp<OnnxNodeOp>() : OnnxNodeOp(); }

std::optional<SmallVector<double>> constantValues(Value v) {
  while (auto op = anyProducer(v)) {
    llvm::StringRef t = op.getOpType();
    if (op.getDomain().empty() && (t == "Cast" || t == "Identity" || t == "Unsqueeze" ||
                                   t == "Reshape" || t == "Squeeze" || t == "CastLike"))
      v = op.getInputs()[0];
    else
      break;
  }
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  SmallVector<double> out;
  Type element = attr.getElementType();
  if (isa<FloatType>(element)) {
    for (APFloat f : attr.getValues<APFloat>()) {
      bool lost = false;
      f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      out.push_back(f.convertToDouble());
    }
  } else if (element.isInteger(1)) {
    for (bool b : attr.getValues<bool>())
      out.push_back(b ? 1.0 : 0.0);
  } else if (auto it = dyn_cast<IntegerType>(element)) {
    for (APInt i : attr.getValues<APInt>())
      out.push_back(it.isUnsigned() ? double(i.getZExtValue()) : double(i.getSExtValue()));
  } else {
    return std::nullopt;
  }
  return out;
}

std::optional<double> constantScalar(Value v) {
  auto values = constantValues(v);
  if (!values || values->empty())
    return std::nullopt;
  for (double x : *values)
    if (x != (*values)[0])
      return std::nullopt;
  return (*values)[0];
}

bool isConstant(Value v, double expected) {
  auto s = constantScalar(v);
  return s && std::fabs(*s - expected) <= 1e-6 * std::max(1.0, std::fabs(expected));
}

Value skipCasts(Value v) {
  while (auto op = anyProducer(v)) {
    if (op.getDomain().empty() && (op.getOpType() == "Cast" || op.getOpType() == "Identity"))
      v = op.getInputs()[0];
    else
      break;
  }
  return v;
}

Value skipLayout(Value v) {
  while (auto op = anyProducer(v)) {
    llvm::StringRef t = op.getOpType();
    if (op.getDomain().empty() &&
        (t == "Cast" || t == "Identity" || t == "Reshape" || t == "Transpose" || t == "Squeeze" ||
         t == "Unsqueeze" || t == "Expand" || t == "Flatten" ||
         (t == "Concat" && op.getInputs().size() == 1))) // TorchScript's one-input Concat
      v = op.getInputs()[0];
    else
      break;
  }
  return v;
}

namespace {
/// Follows `v` up through Cast, Identity and 2-D Transpose nodes; `flip` counts the transposes.
Value skipCastsAndTransposes(Value v, bool &flip) {
  flip = false;
  while (auto op = anyProducer(v)) {
    llvm::StringRef t = op.getOpType();
    if (!op.getDomain().empty())
      break;
    if (t == "Cast" || t == "Identity") {
      v = op.getInputs()[0];
    } else if (t == "Transpose") {
      auto perm = dyn_cast_or_null<DenseI64ArrayAttr>(op.getAttrs().get("perm"));
      if (perm && !(perm.size() == 2 && perm[0] == 1 && perm[1] == 0))
        break;
      flip = !flip;
      v = op.getInputs()[0];
    } else {
      break;
    }
  }
  return v;
}
} // namespace

WeightOp traceWeight(Value v, bool *transposed) {
  bool flip = false;
  v = skipCastsAndTransposes(v, flip);
  auto w = v ? v.getDefiningOp<WeightOp>() : WeightOp();
  if (w && transposed)
    *transposed = flip;
  return w;
}

WeightOp traceReshapedWeight(Value v) {
  while (v) {
    if (auto w = v.getDefiningOp<WeightOp>())
      return w;
    OnnxNodeOp op = anyProducer(v);
    if (!op || !op.getDomain().empty() || op.getInputs().empty())
      return {};
    llvm::StringRef t = op.getOpType();
    if (t != "Identity" && t != "Reshape") // a Cast would change the bytes
      return {};
    v = op.getInputs()[0];
  }
  return {};
}

OnnxNodeOp traceDequantizeLinear(Value v, bool *transposed) {
  bool flip = false;
  v = skipCastsAndTransposes(v, flip);
  OnnxNodeOp dq = v ? producer(v, "DequantizeLinear") : OnnxNodeOp();
  if (dq && transposed)
    *transposed = flip;
  return dq;
}

Value parameterVector(Value v, int64_t width) {
  if (!v)
    return {};
  Value src = skipCasts(v);
  if (!src.getDefiningOp<WeightOp>() && !src.getDefiningOp<ConstantOp>())
    return {};
  auto shape = shapeOf(src);
  if (shape.size() != 1 || (width >= 0 && shape[0] != width))
    return {};
  return src;
}

ArrayRef<int64_t> shapeOf(Value v) {
  if (auto t = dyn_cast<RankedTensorType>(v.getType()))
    return t.getShape();
  return {};
}

RankedTensorType activationType(Type element, int64_t n) {
  return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic, n}, element);
}

Type elementTypeOf(Value v) {
  if (auto t = dyn_cast<ShapedType>(v.getType()))
    return t.getElementType();
  return {};
}

LogicalResult nodeError(OnnxNodeOp op, const llvm::Twine &msg) {
  return op.emitError() << "node '" << op.getNode() << "' (" << op.getOpType() << "): " << msg;
}

} // namespace helm

namespace helm {
void replaceValue(Value from, Value to, Operation *after) {
  bool returned = llvm::any_of(from.getUsers(), [](Operation *u) { return isa<func::ReturnOp>(u); });
  if (after)
    from.replaceUsesWithIf(to, [&](OpOperand &use) {
      Operation *owner = use.getOwner();
      return owner->getBlock() == after->getBlock() && after->isBeforeInBlock(owner);
    });
  else
    from.replaceAllUsesWith(to);
  if (!returned)
    return;
  auto func = to.getParentRegion()->getParentOfType<func::FuncOp>();
  auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 ret.getOperandTypes()));
}

void replaceWithRaised(PatternRewriter &rewriter, Operation *op, Value raised) {
  Value from = op->getResult(0);
  bool returned = llvm::any_of(from.getUsers(), [](Operation *u) { return isa<func::ReturnOp>(u); });
  rewriter.replaceOp(op, raised);
  if (!returned)
    return;
  auto func = raised.getParentRegion()->getParentOfType<func::FuncOp>();
  auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  rewriter.modifyOpInPlace(func, [&] {
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(), ret.getOperandTypes()));
  });
}

LogicalResult applyRaisingPatterns(func::FuncOp func, RewritePatternSet &&patterns) {
  GreedyRewriteConfig config;
  config.enableFolding(false)
      .enableConstantCSE(false)
      .setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  if (failed(applyPatternsGreedily(func, FrozenRewritePatternSet(std::move(patterns)), config)))
    return func.emitError() << "raising did not reach a fixed point in "
                            << config.getMaxIterations() << " rounds";
  return success();
}
} // namespace helm

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace helm {

std::optional<std::vector<char>> weightBytes(WeightOp weight) {
  auto decl = SymbolTable::lookupNearestSymbolFrom<WeightDeclOp>(weight, weight.getNameAttr());
  if (!decl)
    return std::nullopt;
  std::vector<char> bytes;
  auto *dialect = weight->getContext()->getLoadedDialect<HelmDialect>();
  bool ok = false;
  if (dialect && dialect->getWeightReader()) {
    ok = dialect->getWeightReader()(decl, bytes);
  } else if (!decl.getLocation().empty()) {
    auto module = weight->getParentOfType<ModuleOp>();
    auto source = module ? module->getAttrOfType<StringAttr>(HelmDialect::SourceAttrHelper::getNameStr()) : StringAttr();
    if (source) {
      llvm::SmallString<256> path(source.getValue());
      llvm::sys::path::remove_filename(path);
      llvm::sys::path::append(path, decl.getLocation());
      auto buffer = llvm::MemoryBuffer::getFileSlice(path, decl.getLengthAttr().getInt(),
                                                     decl.getOffsetAttr().getInt());
      if (buffer) {
        bytes.assign((*buffer)->getBufferStart(), (*buffer)->getBufferEnd());
        ok = true;
      }
    }
  }
  if (!ok || int64_t(bytes.size()) != decl.getLengthAttr().getInt())
    return std::nullopt;
  return bytes;
}

std::optional<SmallVector<double>> weightValues(WeightOp weight, int64_t maxElements) {
  auto type = cast<RankedTensorType>(weight.getType());
  Type element = type.getElementType();
  // Booleans never hold frequencies or tables.
  if (element.isInteger(1))
    return std::nullopt;
  auto bytes = weightBytes(weight);
  unsigned bits = element.getIntOrFloatBitWidth();
  if (!bytes || bits % 8 != 0 || int64_t(bytes->size()) != type.getNumElements() * (bits / 8))
    return std::nullopt;
  // Decoded straight from the bytes: no attribute (and no copy of the tensor) enters the context.
  SmallVector<double> out;
  int64_t n = std::min<int64_t>(maxElements, type.getNumElements());
  for (int64_t i = 0; i < n; ++i) {
    uint64_t raw = 0;
    std::memcpy(&raw, bytes->data() + i * (bits / 8), bits / 8); // little-endian host
    if (auto f = dyn_cast<FloatType>(element)) {
      APFloat value(f.getFloatSemantics(), APInt(bits, raw));
      bool lost = false;
      value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      out.push_back(value.convertToDouble());
    } else {
      APInt value(bits, raw);
      out.push_back(cast<IntegerType>(element).isUnsigned() ? double(value.getZExtValue())
                                                            : double(value.getSExtValue()));
    }
  }
  return out;
}

std::optional<int64_t> asIndex(double v) {
  if (!std::isfinite(v))
    return std::nullopt;
  // Slice ends are often INT64_MAX/MIN ("to the end"); a double cannot hold them exactly.
  if (v >= 9.2e18)
    return INT64_MAX;
  if (v <= -9.2e18)
    return INT64_MIN;
  return int64_t(v);
}

std::optional<int64_t> evalIndex(Value v, Value x, int64_t lastDim) {
  if (auto c = constantScalar(v))
    return asIndex(*c);
  OnnxNodeOp op = anyProducer(v);
  if (!op || !op.getDomain().empty())
    return std::nullopt;
  llvm::StringRef t = op.getOpType();
  if (t == "Cast" || t == "Unsqueeze" || t == "Squeeze" || t == "Identity")
    return evalIndex(op.getInputs()[0], x, lastDim);
  if (t == "Gather") {
    OnnxNodeOp shape = producer(op.getInputs()[0], "Shape");
    auto idx = constantScalar(op.getInputs()[1]);
    if (!shape || !idx || skipCasts(shape.getInputs()[0]) != skipCasts(x) || shape.getIntAttr("start", 0))
      return std::nullopt;
    int64_t rank = int64_t(shapeOf(x).size());
    bool ranked = isa<RankedTensorType>(x.getType());
    // Unranked: the [batch, heads, seq, head_dim] layout every exporter uses around rotary.
    if (*idx == -1 || (ranked && *idx == double(rank - 1)) || (!ranked && *idx == 3))
      return lastDim;
    return std::nullopt;
  }
  if (t == "Div" || t == "Mul" || t == "Add" || t == "Sub") {
    auto a = evalIndex(op.getInputs()[0], x, lastDim), b = evalIndex(op.getInputs()[1], x, lastDim);
    if (!a || !b)
      return std::nullopt;
    int64_t r = 0;
    if (t == "Div") {
      if (*b == 0 || (*a == INT64_MIN && *b == -1))
        return std::nullopt;
      return *a / *b;
    }
    bool overflow = t == "Mul"   ? __builtin_mul_overflow(*a, *b, &r)
                    : t == "Add" ? __builtin_add_overflow(*a, *b, &r)
                                 : __builtin_sub_overflow(*a, *b, &r);
    return overflow ? std::nullopt : std::optional<int64_t>(r);
  }
  return std::nullopt;
}

} // namespace helm

namespace helm {
SplitOp splitProjection(LinearOp linear, ArrayRef<int64_t> sizes) {
  auto type = cast<RankedTensorType>(linear.getType());
  SmallVector<Type> types;
  for (int64_t size : sizes) {
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = size;
    types.push_back(RankedTensorType::get(shape, type.getElementType()));
  }
  OpBuilder b(linear->getContext());
  b.setInsertionPointAfter(linear);
  return SplitOp::create(b, linear.getLoc(), types, linear.getResult(), b.getDenseI64ArrayAttr(sizes));
}

void refineTypes(func::FuncOp func) {
  func.walk([](Operation *op) {
    if (!isa<RmsNormOp, RopeOp>(op))
      return;
    Type in = op->getOperand(0).getType();
    if (isa<RankedTensorType>(in) && !isa<RankedTensorType>(op->getResult(0).getType()))
      op->getResult(0).setType(in);
  });
  auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(), ret.getOperandTypes()));
}
} // namespace helm

namespace helm {

std::optional<double> thetaFromInvFreq(ArrayRef<double> invFreq, int64_t rotaryDim, int precisionBits) {
  // inv_freq[0] is 1 for every theta; frequencies recovered from float16 caches carry their
  // rounding (atan2 of two float16 values: 2.8e-4 off in ONNX Runtime GenAI's fp16 models).
  double firstTol = precisionBits >= 23 ? 1e-6 : std::ldexp(1.0, -8);
  if (invFreq.size() < 2 || std::fabs(invFreq[0] - 1.0) > firstTol)
    return std::nullopt;
  // Least-squares fit of log(inv_freq[i]) = -(2i/d) log(theta) through the origin, over the entries
  // a float16 round trip keeps normal (>= 2^-14): exports of half-precision models often carry
  // inv_freq rounded through float16, whose smallest entries are subnormal and coarse.
  constexpr double kHalfNormalMin = 6.103515625e-05;
  double num = 0, den = 0;
  for (size_t i = 1; i < invFreq.size(); ++i) {
    if (invFreq[i] <= 0)
      return std::nullopt;
    if (invFreq[i] < kHalfNormalMin)
      continue;
    double slope = -2.0 * double(i) / double(rotaryDim);
    num += slope * std::log(invFreq[i]);
    den += slope * slope;
  }
  if (den == 0)
    return std::nullopt;
  double theta = std::exp(num / den);
  // Every entry must match theta^(-2i/d) at the constant's precision, or at float16 precision
  // (relative 2^-8, absolute half a subnormal step) when the values went through float16.
  auto matches = [&](double relTol, double absTol) {
    for (size_t i = 0; i < invFreq.size(); ++i) {
      double expected = std::pow(theta, -2.0 * double(i) / double(rotaryDim));
      if (std::fabs(invFreq[i] - expected) > relTol * expected + absTol)
        return false;
    }
    return true;
  };
  int digits;
  if (precisionBits >= 23 && matches(1e-5, 0.0))
    digits = 5;
  else if (matches(std::ldexp(1.0, -8), std::ldexp(1.0, -25)))
    digits = 3;
  else
    return std::nullopt;
  // Keep the significant digits the values can carry.
  double scale = std::pow(10.0, digits - 1 - std::floor(std::log10(theta)));
  return std::round(theta * scale) / scale;
}

} // namespace helm

namespace helm {
/// theta from rotary cos/sin caches [positions, rotary_dim/2]: row p holds cos(p * inv_freq).
std::optional<double> thetaFromCaches(ArrayRef<double> cos, ArrayRef<double> sin, int64_t half,
                                      int precisionBits) {
  if (int64_t(cos.size()) < 3 * half || int64_t(sin.size()) < 3 * half)
    return std::nullopt;
  SmallVector<double> invFreq;
  for (int64_t i = 0; i < half; ++i) {
    double f = std::atan2(sin[half + i], cos[half + i]);
    if (std::fabs(cos[i] - 1.0) > 1e-3 || std::fabs(cos[2 * half + i] - std::cos(2 * f)) > 1e-3)
      return std::nullopt;
    invFreq.push_back(f);
  }
  return thetaFromInvFreq(invFreq, 2 * half, precisionBits);
}

int mantissaBits(Value v) {
  if (auto f = dyn_cast_or_null<FloatType>(elementTypeOf(skipCasts(v))))
    return int(f.getFPMantissaWidth()) - 1;
  return 23;
}

/// Values of a cos/sin cache operand: a constant or the leading rows of a weight.
std::optional<SmallVector<double>> cacheValues(Value v, int64_t count) {
  if (auto c = constantValues(v))
    return c;
  if (WeightOp w = traceWeight(v))
    return weightValues(w, count);
  return std::nullopt;
}

} // namespace helm
