//===- Passes.h - HELM passes ----------------------------------------------------===//
#ifndef HELM_PASSES_PASSES_H
#define HELM_PASSES_PASSES_H

#include "dialects/helm/HelmDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
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
