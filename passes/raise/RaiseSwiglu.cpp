//===- RaiseSwiglu.cpp - silu(gate) * up to helm.swiglu --------------------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_RAISESWIGLU
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
/// silu(gate) * up, with silu(g) = g * sigmoid(g), anchored on the outer Mul.
struct SwigluPattern : OpRewritePattern<OnnxNodeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(OnnxNodeOp gateUp, PatternRewriter &rewriter) const override {
    if (!gateUp.is("Mul"))
      return failure();
    for (int siluSide = 0; siluSide < 2; ++siluSide) {
      OnnxNodeOp silu = producer(gateUp.getInputs()[siluSide], "Mul");
      if (!silu || !silu.getResult(0).hasOneUse())
        continue;
      for (int gateSide = 0; gateSide < 2; ++gateSide) {
        Value gate = silu.getInputs()[gateSide];
        OnnxNodeOp sigmoid = producer(silu.getInputs()[1 - gateSide], "Sigmoid");
        Value up = gateUp.getInputs()[1 - siluSide];
        auto type = dyn_cast<RankedTensorType>(gate.getType());
        if (!sigmoid || sigmoid.getInputs()[0] != gate || !type || type != up.getType())
          continue;
        replaceWithRaised(rewriter, gateUp,
                          SwigluOp::create(rewriter, gateUp.getLoc(), type, gate, up).getResult());
        return success();
      }
    }
    return failure();
  }
};

struct RaiseSwigluPass : helm::impl::RaiseSwigluBase<RaiseSwigluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SwigluPattern>(&getContext());
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
