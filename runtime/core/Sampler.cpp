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
  candidates_.clear();
  candidates_.reserve(size_t(vocab));
  for (int64_t i = 0; i < vocab; ++i)
    candidates_.emplace_back(logits[i] / options_.temperature, int32_t(i));
  auto byScore = [](const auto &a, const auto &b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (options_.topK > 0 && size_t(options_.topK) < keep) {
    keep = size_t(options_.topK);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), byScore);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), byScore);
  }
  float maxScore = candidates_.front().first;
  double total = 0;
  for (auto &c : candidates_) {
    c.first = std::exp(c.first - maxScore);
    total += c.first;
  }
  if (options_.topP < 1.0f) {
    double cumulative = 0;
    size_t n = 0;
    for (; n < candidates_.size(); ++n) {
      cumulative += candidates_[n].first / total;
      if (cumulative >= options_.topP) {
        ++n;
        break;
      }
    }
    candidates_.resize(std::max<size_t>(1, std::min(n, candidates_.size())));
    total = 0;
    for (auto &c : candidates_)
      total += c.first;
  }
  double draw = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (auto &c : candidates_) {
    draw -= c.first;
    if (draw <= 0)
      return c.second;
  }
  return candidates_.back().second;
}

} // namespace helm::rt
