//===- helmc.cpp - the HELM compiler driver --------------------------------------===//
//
//   helmc model.onnx --emit=helm      raised HELM IR, one unit per block + embedding + head
//   helmc model.onnx --emit=config    model configuration recovered from the graph (JSON)
//   helmc model.onnx --emit=onnx-mlir the imported graph before raising
//
//===----------------------------------------------------------------------===//
#include "compiler/ModelConfig.h"
#include "compiler/Pipeline.h"
#include "compiler/onnx/OnnxImporter.h"
#include "dialects/helm/HelmDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {
enum class Emit { OnnxMlir, Helm, Config };

cl::OptionCategory helmcCategory("helmc options");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"), cl::Required,
                               cl::cat(helmcCategory));
cl::opt<Emit> emit("emit", cl::desc("What to produce"), cl::init(Emit::Helm),
                   cl::values(clEnumValN(Emit::OnnxMlir, "onnx-mlir",
                                         "the imported graph: one generic helm.onnx op per node"),
                              clEnumValN(Emit::Helm, "helm",
                                         "HELM dialect: block-level ops grouped into partition units"),
                              clEnumValN(Emit::Config, "config",
                                         "JSON model configuration recovered from the graph")),
                   cl::cat(helmcCategory));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: standard output)"),
                                cl::value_desc("file"), cl::init("-"), cl::cat(helmcCategory));

int fail(const std::string &msg) {
  errs() << "helmc: error: " << msg << "\n";
  return 1;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(helmcCategory);
  cl::SetVersionPrinter([](raw_ostream &os) { os << "helmc (HELM) 0.1.0, MLIR " << LLVM_VERSION_STRING << "\n"; });
  cl::ParseCommandLineOptions(argc, argv,
                              "helmc: ahead-of-time compiler for decoder-only LLMs in ONNX\n");

  mlir::MLIRContext ctx;
  ctx.loadDialect<helm::HelmDialect, mlir::func::FuncDialect>();
  ctx.printOpOnDiagnostic(false);

  helm::ImportOptions importOptions;
  std::string error;
  helm::ImportedModel model = helm::importOnnxFile(ctx, inputPath, importOptions, error);
  if (!model.module)
    return fail(error);

  std::string text;
  raw_string_ostream os(text);
  if (emit == Emit::OnnxMlir) {
    model.module->print(os);
  } else {
    if (!helm::raiseModule(*model.module, inputPath, error))
      return fail(error);
    if (emit == Emit::Helm) {
      model.module->print(os);
    } else {
      helm::ModelConfig config;
      if (!helm::extractModelConfig(*model.module, config, error))
        return fail(inputPath + ": " + error);
      os << helm::modelConfigToJson(config) << "\n";
    }
  }

  // Written only once everything succeeded, through a temporary file: a failed run leaves no
  // partial output behind.
  std::error_code ec;
  ToolOutputFile out(outputPath, ec, sys::fs::OF_None);
  if (ec)
    return fail(outputPath + ": cannot write: " + ec.message());
  out.os() << text;
  out.keep();
  return 0;
}
