//===- RaiseResidual.cpp - Add of two raised activations to helm.add -------------===//
#include "passes/OnnxMatchers.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_RAISERESIDUAL
#include "passes/Passes.h.inc"
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

struct RaiseResidualPass : helm::impl::RaiseResidualBase<RaiseResidualPass> {
  void runOnOperation() override {
    // Program order: a residual add's operands are raised before it is visited.
    SmallVector<OnnxNodeOp> adds;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("Add"))
        adds.push_back(op);
    });
    for (OnnxNodeOp add : adds) {
      Value lhs = add.getInputs()[0], rhs = add.getInputs()[1];
      if (!isRaisedActivation(lhs) || !isRaisedActivation(rhs) || lhs.getType() != rhs.getType())
        continue;
      OpBuilder b(add);
      auto sum = b.create<AddOp>(add.getLoc(), lhs.getType(), lhs, rhs);
      replaceValue(add.getResult(0), sum.getResult());
    }
  }
};
} // namespace
