//===- Sampler.cpp ---------------------------------------------------------------===//
#include "runtime/core/Sampler.h"

#include "kernels/cpu/Argmax.h"

#include <algorithm>
#include <cmath>

namespace helm::rt {

int64_t greedyToken(const float *logits, int64_t vocab) { return kernels::firstArgmax(logits, vocab); }

void sampleCandidates(const float *logits, int64_t vocab, float temperature, int topK,
                      std::vector<std::pair<float, int32_t>> &out) {
  out.clear();
  auto byScore = [](const auto &a, const auto &b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (topK > 0 && int64_t(topK) < vocab) {
    // The k best (score, then lower id) in one pass over the logits: a heap of the k best so far,
    // its top the worst of them. Dividing by a positive temperature keeps the logits' order
    // (ties may appear, never swaps), and every kept id is lower than the one being read, so a
    // logit that does not exceed the top's logit cannot enter: the loop mostly compares.
    const size_t k = size_t(topK);
    out.reserve(k);
    for (int32_t i = 0; i < int32_t(k); ++i)
      out.emplace_back(logits[i] / temperature, i);
    std::make_heap(out.begin(), out.end(), byScore);
    float topLogit = logits[out.front().second];
    for (int64_t i = int64_t(k); i < vocab; ++i) {
      if (!(logits[i] > topLogit))
        continue;
      const std::pair<float, int32_t> c(logits[i] / temperature, int32_t(i));
      if (!byScore(c, out.front()))
        continue;
      std::pop_heap(out.begin(), out.end(), byScore);
      out.back() = c;
      std::push_heap(out.begin(), out.end(), byScore);
      topLogit = logits[out.front().second];
    }
    std::sort_heap(out.begin(), out.end(), byScore);
  } else {
    out.reserve(size_t(vocab));
    for (int64_t i = 0; i < vocab; ++i)
      out.emplace_back(logits[i] / temperature, int32_t(i));
    std::sort(out.begin(), out.end(), byScore);
  }
}

int32_t Sampler::sample(const float *logits, int64_t vocab) {
  if (options_.temperature <= 0.0f)
    return int32_t(greedyToken(logits, vocab));
  // One scratch list per thread, not per sampler: a batch of B sequences keeps B samplers, and a
  // vocabulary-sized list each would hold B x vocab x 8 bytes for nothing between steps.
  thread_local std::vector<std::pair<float, int32_t>> candidates;
  sampleCandidates(logits, vocab, options_.temperature, options_.topK, candidates);
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
