//===- ApproximateExp.cpp - f32 math.exp to MLIR's polynomial approximation -------===//
//
// Runs after helm-vectorize-glue, so the SwiGLU sigmoid's exp is already a vector op: the
// approximation keeps it one (a libm call per lane otherwise). Only exp: the other math ops of the
// glue (rsqrt, sin, cos) keep their lowering.
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace helm {
#define GEN_PASS_DEF_APPROXIMATEEXP
#include "passes/codegen/Passes.h.inc"
} // namespace helm

using namespace mlir;

namespace {

struct ApproximateExpPass : helm::impl::ApproximateExpBase<ApproximateExpPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [](llvm::StringRef name) { return name == math::ExpOp::getOperationName(); });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
