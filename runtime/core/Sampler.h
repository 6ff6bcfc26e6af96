//===- Sampler.h - next-token choice from logits ----------------------------------===//
#ifndef HELM_RUNTIME_CORE_SAMPLER_H
#define HELM_RUNTIME_CORE_SAMPLER_H

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace helm::rt {

struct SamplingOptions {
  float temperature = 0.8f; // 0: greedy
  int topK = 40;            // 0: off
  float topP = 0.95f;       // 1: off
  uint64_t seed = 0;
};

/// The greedy token of a row of logits: the first index of the largest value (a NaN never wins,
/// except at index 0). Vectorized where kernels::activeIsa() is not scalar; the same index either
/// way.
int64_t greedyToken(const float *logits, int64_t vocab);

/// The candidates of a draw, best first: (logit / temperature, id) of every id, or of the topK
/// best where 0 < topK < vocab, ordered by score, then by lower id. temperature > 0. `out` is
/// replaced (its capacity is reused).
void sampleCandidates(const float *logits, int64_t vocab, float temperature, int topK,
                      std::vector<std::pair<float, int32_t>> &out);

class Sampler {
public:
  explicit Sampler(const SamplingOptions &options) : options_(options), rng_(options.seed) {}
  /// Greedy takes the first maximum (as numpy's argmax does); otherwise temperature, then top-k,
  /// then top-p (smallest set whose probability reaches p), then a draw.
  int32_t sample(const float *logits, int64_t vocab);

private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

} // namespace helm::rt

#endif
