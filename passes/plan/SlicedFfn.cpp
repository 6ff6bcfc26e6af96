//===- SlicedFfn.cpp - ScheInfer's three-way FFN split and its solvers ----------===//
#include "passes/plan/SlicedFfn.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace helm::sliced {

namespace {
double sgn(double x) { return x > 0 ? 1.0 : 0.0; }

/// r_CC = 1 − r_CG − r_GG; what rounding leaves of an empty slice (1 − 0.3 − 0.7 = 5.6e-17) is 0,
/// or the slice's start-up time would count.
double cpuRate(double rCG, double rGG) {
  double rCC = 1.0 - rCG - rGG;
  return rCC < 1e-12 ? 0.0 : rCC;
}

/// a + b·x, one stream's time on an interval where no slice appears or vanishes.
struct Affine {
  double a = 0, b = 0;
  double at(double x) const { return a + b * x; }
};

/// Where two affine times meet (nothing when they are parallel).
void addMeeting(const Affine &f, const Affine &g, std::vector<double> &points) {
  if (f.b != g.b)
    points.push_back((g.a - f.a) / (f.b - g.b));
}

/// The points of (lo, hi) where the layer's time can turn: two GPU-chain streams equal (the chain's
/// slowest stream changes), or the GPU chain, with each stream taken as its slowest, equal to the
/// CPU chain (eq. 5 in closed form for identical GEMMs: τ_G = t_L + t_C2G + t_G +
/// (n_l − 1)·max(t_L, t_C2G, t_G), a three-stage flow shop).
std::vector<double> turningPoints(const Affine &launch, const Affine &copy, const Affine &gpu,
                                  const Affine &cpuChain, int gemms) {
  std::vector<double> points;
  addMeeting(launch, copy, points);
  addMeeting(launch, gpu, points);
  addMeeting(copy, gpu, points);
  for (const Affine &slowest : {launch, copy, gpu}) {
    Affine chain{launch.a + copy.a + gpu.a + double(gemms - 1) * slowest.a,
                 launch.b + copy.b + gpu.b + double(gemms - 1) * slowest.b};
    addMeeting(chain, cpuChain, points);
  }
  return points;
}
} // namespace

StageTimes gemmTimes(const Rates &r, const Layer &layer, double rCG, double rGG, double tokens) {
  double rCC = cpuRate(rCG, rGG);
  double n = tokens * layer.work;
  StageTimes t;
  t.launch = (2 * sgn(rCG) + sgn(rGG)) * r.launch;
  // Eq. 4 writes α_C2G without sgn(r_CG); eqs. 10–12 and the stream model (nothing is copied for an
  // empty CG slice) have it.
  t.copy = sgn(rCG) * (r.copy.alpha + rCG * layer.bytes * r.copy.beta);
  t.gpu = r.gpu.alpha * (sgn(rCG) + sgn(rGG)) + (rCG + rGG) * n * r.gpu.beta;
  t.cpu = sgn(rCC) * r.cpu.alpha + rCC * n * r.cpu.beta;
  return t;
}

double layerTime(const StageTimes &t, int gemms) {
  double launched = 0, copied = 0, gpuDone = 0, cpuDone = 0;
  for (int i = 0; i < gemms; ++i) {
    launched += t.launch;
    copied = std::max(launched, copied) + t.copy;
    gpuDone = std::max(copied, gpuDone) + t.gpu;
    cpuDone += t.cpu;
  }
  return std::max(gpuDone, cpuDone);
}

Split bestCopyRate(const Rates &r, const Layer &layer, double rGG, double tokens) {
  auto timeAt = [&](double rCG) { return layerTime(gemmTimes(r, layer, rCG, rGG, tokens), layer.gemms); };
  double hi = std::max(0.0, 1.0 - rGG);
  Split best{0, rGG, timeAt(0)};
  auto consider = [&](double rCG) {
    double t = timeAt(rCG);
    if (t < best.time)
      best = {rCG, rGG, t};
  };
  if (hi <= 0)
    return best;
  consider(hi);
  // Inside (0, hi) every slice is non-empty (r_CC = hi − r_CG > 0), so each stream is affine in r_CG;
  // the ends are evaluated exactly above, where a slice's start-up terms vanish.
  double n = tokens * layer.work;
  Affine launch{(2 + sgn(rGG)) * r.launch, 0};
  Affine copy{r.copy.alpha, layer.bytes * r.copy.beta};
  Affine gpu{r.gpu.alpha * (1 + sgn(rGG)) + rGG * n * r.gpu.beta, n * r.gpu.beta};
  Affine cpuChain{layer.gemms * (r.cpu.alpha + hi * n * r.cpu.beta), -layer.gemms * n * r.cpu.beta};
  for (double p : turningPoints(launch, copy, gpu, cpuChain, layer.gemms))
    if (p > 0 && p < hi)
      consider(p);
  return best;
}

Assignment assignGpuMemory(const Rates &r, const std::vector<Layer> &layers, double budgetBytes,
                           int grid) {
  grid = std::max(grid, 1);
  // Each layer's best time at every grid point of r_GG.
  std::vector<std::vector<Split>> table(layers.size());
  for (size_t j = 0; j < layers.size(); ++j)
    for (int i = 0; i <= grid; ++i)
      table[j].push_back(bestCopyRate(r, layers[j], double(i) / grid));
  std::vector<int> at(layers.size(), 0);
  double left = budgetBytes;
  for (;;) {
    double bestScore = 0, bestExtra = 0;
    size_t bestLayer = 0;
    int bestPoint = -1;
    for (size_t j = 0; j < layers.size(); ++j) {
      double layerBytes = double(layers[j].gemms) * layers[j].bytes;
      for (int i = at[j] + 1; i <= grid; ++i) {
        double extra = double(i - at[j]) / grid * layerBytes;
        if (extra > left || extra <= 0)
          continue;
        double score = (table[j][size_t(at[j])].time - table[j][size_t(i)].time) / extra;
        if (score > bestScore) {
          bestScore = score;
          bestLayer = j;
          bestPoint = i;
          bestExtra = extra;
        }
      }
    }
    if (bestPoint < 0)
      break;
    at[bestLayer] = bestPoint;
    left -= bestExtra;
  }
  Assignment a;
  for (size_t j = 0; j < layers.size(); ++j) {
    const Split &s = table[j][size_t(at[j])];
    a.rGG.push_back(s.rGG);
    a.splits.push_back(s);
    a.bytesUsed += s.rGG * double(layers[j].gemms) * layers[j].bytes;
    a.time += s.time;
  }
  return a;
}

StageTimes promptTimes(const Rates &r, const Layer &layer, double rCG, double rGG, int64_t tokens,
                       int64_t gpuTokens) {
  double rCC = cpuRate(rCG, rGG);
  double T = double(tokens), ng = double(std::clamp<int64_t>(gpuTokens, 0, tokens));
  // CG': the CC slice copied to the GPU for the moved tokens, once per GEMM, only when any move
  // (eq. 15 writes sgn(r_CC) and n_W·β_C2G; the copy is of the CC slice and happens iff n_g > 0).
  double moved = sgn(rCC * ng);
  StageTimes t;
  t.launch = (2 * sgn(rCG) + 2 * moved + sgn(rGG)) * r.launch;
  t.copy = r.copy.alpha * (sgn(rCG) + moved) + (rCG + moved * rCC) * layer.bytes * r.copy.beta;
  t.gpu = r.gpu.alpha * (sgn(rCG) + sgn(rGG) + moved) + (T * (rCG + rGG) + ng * rCC) * layer.work * r.gpu.beta;
  t.cpu = sgn(rCC * (T - ng)) * r.cpu.alpha + (T - ng) * rCC * layer.work * r.cpu.beta;
  return t;
}

TokenAssignment assignPromptTokens(const Rates &r, const Layer &layer, double rCG, double rGG,
                                   int64_t tokens) {
  auto timeAt = [&](int64_t ng) {
    return layerTime(promptTimes(r, layer, rCG, rGG, tokens, ng), layer.gemms);
  };
  TokenAssignment best{0, timeAt(0)};
  double rCC = cpuRate(rCG, rGG);
  if (tokens <= 0 || rCC <= 0)
    return best;
  auto consider = [&](int64_t ng) {
    ng = std::clamp<int64_t>(ng, 0, tokens);
    double t = timeAt(ng);
    if (t < best.time)
      best = {ng, t};
  };
  consider(1);
  consider(tokens);
  // For 0 < n_g < T every slice is non-empty and each stream is affine in n_g; the best integer is
  // next to a turning point.
  double T = double(tokens);
  Affine launch{(2 * sgn(rCG) + 2 + sgn(rGG)) * r.launch, 0};
  Affine copy{r.copy.alpha * (sgn(rCG) + 1) + (rCG + rCC) * layer.bytes * r.copy.beta, 0};
  Affine gpu{r.gpu.alpha * (sgn(rCG) + sgn(rGG) + 1) + T * (rCG + rGG) * layer.work * r.gpu.beta,
             rCC * layer.work * r.gpu.beta};
  Affine cpuChain{layer.gemms * (r.cpu.alpha + T * rCC * layer.work * r.cpu.beta),
                  -layer.gemms * rCC * layer.work * r.cpu.beta};
  for (double p : turningPoints(launch, copy, gpu, cpuChain, layer.gemms))
    if (p > 0 && p < T) {
      consider(int64_t(std::floor(p)));
      consider(int64_t(std::ceil(p)));
    }
  return best;
}

} // namespace helm::sliced
