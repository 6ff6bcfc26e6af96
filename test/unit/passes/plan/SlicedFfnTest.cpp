// ScheInfer's sliced FFN (docs/cost-model.md §12): the eq. 5 recurrence against a discrete-event
// simulation of its four streams, the breakpoint solver (eq. 13) and the prompt token assignment
// (eq. 15) against brute force, the greedy memory assignment (eq. 14), and the paper's r_CG trend
// over CPU thread counts from its own Table I.
#include "passes/plan/SlicedFfn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

namespace {
using namespace helm::sliced;

/// A discrete-event simulation of one layer's n_l GEMMs on four streams (launch, copy, GPU, CPU),
/// each running its tasks in order: a copy needs its launch, a GPU GEMM its copy. Events are taken
/// in time order; a stream starts its next task when the stream is idle and the task's input is
/// done.
double simulate(const StageTimes &t, int gemms) {
  enum Stream { launch, copy, gpu, cpu, streams };
  const double duration[streams] = {t.launch, t.copy, t.gpu, t.cpu};
  std::vector<std::vector<double>> done(streams, std::vector<double>(size_t(gemms), -1));
  int next[streams] = {0, 0, 0, 0};
  double busyUntil[streams] = {0, 0, 0, 0};
  double now = 0, finish = 0;
  for (int remaining = streams * gemms; remaining > 0;) {
    bool started = false;
    for (int s = 0; s < streams; ++s) {
      int i = next[s];
      if (i >= gemms || busyUntil[s] > now)
        continue;
      double ready = s == copy ? done[launch][size_t(i)] : s == gpu ? done[copy][size_t(i)] : 0;
      if (ready < 0 || ready > now)
        continue;
      busyUntil[s] = now + duration[s];
      done[size_t(s)][size_t(i)] = busyUntil[s];
      finish = std::max(finish, busyUntil[s]);
      ++next[s];
      --remaining;
      started = true;
    }
    if (started)
      continue;
    // Advance to the next event: a stream becoming idle or a pending input completing.
    double event = std::numeric_limits<double>::infinity();
    for (int s = 0; s < streams; ++s)
      if (busyUntil[s] > now)
        event = std::min(event, busyUntil[s]);
    if (!std::isfinite(event))
      break;
    now = event;
  }
  return finish;
}

double logUniform(std::mt19937_64 &rng, double lo, double hi) {
  return std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng));
}

Rates randomRates(std::mt19937_64 &rng) {
  Rates r;
  r.gpu = {logUniform(rng, 1e-7, 1e-5), logUniform(rng, 1e-13, 1e-11)};
  r.cpu = {logUniform(rng, 1e-7, 1e-4), logUniform(rng, 1e-12, 1e-10)};
  r.copy = {logUniform(rng, 1e-7, 1e-5), logUniform(rng, 1e-12, 1e-10)};
  r.launch = logUniform(rng, 1e-6, 1e-4);
  return r;
}

Layer randomLayer(std::mt19937_64 &rng) {
  Layer l;
  l.gemms = std::uniform_int_distribution<int>(1, 6)(rng);
  l.work = logUniform(rng, 1e6, 1e9);
  l.bytes = l.work * logUniform(rng, 0.25, 2);
  return l;
}
} // namespace

TEST(SlicedFfn, RecurrenceIsTheStreamsSimulated) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    Rates r = randomRates(rng);
    Layer l = randomLayer(rng);
    double rGG = std::uniform_real_distribution<double>(0, 1)(rng);
    double rCG = std::uniform_real_distribution<double>(0, 1 - rGG)(rng);
    StageTimes t = gemmTimes(r, l, rCG, rGG);
    double expected = simulate(t, l.gemms);
    EXPECT_NEAR(layerTime(t, l.gemms), expected, 1e-12 * expected) << "trial " << trial;
  }
}

TEST(SlicedFfn, GemmTimesAreEquationFour) {
  // Testbed A's INT4 row of Table I, one 8192 x 28672 GEMM at T = 1, r_CG = 0.25, r_GG = 0.25.
  Rates r{{4.7e-6, 8.1e-13}, {1.1e-5, 5.4e-12}, {3.0e-6, 2.6e-11}, 4.4e-5};
  Layer l{3, 8192.0 * 28672, 8192.0 * 28672};
  StageTimes t = gemmTimes(r, l, 0.25, 0.25);
  double n = 8192.0 * 28672;
  EXPECT_DOUBLE_EQ(t.launch, 3 * 4.4e-5);                  // CG: launch copy and GEMM, GG: GEMM
  EXPECT_DOUBLE_EQ(t.copy, 3.0e-6 + 0.25 * n * 2.6e-11);
  EXPECT_DOUBLE_EQ(t.gpu, 2 * 4.7e-6 + 0.5 * n * 8.1e-13); // two kernels, half the work
  EXPECT_DOUBLE_EQ(t.cpu, 1.1e-5 + 0.5 * n * 5.4e-12);
  StageTimes none = gemmTimes(r, l, 0, 0); // all on the CPU: no launch, copy or GPU start-up
  EXPECT_EQ(none.launch, 0);
  EXPECT_EQ(none.copy, 0);
  EXPECT_EQ(none.gpu, 0);
}

TEST(SlicedFfn, BestCopyRateIsNeverBeatenByAFineGrid) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 1000; ++trial) {
    Rates r = randomRates(rng);
    Layer l = randomLayer(rng);
    double rGG = trial % 4 == 0 ? 0.0 : std::uniform_real_distribution<double>(0, 1)(rng);
    Split s = bestCopyRate(r, l, rGG);
    double hi = 1 - rGG, gridBest = std::numeric_limits<double>::infinity();
    for (int i = 0; i <= 4000; ++i)
      gridBest = std::min(gridBest, layerTime(gemmTimes(r, l, hi * i / 4000, rGG), l.gemms));
    EXPECT_LE(s.time, gridBest * (1 + 1e-12)) << "trial " << trial;
    EXPECT_GE(s.rCG, 0);
    EXPECT_LE(s.rCG, hi);
    EXPECT_DOUBLE_EQ(s.time, layerTime(gemmTimes(r, l, s.rCG, rGG), l.gemms));
  }
}

TEST(SlicedFfn, PromptTokenAssignmentIsTheBestInteger) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 300; ++trial) {
    Rates r = randomRates(rng);
    Layer l = randomLayer(rng);
    l.work /= 100; // prompts multiply it by up to 2048 tokens
    int64_t tokens = std::uniform_int_distribution<int64_t>(1, 2048)(rng);
    double rGG = std::uniform_real_distribution<double>(0, 0.5)(rng);
    double rCG = std::uniform_real_distribution<double>(0, 1 - rGG)(rng);
    TokenAssignment a = assignPromptTokens(r, l, rCG, rGG, tokens);
    double best = std::numeric_limits<double>::infinity();
    for (int64_t ng = 0; ng <= tokens; ++ng)
      best = std::min(best, layerTime(promptTimes(r, l, rCG, rGG, tokens, ng), l.gemms));
    EXPECT_DOUBLE_EQ(a.time, best) << "trial " << trial << ", T = " << tokens;
  }
}

TEST(SlicedFfn, GpuMemoryGoesWhereItSavesMostPerByte) {
  // Two layers of the same bytes; the second does four times the work per token (its CPU slice is
  // four times slower), so a byte of GPU memory saves more there. With room for one layer's
  // slices, the greedy rule fills the second first.
  Rates r{{1e-6, 1e-13}, {1e-6, 1e-11}, {1e-6, 1e-10}, 1e-5};
  std::vector<Layer> layers = {{2, 1e8, 1e8}, {2, 4e8, 1e8}};
  Assignment none = assignGpuMemory(r, layers, 0, 10);
  EXPECT_EQ(none.rGG, (std::vector<double>{0, 0}));
  EXPECT_EQ(none.bytesUsed, 0);
  Assignment one = assignGpuMemory(r, layers, 2e8, 10);
  EXPECT_DOUBLE_EQ(one.rGG[1], 1.0);
  EXPECT_DOUBLE_EQ(one.rGG[0], 0.0);
  EXPECT_LE(one.bytesUsed, 2e8);
  Assignment both = assignGpuMemory(r, layers, 4e8, 10);
  EXPECT_DOUBLE_EQ(both.rGG[0], 1.0);
  EXPECT_DOUBLE_EQ(both.rGG[1], 1.0);
  EXPECT_LT(both.time, one.time);
  EXPECT_LT(one.time, none.time);
  // The assignment's time is its layers' best times at those rates.
  double sum = 0;
  for (size_t j = 0; j < layers.size(); ++j)
    sum += bestCopyRate(r, layers[j], one.rGG[j]).time;
  EXPECT_DOUBLE_EQ(one.time, sum);
}

TEST(SlicedFfn, TableIGivesThePapersCopyRateTrendOverCpuThreads) {
  // LLaMA-2-70B INT4 on Testbed A (Table I), generation (T = 1), r_GG = 0, three GEMMs of
  // M = 8192 by H = 28672 (public model shape), n_W counted in weight elements (the reading under
  // which Table I's PCIe beta is a plausible 19 GB/s of INT4). The CPU's beta scales as 1/threads
  // from Table I's value, taken at 16 threads. At the optimum the copy is the slowest GPU-chain
  // stream, so the GPU chain is t_L + 3 t_C2G + t_G and equals the CPU chain 3 t_C: by hand,
  //   r* = [3 (a_C + n b_C) - (t_L + 3 a_C2G + a_G)] / (3 n b_C + 3 n_W b_C2G + n b_G).
  const double n = 8192.0 * 28672, launch = 4.4e-5;
  const double published[] = {0.18, 0.25, 0.42, 0.71};
  const int threads[] = {16, 8, 4, 2};
  double previous = 0;
  for (int i = 0; i < 4; ++i) {
    double betaC = 5.4e-12 * 16 / threads[i];
    Rates r{{4.7e-6, 8.1e-13}, {1.1e-5, betaC}, {3.0e-6, 2.6e-11}, launch};
    Layer l{3, n, n};
    Split s = bestCopyRate(r, l, 0);
    double byHand = (3 * (1.1e-5 + n * betaC) - (2 * launch + 3 * 3.0e-6 + 4.7e-6)) /
                    (3 * n * betaC + 3 * n * 2.6e-11 + n * 8.1e-13);
    EXPECT_NEAR(s.rCG, byHand, 1e-9) << threads[i] << " threads";
    EXPECT_GT(s.rCG, previous); // fewer threads: more of the layer goes over the link
    previous = s.rCG;
    // The paper's values need its CPU beta at each thread count, which it does not print; with
    // 1/threads scaling the model lands within 0.1 of them (docs/cost-model.md §12).
    EXPECT_NEAR(s.rCG, published[i], 0.1) << threads[i] << " threads";
  }
}
