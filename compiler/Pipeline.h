//===- Pipeline.h - the compiler's phases as pass pipelines ----------------------===//
//
// import (compiler/onnx, compiler/gguf) -> raise (passes/raise) -> plan (passes/plan) -> package
// (the stage split of passes/codegen, then compiler/codegen for LLVM IR and the shared object, and
// the package writer). The compile driver (Driver.h) runs the phases in order; every MLIR pass run
// of the compiler goes through runPipeline, which owns the one diagnostic capture: a failed run
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

/// The compiler's phases, in the order they run (Driver.h says what each does).
enum class CompilePhase { Import, Raise, Plan, Package };

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

/// How a phase's passes are built.
struct PhasePipelineOptions {
  /// The module holds block-level ops already (a GGUF import): the raise phase only checks them
  /// and groups them into units.
  bool blockLevelInput = false;
  /// Empty, or a scheme of quantizationSchemes() (passes/plan/Passes.h): the raise phase ends by
  /// choosing the weights' block formats (helm-quantize-weights), so that the plan counts the
  /// stored bytes.
  std::string quantize;
  PlanOptions plan;
};

/// Adds `phase`'s passes: raise (helm-raise, or its unit forming alone for block-level input; then
/// helm-quantize-weights), plan (helm-plan, for the module's own `helm.target`), package (the
/// stage split, the last pass before code generation leaves MLIR). Import is the front end and
/// adds none.
void buildPhasePipeline(mlir::OpPassManager &pm, CompilePhase phase, const PhasePipelineOptions &options);

/// Runs `phase`'s passes on `module` through runPipeline; errors are prefixed with `modelPath`.
llvm::Error runPhase(mlir::ModuleOp module, CompilePhase phase, const PhasePipelineOptions &options,
                     llvm::StringRef modelPath);

/// Registers `helm-compile` with helm-opt: the raise, plan and package phases' passes as the
/// driver runs them, with the options `quantize` and `stop-after`.
void registerCompilerPipelines();

} // namespace helm

#endif
