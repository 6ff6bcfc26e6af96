//===- PackageBuilder.h - helmc's last step: compile the CPU stage, write .helmpkg --===//
#ifndef HELM_COMPILER_PACKAGEBUILDER_H
#define HELM_COMPILER_PACKAGEBUILDER_H

#include "compiler/ModelConfig.h"
#include "compiler/codegen/CpuCodegen.h"
#include "compiler/WeightSource.h"
#include "passes/plan/TargetProfile.h"

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace helm {

/// The form of a GPU stage's code (helmc --gpu-code).
enum class GpuCodeForm {
  Auto,    // kernels for a CUDA GPU, host for the emulated GPU
  Host,    // compiled to run on the host: what emu runs
  Kernels, // host code launching the device's kernels: what a CUDA GPU runs (emu: host kernels)
};
/// The form --gpu-code names ("auto", "host", "kernels"), or nullopt.
std::optional<GpuCodeForm> parseGpuCodeForm(llvm::StringRef name);

/// How the package is written. The target and the plan are not here: the builder reads them off
/// the module (`helm.target`, `helm.plan`), where planning left them.
struct PackageOptions {
  std::string outputPath;
  std::string modelPath;
  std::string tokenizerPath;                // empty: tokenizerJson, if any
  /// tokenizer.json text the model file carries (a GGUF file's metadata), used without a path.
  std::string tokenizerJson;
  /// The model file's chat template (Jinja text, GGUF's tokenizer.chat_template), kept in the
  /// manifest for chat use; and end-of-sequence ids it names, added to the tokenizer's guesses.
  std::string chatTemplate;
  std::vector<int32_t> eosIds;
  int64_t maxContext = 4096;                // longest sequence the runtime accepts
  CpuCodegenTarget cpu;                     // ISA of the CPU stage
  std::optional<double> vramReserve;        // --vram-reserve, bytes (none: the target's)
  GpuCodeForm gpuCode = GpuCodeForm::Auto;
  /// The CUDA kernels' fatbin a CUDA package carries (empty: this helmc has no CUDA kernels).
  llvm::ArrayRef<char> cudaKernels;
  /// The CPU stage's KV rows helm-rt uses unless told otherwise (manifest kv.host_dtype): "f16"
  /// for a GGUF file (llama.cpp's own f16 cache) or a float16 model (exact), else "f32".
  std::string kvHostDtype = "f32";
};

struct PackageReport {
  double codegenSeconds = 0, writeSeconds = 0;
  uint64_t weightBytes = 0, codeBytes = 0;
  uint64_t gpuWeightBytes = 0; // of weightBytes, those of the GPU stage
  /// Weights stored in a block format (helm-quantize-weights), and their bytes before it.
  uint64_t quantizedTensors = 0, quantizedSourceBytes = 0, quantizedBytes = 0;
  /// Weights that arrived as ONNX blocked integers, repacked into block formats.
  uint64_t repackedTensors = 0;
  /// Weights that arrived as ONNX blocked integers with rows that are not whole blocks of 32,
  /// stored dequantized.
  uint64_t dequantizedTensors = 0;
  /// Weights whose source bytes already were blocks (GGUF), copied unchanged.
  uint64_t prepackedTensors = 0;
  /// Every tensor written, and their weights (elements): bits per weight = 8 weightBytes / this.
  uint64_t tensors = 0, weightElements = 0;
  /// The tensors stored in each block format ("q4_k" -> count).
  std::map<std::string, uint64_t> blockTensors;
};

/// Lowers the (raised, maybe planned) module's stages to native code and writes the package
/// atomically. The module is consumed. On failure, or when interrupted (SIGINT, SIGTERM), nothing
/// is left at the output path and the error is one line.
llvm::Error buildPackage(mlir::ModuleOp module, const WeightSource &weights,
                         const ModelConfig &config, const PackageOptions &options,
                         PackageReport &report,
                         const std::function<void(llvm::StringRef)> &progress);

} // namespace helm

#endif
