//===- Passes.h - HELM raise passes and pipeline ----------------------------------===//
//
// Raising: generic `helm.onnx` ops to block-level HELM ops grouped into partition units.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_RAISE_PASSES_H
#define HELM_PASSES_RAISE_PASSES_H

#include "dialects/helm/HelmDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace helm {

#define GEN_PASS_DECL
#include "passes/raise/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/raise/Passes.h.inc"

/// Adds the raising passes, in order, from generic `helm.onnx` ops to block-level ops grouped in
/// partition units (pipeline `helm-raise`).
void buildRaisePipeline(mlir::OpPassManager &pm);

/// Registers the raising passes and the `helm-raise` pipeline.
void registerRaisePasses();

} // namespace helm

#endif
