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

// Streamed prefill (docs/cost-model.md §10) on a synthetic target whose terms are round numbers:
// 1 GB/s link without latency (1 MB per ms), 1 TFLOP/s CPU and 10 TFLOP/s GPU at prefill (1e9 and
// 1e10 FLOP per ms), memories too fast to matter, no overhead.
namespace {
helm::TargetProfile roundTarget() {
  helm::TargetProfile t;
  t.name = "round";
  t.cpu.dramBwGbs = t.cpu.l3BwGbs = 1e9;
  t.cpu.pDecGflops = t.cpu.pPreGflops = 1000;
  t.cpu.ramBytes = 1e12;
  helm::GpuProfile g;
  g.vramBytes = 100e9;
  g.memBwGbs = 1e9;
  g.pDecGflops = g.pPreGflops = 10000;
  t.gpu = g;
  t.link.bwGbs = 1;
  t.link.latencyUs = 0;
  return t;
}

/// A block without KV whose prompt costs `flopsPerToken` per position and holds one tensor.
helm::UnitCost flatBlock(const std::string &name, double bytes, double flopsPerToken,
                         int64_t promptLen) {
  helm::UnitCost b;
  b.name = name;
  b.kind = "block";
  b.residentBytes = b.paramBytes = b.prefillParamBytes = int64_t(bytes);
  b.projFlopsDecode = flopsPerToken;
  b.projFlopsPrefill = flopsPerToken * double(promptLen);
  b.tensors = {{name, int64_t(bytes)}};
  return b;
}
} // namespace

TEST(CostModel, StreamedPrefillCrossesOverWhereTheCopyIsPaidFor) {
  // One CPU block of 1 GB: on the CPU a prompt costs 10 ms a position; streamed, 1000 ms of copy
  // then 1 ms a position on the GPU. 10 S < 1000 + S until S = 112.
  helm::PlanOptions o;
  o.promptLen = 128;
  o.context = 4096;
  o.forceSplit = 1;
  auto plan = planFor({flatBlock("b0", 1e9, 1e10, o.promptLen)}, roundTarget(), o);
  ASSERT_TRUE(plan);
  const helm::Candidate &c = plan->candidates[1];
  ASSERT_TRUE(c.stream.possible);
  EXPECT_TRUE(c.stream.fits);
  EXPECT_DOUBLE_EQ(c.stream.slotBytes, 2e9);
  EXPECT_DOUBLE_EQ(c.stream.streamedBytes, 1e9);
  EXPECT_NEAR(c.prefillMs, 1280, 1e-9);
  EXPECT_NEAR(c.stream.ms, 1128, 1e-9);
  EXPECT_EQ(c.stream.crossover, 112);
  EXPECT_TRUE(c.prefillStreamed());
  EXPECT_FALSE(plan->candidates[0].stream.possible); // all on the GPU: nothing to stream
}

TEST(CostModel, StreamedPrefillPipelinesCopiesThroughTwoSlots) {
  // Three CPU blocks. Block 0: 10 MB (copy 10 ms), 100 ms of work; block 1: 1 MB (1 ms), 1 ms;
  // block 2: 50 MB (50 ms), 1 ms. Block 2's copy needs block 0's slot, free at 110 ms: it copies
  // 110..160 and works 160..161 (with a third slot it would copy 11..61 and end at 112).
  helm::PlanOptions o;
  o.promptLen = 1;
  o.context = 1;
  o.forceSplit = 3;
  std::vector<helm::UnitCost> units = {flatBlock("b0", 10e6, 1e12, 1), flatBlock("b1", 1e6, 1e10, 1),
                                       flatBlock("b2", 50e6, 1e10, 1)};
  auto plan = planFor(units, roundTarget(), o);
  ASSERT_TRUE(plan);
  const helm::Candidate &c = plan->candidates[3];
  EXPECT_NEAR(c.stream.ms, 161, 1e-9);
  EXPECT_DOUBLE_EQ(c.stream.slotBytes, 100e6);
  // Copy-bound: 20 blocks of 100 MB (100 ms each) with 10 ms of work: copies back to back, then
  // the last block's work.
  std::vector<helm::UnitCost> many;
  for (int i = 0; i < 20; ++i)
    many.push_back(flatBlock("b" + std::to_string(i), 100e6, 1e11, 1));
  o.forceSplit = 20;
  plan = planFor(many, roundTarget(), o);
  ASSERT_TRUE(plan);
  EXPECT_NEAR(plan->candidates[20].stream.ms, 20 * 100 + 10, 1e-9);
  // Compute-bound: 1000 ms of work each: the first copy, then the work back to back.
  for (auto &b : many)
    b.projFlopsPrefill = 1e13;
  plan = planFor(many, roundTarget(), o);
  ASSERT_TRUE(plan);
  EXPECT_NEAR(plan->candidates[20].stream.ms, 100 + 20 * 1000, 1e-9);
}

TEST(CostModel, StreamedPrefillOnTheLaptopNeedsRoomForItsSlots) {
  // Qwen3-8B on the thesis laptop: k = 21 leaves 88.7 MiB of the GPU free, less than two staging
  // slots. The slots hold the units' largest tensors; these test units hold one tensor per block,
  // so the slots are two 386 MB blocks (771.8 MB): k = 22 leaves 478.9 MB, k = 23 864.8 MB.
  auto units = qwen3Units(kQwen3_8B);
  for (auto &u : units) {
    u.prefillParamBytes = u.kind == "embedding" ? u.paramBytes * 2048 : u.paramBytes;
    u.prefillActBytes = u.actBytes * 2048;
    u.projFlopsPrefill = u.kind == "head" ? u.projFlopsDecode : u.projFlopsDecode * 2048;
    u.attnFlopsPrefill = u.attnFlopsPerToken / 2 * 2048.0 * 2049.0; // causal: Σ_{t=1..S} t
  }
  helm::PlanOptions o;
  o.context = 256;
  o.promptLen = 2048;
  auto plan = planFor(units, laptop(), o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->chosenK, 21);
  EXPECT_FALSE(plan->candidates[21].stream.fits);
  EXPECT_NE(plan->candidates[21].stream.reason.find("with the staging slots"), std::string::npos);
  o.streamPrefill = true;
  plan = planFor(units, laptop(), o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->chosenK, 23);
  EXPECT_FALSE(plan->candidates[21].feasible);
  EXPECT_FALSE(plan->candidates[22].feasible);
  const helm::Candidate &c = plan->candidates[23];
  EXPECT_TRUE(c.prefillStreamed());
  EXPECT_NEAR(c.gpuBytes, 6647168000.0 + 2 * 385892864.0, 1);
  // 22 blocks stream (8.49 GB at 16 GB/s); at 2048 positions a block's GPU work
  // (7.90e11 + 3.44e10 FLOP at 29.1 TFLOP/s = 28.34 ms + 0.14 ms overhead) exceeds its copy
  // (24.12 ms), so the prompt is the first copy and then the work: about 1.2 s, against 40 s and
  // more on the CPU.
  EXPECT_GT(c.prefillMs, 30 * c.stream.ms);
  EXPECT_GT(c.stream.crossover, 10);
  EXPECT_LT(c.stream.crossover, 100);
}

// A decode step's KV that spills to host RAM, and LIA's attention on the CPU (docs/cost-model.md
// §11). One GPU block with 1 GB of weights on a 1.5 GB GPU: its KV pages may take 80% of the
// 0.5 GB left (0.4 GB); at 1000 positions of 1 MB each, 0.6 GB streams back over the 1 GB/s link
// every step (600 ms). Its attention on the CPU instead reads the 1 GB at 100 GB/s (10 ms; its
// 1e9 FLOP take 1 ms at 1 TFLOP/s) and sends 1 MB over the link (1 ms).
TEST(CostModel, AttentionOnTheCpuBeatsStreamingItsKvBack) {
  helm::TargetProfile t = roundTarget();
  t.cpu.dramBwGbs = 100;
  t.cpu.l3Bytes = 0;
  t.gpu->vramBytes = 1.5e9;
  t.gpu->memBwGbs = 1e6;
  helm::UnitCost b = flatBlock("b0", 1e9, 1e10, 1);
  b.kvBytesPerToken = 1000000;
  b.attnFlopsPerToken = 1e6;
  b.attnIoBytes = 1000000;
  helm::PlanOptions o;
  o.context = 1000;
  o.promptLen = 1;
  o.forceSplit = 0;
  auto plan = planFor({b}, t, o);
  ASSERT_TRUE(plan);
  const helm::Candidate &c = plan->candidates[0];
  // GPU: 1e10 FLOP of projections at 10 TFLOP/s take 1 ms, attention 0.1 ms; then the spill.
  EXPECT_NEAR(c.spillBytes, 0.6e9, 1);
  EXPECT_NEAR(c.decodeMs, 1 + 0.1 + 600, 0.01);
  EXPECT_EQ(c.cpuAttentionBlocks, 0); // not planned
  EXPECT_EQ(c.bestCpuAttentionBlocks, 1);
  EXPECT_NEAR(c.bestCpuAttentionDecodeMs, 1 + 10 + 1, 0.01);
  o.cpuAttention = true;
  plan = planFor({b}, t, o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->candidates[0].cpuAttentionBlocks, 1);
  EXPECT_NEAR(plan->candidates[0].decodeMs, 12, 0.01);
  EXPECT_EQ(plan->candidates[0].spillBytes, 0);
  EXPECT_NEAR(plan->predictedMsPerToken, 12, 0.01);
  // With the KV on a bigger GPU nothing spills, and the GPU's attention (0.1 ms) stays.
  t.gpu->vramBytes = 10e9;
  plan = planFor({b}, t, o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->candidates[0].cpuAttentionBlocks, 0);
  EXPECT_NEAR(plan->candidates[0].decodeMs, 1.1, 0.01);
  // With kv-offload off the GPU must hold the KV: nothing spills and no attention moves.
  t.gpu->vramBytes = 1.5e9;
  o.kvOffload = false;
  o.forceSplit.reset();
  plan = planFor({b}, t, o);
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->candidates[0].feasible);
  EXPECT_EQ(plan->candidates[0].bestCpuAttentionBlocks, 0);
}

// ScheInfer's plan (docs/cost-model.md §12.1) with room for everything: every FFN slice on the GPU
// and the step is the roofline of the split that keeps only the embedding on the CPU (memory-bound
// bf16 GEMVs: the three FFN GEMMs' bytes at the GPU's bandwidth). Without room for the non-FFN
// weights it is not possible, and without a GPU neither.
TEST(CostModel, SlicedFfnWithRoomForEverythingIsTheAllGpuRoofline) {
  auto units = qwen3Units(kQwen3_8B);
  for (auto &u : units)
    if (u.kind == "block") {
      u.ffnWeightElems = 3 * kQwen3_8B.hidden * kQwen3_8B.inter;
      u.ffnBytes = 2 * u.ffnWeightElems;
    }
  helm::TargetProfile h100;
  for (const auto &t : helm::targetCatalogue())
    if (t.name == "h100-pcie")
      h100 = t;
  ASSERT_TRUE(h100.gpu);
  helm::PlanOptions o;
  o.context = 256;
  auto plan = planFor(units, h100, o);
  ASSERT_TRUE(plan);
  const helm::SlicedFfnPlan &s = plan->sliced;
  ASSERT_TRUE(s.possible) << s.reason;
  ASSERT_EQ(s.rGG.size(), 36u);
  for (double r : s.rGG)
    EXPECT_DOUBLE_EQ(r, 1.0);
  EXPECT_NEAR(s.ggBytes, 36.0 * 2 * 3 * 4096 * 12288, 1);
  EXPECT_NEAR(s.decodeMs, plan->candidates[1].decodeMs, 1e-9 * s.decodeMs);

  // On the laptop the FFNs split: part of each stays on the CPU or streams, and the GPU holds the
  // rest of every block, the head and two copy slots (each one 100.7 MB GEMM) within its 7.512 GB.
  plan = planFor(units, laptop(), o);
  ASSERT_TRUE(plan);
  ASSERT_TRUE(plan->sliced.possible);
  EXPECT_LE(plan->sliced.gpuBytes, 7511998464.0);
  double nonFfn = 36.0 * (385892864 - 2 * 3 * 4096 * 12288) + 1244667904 + 2 * 2 * 4096 * 12288;
  EXPECT_NEAR(plan->sliced.gpuBytes - plan->sliced.ggBytes, nonFfn, 1);
  for (size_t i = 0; i < plan->sliced.rGG.size(); ++i)
    EXPECT_LT(plan->sliced.rGG[i] + plan->sliced.rCG[i], 1.0 + 1e-12);

  helm::TargetProfile small = laptop();
  small.gpu->vramBytes = 4e9;
  plan = planFor(units, small, o);
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->sliced.possible);
  EXPECT_NE(plan->sliced.reason.find("for every unit but the embedding and the FFNs"), std::string::npos)
      << plan->sliced.reason;
  small.gpu.reset();
  plan = planFor(units, small, o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->sliced.reason, "target has no GPU");
}
