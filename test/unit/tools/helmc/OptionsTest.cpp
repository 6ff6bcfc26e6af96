// helmc's command line as a library: which flags are helmc's (what the CLI fuzz target feeds),
// and the checks parseCommandLine makes, run twice in one process.
#include "tools/helmc/Options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

/// parseCommandLine on `args` (after the program name); the error's text, or "" on success.
std::string parseError(std::vector<const char *> args, helm::helmc::Options *out = nullptr) {
  args.insert(args.begin(), "helmc");
  auto parsed = helm::helmc::parseCommandLine(int(args.size()), args.data());
  if (!parsed)
    return llvm::toString(parsed.takeError());
  if (out)
    *out = *parsed;
  return "";
}

TEST(HelmcOptions, OwnFlagsOnly) {
  for (const char *flag : {"--emit=plan", "-emit", "--target=rtx3090", "-o", "-q", "--max-context",
                           "--gpu-code=host", "--list-targets", "--force-split=2"})
    EXPECT_TRUE(helm::helmc::isHelmcFlag(flag)) << flag;
  // LLVM's flags are not helmc's; plain arguments are no flags.
  for (const char *arg : {"--help", "--version", "--debug-pass=Structure", "--stats", "model.onnx",
                          "-", "--", "--emitx"})
    EXPECT_FALSE(helm::helmc::isHelmcFlag(arg)) << arg;
}

TEST(HelmcOptions, ChecksAndDefaultsAcrossRuns) {
  helm::helmc::Options o;
  ASSERT_EQ(parseError({"m.onnx", "--target=rtx3090", "--emit=plan", "--batch=4"}, &o), "");
  EXPECT_TRUE(o.planning());
  EXPECT_FALSE(o.packaging());
  EXPECT_EQ(o.compile.plan.batch, 4);
  // A second parse starts from the defaults, not from the first run's values.
  ASSERT_EQ(parseError({"m.onnx", "-o", "m.helmpkg"}, &o), "");
  EXPECT_TRUE(o.packaging());
  EXPECT_FALSE(o.planning());
  EXPECT_EQ(o.compile.plan.batch, 1);
  EXPECT_EQ(parseError({"m.onnx", "--emit=plan"}),
            "--emit=plan and --emit=plan-json need --target (see --list-targets)");
  EXPECT_EQ(parseError({"m.onnx", "--emit=package"}),
            "--emit=package needs an output file (-o model.helmpkg)");
  EXPECT_EQ(parseError({"m.onnx", "--target=x", "--emit=plan", "--vram-reserve=1\n2"}),
            "--vram-reserve '1\\x0a2' is not a byte count (e.g. 1G, 512MiB)");
  EXPECT_EQ(parseError({}), "no input model (usage: helmc model.onnx|model.gguf [options]; see --help)");
  EXPECT_EQ(parseError({"m.onnx", "--emit=nonsense"}),
            "--emit must be onnx-mlir, helm, config, plan, plan-json or package, got 'nonsense'");
  EXPECT_EQ(parseError({"m.onnx", "--bogus"}), "unknown option '--bogus' (see --help)");
  EXPECT_EQ(parseError({"m.onnx", "other.onnx"}), "unexpected argument 'other.onnx' (one model per run)");
  EXPECT_EQ(parseError({"m.onnx", "--batch"}), "--batch needs a value");
  EXPECT_EQ(parseError({"m.onnx", "--batch=x"}), "--batch expects an integer, got 'x'");
  EXPECT_EQ(parseError({"m.onnx", "-q=1"}), "-q takes no value");
}

// The syntax helm-rt shares: --flag value, --flag=value, one dash for a long name, -- before a
// positional argument that starts with a dash; --help and --version are requests, not errors.
TEST(HelmcOptions, SharedSyntax) {
  helm::helmc::Options o;
  ASSERT_EQ(parseError({"m.onnx", "-emit", "plan", "-target=rtx4060", "--batch", "2"}, &o), "");
  EXPECT_EQ(o.emit, helm::helmc::Emit::Plan);
  EXPECT_EQ(o.targetSpec, "rtx4060");
  EXPECT_EQ(o.compile.plan.batch, 2);
  ASSERT_EQ(parseError({"--", "-model.onnx"}, &o), "");
  EXPECT_EQ(o.compile.inputPath, "-model.onnx");
  // --help ends the parse: what follows is not read, an error before it is still the error, and
  // a flag's value that reads "--help" is a value.
  ASSERT_EQ(parseError({"--help", "--bogus"}, &o), "");
  EXPECT_EQ(o.request, helm::helmc::Request::Help);
  EXPECT_EQ(parseError({"--bogus", "--help"}), "unknown option '--bogus' (see --help)");
  ASSERT_EQ(parseError({"m.onnx", "-o", "--help"}, &o), "");
  EXPECT_EQ(o.request, helm::helmc::Request::Compile);
  EXPECT_EQ(o.compile.outputPath, "--help");
  ASSERT_EQ(parseError({"--version"}, &o), "");
  EXPECT_EQ(o.request, helm::helmc::Request::Version);
}

TEST(HelmcOptions, TypedAtTheEdge) {
  helm::helmc::Options o;
  ASSERT_EQ(parseError({"m.onnx", "-o", "m.helmpkg", "--gpu-code=kernels", "--quantize=q4_k_m"}, &o), "");
  EXPECT_EQ(o.compile.gpuCode, helm::GpuCodeForm::Kernels);
  EXPECT_EQ(o.compile.quantize, "q4_k_m");
  EXPECT_EQ(o.stopAfter(), helm::CompilePhase::Package);
  ASSERT_EQ(parseError({"m.onnx", "--quantize=none"}, &o), "");
  EXPECT_EQ(o.compile.quantize, "");
  EXPECT_EQ(o.compile.gpuCode, helm::GpuCodeForm::Auto);
  EXPECT_EQ(o.stopAfter(), helm::CompilePhase::Raise);
  ASSERT_EQ(parseError({"m.onnx", "--emit=onnx-mlir"}, &o), "");
  EXPECT_EQ(o.stopAfter(), helm::CompilePhase::Import);
  ASSERT_EQ(parseError({"m.onnx", "--emit=plan-json", "--target=rtx4060"}, &o), "");
  EXPECT_EQ(o.stopAfter(), helm::CompilePhase::Plan);
  EXPECT_EQ(parseError({"m.onnx", "-o", "m.helmpkg", "--gpu-code=ptx"}),
            "--gpu-code must be auto, host or kernels, not 'ptx'");
  EXPECT_EQ(parseError({"m.onnx", "--quantize=q7_k"}),
            "--quantize must be none, q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, q5_0, q5_1, q2_k, q3_k, q3_k_m, q4_k_m or q5_k_m, got 'q7_k'");
}

TEST(HelmcOptions, NoChatTemplateGoesWithAPackage) {
  EXPECT_TRUE(helm::helmc::isHelmcFlag("--no-chat-template"));
  helm::helmc::Options o;
  ASSERT_EQ(parseError({"m.onnx", "-o", "m.helmpkg", "--no-chat-template"}, &o), "");
  EXPECT_FALSE(o.compile.chatTemplate);
  ASSERT_EQ(parseError({"m.onnx", "-o", "m.helmpkg"}, &o), "");
  EXPECT_TRUE(o.compile.chatTemplate);
  EXPECT_EQ(parseError({"m.onnx", "--emit=config", "--no-chat-template"}),
            "--no-chat-template goes with a package output (-o model.helmpkg)");
}

} // namespace
