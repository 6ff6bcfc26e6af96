//===- RaiseLmHead.cpp - the logits projection to helm.lm_head -------------------===//
#include "passes/OnnxMatchers.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_RAISELMHEAD
#include "passes/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
struct RaiseLmHeadPass : helm::impl::RaiseLmHeadBase<RaiseLmHeadPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    EmbedOp embed;
    func.walk([&](EmbedOp e) { embed = embed ? embed : e; });
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    for (Value returned : ret.getOperands()) {
      auto linear = skipCasts(returned).getDefiningOp<LinearOp>();
      if (!linear || linear.getBias())
        continue;
      auto weight = linear.getWeight().getDefiningOp<WeightOp>();
      bool tied = embed && weight &&
                  embed.getTable().getDefiningOp<WeightOp>().getName() == weight.getName();
      OpBuilder b(linear);
      auto head = b.create<LmHeadOp>(linear.getLoc(), linear.getType(), linear.getInput(),
                                     linear.getWeight(), linear.getTransposeWeightAttr(),
                                     b.getBoolAttr(tied));
      replaceValue(linear.getResult(), head.getResult());
      linear.erase();
    }
  }
};
} // namespace
