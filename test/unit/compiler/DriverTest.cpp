//===- DriverTest.cpp - the compile driver: phases, stops, errors, the package -----===//
//
// compile() on a corpus model stops after each phase with the module that phase leaves (import:
// helm.onnx ops; raise: units, and blocks with --quantize; plan: the target and the plan on the
// module), refuses what a phase cannot do in one line naming the input, and writes a package that
// the format's reader opens, leaving nothing behind when it cannot.
//
//===----------------------------------------------------------------------===//
#include "compiler/Driver.h"

#include "contract/format/Package.h"
#include "dialects/helm/HelmDialect.h"
#include "passes/plan/UnitCosts.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace {

std::string corpusModel(const char *name) {
  return std::string(HELM_SOURCE_DIR) + "/test/models/" + name + "/model.onnx";
}

class Driver : public ::testing::Test {
protected:
  static void SetUpTestSuite() { mlir::registerAllPasses(); }
  Driver() {
    mlir::registerAllDialects(registry);
    mlir::registerAllExtensions(registry);
  }
  /// Each compilation in a context of its own, alive as long as the test (its module lives there).
  llvm::Expected<helm::Compilation> compile(const helm::CompileOptions &options, helm::CompilePhase stopAfter) {
    contexts.push_back(std::make_unique<mlir::MLIRContext>(registry));
    return helm::compile(*contexts.back(), options, stopAfter);
  }
  mlir::DialectRegistry registry;
  std::vector<std::unique_ptr<mlir::MLIRContext>> contexts;
};

/// How many ops of the generic ONNX form the module holds.
int64_t onnxOps(mlir::ModuleOp module) {
  int64_t n = 0;
  module.walk([&](helm::OnnxNodeOp) { ++n; });
  return n;
}

TEST_F(Driver, StopsAfterEachPhase) {
  helm::CompileOptions options;
  options.inputPath = corpusModel("qwen3-kv-fp32");

  auto imported = compile(options, helm::CompilePhase::Import);
  ASSERT_TRUE(bool(imported)) << llvm::toString(imported.takeError());
  EXPECT_GT(onnxOps(*imported->model.module), 0);
  EXPECT_TRUE(helm::unitsOf(*imported->model.module).empty());
  EXPECT_FALSE(imported->fromGguf);

  auto raised = compile(options, helm::CompilePhase::Raise);
  ASSERT_TRUE(bool(raised)) << llvm::toString(raised.takeError());
  EXPECT_EQ(onnxOps(*raised->model.module), 0);
  EXPECT_GT(helm::unitsOf(*raised->model.module).size(), 2u); // embedding, blocks, head
  EXPECT_FALSE(raised->config.has_value()); // read only by the phases that need it
  auto config = helm::modelConfigOf(*raised, options.inputPath);
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->architecture, "qwen3");

  auto target = helm::resolveTarget("rtx4060");
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  options.target = *target;
  auto planned = compile(options, helm::CompilePhase::Plan);
  ASSERT_TRUE(bool(planned)) << llvm::toString(planned.takeError());
  mlir::ModuleOp module = *planned->model.module;
  EXPECT_TRUE(helm::HelmDialect::PlanAttrHelper(module.getContext()).getAttr(module));
  helm::TargetAttr attached = helm::HelmDialect::TargetAttrHelper(module.getContext()).getAttr(module);
  ASSERT_TRUE(attached);
  EXPECT_EQ(attached.getName(), "rtx4060");
  EXPECT_TRUE(planned->config.has_value());
}

TEST_F(Driver, QuantizationIsPartOfTheRaisePhase) {
  helm::CompileOptions options;
  options.inputPath = corpusModel("qwen3-kv-fp32");
  options.quantize = "q8_0";
  auto raised = compile(options, helm::CompilePhase::Raise);
  ASSERT_TRUE(bool(raised)) << llvm::toString(raised.takeError());
  int64_t inBlocks = 0;
  for (helm::WeightDeclOp decl : raised->model.module->getOps<helm::WeightDeclOp>())
    if (decl.getBlocks())
      ++inBlocks;
  EXPECT_GT(inBlocks, 0);
}

TEST_F(Driver, PhasesRefuseWhatTheyCannotDoInOneLine) {
  helm::CompileOptions options;
  options.inputPath = corpusModel("qwen3-kv-fp32");
  auto noTarget = compile(options, helm::CompilePhase::Plan);
  ASSERT_FALSE(bool(noTarget));
  EXPECT_EQ(llvm::toString(noTarget.takeError()),
            options.inputPath + ": planning needs a target (--target; see --list-targets)");

  options.inputPath = std::string(HELM_SOURCE_DIR) + "/test/fuzz/gguf-corpus/llama-complete.gguf";
  auto ggufGraph = compile(options, helm::CompilePhase::Import);
  ASSERT_FALSE(bool(ggufGraph));
  EXPECT_EQ(llvm::toString(ggufGraph.takeError()),
            options.inputPath + ": --emit=onnx-mlir shows an ONNX graph; this is a GGUF file (use --emit=helm)");
  auto ggufRaised = compile(options, helm::CompilePhase::Raise);
  ASSERT_TRUE(bool(ggufRaised)) << llvm::toString(ggufRaised.takeError());
  EXPECT_TRUE(ggufRaised->fromGguf);
  EXPECT_GT(helm::unitsOf(*ggufRaised->model.module).size(), 2u);

  options.inputPath = corpusModel("qwen3-kv-fp32");
  options.quantize = "iq4_xs";
  auto badScheme = compile(options, helm::CompilePhase::Raise);
  ASSERT_FALSE(bool(badScheme));
  std::string message = llvm::toString(badScheme.takeError());
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_NE(message.find("block format 'iq4_xs' is read from GGUF files only"), std::string::npos) << message;
  options.quantize = "q9_k";
  auto unknown = compile(options, helm::CompilePhase::Raise);
  ASSERT_FALSE(bool(unknown));
  message = llvm::toString(unknown.takeError());
  EXPECT_NE(message.find("unknown quantization format 'q9_k'"), std::string::npos) << message;
}

TEST_F(Driver, WritesAPackageTheReaderOpensAndNothingOnFailure) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("helm-driver-test", dir));
  helm::CompileOptions options;
  options.inputPath = corpusModel("qwen3-kv-fp32");
  options.outputPath = (dir + "/m.helmpkg").str();
  auto packaged = compile(options, helm::CompilePhase::Package);
  ASSERT_TRUE(bool(packaged)) << llvm::toString(packaged.takeError());
  EXPECT_GT(packaged->report.tensors, 0u);
  EXPECT_GT(packaged->report.codeBytes, 0u);
  auto package = helm::pkg::Package::open(options.outputPath);
  ASSERT_TRUE(bool(package)) << llvm::toString(package.takeError());

  // A plan that puts units on a CUDA GPU needs the GPU stage as kernel launches.
  options.outputPath = (dir + "/gpu.helmpkg").str();
  auto target = helm::resolveTarget("rtx4060");
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  options.target = *target;
  options.gpuCode = helm::GpuCodeForm::Host;
  auto refused = compile(options, helm::CompilePhase::Package);
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("--gpu-code=host compiles the GPU stage for the host"),
            std::string::npos);
  std::error_code ec;
  int left = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    left += llvm::sys::path::filename(it->path()) != "m.helmpkg";
  EXPECT_EQ(left, 0);
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
