//===- RaiseEmbedding.cpp - Gather from a weight table to helm.embed -------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_RAISEEMBEDDING
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
/// Gather(table, ids) on axis 0 of a 2-D weight with integer ids: an embedding lookup.
struct EmbeddingPattern : OpRewritePattern<OnnxNodeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(OnnxNodeOp op, PatternRewriter &rewriter) const override {
    if (!op.is("Gather"))
      return failure();
    WeightOp table = traceWeight(op.getInputs()[0]);
    if (!table || shapeOf(table).size() != 2 || op.getIntAttr("axis", 0) != 0)
      return failure();
    Value ids = op.getInputs()[1];
    auto idsType = dyn_cast<TensorType>(ids.getType());
    if (!idsType || !isa<IntegerType>(idsType.getElementType()))
      return failure();
    int64_t hidden = shapeOf(table)[1];
    RankedTensorType resultType;
    Type element = elementTypeOf(table);
    if (auto ranked = dyn_cast<RankedTensorType>(ids.getType())) {
      SmallVector<int64_t> shape(ranked.getShape());
      shape.push_back(hidden);
      resultType = RankedTensorType::get(shape, element);
    } else {
      resultType = activationType(element, hidden);
    }
    replaceWithRaised(rewriter, op,
                      EmbedOp::create(rewriter, op.getLoc(), resultType, ids, table.getResult()).getResult());
    return success();
  }
};

struct RaiseEmbeddingPass : helm::impl::RaiseEmbeddingBase<RaiseEmbeddingPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<EmbeddingPattern>(&getContext());
    if (failed(applyRaisingPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
