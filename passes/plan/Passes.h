//===- Passes.h - HELM plan passes and pipeline ----------------------------------===//
//
// Planning: per-unit costs from shapes (helm-annotate-costs) and the CPU/GPU split with the
// roofline cost model (helm-partition). The cost model and target profiles live beside them.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_PLAN_PASSES_H
#define HELM_PASSES_PLAN_PASSES_H

#include "dialects/helm/HelmDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "passes/plan/CostModel.h"

namespace helm {

#define GEN_PASS_DECL
#include "passes/plan/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/plan/Passes.h.inc"

/// What helm-quantize-weights stores weights as: each block format it quantizes to, then the mixed
/// recipes q3_k_m, q4_k_m and q5_k_m (llama.cpp's), in the order messages list them.
llvm::ArrayRef<llvm::StringLiteral> quantizationSchemes();

/// Adds helm-annotate-costs and helm-partition with the planner's options (pipeline `helm-plan`,
/// which reads the target from the module's `helm.target`).
void buildPlanPipeline(mlir::OpPassManager &pm, const PlanOptions &options = {});

/// Registers the planning passes and the `helm-plan` pipeline.
void registerPlanPasses();

} // namespace helm

#endif
