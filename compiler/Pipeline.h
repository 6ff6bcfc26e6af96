//===- Pipeline.h - the one owner of helmc's pass pipeline -----------------------===//
//
// import (compiler/onnx) -> raise (passes/raise) -> plan (passes/plan) -> stage split and codegen
// (passes/codegen, then compiler/codegen for LLVM IR and the shared object). Every MLIR pass run of
// the compiler goes through runPipeline, which owns the one diagnostic capture: a failed run
// returns an llvm::Error holding the first error diagnostic, one line.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_PIPELINE_H
#define HELM_COMPILER_PIPELINE_H

#include "passes/plan/CostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <string>

namespace helm {

/// While alive, keeps the first error diagnostic raised in `ctx` (and stops it from printing): the
/// compiler's one diagnostic capture, used by runPipeline and by LLVM IR translation.
class FirstErrorCapture {
public:
  explicit FirstErrorCapture(mlir::MLIRContext &ctx);
  /// The first error as one line, or `fallback` when there was none.
  std::string messageOr(const std::string &fallback) const {
    return message.empty() ? fallback : message;
  }

private:
  std::string message;
  mlir::ScopedDiagnosticHandler handler;
};

/// Builds `build`'s passes and runs them on `module`. The error is one line: `prefix + ": "` (when
/// `prefix` is not empty) and the first error diagnostic, or "<what> failed" when the passes said
/// nothing.
llvm::Error runPipeline(mlir::ModuleOp module,
                        llvm::function_ref<void(mlir::OpPassManager &)> build, llvm::StringRef what,
                        llvm::StringRef prefix = "");

/// Runs the `helm-raise` pipeline on an imported module. Errors are prefixed with the model path.
llvm::Error raiseModule(mlir::ModuleOp module, llvm::StringRef modelPath);

/// Groups a module whose @main already holds block-level ops (a GGUF import) into partition
/// units: the end of `helm-raise` (helm-check-raised, helm-form-units) without its raising.
llvm::Error formUnits(mlir::ModuleOp module, llvm::StringRef modelPath);

/// Attaches `target` as the module's `helm.target` and runs the `helm-plan` pipeline
/// (helm-annotate-costs, helm-partition) with `options`. Errors are prefixed with the model path.
llvm::Error planModule(mlir::ModuleOp module, const TargetProfile &target,
                       const PlanOptions &options, llvm::StringRef modelPath);

/// Outlines the (planned) units of `@main` into their stage functions (helm-stage-split). Errors
/// are prefixed with the model path.
/// Marks the weights the package stores in blocks, of `format` or of the recipe q4_k_m: helm-quantize-weights.
/// Before planning, so that the plan counts the quantized bytes.
llvm::Error quantizeWeights(mlir::ModuleOp module, llvm::StringRef format, llvm::StringRef modelPath);

llvm::Error splitStages(mlir::ModuleOp module, llvm::StringRef modelPath);

/// Registers the compiler's front half as one helm-opt pipeline, `helm-compile`: raise, plan
/// (for the module's own `helm.target`) and the stage split, exactly as helmc runs them.
void registerCompilerPipelines();

} // namespace helm

#endif
