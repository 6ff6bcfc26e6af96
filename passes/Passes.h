//===- Passes.h - HELM passes ----------------------------------------------------===//
#ifndef HELM_PASSES_PASSES_H
#define HELM_PASSES_PASSES_H

#include "dialects/helm/HelmDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace helm {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Adds the raising passes, in order, from generic `helm.onnx` ops to block-level ops grouped in
/// partition units (the `helm-raise` pipeline).
void buildRaisePipeline(mlir::OpPassManager &pm);

/// Registers every HELM pass and the `helm-raise` pipeline with the global registry.
void registerAllHelmPasses();

} // namespace helm

#endif
