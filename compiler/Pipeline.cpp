//===- Pipeline.cpp - the compiler's phases as pass pipelines --------------------===//
#include "compiler/Pipeline.h"

#include "dialects/helm/HelmDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassOptions.h"
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

void buildPhasePipeline(OpPassManager &pm, CompilePhase phase, const PhasePipelineOptions &options) {
  switch (phase) {
  case CompilePhase::Import:
    return;
  case CompilePhase::Raise:
    if (options.blockLevelInput) {
      OpPassManager &fpm = pm.nest<func::FuncOp>();
      fpm.addPass(createCheckRaised());
      fpm.addPass(createFormUnits());
    } else {
      buildRaisePipeline(pm);
    }
    if (!options.quantize.empty()) {
      QuantizeWeightsOptions quantize;
      quantize.format = options.quantize;
      pm.addPass(createQuantizeWeights(quantize));
    }
    return;
  case CompilePhase::Plan:
    buildPlanPipeline(pm, options.plan);
    return;
  case CompilePhase::Package:
    buildStageSplitPipeline(pm);
    return;
  }
}

llvm::Error runPhase(ModuleOp module, CompilePhase phase, const PhasePipelineOptions &options,
                     llvm::StringRef modelPath) {
  // What a failure that raised no diagnostic is called.
  llvm::StringRef what = phase == CompilePhase::Plan      ? "planning"
                         : phase == CompilePhase::Package ? "stage split"
                         : options.blockLevelInput        ? "forming units"
                                                          : "raising";
  return runPipeline(
      module, [&](OpPassManager &pm) { buildPhasePipeline(pm, phase, options); }, what, modelPath);
}

namespace {
struct CompilePipelineOptions : public PassPipelineOptions<CompilePipelineOptions> {
  Option<std::string> quantize{*this, "quantize",
                               llvm::cl::desc("Block format of the weights (as helmc --quantize; default none)"),
                               llvm::cl::init("none")};
  Option<CompilePhase> stopAfter{
      *this, "stop-after", llvm::cl::desc("Last phase to run"), llvm::cl::init(CompilePhase::Package),
      llvm::cl::values(clEnumValN(CompilePhase::Raise, "raise", "block-level ops in units"),
                       clEnumValN(CompilePhase::Plan, "plan", "units placed on the CPU or the GPU"),
                       clEnumValN(CompilePhase::Package, "package", "split into stage functions"))};
};
} // namespace

void registerCompilerPipelines() {
  PassPipelineRegistration<CompilePipelineOptions>(
      "helm-compile",
      "helmc's phases on an imported ONNX module: raise (and --quantize), plan for the module's "
      "helm.target, split into stages",
      [](OpPassManager &pm, const CompilePipelineOptions &options) {
        PhasePipelineOptions phaseOptions;
        if (options.quantize != "none")
          phaseOptions.quantize = options.quantize;
        // The quantization scheme is checked by its pass.
        for (CompilePhase phase : {CompilePhase::Raise, CompilePhase::Plan, CompilePhase::Package})
          if (phase <= options.stopAfter)
            buildPhasePipeline(pm, phase, phaseOptions);
      });
}

} // namespace helm
