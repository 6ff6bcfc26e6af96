//===- OnnxMatchers.cpp - use-def matching helpers over generic ONNX nodes -------===//
#include "passes/OnnxMatchers.h"

#include "mlir/IR/Matchers.h"

#include <cmath>

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
         t == "Unsqueeze" || t == "Expand" || t == "Flatten"))
      v = op.getInputs()[0];
    else
      break;
  }
  return v;
}

WeightOp traceWeight(Value v, bool *transposed) {
  bool flip = false;
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
  auto w = v ? v.getDefiningOp<WeightOp>() : WeightOp();
  if (w && transposed)
    *transposed = flip;
  return w;
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
} // namespace helm
