//===- ModelConfig.h - the model configuration recovered from raised HELM IR ----===//
#ifndef HELM_COMPILER_MODELCONFIG_H
#define HELM_COMPILER_MODELCONFIG_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>

namespace helm {

/// What `helmc --emit=config` prints. Every field is read off the raised graph (weight shapes, op
/// attributes), never off metadata the exporter may or may not have written.
struct ModelConfig {
  std::string architecture;
  int64_t numLayers = 0;
  int64_t hiddenSize = 0;
  int64_t numAttentionHeads = 0;
  int64_t numKeyValueHeads = 0;
  int64_t headDim = 0;
  int64_t intermediateSize = 0;
  int64_t vocabSize = 0;
  double ropeTheta = 0;
  double rmsNormEps = 0;
  bool tieWordEmbeddings = false;
  std::string dtype;
  int64_t numUnits = 0;
};

/// Reads the configuration off a module that went through `helm-raise`. An error when the module is
/// not a complete decoder (no units, no attention, ...).
llvm::Expected<ModelConfig> extractModelConfig(mlir::ModuleOp module);

/// The configuration as one JSON object (keys as listed in README.md, "Using helmc").
/// The configuration as a JSON object (the keys --emit=config prints), for embedding in other
/// documents (plan JSON, package manifest).
llvm::json::Object modelConfigJson(const ModelConfig &config);

std::string modelConfigToJson(const ModelConfig &config);

} // namespace helm

#endif
