//===- CheckRaised.cpp - erase dead ONNX nodes, reject live ones -----------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

namespace helm {
#define GEN_PASS_DEF_CHECKRAISED
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
struct CheckRaisedPass : helm::impl::CheckRaisedBase<CheckRaisedPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Erase in reverse order so users go before their producers.
    SmallVector<Operation *> ops;
    for (Operation &op : func.getBody().front())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (op->use_empty() && isa<HelmDialect>(op->getDialect()) && isMemoryEffectFree(op))
        op->erase();
    bool failed = false;
    func.walk([&](OnnxNodeOp op) {
      op.emitError() << "unsupported ONNX node '" << op.getNode() << "' (" << op.getOpType()
                     << ", domain '" << (op.getDomain().empty() ? "ai.onnx" : op.getDomain())
                     << "'): no HELM pattern covers it";
      failed = true;
      return WalkResult::interrupt();
    });
    if (failed)
      signalPassFailure();
  }
};
} // namespace
