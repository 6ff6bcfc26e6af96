//===- Generator.h - the token loop: prefill once, then decode step by step ---------===//
#ifndef HELM_RUNTIME_CORE_GENERATOR_H
#define HELM_RUNTIME_CORE_GENERATOR_H

#include "runtime/kv/KvCache.h"
#include "runtime/core/Model.h"

#include <cmath>
#include "runtime/core/Sampler.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <vector>

namespace helm::rt {

struct GenerateRequest {
  std::vector<std::vector<int32_t>> prompts; // one per sequence (the batch)
  int64_t maxNewTokens = 128;
  SamplingOptions sampling;
  std::vector<int32_t> stopIds; // EOS; empty or ignoreEos: never stop early
};

struct GenerateStats {
  int64_t promptTokens = 0, generatedTokens = 0, decodeTokens = 0, decodeSteps = 0;
  /// What the device of a split package did (link traffic, allocations, host waits) in the
  /// prefill and over all decode steps (zero when everything runs on the CPU).
  DeviceCounters prefillDevice, decodeDevice;
  uint64_t minStepLinkBytes = 0, maxStepLinkBytes = 0; // over decode steps
  /// Device allocations of the first decode step (the stage buffers for the batch's sizes are
  /// made); the later steps' are the rest of decodeDevice's (none in steady state).
  uint64_t firstStepAllocations = 0;
  /// The GPU stage's paged KV cache: evictions, prefetches, device pages (zero without one).
  PagingCounters kvPaging;
  int64_t kvPageTokens = 0; // 0: no paged cache
  /// Sequences that stopped because they reached the package's context limit (max_context)
  /// before -n tokens, an end-of-sequence token or a stop string; in sequence order.
  std::vector<int> contextLimited;
  double ttftMs = 0, prefillMs = 0, decodeMs = 0;
  double prefillTokS() const { return prefillMs > 0 ? promptTokens / (prefillMs / 1000) : 0; }
  double decodeTokS() const { return decodeMs > 0 ? decodeTokens / (decodeMs / 1000) : 0; }
  double linkBytesPerStep() const {
    return decodeSteps ? double(decodeDevice.bytes()) / double(decodeSteps) : 0;
  }
  double linkTransfersPerStep() const {
    return decodeSteps ? double(decodeDevice.transfers()) / double(decodeSteps) : 0;
  }
  /// Mean device allocations of the decode steps after the first.
  double allocationsPerStep() const {
    return decodeSteps > 1
               ? double(decodeDevice.allocations - firstStepAllocations) / double(decodeSteps - 1)
               : 0;
  }
  double hostSynchronizationsPerStep() const {
    return decodeSteps ? double(decodeDevice.hostSynchronizations) / double(decodeSteps) : 0;
  }
};

/// Called for every sampled token; return false to finish that sequence (a stop string matched).
using TokenCallback = std::function<bool(int sequence, int32_t token)>;
/// Called with each step's logits: `rows` rows of `vocab` floats for sequences `sequenceOfRow`.
using LogitsCallback =
    std::function<void(const float *logits, int64_t rows, const int *sequenceOfRow)>;

/// generate()'s checks of a request, before any work: at least one prompt, none empty, at or past
/// the context limit, or with an id outside the vocabulary; -n at least 1. One line each.
llvm::Error validateRequest(const ModelInfo &info, const GenerateRequest &request);

/// Positions a session for `request` holds per sequence: the longest prompt plus the tokens to
/// generate, capped by the package's context limit.
int64_t sessionTokens(const ModelInfo &info, const GenerateRequest &request);

/// Prefills each prompt on its own (no padding; with a paged GPU-stage KV cache, in chunks of one
/// page, so a long prompt never needs more device pages than one chunk writes), then decodes all unfinished sequences together,
/// one token per step, each at its own position. Bad requests (empty prompt, id outside the
/// vocabulary, prompt at or past the context limit) fail before any work with a one-line error.
llvm::Error generate(const LoadedModel &model, const GenerateRequest &request,
                     const TokenCallback &onToken, const LogitsCallback &onLogits,
                     GenerateStats &stats);

/// Teacher-forced scoring of token sequences (perplexity): every sequence runs position by position,
/// fed its own tokens, and the log-probability of each next token under the model is summed.
struct ScoreStats {
  int64_t tokens = 0;  // predicted tokens: the sequences' lengths minus one each
  double nll = 0;      // sum of -log p(token | the tokens before it), natural log
  double ms = 0;
  double perplexity() const { return tokens ? std::exp(nll / double(tokens)) : 0; }
};

/// Scores `sequences` (each at least 2 tokens, shorter than the context limit, ids in the
/// vocabulary) in batches of up to `batch`, one step per position: the logits at position t give
/// -log softmax(logits)[sequence[t + 1]], computed in double. Bad input fails before any work.
llvm::Error score(const LoadedModel &model, const std::vector<std::vector<int32_t>> &sequences, int batch,
                  ScoreStats &stats);

} // namespace helm::rt

#endif
