//===- Pipeline.cpp - the one owner of helmc's pass pipeline ---------------------===//
#include "compiler/Pipeline.h"

#include "dialects/helm/HelmDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace helm {

FirstErrorCapture::FirstErrorCapture(MLIRContext &ctx)
    : handler(&ctx, [this](Diagnostic &diag) {
        if (diag.getSeverity() == DiagnosticSeverity::Error && message.empty())
          message = diag.str();
        return success();
      }) {}

llvm::Error runPipeline(ModuleOp module, llvm::function_ref<void(OpPassManager &)> build,
                        llvm::StringRef what, llvm::StringRef prefix) {
  FirstErrorCapture diagnostics(*module.getContext());
  PassManager pm(module.getContext());
  build(pm);
  if (succeeded(pm.run(module)))
    return llvm::Error::success();
  return llvm::createStringError((prefix.empty() ? std::string() : prefix.str() + ": ") +
                                 diagnostics.messageOr(what.str() + " failed"));
}

llvm::Error raiseModule(ModuleOp module, llvm::StringRef modelPath) {
  return runPipeline(module, buildRaisePipeline, "raising", modelPath);
}

llvm::Error formUnits(ModuleOp module, llvm::StringRef modelPath) {
  return runPipeline(
      module,
      [](OpPassManager &pm) {
        OpPassManager &fpm = pm.nest<func::FuncOp>();
        fpm.addPass(createCheckRaised());
        fpm.addPass(createFormUnits());
      },
      "forming units", modelPath);
}

llvm::Error planModule(ModuleOp module, const TargetProfile &target, const PlanOptions &options,
                       llvm::StringRef modelPath) {
  module->setAttr(HelmDialect::TargetAttrHelper::getNameStr(), targetToAttr(module.getContext(), target));
  return runPipeline(
      module, [&](OpPassManager &pm) { buildPlanPipeline(pm, options); }, "planning", modelPath);
}

llvm::Error quantizeWeights(ModuleOp module, llvm::StringRef format, llvm::StringRef modelPath) {
  QuantizeWeightsOptions options;
  options.format = format.str();
  return runPipeline(
      module, [&](OpPassManager &pm) { pm.addPass(createQuantizeWeights(options)); }, "quantization",
      modelPath);
}

llvm::Error splitStages(ModuleOp module, llvm::StringRef modelPath) {
  return runPipeline(module, buildStageSplitPipeline, "stage split", modelPath);
}

void registerCompilerPipelines() {
  PassPipelineRegistration<>(
      "helm-compile",
      "helmc's front half: raise, plan for the module's helm.target, split into stages",
      [](OpPassManager &pm) {
        buildRaisePipeline(pm);
        buildPlanPipeline(pm);
        buildStageSplitPipeline(pm);
      });
}

} // namespace helm
