//===- RaiseRmsNorm.cpp - decomposed RMSNorm to helm.rms_norm --------------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_RAISERMSNORM
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {

/// The single `helm.onnx` user of `v` (looking through Casts) of one of `types`, or null.
OnnxNodeOp soleUser(Value v, std::initializer_list<llvm::StringRef> types) {
  while (v.hasOneUse()) {
    auto user = dyn_cast<OnnxNodeOp>(*v.user_begin());
    if (!user || !user.getDomain().empty())
      return {};
    if (user.getOpType() == "Cast") {
      v = user.getResult(0);
      continue;
    }
    for (llvm::StringRef t : types)
      if (user.getOpType() == t)
        return user;
    return {};
  }
  return {};
}

/// The operand of binary `op` that is not `v` (after casts), or null if `v` is neither.
Value otherOperand(OnnxNodeOp op, Value v) {
  Value a = op.getInputs()[0], b = op.getInputs()[1];
  if (skipCasts(a) == v || a == v)
    return b;
  if (skipCasts(b) == v || b == v)
    return a;
  return {};
}

struct RaiseRmsNormPass : helm::impl::RaiseRmsNormBase<RaiseRmsNormPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> means;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("ReduceMean"))
        means.push_back(op);
    });
    for (OnnxNodeOp mean : means)
      raise(mean);
  }

  bool reducesLastAxis(OnnxNodeOp mean, Value x) {
    if (mean.getIntAttr("keepdims", 1) != 1)
      return false;
    SmallVector<double> axes;
    if (auto a = dyn_cast_or_null<DenseI64ArrayAttr>(mean.getAttrs().get("axes"))) {
      for (int64_t v : a.asArrayRef())
        axes.push_back(double(v));
    } else if (mean.getInputs().size() > 1) {
      auto v = constantValues(mean.getInputs()[1]);
      if (!v)
        return false;
      axes = *v;
    }
    if (axes.size() != 1)
      return false;
    auto rank = shapeOf(x).size();
    return axes[0] == -1 || (rank > 0 && axes[0] == double(rank - 1));
  }

  void raise(OnnxNodeOp mean) {
    // mean(x^2)
    OnnxNodeOp square = anyProducer(mean.getInputs()[0]);
    if (!square || !square.getDomain().empty())
      return;
    Value xf; // x as the norm computes it (often Cast to float32)
    if (square.getOpType() == "Pow" && isConstant(square.getInputs()[1], 2.0))
      xf = square.getInputs()[0];
    else if (square.getOpType() == "Mul" && square.getInputs()[0] == square.getInputs()[1])
      xf = square.getInputs()[0];
    else
      return;
    if (!reducesLastAxis(mean, xf))
      return;
    // + eps
    OnnxNodeOp addEps = soleUser(mean.getResult(0), {"Add"});
    if (!addEps)
      return;
    Value epsValue = otherOperand(addEps, mean.getResult(0));
    auto eps = epsValue ? constantScalar(epsValue) : std::nullopt;
    if (!eps || *eps <= 0)
      return;
    // 1/sqrt(.) in its various spellings, then x * that.
    Value normed;
    auto multiplyX = [&](Value inv) -> Value {
      OnnxNodeOp mul = soleUser(inv, {"Mul"});
      if (mul && skipCasts(otherOperand(mul, inv)) == skipCasts(xf))
        return mul.getResult(0);
      return {};
    };
    if (OnnxNodeOp root = soleUser(addEps.getResult(0), {"Sqrt", "Pow"})) {
      if (root.getOpType() == "Pow") {
        if (isConstant(root.getInputs()[1], -0.5))
          normed = multiplyX(root.getResult(0));
      } else if (OnnxNodeOp inv = soleUser(root.getResult(0), {"Reciprocal", "Div"})) {
        if (inv.getOpType() == "Reciprocal")
          normed = multiplyX(inv.getResult(0));
        else if (inv.getInputs()[1] == root.getResult(0) && isConstant(inv.getInputs()[0], 1.0))
          normed = multiplyX(inv.getResult(0));
        else if (inv.getInputs()[1] == root.getResult(0) && skipCasts(inv.getInputs()[0]) == skipCasts(xf))
          normed = inv.getResult(0);
      }
    }
    if (!normed)
      return;
    OnnxNodeOp scale = soleUser(normed, {"Mul"});
    if (!scale)
      return;
    Value gamma = parameterVector(otherOperand(scale, normed));
    if (!gamma && skipCasts(scale.getInputs()[0]) == skipCasts(normed))
      gamma = parameterVector(scale.getInputs()[1]);
    if (!gamma)
      return;
    Value x = skipCasts(xf);
    auto xType = dyn_cast<TensorType>(x.getType());
    int64_t group = shapeOf(gamma)[0];
    auto xShape = shapeOf(x);
    if (!xType || (xType.hasRank() && (xShape.empty() || (!ShapedType::isDynamic(xShape.back()) &&
                                                          xShape.back() % group != 0))))
      return;
    OpBuilder b(scale);
    auto norm = RmsNormOp::create(b, mean.getLoc(), xType, x, gamma, b.getF64FloatAttr(*eps));
    // The result replaces gamma * normed, in the input's precision (the trailing Cast, if any).
    Value result = scale.getResult(0);
    if (OnnxNodeOp cast = result.hasOneUse() ? dyn_cast<OnnxNodeOp>(*result.user_begin()) : OnnxNodeOp())
      if (cast.is("Cast") && elementTypeOf(cast.getResult(0)) == xType.getElementType())
        result = cast.getResult(0);
    replaceValue(result, norm.getResult());
  }
};
} // namespace
