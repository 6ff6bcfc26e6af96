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
struct RaiseSwigluPass : helm::impl::RaiseSwigluBase<RaiseSwigluPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> sigmoids;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("Sigmoid"))
        sigmoids.push_back(op);
    });
    for (OnnxNodeOp sigmoid : sigmoids) {
      Value gate = sigmoid.getInputs()[0];
      // silu(g) = g * sigmoid(g)
      OnnxNodeOp silu;
      for (Operation *user : sigmoid.getResult(0).getUsers())
        if (auto mul = dyn_cast<OnnxNodeOp>(user); mul && mul.is("Mul") &&
            llvm::is_contained(mul.getInputs(), gate))
          silu = mul;
      if (!silu || !silu.getResult(0).hasOneUse())
        continue;
      auto gateUp = dyn_cast<OnnxNodeOp>(*silu.getResult(0).user_begin());
      if (!gateUp || !gateUp.is("Mul"))
        continue;
      Value up = gateUp.getInputs()[0] == silu.getResult(0) ? gateUp.getInputs()[1]
                                                             : gateUp.getInputs()[0];
      auto type = dyn_cast<RankedTensorType>(gate.getType());
      if (!type || type != up.getType())
        continue;
      OpBuilder b(gateUp);
      auto swiglu = SwigluOp::create(b, gateUp.getLoc(), type, gate, up);
      replaceValue(gateUp.getResult(0), swiglu.getResult());
    }
  }
};
} // namespace
