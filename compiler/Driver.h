//===- Driver.h - the compiler's one entry: typed options, phases, compile() -----===//
//
// A compilation runs the compiler's phases in order and stops after the one asked for (helmc's
// --emit names it):
//
//   import   the front end: an ONNX graph as one helm.onnx op per node (compiler/onnx), or a
//            GGUF file as block-level ops (compiler/gguf), with the tokenizer and chat template
//            the package will carry
//   raise    block-level ops grouped into partition units (passes/raise), and the weights'
//            storage (--quantize: helm-quantize-weights)
//   plan     unit costs and the CPU/GPU split for the target (passes/plan); only with a target
//   package  stage split, code generation and the .helmpkg (PackageBuilder)
//
// helmc's main parses its flags into CompileOptions and calls compile(); helm-opt's
// `helm-compile` pipeline and the tests build the same phases' passes (Pipeline.h).
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_DRIVER_H
#define HELM_COMPILER_DRIVER_H

#include "compiler/ModelConfig.h"
#include "compiler/PackageBuilder.h"
#include "compiler/Pipeline.h"
#include "compiler/WeightSource.h"
#include "passes/plan/CostModel.h"
#include "passes/plan/TargetProfile.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>

namespace helm {

/// Everything a compilation needs, parsed and checked at the edge (helmc's command line).
struct CompileOptions {
  std::string inputPath;                // model.onnx or model.gguf
  /// The machine to plan for, resolved (resolveTarget). None: no plan; the CPU stage is
  /// compiled for this CPU.
  std::optional<TargetProfile> target;
  PlanOptions plan;
  /// Empty, or a quantization scheme of quantizationSchemes(): the weights' block format.
  std::string quantize;
  std::string tokenizerPath;            // tokenizer.json to bundle; empty: the model file's own
  /// The model's chat template goes into the package (false: --no-chat-template).
  bool chatTemplate = true;
  int64_t maxContext = 4096;
  GpuCodeForm gpuCode = GpuCodeForm::Auto;
  std::string outputPath;               // the package (package phase)
};

/// Where a compilation reports as it goes: progress lines (planning, the package) and warnings.
/// Either may be empty.
struct CompileHooks {
  std::function<void(llvm::StringRef)> progress, warning;
};

/// What a compilation leaves: the module as the last phase it ran left it, its weights, and for
/// the package phase what was written.
struct Compilation {
  ImportedModel model;
  bool fromGguf = false;
  /// Read off the raised module by the phases that need it (plan, package).
  std::optional<ModelConfig> config;
  PackageReport report;
};

/// Runs the phases up to and including `stopAfter`. The plan phase needs `options.target`. Errors
/// are one line naming the input file. On failure (or interruption) nothing is left at the
/// output path.
llvm::Expected<Compilation> compile(mlir::MLIRContext &ctx, const CompileOptions &options,
                                    CompilePhase stopAfter, const CompileHooks &hooks = {});

/// The model configuration of a raised module (the one compile() read, if it did); errors name
/// the input file.
llvm::Expected<ModelConfig> modelConfigOf(const Compilation &compilation,
                                          llvm::StringRef inputPath);

} // namespace helm

#endif
