//===- RaiseLmHead.cpp - the logits projection to helm.lm_head -------------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

#include <cstring>

namespace helm {
#define GEN_PASS_DEF_RAISELMHEAD
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
/// Largest tables compared value by value (TorchScript stores a tied LM head as a transposed copy of
/// the embedding); bigger ones are reported untied, which is correct, only not deduplicated.
constexpr int64_t kMaxCompareElements = int64_t(16) << 20;

/// True if `head` holds the same values as the [vocab, hidden] `table`, in the head's layout.
bool sameValues(WeightOp table, WeightOp head, bool headTransposed) {
  auto t = shapeOf(table), h = shapeOf(head);
  if (t.size() != 2 || h.size() != 2 || t[0] * t[1] == 0 || t[0] * t[1] > kMaxCompareElements)
    return false;
  if (headTransposed ? (h[0] != t[0] || h[1] != t[1]) : (h[0] != t[1] || h[1] != t[0]))
    return false;
  if (elementTypeOf(table) != elementTypeOf(head))
    return false;
  // Raw bytes, compared element by element in the head's layout (no decoded copies).
  auto a = weightBytes(table), b = weightBytes(head);
  if (!a || !b || a->size() != b->size())
    return false;
  int64_t vocab = t[0], hidden = t[1];
  size_t width = a->size() / size_t(vocab * hidden);
  if (headTransposed)
    return *a == *b;
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t i = 0; i < hidden; ++i)
      if (std::memcmp(a->data() + (v * hidden + i) * width, b->data() + (i * vocab + v) * width, width))
        return false;
  return true;
}

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
      auto table = embed ? embed.getTable().getDefiningOp<WeightOp>() : WeightOp();
      bool tied = table && weight &&
                  (table.getName() == weight.getName() ||
                   sameValues(table, weight, linear.getTransposeWeight()));
      OpBuilder b(linear);
      auto head = LmHeadOp::create(b, linear.getLoc(), linear.getType(), linear.getInput(),
                                     linear.getWeight(), linear.getTransposeWeightAttr(),
                                     b.getBoolAttr(tied));
      replaceValue(linear.getResult(), head.getResult());
      linear.erase();
    }
  }
};
} // namespace
