//===- ApproximateMath.cpp - f32 math.exp and math.tanh to polynomial approximations ===//
//
// Runs after helm-vectorize-glue, so the SwiGLU sigmoid's exp and the GeGLU's tanh are already
// vector ops: the approximations keep them so (a libm call per lane otherwise). Only exp and tanh:
// the other math ops of the glue (rsqrt, sin, cos) keep their lowering.
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace helm {
#define GEN_PASS_DEF_APPROXIMATEMATH
#include "passes/codegen/Passes.h.inc"
} // namespace helm

using namespace mlir;

namespace {

struct ApproximateMathPass : helm::impl::ApproximateMathBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [](llvm::StringRef name) {
          return name == math::ExpOp::getOperationName() || name == math::TanhOp::getOperationName();
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
