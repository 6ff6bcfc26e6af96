//===- OptionsTest.cpp - helm-rt's flags in the syntax helmc shares ----------------===//
#include "runtime/cli/Options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

/// parseArgs on `args` (after the program name): its result, "" on success.
std::string parse(std::vector<const char *> args, helm::rt::cli::Options *out = nullptr) {
  args.insert(args.begin(), "helm-rt");
  helm::rt::cli::Options o;
  std::string result = helm::rt::cli::parseArgs(int(args.size()), args.data(), o);
  if (out)
    *out = o;
  return result;
}

TEST(HelmRtOptions, ValuesInEitherFormAndRepeatedFlags) {
  helm::rt::cli::Options o;
  ASSERT_EQ(parse({"m.helmpkg", "-p", "a", "--prompt=b", "-n", "7", "--temperature=0", "-t", "2", "--kv-type", "f16"}, &o),
            "");
  EXPECT_EQ(o.packagePath, "m.helmpkg");
  EXPECT_EQ(o.prompts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.numTokens, 7);
  EXPECT_EQ(o.temperature, 0.0f);
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.kvType, "f16");
  ASSERT_EQ(parse({"--gpu-memory=1GiB", "--emu-vram", "2MiB", "m.helmpkg"}, &o), "");
  EXPECT_EQ(o.gpuMemory, uint64_t(2) << 20);
  EXPECT_EQ(o.gpuMemoryFlag, "--emu-vram");
  ASSERT_EQ(parse({"--", "-odd.helmpkg"}, &o), "");
  EXPECT_EQ(o.packagePath, "-odd.helmpkg");
}

TEST(HelmRtOptions, OneLineErrors) {
  EXPECT_EQ(parse({"m.helmpkg", "-t", "0"}), "-t must be >= 1");
  EXPECT_EQ(parse({"m.helmpkg", "-t", "x"}), "-t expects an integer, got 'x'");
  EXPECT_EQ(parse({"m.helmpkg", "--top-p", "inf"}), "--top-p expects a finite number, got 'inf'");
  EXPECT_EQ(parse({"m.helmpkg", "--kv-offload=maybe"}), "--kv-offload must be on or off, got 'maybe'");
  EXPECT_EQ(parse({"m.helmpkg", "--info=yes"}), "--info takes no value");
  EXPECT_EQ(parse({"m.helmpkg", "-n"}), "-n needs a value");
  EXPECT_EQ(parse({"m.helmpkg", "--bogus"}), "unknown option '--bogus' (see --help)");
  EXPECT_EQ(parse({"a.helmpkg", "b.helmpkg"}), "unexpected argument 'b.helmpkg' (one package per run)");
  EXPECT_EQ(parse({"m.helmpkg", "-p", "a\nb", "-t", "a\nb"}), "-t expects an integer, got 'a\\x0ab'");
  // --help is read in turn: an error before it wins, nothing after it is read, and a value that
  // reads "--help" is a value.
  EXPECT_EQ(parse({"--help", "--bogus"}), "help");
  EXPECT_EQ(parse({"--bogus", "--help"}), "unknown option '--bogus' (see --help)");
  helm::rt::cli::Options o;
  ASSERT_EQ(parse({"m.helmpkg", "-p", "--help"}, &o), "");
  EXPECT_EQ(o.prompts, (std::vector<std::string>{"--help"}));
}

TEST(HelmRtOptions, ServeAndGenerationKeepTheirOwnFlags) {
  helm::rt::cli::Options o;
  ASSERT_EQ(parse({"serve", "m.helmpkg", "--port", "0", "--parallel=2"}, &o), "");
  EXPECT_TRUE(o.serve);
  EXPECT_EQ(o.port, 0);
  EXPECT_EQ(o.parallel, 2);
  EXPECT_EQ(parse({"serve", "m.helmpkg", "--temperature", "1"}),
            "--temperature does not apply to helm-rt serve (clients send prompts and sampling per request)");
  EXPECT_EQ(parse({"m.helmpkg", "--port", "9"}),
            "--port goes with helm-rt serve (helm-rt serve model.helmpkg --port ...)");
  EXPECT_EQ(parse({"m.helmpkg", "--tensors"}), "--tensors goes with --info");
}

} // namespace
