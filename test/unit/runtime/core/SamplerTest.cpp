//===- SamplerTest.cpp - greedy, top-k, top-p, seeds and the sampled distribution ---===//
#include "runtime/core/Sampler.h"

#include "kernels/common/Isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using helm::rt::Sampler;
using helm::rt::SamplingOptions;

namespace {

SamplingOptions opts(float temperature, int topK, float topP, uint64_t seed = 0) {
  SamplingOptions o;
  o.temperature = temperature;
  o.topK = topK;
  o.topP = topP;
  o.seed = seed;
  return o;
}

std::vector<float> randomLogits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

int32_t firstArgmax(const std::vector<float> &v) {
  int32_t best = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] > v[size_t(best)])
      best = int32_t(i);
  return best;
}

TEST(Sampler, TemperatureZeroIsArgmax) {
  Sampler s(opts(0.0f, 40, 0.95f));
  for (uint32_t seed = 0; seed < 50; ++seed) {
    auto logits = randomLogits(1000, seed);
    EXPECT_EQ(s.sample(logits.data(), int64_t(logits.size())), firstArgmax(logits));
  }
  // Ties: the first maximum wins (numpy's argmax).
  std::vector<float> tie = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f, 0.0f};
  EXPECT_EQ(s.sample(tie.data(), 6), 1);
  std::vector<float> allEqual(17, 0.5f);
  EXPECT_EQ(s.sample(allEqual.data(), 17), 0);
  std::vector<float> last = {-5.0f, -4.0f, -3.0f, 10.0f};
  EXPECT_EQ(s.sample(last.data(), 4), 3);
  std::vector<float> negInf = {-INFINITY, -INFINITY, -1e30f};
  EXPECT_EQ(s.sample(negInf.data(), 3), 2);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  for (float t : {0.1f, 1.0f, 2.0f, 100.0f}) {
    Sampler s(opts(t, 1, 1.0f, 7));
    for (uint32_t seed = 0; seed < 30; ++seed) {
      auto logits = randomLogits(300, 100 + seed);
      for (int rep = 0; rep < 5; ++rep)
        ASSERT_EQ(s.sample(logits.data(), 300), firstArgmax(logits)) << "temperature " << t;
    }
    std::vector<float> tie = {0.0f, 2.0f, 2.0f, 1.0f};
    EXPECT_EQ(s.sample(tie.data(), 4), 1) << "ties: first maximum";
  }
}

std::vector<int32_t> drawMany(const SamplingOptions &o, const std::vector<float> &logits, int n) {
  Sampler s(o);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i)
    out.push_back(s.sample(logits.data(), int64_t(logits.size())));
  return out;
}

TEST(Sampler, SeedsAreReproducible) {
  std::vector<float> flat(64);
  for (size_t i = 0; i < flat.size(); ++i)
    flat[i] = float(i % 5) * 0.1f;
  auto a = drawMany(opts(1.0f, 0, 1.0f, 42), flat, 500);
  auto b = drawMany(opts(1.0f, 0, 1.0f, 42), flat, 500);
  auto c = drawMany(opts(1.0f, 0, 1.0f, 43), flat, 500);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // With top-k/top-p on, still reproducible and still seed-dependent.
  auto d = drawMany(opts(0.8f, 40, 0.9f, 7), flat, 500);
  auto e = drawMany(opts(0.8f, 40, 0.9f, 7), flat, 500);
  auto f = drawMany(opts(0.8f, 40, 0.9f, 8), flat, 500);
  EXPECT_EQ(d, e);
  EXPECT_NE(d, f);
  for (int32_t id : a)
    ASSERT_TRUE(id >= 0 && id < 64);
}

TEST(Sampler, SmallTopPTakesTheTopToken) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    auto logits = randomLogits(200, 500 + seed);
    int32_t top = firstArgmax(logits);
    for (float p : {1e-6f, 0.01f}) {
      Sampler s(opts(1.0f, 0, p, seed));
      for (int rep = 0; rep < 20; ++rep)
        ASSERT_EQ(s.sample(logits.data(), 200), top);
    }
  }
}

/// Checks empirical frequencies of `draws` against `p` within 5 sigma (binomial), and zero where p
/// is zero. 5 sigma over ~10 tokens: a false alarm probability below 1e-5 per test run.
void expectFrequencies(const std::vector<int32_t> &draws, const std::vector<double> &p) {
  std::vector<int> counts(p.size(), 0);
  for (int32_t id : draws) {
    ASSERT_TRUE(id >= 0 && size_t(id) < p.size()) << id;
    ++counts[size_t(id)];
  }
  double n = double(draws.size());
  for (size_t i = 0; i < p.size(); ++i) {
    double freq = counts[i] / n;
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " must never be drawn";
      continue;
    }
    double sigma = std::sqrt(p[i] * (1 - p[i]) / n);
    EXPECT_NEAR(freq, p[i], 5 * sigma) << "token " << i;
  }
}

const std::vector<double> kProbs = {0.05, 0.3, 0.02, 0.15, 0.1, 0.2, 0.08, 0.1};

std::vector<float> logOf(const std::vector<double> &p) {
  std::vector<float> l;
  for (double x : p)
    l.push_back(float(std::log(x)));
  return l;
}

TEST(Sampler, DistributionMatchesSoftmax) {
  auto draws = drawMany(opts(1.0f, 0, 1.0f, 2024), logOf(kProbs), 20000);
  expectFrequencies(draws, kProbs);
  // Temperature 2 flattens: p_i^(1/2), renormalised. Logits shifted by a constant change nothing.
  std::vector<double> flat;
  double z = 0;
  for (double x : kProbs)
    z += std::sqrt(x);
  for (double x : kProbs)
    flat.push_back(std::sqrt(x) / z);
  auto shifted = logOf(kProbs);
  for (float &l : shifted)
    l += 100.0f;
  expectFrequencies(drawMany(opts(2.0f, 0, 1.0f, 99), shifted, 20000), flat);
}

TEST(Sampler, TopKAndTopPRenormalise) {
  // top-k 3 keeps tokens 1 (0.3), 5 (0.2), 3 (0.15): probabilities 0.3/0.65, 0.2/0.65, 0.15/0.65.
  std::vector<double> k3(kProbs.size(), 0.0);
  k3[1] = 0.3 / 0.65;
  k3[5] = 0.2 / 0.65;
  k3[3] = 0.15 / 0.65;
  expectFrequencies(drawMany(opts(1.0f, 3, 1.0f, 11), logOf(kProbs), 20000), k3);
  // top-p 0.6: the smallest set reaching 0.6 is the same three tokens (0.3 + 0.2 < 0.6 <= 0.65).
  expectFrequencies(drawMany(opts(1.0f, 0, 0.6f, 12), logOf(kProbs), 20000), k3);
  // top-p 0.45: tokens 1 and 5 (0.3 < 0.45 <= 0.5).
  std::vector<double> p2(kProbs.size(), 0.0);
  p2[1] = 0.3 / 0.5;
  p2[5] = 0.2 / 0.5;
  expectFrequencies(drawMany(opts(1.0f, 0, 0.45f, 13), logOf(kProbs), 20000), p2);
  // top-k larger than the vocabulary is no limit.
  expectFrequencies(drawMany(opts(1.0f, 1000, 1.0f, 14), logOf(kProbs), 20000), kProbs);
}

// The one-pass top-k selection keeps exactly the candidates, in exactly the order, of sorting every
// (logit / temperature, id) by score and then id: with many ties (logits on a coarse grid, ties
// that only appear after the division), -inf, and k from 1 to vocab - 1.
TEST(Sampler, TopKCandidatesEqualASortOfEveryToken) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> grid(-40, 40);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t vocab = trial % 3 ? 5003 : 151936;
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float &l : logits)
      l = trial % 4 == 3 ? float(grid(rng)) * 0.25f + std::ldexp(float(grid(rng)), -22) : float(grid(rng)) * 0.25f;
    logits[size_t(trial * 37 % vocab)] = -INFINITY;
    for (float temperature : {0.7f, 1.0f, 1.3f})
      for (int k : {1, 5, 40, int(vocab - 1)}) {
        std::vector<std::pair<float, int32_t>> all, got;
        for (int64_t i = 0; i < vocab; ++i)
          all.emplace_back(logits[size_t(i)] / temperature, int32_t(i));
        std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) {
          return a.first > b.first || (a.first == b.first && a.second < b.second);
        });
        all.resize(size_t(k));
        helm::rt::sampleCandidates(logits.data(), vocab, temperature, k, got);
        ASSERT_EQ(got, all) << "trial " << trial << " temperature " << temperature << " k " << k;
      }
  }
}

} // namespace

// The greedy token is the first index of the largest logit on every ISA path (the vector one scans
// for the maximum, then for its first index): ties, -0 against +0, infinities, NaNs (which never
// win, except at index 0), lengths around the vector widths and a Qwen3-sized vocabulary.
TEST(Sampler, GreedyTokenIsTheFirstArgmaxOnEveryPath) {
  namespace k = helm::kernels;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3), kind(0, 9);
  std::vector<std::vector<float>> rows;
  for (size_t n : {size_t(1), size_t(2), size_t(7), size_t(8), size_t(15), size_t(16), size_t(17), size_t(31),
                   size_t(64), size_t(100), size_t(151936)})
    for (int variant = 0; variant < 6; ++variant) {
      std::vector<float> v = variant == 0 ? randomLogits(n, uint32_t(n)) : std::vector<float>(n);
      if (variant > 0)
        for (float &x : v) { // few distinct values: many ties
          const int c = kind(rng);
          x = c == 0 ? NAN : c == 1 ? -0.0f : c == 2 ? 0.0f : float(small(rng));
        }
      if (variant == 2)
        v[0] = NAN; // nothing beats index 0
      if (variant == 3)
        v[n - 1] = INFINITY;
      if (variant == 4)
        std::fill(v.begin(), v.end(), -INFINITY);
      if (variant == 5)
        for (float &x : v)
          x = (x == x) ? -0.0f : x; // -0 everywhere but the NaNs
      rows.push_back(std::move(v));
    }
  for (k::Isa isa : {k::Isa::scalar, k::Isa::avx2, k::Isa::avx512}) {
    if (!k::setIsaForTesting(isa))
      continue;
    for (const std::vector<float> &v : rows)
      ASSERT_EQ(helm::rt::greedyToken(v.data(), int64_t(v.size())), firstArgmax(v))
          << "isa " << int(isa) << ", " << v.size() << " logits";
  }
  k::resetIsaForTesting();
}
