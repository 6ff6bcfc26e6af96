//===- RaiseLinear.cpp - MatMul/Gemm with a weight to helm.linear ----------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_RAISELINEAR
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {

struct RaiseLinearPass : helm::impl::RaiseLinearBase<RaiseLinearPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> candidates;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("MatMul") || op.is("Gemm"))
        candidates.push_back(op);
    });
    for (OnnxNodeOp op : candidates)
      raise(op);
  }

  void raise(OnnxNodeOp op) {
    bool gemm = op.is("Gemm");
    if (gemm && (op.getIntAttr("transA", 0) != 0 || op.getFloatAttr("alpha", 1.0) != 1.0 ||
                 op.getFloatAttr("beta", 1.0) != 1.0))
      return;
    Value x = op.getInputs()[0];
    bool transposed = false;
    WeightOp weight = traceWeight(op.getInputs()[1], &transposed);
    if (!weight || shapeOf(weight).size() != 2)
      return;
    if (gemm && op.getIntAttr("transB", 0))
      transposed = !transposed;
    auto wShape = shapeOf(weight);
    int64_t inFeatures = transposed ? wShape[1] : wShape[0];
    int64_t outFeatures = transposed ? wShape[0] : wShape[1];
    auto xType = dyn_cast<RankedTensorType>(x.getType());
    if (xType && (xType.getRank() < 2 || xType.getShape().back() != inFeatures))
      return;

    Value bias;
    Operation *replaced = op;
    if (gemm && op.getInputs().size() > 2 && !isa<NoneType>(op.getInputs()[2].getType())) {
      bias = parameterVector(op.getInputs()[2], outFeatures);
      if (!bias)
        return;
    } else if (op.getResult(0).hasOneUse()) {
      auto add = dyn_cast<OnnxNodeOp>(*op.getResult(0).user_begin());
      if (add && add.is("Add")) {
        Value other = add.getInputs()[0] == op.getResult(0) ? add.getInputs()[1] : add.getInputs()[0];
        if ((bias = parameterVector(other, outFeatures)))
          replaced = add;
      }
    }

    RankedTensorType resultType;
    Type element = elementTypeOf(x);
    if (xType) {
      SmallVector<int64_t> shape(xType.getShape());
      shape.back() = outFeatures;
      resultType = RankedTensorType::get(shape, element);
    } else {
      resultType = activationType(element, outFeatures);
    }
    OpBuilder b(replaced);
    auto linear = LinearOp::create(b, op.getLoc(), resultType, x, weight.getResult(), bias,
                                     b.getBoolAttr(transposed));
    replaceValue(replaced->getResult(0), linear.getResult());
  }
};
} // namespace
