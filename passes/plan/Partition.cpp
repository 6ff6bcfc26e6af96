//===- Partition.cpp - choose the CPU/GPU split (thesis Algorithm 1) -------------===//
#include "passes/plan/Passes.h"
#include "passes/plan/UnitCosts.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_PARTITION
#include "passes/plan/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
SlicedFfnAttr slicedAttr(MLIRContext *ctx, const SlicedFfnPlan &s) {
  return SlicedFfnAttr::get(ctx, s.possible, s.reason, s.decodeMs, s.gpuBytes, s.ggBytes,
                            s.possible ? DenseF64ArrayAttr::get(ctx, s.rGG) : DenseF64ArrayAttr(),
                            s.possible ? DenseF64ArrayAttr::get(ctx, s.rCG) : DenseF64ArrayAttr());
}

struct PartitionPass : helm::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    auto parsedTarget = targetFromAttr(HelmDialect::TargetAttrHelper(ctx).getAttr(module));
    if (!parsedTarget) {
      module.emitError() << llvm::toString(parsedTarget.takeError());
      return signalPassFailure();
    }
    const TargetProfile &target = *parsedTarget;
    CostOptionsAttr costOptions = HelmDialect::CostOptionsAttrHelper(ctx).getAttr(module);
    if (!costOptions) {
      module.emitError() << "units carry no costs; run helm-annotate-costs first";
      return signalPassFailure();
    }
    PlanOptions options;
    if (objective != "decode" && objective != "prefill") {
      module.emitError() << "objective must be decode or prefill, got '" << objective << "'";
      return signalPassFailure();
    }
    options.objective = objective == "prefill" ? Objective::prefill : Objective::decode;
    // The attribute's verifier has checked the ranges.
    options.batch = costOptions.getBatch();
    options.context = costOptions.getContextTokens();
    options.promptLen = costOptions.getPromptLen();
    options.kvOffload = kvOffload;
    if (vramReserve >= 0)
      options.vramReserve = vramReserve;
    if (forceSplit >= 0)
      options.forceSplit = forceSplit;
    options.streamPrefill = streamPrefill;
    options.cpuAttention = cpuAttention;

    auto units = unitsOf(module);
    std::vector<UnitCost> costs;
    for (UnitOp unit : units) {
      UnitCost c;
      if (!readUnitCost(unit, c)) {
        unit.emitError() << "unit has no costs; run helm-annotate-costs first";
        return signalPassFailure();
      }
      costs.push_back(std::move(c));
    }
    auto planned = planPartition(costs, target, options);
    if (!planned) {
      module.emitError() << llvm::toString(planned.takeError());
      return signalPassFailure();
    }
    const Plan &plan = *planned;
    HelmDialect::DeviceAttrHelper deviceAttr(ctx);
    for (auto [i, unit] : llvm::enumerate(units))
      deviceAttr.setAttr(unit, DeviceAttr::get(ctx, int64_t(i) < plan.chosenK ? Device::cpu : Device::gpu));
    SmallVector<PlanCandidateAttr> rows;
    for (const Candidate &c : plan.candidates)
      rows.push_back(PlanCandidateAttr::get(
          ctx, c.k, c.feasible, c.reason, c.tCpuMs, c.tGpuMs, c.tCommMs, c.tPlanMs, c.gpuBytes,
          c.hostBytes, c.decodeMs, c.prefillMs, c.stream.possible, c.stream.fits, c.stream.reason,
          c.stream.ms, c.stream.slotBytes, c.stream.streamedBytes, c.stream.crossover,
          c.cpuAttentionBlocks, c.spillBytes, c.bestCpuAttentionBlocks, c.bestCpuAttentionDecodeMs));
    HelmDialect::PlanAttrHelper(ctx).setAttr(
        module, PlanAttr::get(ctx, plan.chosenK, plan.predictedMsPerToken, objective, kvOffload,
                                          plan.streamPrefill, plan.cpuAttention,
                                          slicedAttr(ctx, plan.sliced), rows));
  }
};
} // namespace
