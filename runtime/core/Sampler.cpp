//===- Sampler.cpp ---------------------------------------------------------------===//
#include "runtime/core/Sampler.h"

#include "kernels/cpu/Isa.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace helm::rt {

namespace {

/// Greedy's token: the first index of the largest logit. A NaN never wins, except at index 0,
/// which nothing compares greater than.
int64_t firstArgmaxScalar(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best])
      best = i;
  return best;
}

#if defined(__x86_64__)
/// The same index in two vector passes over the row (it stays in L2): the largest non-NaN value
/// (vmaxps returns its second operand, the running maximum, where the row holds a NaN), then the
/// first index equal to it (-0 and +0 compare equal, as the scalar loop keeps the first of them).
/// The scalar loop over Qwen3's 151936 logits was 1% of a 16-stream decode step's samples (perf),
/// all on the thread that runs the step.
__attribute__((target("avx2"))) int64_t firstArgmaxAvx2(const float *x, int64_t n) {
  if (n < 16 || std::isnan(x[0]))
    return firstArgmaxScalar(x, n);
  __m256 running = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    running = _mm256_max_ps(_mm256_loadu_ps(x + i), running);
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(running), _mm256_extractf128_ps(running, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  float best = _mm_cvtss_f32(m);
  for (; i < n; ++i)
    if (x[i] > best)
      best = x[i];
  const __m256 target = _mm256_set1_ps(best);
  for (i = 0; i + 8 <= n; i += 8)
    if (const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), target, _CMP_EQ_OQ)))
      return i + __builtin_ctz(unsigned(hits));
  for (; i < n; ++i)
    if (x[i] == best)
      return i;
  return 0; // not reached: best is one of the values
}
#endif

} // namespace

int64_t greedyToken(const float *logits, int64_t vocab) {
#if defined(__x86_64__)
  if (kernels::activeIsa() != kernels::Isa::scalar)
    return firstArgmaxAvx2(logits, vocab);
#endif
  return firstArgmaxScalar(logits, vocab);
}

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
