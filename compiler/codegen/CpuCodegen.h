//===- CpuCodegen.h - CPU stage to a native shared object -------------------------===//
#ifndef HELM_COMPILER_CODEGEN_CPUCODEGEN_H
#define HELM_COMPILER_CODEGEN_CPUCODEGEN_H

#include "contract/helm_contract.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace helm {

/// One weight the generated code asks the runtime for, by id (`helm_rt_weight(ctx, id)`).
struct StageTensor {
  int64_t id = 0;
  std::string symbol;   // helm.weight_decl symbol
  std::string onnxName; // initializer name in the source model
  std::string dtype;    // f32, f16, bf16, i64, ..., or a block format (q8_0, ...)
  std::vector<int64_t> shape; // for a block format: [rows, row length], rows first
  int64_t bytes = 0;          // in the package
  /// A weight the package stores quantized: the source's dtype, bytes and shape, and the source
  /// dimension that holds the rows (the builder transposes while quantizing when it is 1).
  int32_t blockDtype = 0; // helm_dtype code; 0 for a weight stored as it is
  std::string sourceDtype;
  std::vector<int64_t> sourceShape;
  int64_t sourceBytes = 0;
  int64_t rowDim = 0;
  /// The source bytes already are the blocks (a GGUF tensor): copied as they are.
  bool prepacked = false;
  /// A weight that arrives as ONNX blocked integers (MatMulNBits, GatherBlockQuantized, a
  /// block-wise DequantizeLinear): the initializers the builder repacks into blockDtype's blocks
  /// (onnxName is the codes'), `bits` 0 otherwise.
  struct OnnxBlocks {
    int64_t bits = 0, blockSize = 0;
    bool kMajor = false;
    std::string codeDtype, scales, scaleDtype, zeroPoints, zeroPointDtype;
  } onnxBlocks;
};

/// Which CPU the object is compiled for.
struct CpuCodegenTarget {
  std::string cpu = "x86-64-v3"; // LLVM CPU name
  std::string features;         // extra LLVM features ("+avx2,+fma,..."), may be empty
  static CpuCodegenTarget host();
};

/// One compiled stage: a shared object with one entry point `(ctx, in*, positions*, out*, B, S)`.
/// The CPU stage always is one; the GPU stage is one when it was compiled for the host (emu targets).
struct CpuStage {
  helm_stage_side side = HELM_STAGE_CPU; // the plan's side of the stage
  std::string sharedObject;         // bytes of the linked .so
  std::string entry = "helm_cpu_stage";
  std::vector<StageTensor> tensors; // indexed by id
  int64_t kvLayers = 0;
  int64_t firstUnit = 0, lastUnit = 0;
  bool takesIds = true;       // input: token ids [B, S] i64, else the boundary activation
  bool returnsLogits = true;  // output: logits [B, V] f32, else the boundary activation
  std::string activationDtype; // boundary activation [B, S, width] (when it has one)
  int64_t activationWidth = 0;
  /// A GPU stage in kernel form (helm-lower-to-device-calls): host code that only calls the
  /// device's kernels (helm_dev_*); otherwise the stage's code computes on the host.
  bool deviceCalls = false;
};

/// Compiles each stage function of a split module (compiler/Pipeline.h's splitStages) into a
/// shared object for `target`: the CPU stage, and the GPU stage of a split plan compiled for the
/// host (how the emu device runs it) or in kernel form. The module is consumed. `progress`
/// gets one line per step. Errors are one line.
/// `gpuDeviceCalls`: the GPU stage is compiled in kernel form (what a CUDA GPU runs; emu can run
/// either form).
llvm::Expected<std::vector<CpuStage>>
compileHostStages(mlir::ModuleOp module, const CpuCodegenTarget &target,
                  const std::function<void(llvm::StringRef)> &progress = {},
                  bool gpuDeviceCalls = false);

} // namespace helm

#endif
