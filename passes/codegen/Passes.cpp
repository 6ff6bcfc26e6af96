//===- Passes.cpp - the code generation pipelines and their registration ---------===//
#include "passes/codegen/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace helm {

namespace {
/// Appends upstream passes by their registered names, so that each list reads like the lit tests'
/// RUN lines. The lists are constants: a parse failure is a bug in this file.
void addUpstream(OpPassManager &pm, llvm::StringRef pipeline, llvm::StringRef name) {
  std::string error;
  llvm::raw_string_ostream os(error);
  if (failed(parsePassPipeline(pipeline, pm, os)))
    llvm::report_fatal_error(llvm::Twine(name) + " pipeline: " + error);
}

constexpr llvm::StringLiteral kBufferize =
    "canonicalize,cse,one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map "
    "unknown-type-conversion=identity-layout-map},canonicalize";
} // namespace

void buildStageSplitPipeline(OpPassManager &pm) { pm.addPass(createStageSplit()); }

void buildCpuBufferizePipeline(OpPassManager &pm) {
  pm.addPass(createLowerToLinalg());
  addUpstream(pm, kBufferize, "helm-cpu-bufferize");
  pm.addNestedPass<func::FuncOp>(createStridedCopiesToLinalg());
  pm.addPass(createFreeBuffers());
  // After bufferization: on tensors, the analysis of hundreds of tiled loops is superlinear.
  pm.addNestedPass<func::FuncOp>(createVectorizeGlue());
  pm.addNestedPass<func::FuncOp>(createApproximateMath());
  pm.addPass(createCanonicalizerPass());
}

void buildDeviceCallsBufferizePipeline(OpPassManager &pm) {
  LowerToDeviceCallsOptions options;
  options.stageDevice = "gpu";
  pm.addPass(createLowerToDeviceCalls(options));
  addUpstream(pm, kBufferize, "helm-device-calls-bufferize");
  pm.addPass(createFreeBuffers());
  pm.addPass(createCanonicalizerPass());
}

void buildCpuToLlvmPipeline(OpPassManager &pm, bool deviceBuffers) {
  std::string memrefToLlvm = deviceBuffers ? "finalize-memref-to-llvm{use-generic-functions=true}"
                                           : "finalize-memref-to-llvm";
  addUpstream(pm,
              "func.func(convert-linalg-to-loops),canonicalize,"
              "func.func(lower-vector-mask,lower-vector-multi-reduction{lowering-strategy=inner-reduction},convert-vector-to-scf{full-unroll=true lower-tensors=false}),"
              "expand-strided-metadata,lower-affine,convert-scf-to-cf,convert-vector-to-llvm{reassociate-fp-reductions=true},"
              "convert-math-to-llvm," + memrefToLlvm + ",convert-to-llvm,"
              "reconcile-unrealized-casts,canonicalize",
              "helm-cpu-to-llvm");
}

void registerCodegenPasses() {
  registerHelmCodegenPasses();
  PassPipelineRegistration<>("helm-cpu-bufferize",
                             "Stage split, HELM to linalg + kernel calls, bufferization, early frees",
                             [](OpPassManager &pm) {
                               buildStageSplitPipeline(pm);
                               buildCpuBufferizePipeline(pm);
                             });
  PassPipelineRegistration<>(
      "helm-device-calls-bufferize",
      "A split GPU stage to device-kernel calls (helm_dev_*), bufferization, early frees",
      buildDeviceCallsBufferizePipeline);
  PassPipelineRegistration<>("helm-cpu-to-llvm", "Bufferized stage code to the LLVM dialect",
                             [](OpPassManager &pm) { buildCpuToLlvmPipeline(pm); });
}

} // namespace helm
