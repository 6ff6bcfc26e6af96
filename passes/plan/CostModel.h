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
  std::vector<std::pair<std::string, int64_t>> tensors; // distinct weights (symbol, bytes)
};

enum class Objective { decode, prefill };

struct PlanOptions {
  Objective objective = Objective::decode;
  int64_t batch = 1;
  int64_t context = 4096;   // c: tokens in the KV cache at the decode step being costed
  int64_t promptLen = 128;  // S for the prefill objective
  bool kvOffload = true;    // KV pages may spill to host RAM (not counted against VRAM)
  std::optional<double> vramReserve;  // overrides the profile's reserved_bytes
  std::optional<int64_t> forceSplit;  // take this k (must be feasible)
};

struct Candidate {
  int64_t k = 0;
  bool feasible = false;
  std::string reason;       // why not, when infeasible
  double tCpuMs = 0, tGpuMs = 0, tCommMs = 0, tPlanMs = 0;
  double gpuBytes = 0;      // resident + KV on the GPU
  double hostBytes = 0;     // resident + KV in host RAM
};

struct Plan {
  std::vector<Candidate> candidates; // k = 0..N
  int64_t chosenK = -1;
  double predictedMsPerToken = 0;
};

/// Algorithm 1: costs every split k (CPU runs units [0, k), GPU the rest). The error is one line
/// when no k is feasible (naming the bytes missing and where) or `forceSplit` is out of range or
/// infeasible.
llvm::Expected<Plan> planPartition(const std::vector<UnitCost> &units, const TargetProfile &target,
                                   const PlanOptions &options);

} // namespace helm

#endif
