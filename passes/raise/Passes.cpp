//===- Passes.cpp - the raising pipeline and its registration --------------------===//
#include "passes/raise/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace helm {

void buildRaisePipeline(OpPassManager &pm) {
  pm.addPass(createRaiseLinear()); // module passes: MatMulNBits and GatherBlockQuantized add
  pm.addPass(createRaiseQuantizedGather()); // weight declarations
  OpPassManager &fpm = pm.nest<func::FuncOp>();
  fpm.addPass(createRaiseSplit());
  fpm.addPass(createRaiseEmbedding());
  fpm.addPass(createRaiseFusedNorms());
  fpm.addPass(createRaiseRmsNorm());
  fpm.addPass(createRaiseSwiglu());
  fpm.addPass(createRaiseRope());
  fpm.addPass(createRaiseAttention());
  fpm.addPass(createRaiseResidual());
  fpm.addPass(createRaiseLmHead());
  fpm.addPass(createCheckRaised());
  fpm.addPass(createFormUnits());
}

void registerRaisePasses() {
  registerHelmRaisePasses();
  PassPipelineRegistration<>("helm-raise",
                             "Raise generic ONNX nodes to block-level HELM ops in partition units",
                             buildRaisePipeline);
}

} // namespace helm
