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
struct PartitionPass : helm::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto parsedTarget =
        targetFromAttr(module->getAttrOfType<DictionaryAttr>(HelmDialect::TargetAttrHelper::getNameStr()));
    if (!parsedTarget) {
      module.emitError() << llvm::toString(parsedTarget.takeError());
      return signalPassFailure();
    }
    const TargetProfile &target = *parsedTarget;
    auto costOptions = module->getAttrOfType<DictionaryAttr>(HelmDialect::CostOptionsAttrHelper::getNameStr());
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
    for (llvm::StringRef key : {"batch", "context", "prompt_len"})
      if (!costOptions.getAs<IntegerAttr>(key)) {
        module.emitError() << "helm.cost_options lacks integer '" << key << "'";
        return signalPassFailure();
      }
    options.batch = costOptions.getAs<IntegerAttr>("batch").getInt();
    options.context = costOptions.getAs<IntegerAttr>("context").getInt();
    options.promptLen = costOptions.getAs<IntegerAttr>("prompt_len").getInt();
    if (options.batch < 1 || options.context < 0 || options.promptLen < 1) {
      module.emitError() << "helm.cost_options must have batch >= 1, context >= 0, prompt_len >= 1";
      return signalPassFailure();
    }
    options.kvOffload = kvOffload;
    if (vramReserve >= 0)
      options.vramReserve = vramReserve;
    if (forceSplit >= 0)
      options.forceSplit = forceSplit;

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
    Builder b(module.getContext());
    for (auto [i, unit] : llvm::enumerate(units))
      unit->setAttr(HelmDialect::DeviceAttrHelper::getNameStr(), DeviceAttr::get(b.getContext(), int64_t(i) < plan.chosenK
                                                                       ? Device::cpu
                                                                       : Device::gpu));
    SmallVector<Attribute> rows;
    for (const Candidate &c : plan.candidates)
      rows.push_back(b.getDictionaryAttr({
          b.getNamedAttr("k", b.getI64IntegerAttr(c.k)),
          b.getNamedAttr("feasible", b.getBoolAttr(c.feasible)),
          b.getNamedAttr("reason", b.getStringAttr(c.reason)),
          b.getNamedAttr("t_cpu_ms", b.getF64FloatAttr(c.tCpuMs)),
          b.getNamedAttr("t_gpu_ms", b.getF64FloatAttr(c.tGpuMs)),
          b.getNamedAttr("t_comm_ms", b.getF64FloatAttr(c.tCommMs)),
          b.getNamedAttr("t_plan_ms", b.getF64FloatAttr(c.tPlanMs)),
          b.getNamedAttr("gpu_bytes", b.getF64FloatAttr(c.gpuBytes)),
          b.getNamedAttr("host_bytes", b.getF64FloatAttr(c.hostBytes)),
      }));
    module->setAttr(HelmDialect::PlanAttrHelper::getNameStr(),
                    b.getDictionaryAttr({
                        b.getNamedAttr("chosen_k", b.getI64IntegerAttr(plan.chosenK)),
                        b.getNamedAttr("predicted_ms_per_token",
                                       b.getF64FloatAttr(plan.predictedMsPerToken)),
                        b.getNamedAttr("objective", b.getStringAttr(objective)),
                        b.getNamedAttr("kv_offload", b.getBoolAttr(kvOffload)),
                        b.getNamedAttr("candidates", b.getArrayAttr(rows)),
                    }));
  }
};
} // namespace
