// The partition cost model against hand-computed values (docs/cost-model.md §5, §9): Qwen3-8B and
// Qwen3-4B on the thesis' RTX 4060 laptop.
#include "passes/plan/CostModel.h"

#include <gtest/gtest.h>

#include <optional>

namespace {
struct Shape {
  int64_t layers, hidden, heads, kvHeads, headDim, inter, vocab;
  bool tied;
};

/// Units of a Qwen3 model in bf16 at batch 1, built from the formulas of docs/cost-model.md §2.1.
std::vector<helm::UnitCost> qwen3Units(const Shape &s) {
  const int64_t d = 2, q = s.heads * s.headDim, kv = s.kvHeads * s.headDim;
  std::vector<helm::UnitCost> units;
  helm::UnitCost embed;
  embed.name = "embedding";
  embed.kind = "embedding";
  embed.residentBytes = s.vocab * s.hidden * d;
  embed.paramBytes = s.hidden * d;
  embed.actBytes = s.hidden * d;
  embed.tensors = {{"embed", embed.residentBytes}};
  units.push_back(embed);
  const int64_t lin = 2 * s.hidden * q + 2 * s.hidden * kv + 3 * s.hidden * s.inter;
  for (int64_t l = 0; l < s.layers; ++l) {
    helm::UnitCost b;
    b.name = "block." + std::to_string(l);
    b.kind = "block";
    b.residentBytes = b.paramBytes = (lin + 2 * s.hidden + 2 * s.headDim) * d;
    b.actBytes = s.hidden * d;
    b.kvBytesPerToken = 2 * kv * d;
    b.projFlopsDecode = 2.0 * double(lin);
    b.attnFlopsPerToken = 4.0 * double(q);
    b.tensors = {{"block" + std::to_string(l), b.residentBytes}};
    units.push_back(b);
  }
  helm::UnitCost head;
  head.name = "head";
  head.kind = "head";
  int64_t table = s.vocab * s.hidden * d;
  head.residentBytes = head.paramBytes = table + s.hidden * d;
  head.projFlopsDecode = 2.0 * double(s.hidden) * double(s.vocab);
  head.tensors = {{s.tied ? "embed" : "lm_head", table}, {"final_norm", s.hidden * d}};
  units.push_back(head);
  return units;
}

const Shape kQwen3_8B{36, 4096, 32, 8, 128, 12288, 151936, false};
const Shape kQwen3_4B{36, 2560, 32, 8, 128, 9728, 151936, true};

helm::TargetProfile laptop() {
  for (const auto &t : helm::targetCatalogue())
    if (t.name == "rtx4060-laptop")
      return t;
  ADD_FAILURE() << "rtx4060-laptop missing from the catalogue";
  return {};
}

/// The plan of `units` on `target`, or nullopt (a test failure naming the error) when planning fails.
std::optional<helm::Plan> planFor(const std::vector<helm::UnitCost> &units,
                                  const helm::TargetProfile &target, const helm::PlanOptions &options) {
  auto plan = helm::planPartition(units, target, options);
  if (plan)
    return std::move(*plan);
  ADD_FAILURE() << llvm::toString(plan.takeError());
  return std::nullopt;
}
} // namespace

TEST(CostModel, Qwen3_8BBlockTerms) {
  auto units = qwen3Units(kQwen3_8B);
  ASSERT_EQ(units.size(), 38u);
  EXPECT_EQ(units[1].paramBytes, 385892864);  // ≈ 386 MB per block in bf16
  EXPECT_EQ(units[1].actBytes, 8192);         // W_act = 8 KiB at B = 1
  EXPECT_EQ(units[1].kvBytesPerToken, 4096);  // 2 · 8 · 128 · 2
}

TEST(CostModel, Qwen3_8BOnTheLaptopIsCpu21Cuda17) {
  helm::TargetProfile t = laptop();
  t.cpu.overheadMsPerBlock = t.gpu->overheadMsPerBlock = 0;
  helm::PlanOptions o;
  o.context = 0;
  auto plan = planFor(qwen3Units(kQwen3_8B), t, o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->chosenK, 21);
  const auto &c = plan->candidates[21];
  EXPECT_NEAR(c.gpuBytes, 7418953728.0, 1);
  EXPECT_NEAR(c.tCpuMs, 171.508, 0.01);
  EXPECT_NEAR(c.tGpuMs, 34.032, 0.01);
  EXPECT_NEAR(c.tCommMs, 0.005512, 1e-5);
  EXPECT_NEAR(c.tPlanMs, 205.55, 0.01);
  EXPECT_FALSE(plan->candidates[20].feasible); // needs 7,804,846,592 B of 7,511,998,464
  EXPECT_NEAR(plan->candidates[20].gpuBytes, 7804846592.0, 1);
}

TEST(CostModel, OverheadAndContextOnTheLaptop) {
  helm::PlanOptions o;
  o.context = 256;
  auto plan = planFor(qwen3Units(kQwen3_8B), laptop(), o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->chosenK, 21);
  EXPECT_NEAR(plan->predictedMsPerToken, 212.81, 0.01);
}

TEST(CostModel, KvOnTheGpuMovesTheSplit) {
  helm::PlanOptions o;
  o.context = 4096;
  o.kvOffload = false;
  auto plan = planFor(qwen3Units(kQwen3_8B), laptop(), o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->chosenK, 22);
}

TEST(CostModel, TiedTableCountsOnBothDevices) {
  helm::PlanOptions o;
  o.context = 256;
  auto plan = planFor(qwen3Units(kQwen3_4B), laptop(), o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->chosenK, 4);
  EXPECT_NEAR(plan->candidates[4].gpuBytes, 7439351296.0, 1);
  EXPECT_NEAR(plan->candidates[3].gpuBytes, 7641212928.0, 1);
  EXPECT_NEAR(plan->candidates[0].gpuBytes, 8044936192.0, 1); // tied table once when all on GPU
}

TEST(CostModel, ForceSplitAndInfeasiblePlans) {
  helm::PlanOptions o;
  auto errorOf = [](llvm::Expected<helm::Plan> plan) {
    return plan ? std::string() : llvm::toString(plan.takeError());
  };
  o.forceSplit = 39;
  EXPECT_EQ(errorOf(helm::planPartition(qwen3Units(kQwen3_8B), laptop(), o)),
            "--force-split=39 is out of range (0..38 for 38 units)");
  o.forceSplit = 0;
  std::string error = errorOf(helm::planPartition(qwen3Units(kQwen3_8B), laptop(), o));
  EXPECT_NE(error.find("--force-split=0 is infeasible: GPU needs 16.381 GB"), std::string::npos)
      << error;
  helm::TargetProfile tiny = laptop();
  tiny.cpu.ramBytes = 4e9;
  o.forceSplit.reset();
  error = errorOf(helm::planPartition(qwen3Units(kQwen3_8B), tiny, o));
  EXPECT_NE(error.find("no feasible plan: even all on the CPU the model needs 16.985 GB of host RAM "
                       "and the target has 4.000 GB"),
            std::string::npos)
      << error;
}

TEST(CostModel, CpuOnlyTargetPlansEverythingOnTheCpu) {
  helm::TargetProfile t = laptop();
  t.gpu.reset();
  helm::PlanOptions o;
  auto plan = planFor(qwen3Units(kQwen3_8B), t, o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->chosenK, 38);
  EXPECT_EQ(plan->candidates[0].reason, "target has no GPU");
}
