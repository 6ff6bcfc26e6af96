//===- CostModel.h - roofline cost of a CPU/GPU split (thesis eq. 4.7-4.16) -----===//
//
// Pure arithmetic over per-unit costs and a target profile; docs/cost-model.md gives every equation
// with these names. The MLIR passes (helm-annotate-costs, helm-partition) fill UnitCost from the IR
// and write the Plan back as attributes.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_PLAN_COSTMODEL_H
#define HELM_PASSES_PLAN_COSTMODEL_H

#include "passes/plan/TargetProfile.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace helm {

struct UnitCost {
  std::string name;               // "embedding", "block.3", "head"
  std::string kind;               // embedding | block | head
  int64_t paramBytes = 0;         // weight bytes read per decode step (embedding: gathered rows)
  int64_t residentBytes = 0;      // bytes the unit occupies on its device
  int64_t actBytes = 0;           // output activation, B x width x dtype
  int64_t kvBytesPerToken = 0;    // 2 * h_kv * d_h * dtype (blocks)
  double flopsDecode = 0;         // at the annotated context
  double flopsPrefill = 0;        // at the annotated prompt length
  double projFlopsDecode = 0;     // F_proj: 2 B x linear weight elements (head: 2 B H V)
  double attnFlopsPerToken = 0;   // F_attn / c = 4 B h_a d_h
  double projFlopsPrefill = 0;    // 2 B S x linear weight elements
  double attnFlopsPrefill = 0;    // 2 B h_a d_h S (S + 1)
  int64_t prefillParamBytes = 0;  // embedding: B S H dtype; others: as decode
  int64_t prefillActBytes = 0;    // B S width dtype
  /// Bytes that cross per decode step when the block's attention core (Q·Kᵀ, softmax, ·V) runs on
  /// the other device than its projections: q, the new k and v, and the output (LIA's policy).
  int64_t attnIoBytes = 0;
  /// The gated FFN's weights (gate, up and down: ScheInfer's three GEMMs): stored bytes and elements.
  int64_t ffnBytes = 0;
  int64_t ffnWeightElems = 0;
  /// 2 * h_kv * d_h: what a GPU stage's KV pages hold per token, at HELM_DEVICE_KV_ELEMENT_BYTES
  /// each (0: unknown, kvBytesPerToken is used).
  int64_t kvElemsPerToken = 0;
  double deviceKvBytesPerToken() const {
    return kvElemsPerToken > 0 ? double(kvElemsPerToken) * HELM_DEVICE_KV_ELEMENT_BYTES
                               : double(kvBytesPerToken);
  }
  std::vector<std::pair<std::string, int64_t>> tensors; // distinct weights (symbol, bytes)
};

enum class Objective { decode, prefill };

/// What a phase's time is computed for: decode steps with `tokens` positions cached, or a prompt of
/// `tokens` positions.
enum class Phase { decode, prefill };

struct PlanOptions {
  Objective objective = Objective::decode;
  int64_t batch = 1;
  int64_t context = 4096;   // c: tokens in the KV cache at the decode step being costed
  int64_t promptLen = 128;  // S for the prefill objective
  bool kvOffload = true;    // KV pages may spill to host RAM (not counted against VRAM)
  std::optional<double> vramReserve;  // overrides the profile's reserved_bytes
  std::optional<int64_t> forceSplit;  // take this k (must be feasible)
  /// Prefill may stream the CPU units' weights to the GPU (docs/cost-model.md §10): the GPU then
  /// keeps two staging slots, counted in its bytes, and a prompt at or past the crossover is
  /// computed there. Off: streamed prefill is priced for every split but not part of the plan.
  bool streamPrefill = false;
  /// Decode may run the attention core of GPU blocks on the CPU beside their KV in host RAM (LIA,
  /// docs/cost-model.md §11): the plan takes the number of such blocks that is fastest. Off: that
  /// policy is priced for every split but not part of the plan.
  bool cpuAttention = false;
  /// The share of the GPU memory left after the weights that its KV pages take (helm-rt's
  /// --kv-watermark); with kv-offload the GPU blocks' KV beyond it streams back every decode step.
  double kvWatermark = HELM_KV_WATERMARK_DEFAULT;
};

/// Prefill with the CPU units' weights streamed over the link (PIPO): the embedding gathers on the
/// CPU, every other CPU-resident unit computes on the GPU from weights copied one tensor at a time
/// into one of two staging slots while the previous tensor's work runs, its prompt KV copied back
/// to the host; the GPU-resident units follow.
struct StreamedPrefill {
  bool possible = false;    // the split has units to stream (and the target a GPU)
  bool fits = false;        // the GPU holds its resident units plus the two slots
  std::string reason;       // why not possible or why it does not fit
  double slotBytes = 0;     // both staging slots: twice the largest streamed tensor
  double streamedBytes = 0; // weight bytes crossing the link per prompt
  double ms = 0;            // the options' prompt, streamed
  /// The shortest prompt (positions) that is faster streamed than on the split's devices; -1 when
  /// none up to the context.
  int64_t crossover = -1;
};

struct Candidate {
  int64_t k = 0;
  bool feasible = false;
  std::string reason;       // why not, when infeasible
  double tCpuMs = 0, tGpuMs = 0, tCommMs = 0, tPlanMs = 0; // the objective's phase
  double decodeMs = 0;      // one decode step at the options' context
  double prefillMs = 0;     // the options' prompt on the split's devices
  double gpuBytes = 0;      // resident + KV on the GPU (+ the staging slots when streaming is planned)
  double hostBytes = 0;     // resident + KV in host RAM
  StreamedPrefill stream;
  /// GPU blocks whose attention core the plan runs on the CPU (0 unless PlanOptions::cpuAttention).
  int64_t cpuAttentionBlocks = 0;
  /// KV bytes a decode step streams back from host RAM (GPU blocks' pages beyond the watermark).
  double spillBytes = 0;
  /// LIA's policy at this split: the number of GPU blocks with their attention core on the CPU
  /// that makes decode fastest, and that decode step's time (whether planned or not).
  int64_t bestCpuAttentionBlocks = 0;
  double bestCpuAttentionDecodeMs = 0;
  /// Whether the options' prompt would be faster streamed (and the slots fit).
  bool prefillStreamed() const { return stream.fits && stream.ms < prefillMs; }
};

/// ScheInfer's plan (docs/cost-model.md §12.1): every unit but the embedding on the GPU except
/// the FFN weights, which each block splits three ways (CPU-resident computed on the CPU, streamed,
/// GPU-resident) with the GPU memory left given by the greedy rule and each block's copy rate
/// solved. A planning estimate beside the split candidates.
struct SlicedFfnPlan {
  bool possible = false;
  std::string reason;             // why not
  double decodeMs = 0;            // one decode step
  double gpuBytes = 0;            // non-FFN weights, GG slices, two copy slots (and KV with offload off)
  double ggBytes = 0;             // of which the GG slices
  std::vector<double> rGG, rCG;   // per block with an FFN
};

struct Plan {
  std::vector<Candidate> candidates; // k = 0..N
  int64_t chosenK = -1;
  double predictedMsPerToken = 0;
  bool streamPrefill = false; // PlanOptions::streamPrefill: the plan carries the streamed prefill
  bool cpuAttention = false;  // PlanOptions::cpuAttention: the plan may move attention cores
  SlicedFfnPlan sliced;       // priced, not chosen
};

/// Algorithm 1: costs every split k (CPU runs units [0, k), GPU the rest). The error is one line
/// when no k is feasible (naming the bytes missing and where) or `forceSplit` is out of range or
/// infeasible.
llvm::Expected<Plan> planPartition(const std::vector<UnitCost> &units, const TargetProfile &target,
                                   const PlanOptions &options);

/// ScheInfer's sliced-FFN plan for `units` on `target` (§12.1).
SlicedFfnPlan slicedFfnPlan(const std::vector<UnitCost> &units, const TargetProfile &target,
                            const PlanOptions &options);

/// Time of units [lo, hi) on one device for `phase` at `tokens` (decode: cached positions; prefill:
/// prompt positions): eq. 4.8 with 4.10, 4.13, 4.14 and the overhead δ per unit.
double stageMs(const std::vector<UnitCost> &units, size_t lo, size_t hi, bool onGpu,
               const TargetProfile &target, const PlanOptions &options, Phase phase, int64_t tokens);

/// Split k's prefill of a `tokens`-position prompt on its own devices: CPU stage, boundary, GPU
/// stage (§3.8).
double splitPrefillMs(const std::vector<UnitCost> &units, size_t k, const TargetProfile &target,
                      const PlanOptions &options, int64_t tokens);

/// Split k's prefill of a `tokens`-position prompt with the CPU units' weights streamed (§10); the
/// result's crossover is left at -1 (planPartition searches it).
StreamedPrefill streamedPrefill(const std::vector<UnitCost> &units, size_t k,
                                const TargetProfile &target, const PlanOptions &options,
                                int64_t tokens);

} // namespace helm

#endif
