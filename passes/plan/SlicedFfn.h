//===- SlicedFfn.h - ScheInfer's three-way FFN split and its solvers ------------===//
//
// An FFN (or expert) layer's weights split by columns of W1 and rows of W2 into three slices
// (ScheInfer, seed 001, §III-B): CC, kept in host RAM and computed on the CPU; CG, kept in host RAM,
// copied to the GPU and computed there; GG, kept on the GPU. The slices run concurrently and their
// partial outputs are summed. Times come from the α + β·n models of eq. 3, per GEMM from eq. 4,
// per layer from the recurrence of eq. 5; the copy rate r_CG that minimises a layer's time is
// found at the breakpoints of that piecewise-affine problem (eq. 13), the GPU's memory is given to
// layers by the greedy time-saved-per-byte rule (eq. 14), and a prompt moves n_g of its tokens
// from the CPU's slice to the GPU (eq. 15). docs/cost-model.md §12 has every equation and the
// readings of the paper's ambiguities. Times are in seconds, as in the paper's Table I.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_PLAN_SLICEDFFN_H
#define HELM_PASSES_PLAN_SLICEDFFN_H

#include <cstdint>
#include <vector>

namespace helm::sliced {

/// t = α + β·n (eq. 3).
struct AlphaBeta {
  double alpha = 0, beta = 0;
  double at(double n) const { return alpha + beta * n; }
};

/// One machine's fitted models for one weight format (a row of the paper's Table I).
struct Rates {
  AlphaBeta gpu;      // GPU GEMM, n = T·M·H
  AlphaBeta cpu;      // CPU GEMM, n = T·M·H
  AlphaBeta copy;     // host-to-GPU copy, n = bytes (of the weight slice)
  double launch = 0;  // one GPU kernel launch
};

/// One FFN layer: `gemms` GEMMs (n_l) of equal size, each `work` = M·H per token and `bytes` = n_W.
struct Layer {
  int gemms = 2;
  double work = 0;
  double bytes = 0;
};

/// The four streams' times for one GEMM (eq. 4).
struct StageTimes {
  double launch = 0, copy = 0, gpu = 0, cpu = 0;
};

/// Eq. 4 at `tokens` tokens, slicing rates r_CG and r_GG (r_CC = 1 − r_CG − r_GG). A slice of rate
/// 0 costs nothing, its start-up terms included (sgn).
StageTimes gemmTimes(const Rates &rates, const Layer &layer, double rCG, double rGG, double tokens = 1);

/// Eq. 5: the layer's time, the later of the GPU chain (launch → copy → GPU GEMM, each stream in
/// order, pipelined across the n_l GEMMs) and the CPU chain (n_l CPU GEMMs).
double layerTime(const StageTimes &t, int gemms);

/// The best r_CG ∈ [0, 1 − r_GG] for a layer at r_GG (eq. 13).
struct Split {
  double rCG = 0, rGG = 0, time = 0;
};
Split bestCopyRate(const Rates &rates, const Layer &layer, double rGG, double tokens = 1);

/// Eq. 14: r_GG per layer on the grid i / grid (i = 0..grid), given `budgetBytes` of GPU memory for
/// the GG slices. Each step gives the layer and grid point with the most time saved per extra byte
/// (among those that fit what is left), until no step saves time. Every layer starts at r_GG = 0.
struct Assignment {
  std::vector<double> rGG;    // per layer
  std::vector<Split> splits;  // per layer, with its best r_CG
  double bytesUsed = 0;
  double time = 0;            // Σ layer times
};
Assignment assignGpuMemory(const Rates &rates, const std::vector<Layer> &layers, double budgetBytes,
                           int grid);

/// Eq. 15: a prompt of `tokens` tokens at fixed slicing rates moves n_g of the CPU slice's tokens to
/// the GPU (which then copies the CC slice too, once). The best n_g ∈ [0, tokens] and the time.
struct TokenAssignment {
  int64_t gpuTokens = 0;
  double time = 0;
};
StageTimes promptTimes(const Rates &rates, const Layer &layer, double rCG, double rGG, int64_t tokens,
                       int64_t gpuTokens);
TokenAssignment assignPromptTokens(const Rates &rates, const Layer &layer, double rCG, double rGG,
                                   int64_t tokens);

} // namespace helm::sliced

#endif
