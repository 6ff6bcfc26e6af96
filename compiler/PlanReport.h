//===- PlanReport.h - the partition plan as a table, JSON and SVG ---------------===//
#ifndef HELM_COMPILER_PLANREPORT_H
#define HELM_COMPILER_PLANREPORT_H

#include "compiler/ModelConfig.h"
#include "passes/plan/TargetProfile.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace helm {

/// Renders the `helm.plan` a partitioned module carries. All of them read the same attributes; the
/// JSON value is what the package's manifest keeps under "plan".
std::string planTable(mlir::ModuleOp module, const TargetProfile &target, const ModelConfig &config);
llvm::json::Value planJsonValue(mlir::ModuleOp module, const TargetProfile &target, const ModelConfig &config);
std::string planJson(mlir::ModuleOp module, const TargetProfile &target, const ModelConfig &config);
std::string planSvg(mlir::ModuleOp module, const TargetProfile &target, const ModelConfig &config);

/// "cpu(21)->cuda(17)", "cuda(38)" or "cpu(38)" for split k of n units.
std::string splitName(int64_t k, int64_t n);

} // namespace helm

#endif
