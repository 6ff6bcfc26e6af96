// Profile JSON: round trip of the catalogue, and one-line errors that name the field.
#include "compiler/target/TargetProfile.h"

#include <gtest/gtest.h>

TEST(TargetProfile, CatalogueRoundTripsThroughJson) {
  for (const helm::TargetProfile &t : helm::targetCatalogue()) {
    helm::TargetProfile back;
    std::string error;
    ASSERT_TRUE(helm::parseTargetProfile(helm::targetProfileToJson(t), back, error)) << t.name << error;
    EXPECT_EQ(back.name, t.name);
    EXPECT_DOUBLE_EQ(back.cpu.dramBwGbs, t.cpu.dramBwGbs);
    ASSERT_TRUE(back.gpu.has_value());
    EXPECT_DOUBLE_EQ(back.gpu->vramBytes, t.gpu->vramBytes);
    EXPECT_DOUBLE_EQ(back.link.bwGbs, t.link.bwGbs);
    // Every field, not just the ones above: what was parsed writes the same document again.
    EXPECT_EQ(helm::targetProfileToJson(back), helm::targetProfileToJson(t)) << t.name;
  }
}

TEST(TargetProfile, ErrorsNameTheField) {
  helm::TargetProfile t;
  std::string error;
  EXPECT_FALSE(helm::parseTargetProfile("{\"cpu\": {\"dram_bw_gbs\": 0}}", t, error));
  EXPECT_EQ(error, "cpu.dram_bw_gbs must be positive, got 0");
  EXPECT_FALSE(helm::parseTargetProfile("{\"cpu\": {\"dram_bw_gbs\": 40}}", t, error));
  EXPECT_EQ(error, "cpu.l3_bytes is missing");
  EXPECT_FALSE(helm::parseTargetProfile(
      "{\"cpu\": {\"dram_bw_gbs\": 40, \"l3_bytes\": 0, \"l3_bw_gbs\": 1, \"p_dec_gflops\": 1, "
      "\"p_pre_gflops\": 1, \"ram_bytes\": 1, \"overhead_ms_per_block\": 0, \"cores\": 1e30}}",
      t, error));
  EXPECT_EQ(error, "cpu.cores must be at most 2147483647, got 1e+30");
  EXPECT_FALSE(helm::parseTargetProfile("[1, 2]", t, error));
  EXPECT_EQ(error, "the profile must be a JSON object");
  EXPECT_FALSE(helm::parseTargetProfile("{\"cpu\": ", t, error));
  EXPECT_EQ(error.rfind("not valid JSON", 0), 0u) << error;
}

TEST(TargetProfile, UnknownTargetListsTheKnownOnes) {
  helm::TargetProfile t;
  std::string error;
  EXPECT_FALSE(helm::resolveTarget("rtx9999", t, error));
  EXPECT_EQ(error.rfind("unknown target 'rtx9999' (known: rtx4060-laptop, rtx4060, rtx3090, l40s, "
                        "h100-pcie, rtx4090, a100-40gb, host, emu:<name>",
                        0),
            0u)
      << error;
  EXPECT_TRUE(helm::resolveTarget("emu:rtx3090", t, error)) << error;
  EXPECT_EQ(t.name, "emu:rtx3090");
}

TEST(TargetProfile, DeepNestingIsAnErrorNotAStackOverflow) {
  // llvm::json::parse recurses per level: a million '[' would overflow the stack unbounded.
  helm::TargetProfile t;
  std::string error;
  std::string deep(1 << 20, '[');
  EXPECT_FALSE(helm::parseTargetProfile(deep, t, error));
  EXPECT_EQ(error, "not valid JSON: nested deeper than 64 levels");
  std::string shallow = "{\"cpu\": " + std::string(10, '[') + std::string(10, ']') + "}";
  EXPECT_FALSE(helm::parseTargetProfile(shallow, t, error));
  EXPECT_NE(error.find("cpu"), std::string::npos) << error;
}
