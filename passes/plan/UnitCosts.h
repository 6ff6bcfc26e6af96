//===- UnitCosts.h - per-unit costs as attributes and back ----------------------===//
#ifndef HELM_PASSES_PLAN_UNITCOSTS_H
#define HELM_PASSES_PLAN_UNITCOSTS_H

#include "passes/plan/CostModel.h"
#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/BuiltinOps.h"

namespace helm {

/// The partition units of the module's `main`, in order.
llvm::SmallVector<UnitOp> unitsOf(mlir::ModuleOp module);

/// Name used in tables: "embedding", "block.<i>", "head".
std::string unitName(UnitOp unit);

/// The parameters a unit keeps on its device: each distinct weight (symbol, declared bytes) and, as
/// one entry, its constants (small parameters of tiny models). Nothing is read.
std::vector<std::pair<std::string, int64_t>> unitTensors(UnitOp unit);

/// Reads the costs helm-annotate-costs attached to `unit` (false if it has none).
bool readUnitCost(UnitOp unit, UnitCost &cost);

} // namespace helm

#endif
