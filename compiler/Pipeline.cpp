//===- Pipeline.cpp - helmc's compile steps --------------------------------------===//
#include "compiler/Pipeline.h"

#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace helm {

bool raiseModule(ModuleOp module, const std::string &modelPath, std::string &error) {
  MLIRContext *ctx = module.getContext();
  std::string first;
  // Keep the first error only: later ones are usually consequences of it.
  ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && first.empty())
      first = diag.str();
    return success();
  });
  PassManager pm(ctx);
  buildRaisePipeline(pm);
  if (failed(pm.run(module))) {
    error = modelPath + ": " + (first.empty() ? std::string("raising failed") : first);
    return false;
  }
  return true;
}

} // namespace helm
