//===- Model.h - a loaded .helmpkg: manifest, weights, the CPU stage ----------------===//
#ifndef HELM_RUNTIME_CORE_MODEL_H
#define HELM_RUNTIME_CORE_MODEL_H

#include "runtime/core/StageContext.h"
#include "runtime/package/Package.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace helm::rt {

struct ModelInfo {
  std::string architecture, source, dtype, targetName, targetCpu;
  int64_t vocab = 0, hidden = 0, kvLayers = 0, kvHeads = 0, headDim = 0, maxContext = 0;
  int64_t numTensors = 0, weightBytes = 0;
  std::vector<int32_t> eosIds;
  int32_t bosId = -1; // -1: none
  bool hasTokenizer = false;
};

/// Signature of a generated CPU stage (compiler/codegen): logits of the last position, [B, V] f32.
using StageFn = void (*)(void *ctx, const int64_t *ids, const int64_t *positions, float *logits,
                         int64_t batch, int64_t seq);

class LoadedModel {
public:
  ~LoadedModel();
  /// Maps the package, verifies every checksum, checks that this CPU can run the code, and loads
  /// the CPU stage from memory (memfd; no file is written). Errors are one line naming the file.
  static llvm::Expected<std::unique_ptr<LoadedModel>> load(llvm::StringRef path);

  const ModelInfo &info() const { return info_; }
  llvm::StringRef manifest() const { return package_->manifest(); }
  llvm::StringRef tokenizerJson() const { return tokenizer_; }
  const pkg::Package &package() const { return *package_; }
  double loadSeconds() const { return loadSeconds_; }

  /// Runs the stage on B rows of S tokens; `ctx` supplies the KV cache and row bookkeeping. Fails
  /// when the stage's code and the package's manifest disagree (a call into the ABI was refused).
  llvm::Error run(StageContext &ctx, const int64_t *ids, const int64_t *positions, float *logits,
           int64_t batch, int64_t seq) const;
  const std::vector<const void *> &weights() const { return weights_; }

private:
  std::unique_ptr<pkg::Package> package_;
  void *library_ = nullptr;
  StageFn stage_ = nullptr;
  std::vector<const void *> weights_;
  std::string tokenizer_;
  ModelInfo info_;
  double loadSeconds_ = 0;
};

} // namespace helm::rt

#endif
