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
  std::string printed;
  llvm::raw_string_ostream os(printed);
  auto parsed = helm::helmc::parseCommandLine(int(args.size()), args.data(), os);
  if (!parsed) {
    std::string message = llvm::toString(parsed.takeError());
    return message.empty() ? "llvm::cl: " + printed : message;
  }
  if (out)
    *out = *parsed;
  return "";
}

TEST(HelmcOptions, OwnFlagsOnly) {
  for (const char *flag : {"--emit=plan", "-emit", "--target=rtx3090", "-o", "-q", "--max-context",
                           "--gpu-code=host", "--list-targets", "--force-split=2"})
    EXPECT_TRUE(helm::helmc::isHelmcFlag(flag)) << flag;
  // LLVM's flags live in the same registry; plain arguments are no flags.
  for (const char *arg : {"--help", "--version", "--debug-pass=Structure", "--stats", "model.onnx",
                          "-", "--", "--emitx"})
    EXPECT_FALSE(helm::helmc::isHelmcFlag(arg)) << arg;
}

TEST(HelmcOptions, ChecksAndDefaultsAcrossRuns) {
  helm::helmc::Options o;
  ASSERT_EQ(parseError({"m.onnx", "--target=rtx3090", "--emit=plan", "--batch=4"}, &o), "");
  EXPECT_TRUE(o.planning);
  EXPECT_FALSE(o.packaging);
  EXPECT_EQ(o.plan.batch, 4);
  // A second parse starts from the defaults, not from the first run's values.
  ASSERT_EQ(parseError({"m.onnx", "-o", "m.helmpkg"}, &o), "");
  EXPECT_TRUE(o.packaging);
  EXPECT_FALSE(o.planning);
  EXPECT_EQ(o.plan.batch, 1);
  EXPECT_EQ(parseError({"m.onnx", "--emit=plan"}),
            "--emit=plan and --emit=plan-json need --target (see --list-targets)");
  EXPECT_EQ(parseError({"m.onnx", "--emit=package"}),
            "--emit=package needs an output file (-o model.helmpkg)");
  EXPECT_EQ(parseError({"m.onnx", "--target=x", "--emit=plan", "--vram-reserve=1\n2"}),
            "--vram-reserve '1\\x0a2' is not a byte count (e.g. 1GiB, 512MiB)");
  EXPECT_EQ(parseError({}), "no input model (usage: helmc model.onnx|model.gguf [options]; see --help)");
  EXPECT_EQ(parseError({"m.onnx", "--emit=nonsense"}).rfind("llvm::cl: ", 0), 0u);
}

TEST(HelmcOptions, NoChatTemplateGoesWithAPackage) {
  EXPECT_TRUE(helm::helmc::isHelmcFlag("--no-chat-template"));
  helm::helmc::Options o;
  ASSERT_EQ(parseError({"m.onnx", "-o", "m.helmpkg", "--no-chat-template"}, &o), "");
  EXPECT_TRUE(o.noChatTemplate);
  ASSERT_EQ(parseError({"m.onnx", "-o", "m.helmpkg"}, &o), "");
  EXPECT_FALSE(o.noChatTemplate);
  EXPECT_EQ(parseError({"m.onnx", "--emit=config", "--no-chat-template"}),
            "--no-chat-template goes with a package output (-o model.helmpkg)");
}

} // namespace
