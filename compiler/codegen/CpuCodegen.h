//===- CpuCodegen.h - CPU stage to a native shared object -------------------------===//
#ifndef HELM_COMPILER_CODEGEN_CPUCODEGEN_H
#define HELM_COMPILER_CODEGEN_CPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <functional>
#include <string>
#include <vector>

namespace helm {

/// One weight the generated code asks the runtime for, by id (`helm_rt_weight(ctx, id)`).
struct StageTensor {
  int64_t id = 0;
  std::string symbol;   // helm.weight_decl symbol
  std::string onnxName; // initializer name in the source model
  std::string dtype;    // f32, f16, bf16, i64, ...
  std::vector<int64_t> shape;
  int64_t bytes = 0;
};

/// Which CPU the object is compiled for.
struct CpuCodegenTarget {
  std::string cpu = "x86-64-v3"; // LLVM CPU name
  std::string features;         // extra LLVM features ("+avx2,+fma,..."), may be empty
  static CpuCodegenTarget host();
};

struct CpuStage {
  std::string sharedObject; // bytes of the linked .so
  std::string entry = "helm_cpu_stage";
  std::vector<StageTensor> tensors; // indexed by id
  int64_t kvLayers = 0;
};

/// Adds stage-split, HELM-to-linalg lowering, bufferization and early frees (pipeline
/// `helm-cpu-bufferize`).
void buildCpuBufferizePipeline(mlir::OpPassManager &pm);
/// Adds the lowering of bufferized stage code to the LLVM dialect (pipeline `helm-cpu-to-llvm`).
void buildCpuToLlvmPipeline(mlir::OpPassManager &pm);
/// Registers both pipelines under their names.
void registerCpuCodegenPipelines();

/// Compiles the raised (and optionally planned) module's CPU stage into a shared object. The module
/// is consumed (lowered in place). `progress` gets one line per step. On failure returns false with a
/// one-line `error`.
bool compileCpuStage(mlir::ModuleOp module, const CpuCodegenTarget &target, CpuStage &stage,
                     std::string &error, const std::function<void(llvm::StringRef)> &progress = {});

} // namespace helm

#endif
