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
struct RaiseEmbeddingPass : helm::impl::RaiseEmbeddingBase<RaiseEmbeddingPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> gathers;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("Gather"))
        gathers.push_back(op);
    });
    for (OnnxNodeOp op : gathers) {
      WeightOp table = traceWeight(op.getInputs()[0]);
      if (!table || shapeOf(table).size() != 2 || op.getIntAttr("axis", 0) != 0)
        continue;
      Value ids = op.getInputs()[1];
      auto idsType = dyn_cast<TensorType>(ids.getType());
      if (!idsType || !isa<IntegerType>(idsType.getElementType()))
        continue;
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
      OpBuilder b(op);
      auto embed = EmbedOp::create(b, op.getLoc(), resultType, ids, table.getResult());
      replaceValue(op.getResult(0), embed.getResult());
    }
  }
};
} // namespace
