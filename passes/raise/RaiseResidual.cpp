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

struct ResidualPattern : OpRewritePattern<OnnxNodeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(OnnxNodeOp add, PatternRewriter &rewriter) const override {
    if (!add.is("Add"))
      return failure();
    Value lhs = skipNoOpCasts(add.getInputs()[0]), rhs = skipNoOpCasts(add.getInputs()[1]);
    if (!isRaisedActivation(lhs) || !isRaisedActivation(rhs) || lhs.getType() != rhs.getType())
      return failure();
    replaceWithRaised(rewriter, add, AddOp::create(rewriter, add.getLoc(), lhs.getType(), lhs, rhs).getResult());
    return success();
  }
};

struct RaiseResidualPass : helm::impl::RaiseResidualBase<RaiseResidualPass> {
  void runOnOperation() override {
    // An add of adds raises whatever the visiting order: replacing the inner add re-queues the outer.
    RewritePatternSet patterns(&getContext());
    patterns.add<ResidualPattern>(&getContext());
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      return signalPassFailure();
    refineTypes(getOperation());
  }
};
} // namespace
