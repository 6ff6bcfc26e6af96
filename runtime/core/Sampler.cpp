//===- Sampler.cpp ---------------------------------------------------------------===//
#include "runtime/core/Sampler.h"

#include <algorithm>
#include <cmath>

namespace helm::rt {

int32_t Sampler::sample(const float *logits, int64_t vocab) {
  if (options_.temperature <= 0.0f) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
      if (logits[i] > logits[best])
        best = i;
    return int32_t(best);
  }
  // One scratch list per thread, not per sampler: a batch of B sequences keeps B samplers, and a
  // vocabulary-sized list each would hold B x vocab x 8 bytes for nothing between steps.
  thread_local std::vector<std::pair<float, int32_t>> candidates;
  candidates.clear();
  candidates.reserve(size_t(vocab));
  for (int64_t i = 0; i < vocab; ++i)
    candidates.emplace_back(logits[i] / options_.temperature, int32_t(i));
  auto byScore = [](const auto &a, const auto &b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates.size();
  if (options_.topK > 0 && size_t(options_.topK) < keep) {
    keep = size_t(options_.topK);
    std::partial_sort(candidates.begin(), candidates.begin() + keep, candidates.end(), byScore);
    candidates.resize(keep);
  } else {
    std::sort(candidates.begin(), candidates.end(), byScore);
  }
  float maxScore = candidates.front().first;
  double total = 0;
  for (auto &c : candidates) {
    c.first = std::exp(c.first - maxScore);
    total += c.first;
  }
  if (options_.topP < 1.0f) {
    double cumulative = 0;
    size_t n = 0;
    for (; n < candidates.size(); ++n) {
      cumulative += candidates[n].first / total;
      if (cumulative >= options_.topP) {
        ++n;
        break;
      }
    }
    candidates.resize(std::max<size_t>(1, std::min(n, candidates.size())));
    total = 0;
    for (auto &c : candidates)
      total += c.first;
  }
  double draw = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (auto &c : candidates) {
    draw -= c.first;
    if (draw <= 0)
      return c.second;
  }
  return candidates.back().second;
}

} // namespace helm::rt
