//===- Pipeline.cpp - helmc's compile steps --------------------------------------===//
#include "compiler/Pipeline.h"

#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace helm {

namespace {
/// Runs `pm` on `module`, keeping the first error diagnostic as `error`.
bool runPasses(PassManager &pm, ModuleOp module, const std::string &modelPath, std::string &error,
               const char *what) {
  std::string first;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && first.empty())
      first = diag.str();
    return success();
  });
  if (failed(pm.run(module))) {
    error = modelPath + ": " + (first.empty() ? std::string(what) : first);
    return false;
  }
  return true;
}
} // namespace

bool planModule(ModuleOp module, const TargetProfile &target, const PlanOptions &options,
                const std::string &modelPath, std::string &error) {
  module->setAttr("helm.target", targetToAttr(module.getContext(), target));
  PassManager pm(module.getContext());
  AnnotateCostsOptions costs;
  costs.batch = options.batch;
  costs.context = options.context;
  costs.promptLen = options.promptLen;
  pm.addPass(createAnnotateCosts(costs));
  PartitionOptions partition;
  partition.objective = options.objective == Objective::prefill ? "prefill" : "decode";
  partition.kvOffload = options.kvOffload;
  partition.vramReserve = options.vramReserve ? *options.vramReserve : -1.0;
  partition.forceSplit = options.forceSplit ? *options.forceSplit : -1;
  pm.addPass(createPartition(partition));
  return runPasses(pm, module, modelPath, error, "planning failed");
}

bool raiseModule(ModuleOp module, const std::string &modelPath, std::string &error) {
  MLIRContext *ctx = module.getContext();
  PassManager pm(ctx);
  buildRaisePipeline(pm);
  return runPasses(pm, module, modelPath, error, "raising failed");
}

} // namespace helm
