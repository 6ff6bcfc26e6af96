//===- Passes.h - HELM codegen passes and pipeline ----------------------------------===//
//
// Code generation: the stage split and the lowering of each stage, to host code that calls the
// kernels (helm-lower-to-linalg) or to device-kernel calls (helm-lower-to-device-calls), then
// bufferization and the LLVM dialect. compiler/codegen turns the result into a shared object.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_CODEGEN_PASSES_H
#define HELM_PASSES_CODEGEN_PASSES_H

#include "dialects/helm/HelmDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace helm {

#define GEN_PASS_DECL
#include "passes/codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/codegen/Passes.h.inc"

/// Adds the stage split (helm-stage-split) alone; compiler/Pipeline.h's splitStages runs it.
void buildStageSplitPipeline(mlir::OpPassManager &pm);
/// Adds HELM-to-linalg lowering, bufferization and early frees for host stage code; the module
/// already holds its stage functions. (The registered `helm-cpu-bufferize` pipeline runs the stage
/// split first, so helm-opt takes a raised module as it is.)
void buildCpuBufferizePipeline(mlir::OpPassManager &pm);
/// Adds the kernel-form lowering of the GPU stage (helm-lower-to-device-calls), bufferization and
/// early frees (pipeline `helm-device-calls-bufferize`). The module already holds its stages.
void buildDeviceCallsBufferizePipeline(mlir::OpPassManager &pm);
/// Adds the lowering of bufferized stage code to the LLVM dialect (pipeline `helm-cpu-to-llvm`).
/// `deviceBuffers`: the code allocates its buffers through `_mlir_memref_to_llvm_alloc/free`, which
/// the runtime serves from the device the stage runs on (an emu device stage's arena).
void buildCpuToLlvmPipeline(mlir::OpPassManager &pm, bool deviceBuffers = false);

/// Registers the code generation passes and the pipelines above.
void registerCodegenPasses();

} // namespace helm

#endif
