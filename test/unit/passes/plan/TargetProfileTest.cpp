// Profile JSON: round trip of the catalogue, and one-line errors that name the field.
#include "passes/plan/TargetProfile.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

namespace {
/// The error an Expected holds, or "" when it holds a value.
template <typename T> std::string errorOf(llvm::Expected<T> value) {
  return value ? std::string() : llvm::toString(value.takeError());
}
} // namespace

TEST(TargetProfile, CatalogueRoundTripsThroughJson) {
  for (const helm::TargetProfile &t : helm::targetCatalogue()) {
    auto parsed = helm::parseTargetProfile(helm::targetProfileToJson(t));
    ASSERT_TRUE(bool(parsed)) << t.name << llvm::toString(parsed.takeError());
    const helm::TargetProfile &back = *parsed;
    EXPECT_EQ(back.name, t.name);
    EXPECT_DOUBLE_EQ(back.cpu.dramBwGbs, t.cpu.dramBwGbs);
    ASSERT_TRUE(back.gpu.has_value());
    EXPECT_DOUBLE_EQ(back.gpu->vramBytes, t.gpu->vramBytes);
    EXPECT_DOUBLE_EQ(back.link.bwGbs, t.link.bwGbs);
    // Every field, not just the ones above: what was parsed writes the same document again.
    EXPECT_EQ(helm::targetProfileToJson(back), helm::targetProfileToJson(t)) << t.name;
  }
}

TEST(TargetProfile, AttentionRateIsOptionalAndDefaultsToTheDecodeRate) {
  helm::TargetProfile t = helm::targetCatalogue().front();
  EXPECT_EQ(t.cpu.pAttnGflops, 0);
  EXPECT_DOUBLE_EQ(t.cpu.attentionGflops(), t.cpu.pDecGflops); // the thesis' one decode rate
  EXPECT_EQ(helm::targetProfileToJson(t).find("p_attn_gflops"), std::string::npos);
  t.cpu.pAttnGflops = 250;
  auto parsed = helm::parseTargetProfile(helm::targetProfileToJson(t));
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_DOUBLE_EQ(parsed->cpu.attentionGflops(), 250);
  std::string json = helm::targetProfileToJson(t);
  json.replace(json.find("250"), 3, "-1");
  EXPECT_EQ(errorOf(helm::parseTargetProfile(json)), "cpu.p_attn_gflops must be positive, got -1");
}

TEST(TargetProfile, ErrorsNameTheField) {
  EXPECT_EQ(errorOf(helm::parseTargetProfile("{\"cpu\": {\"dram_bw_gbs\": 0}}")),
            "cpu.dram_bw_gbs must be positive, got 0");
  EXPECT_EQ(errorOf(helm::parseTargetProfile("{\"cpu\": {\"dram_bw_gbs\": 40}}")),
            "cpu.l3_bytes is missing");
  EXPECT_EQ(errorOf(helm::parseTargetProfile(
                "{\"cpu\": {\"dram_bw_gbs\": 40, \"l3_bytes\": 0, \"l3_bw_gbs\": 1, \"p_dec_gflops\": 1, "
                "\"p_pre_gflops\": 1, \"ram_bytes\": 1, \"overhead_ms_per_block\": 0, \"cores\": 1e30}}")),
            "cpu.cores must be at most 2147483647, got 1e+30");
  EXPECT_EQ(errorOf(helm::parseTargetProfile("[1, 2]")), "the profile must be a JSON object");
  // A literal too large for a double parses to infinity (found by helm-profile-fuzzer: the profile
  // was accepted and could not be written back as JSON).
  EXPECT_EQ(errorOf(helm::parseTargetProfile("{\"cpu\": {\"dram_bw_gbs\": 20, \"l3_bytes\": 3355E432}}")),
            "cpu.l3_bytes must be a finite number");
  std::string error = errorOf(helm::parseTargetProfile("{\"cpu\": "));
  EXPECT_EQ(error.rfind("not valid JSON", 0), 0u) << error;
}

TEST(TargetProfile, UnknownTargetListsTheKnownOnes) {
  std::string error = errorOf(helm::resolveTarget("rtx9999"));
  EXPECT_EQ(error.rfind("unknown target 'rtx9999' (known: rtx4060-laptop, rtx4060, rtx3090, l40s, "
                        "h100-pcie, rtx4090, a100-40gb, host, emu:<name>",
                        0),
            0u)
      << error;
  auto emu = helm::resolveTarget("emu:rtx3090");
  ASSERT_TRUE(bool(emu)) << llvm::toString(emu.takeError());
  EXPECT_EQ(emu->name, "emu:rtx3090");
  EXPECT_TRUE(emu->emulated());
}

TEST(TargetProfile, DeepNestingIsAnErrorNotAStackOverflow) {
  // llvm::json::parse recurses per level: a million '[' would overflow the stack unbounded.
  std::string deep(1 << 20, '[');
  EXPECT_EQ(errorOf(helm::parseTargetProfile(deep)), "not valid JSON: nested deeper than 64 levels");
  std::string shallow = "{\"cpu\": " + std::string(10, '[') + std::string(10, ']') + "}";
  std::string error = errorOf(helm::parseTargetProfile(shallow));
  EXPECT_FALSE(error.empty());
  EXPECT_NE(error.find("cpu"), std::string::npos) << error;
}

// The module attribute: every catalogue target, and its emu: form, survives TargetProfile ->
// #helm.target -> printed text -> parsed -> TargetProfile with every field and the backend.
TEST(TargetProfile, AttributeRoundTripsThroughText) {
  mlir::MLIRContext context;
  context.loadDialect<helm::HelmDialect>();
  std::vector<helm::TargetProfile> targets = helm::targetCatalogue();
  auto emu = helm::resolveTarget("emu:" + targets.front().name);
  ASSERT_TRUE(bool(emu)) << llvm::toString(emu.takeError());
  targets.push_back(*emu);
  // A measured attention rate (helm-profile's p_attn_gflops) travels too.
  helm::TargetProfile measured = targets.front();
  measured.cpu.pAttnGflops = 123.5;
  targets.push_back(measured);
  for (const helm::TargetProfile &t : targets) {
    helm::TargetAttr attr = helm::targetToAttr(&context, t);
    std::string text;
    llvm::raw_string_ostream os(text);
    mlir::Attribute(attr).print(os);
    auto parsed = llvm::dyn_cast_or_null<helm::TargetAttr>(mlir::parseAttribute(text, &context));
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(parsed, attr) << text;
    auto back = helm::targetFromAttr(parsed);
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    EXPECT_EQ(helm::targetProfileToJson(*back), helm::targetProfileToJson(t)) << t.name;
    EXPECT_EQ(back->gpuDevice, t.gpuDevice) << t.name;
  }
  EXPECT_EQ(errorOf(helm::targetFromAttr(helm::TargetAttr())),
            "module has no helm.target = #helm.target<...> attribute");
}

// A CPU-only target has no gpu and no link in the attribute, and comes back without them.
TEST(TargetProfile, CpuOnlyTargetAttributeHasNoGpu) {
  mlir::MLIRContext context;
  context.loadDialect<helm::HelmDialect>();
  helm::TargetProfile cpuOnly = helm::targetCatalogue().front();
  cpuOnly.gpu.reset();
  cpuOnly.link = {};
  helm::TargetAttr attr = helm::targetToAttr(&context, cpuOnly);
  EXPECT_FALSE(attr.getGpu());
  EXPECT_FALSE(attr.getLink());
  auto back = helm::targetFromAttr(attr);
  ASSERT_TRUE(bool(back));
  EXPECT_FALSE(back->gpu.has_value());
}
