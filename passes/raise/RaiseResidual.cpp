//===- RaiseResidual.cpp - Add of two raised activations to helm.add -------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_RAISERESIDUAL
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
/// A block-level HELM value: produced by a raised op, not by an ONNX node, weight or constant.
bool isRaisedActivation(Value v) {
  Operation *def = v.getDefiningOp();
  return def && isa<HelmDialect>(def->getDialect()) &&
         !isa<OnnxNodeOp, WeightOp, ConstantOp, NoneOp>(def);
}

/// Looks through Casts that do not change the element type (TorchScript records `x.to(float32)` on a
/// float32 tensor as a Cast, and the residual then reads the Cast).
Value skipNoOpCasts(Value v) {
  while (OnnxNodeOp cast = producer(v, "Cast")) {
    if (elementTypeOf(cast.getInputs()[0]) != elementTypeOf(v))
      break;
    v = cast.getInputs()[0];
  }
  return v;
}

struct RaiseResidualPass : helm::impl::RaiseResidualBase<RaiseResidualPass> {
  void runOnOperation() override {
    // Program order: a residual add's operands are raised before it is visited.
    SmallVector<OnnxNodeOp> adds;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("Add"))
        adds.push_back(op);
    });
    for (OnnxNodeOp add : adds) {
      Value lhs = skipNoOpCasts(add.getInputs()[0]), rhs = skipNoOpCasts(add.getInputs()[1]);
      if (!isRaisedActivation(lhs) || !isRaisedActivation(rhs) || lhs.getType() != rhs.getType())
        continue;
      OpBuilder b(add);
      auto sum = AddOp::create(b, add.getLoc(), lhs.getType(), lhs, rhs);
      replaceValue(add.getResult(0), sum.getResult());
    }
    refineTypes(getOperation());
  }
};
} // namespace
