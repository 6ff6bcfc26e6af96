//===- RaiseFusedNorms.cpp - fused RMSNorm ops to helm.rms_norm / helm.add -------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_RAISEFUSEDNORMS
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
bool lastAxis(OnnxNodeOp op, Value x) {
  int64_t axis = op.getIntAttr("axis", -1);
  auto rank = int64_t(shapeOf(x).size());
  return axis == -1 || (rank > 0 && axis == rank - 1);
}

struct RaiseFusedNormsPass : helm::impl::RaiseFusedNormsBase<RaiseFusedNormsPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> norms;
    getOperation().walk([&](OnnxNodeOp op) {
      llvm::StringRef t = op.getOpType();
      if (t == "RMSNormalization" || t == "SimplifiedLayerNormalization" ||
          t == "SkipSimplifiedLayerNormalization")
        norms.push_back(op);
    });
    for (OnnxNodeOp op : norms) {
      bool skip = op.getOpType() == "SkipSimplifiedLayerNormalization";
      if (skip ? op.getDomain() != "com.microsoft"
               : !(op.getDomain().empty() || op.getDomain() == "com.microsoft"))
        continue;
      if (op.getInputs().size() < (skip ? 3u : 2u))
        continue;
      Value x = op.getInputs()[0];
      Value gamma = parameterVector(op.getInputs()[skip ? 2 : 1]);
      if (!gamma || !lastAxis(op, x))
        continue;
      // ONNX 23's default epsilon is 1e-5; ONNX Runtime's contrib ops also default to 1e-5.
      double eps = op.getFloatAttr("epsilon", 1e-5);
      OpBuilder b(op);
      Value sum;
      if (skip) {
        if (op.getInputs().size() > 4 && !isa<NoneType>(op.getInputs()[4].getType()))
          continue; // a bias on the skip connection has no place in the supported blocks
        Value skipValue = op.getInputs()[1];
        if (!isa<RankedTensorType>(x.getType()) || x.getType() != skipValue.getType())
          continue;
        sum = AddOp::create(b, op.getLoc(), x.getType(), x, skipValue);
        x = sum;
      }
      auto norm = RmsNormOp::create(b, op.getLoc(), x.getType(), x, gamma, b.getF64FloatAttr(eps));
      replaceValue(op.getResult(0), norm.getResult());
      if (skip && op.getNumResults() > 3)
        replaceValue(op.getResult(3), sum);
    }
  }
};
} // namespace
