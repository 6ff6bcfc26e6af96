//===- Passes.cpp - the planning pipeline and its registration -------------------===//
#include "passes/plan/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace helm {

void buildPlanPipeline(OpPassManager &pm, const PlanOptions &options) {
  AnnotateCostsOptions costs;
  costs.batch = options.batch;
  costs.context = options.context;
  costs.promptLen = options.promptLen;
  pm.addPass(createAnnotateCosts(costs));
  PartitionOptions partition;
  partition.objective = options.objective == Objective::prefill ? "prefill" : "decode";
  partition.kvOffload = options.kvOffload;
  partition.vramReserve = options.vramReserve ? *options.vramReserve : -1.0;
  partition.forceSplit = options.forceSplit ? *options.forceSplit : -1;
  partition.streamPrefill = options.streamPrefill;
  partition.cpuAttention = options.cpuAttention;
  pm.addPass(createPartition(partition));
}

void registerPlanPasses() {
  registerHelmPlanPasses();
  PassPipelineRegistration<>(
      "helm-plan",
      "Per-unit costs and the CPU/GPU split for the module's helm.target (default plan options)",
      [](OpPassManager &pm) { buildPlanPipeline(pm); });
}

} // namespace helm
