//===- helmc.cpp - the HELM compiler's command line ------------------------------===//
//
//   helmc model.onnx --emit=helm      raised HELM IR, one unit per block + embedding + head
//   helmc model.onnx --emit=config    model configuration recovered from the graph (JSON)
//   helmc model.onnx --emit=onnx-mlir the imported graph before raising
//   helmc model.onnx --target=rtx3090 --emit=plan|plan-json [--plan-svg=plan.svg]
//   helmc model.onnx [--target=host] [--tokenizer tokenizer.json] -o model.helmpkg
//   helmc model.gguf ...              the same for a GGUF file (llama.cpp's), its tokenizer included
//   ... --no-chat-template            a package without the model's chat template
//   helmc --list-targets
//
// Flags are parsed once (Options.h) into the compile driver's options; compile() (compiler/
// Driver.h) runs the phases up to the one --emit names, and this file prints what that phase left.
//
//===----------------------------------------------------------------------===//
#include "compiler/Driver.h"
#include "compiler/PlanReport.h"
#include "kernels/common/ThreadPool.h"
#include "passes/plan/TargetProfile.h"
#include "tools/helmc/Options.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

using namespace llvm;

namespace {
using helm::helmc::Emit;

int fail(const std::string &msg) {
  errs() << "helmc: error: " << msg << "\n";
  return 1;
}
int fail(Error error) { return fail(toString(std::move(error))); }

/// SIGINT, SIGTERM or SIGHUP: LLVM's handler has removed the files registered for removal (the
/// package's temporary file, a text output not yet kept); say so in one line and exit.
void onInterrupt() {
  static const char message[] = "helmc: error: interrupted; no output written\n";
  (void)!::write(STDERR_FILENO, message, sizeof(message) - 1);
  ::_exit(130);
}

void printCatalogue(raw_ostream &os) {
  os << formatv("{0,-16} {1,10} {2,9} {3,10} {4,9} {5,9} {6,8}  {7}\n", "target", "VRAM GiB",
                "GPU GB/s", "reserve", "CPU GB/s", "RAM GiB", "PCIe", "source");
  for (const helm::TargetProfile &t : helm::targetCatalogue())
    os << formatv("{0,-16} {1,10:f2} {2,9:f0} {3,10:f2} {4,9:f0} {5,9:f1} {6,8:f0}  {7}\n", t.name,
                  t.gpu->vramBytes / (1 << 30), t.gpu->memBwGbs, t.gpu->reservedBytes / (1 << 30),
                  t.cpu.dramBwGbs, t.cpu.ramBytes / (1 << 30), t.link.bwGbs, t.source);
  os << "also: host (measured now), emu:<name> (plan for <name>, run on the emulated GPU), "
        "or a profile .json (docs/target-profile.md)\n";
}

/// The text an --emit that stops before the package prints.
Expected<std::string> render(const helm::helmc::Options &opts, const helm::Compilation &compilation) {
  std::string text;
  raw_string_ostream os(text);
  const std::string &inputPath = opts.compile.inputPath;
  if (opts.emit == Emit::OnnxMlir || opts.emit == Emit::Helm) {
    mlir::ModuleOp module = compilation.model.module.get();
    module.print(os);
    return text;
  }
  auto config = helm::modelConfigOf(compilation, inputPath);
  if (!config)
    return config.takeError();
  if (opts.emit == Emit::Config) {
    os << helm::modelConfigToJson(*config) << "\n";
    return text;
  }
  mlir::ModuleOp module = compilation.model.module.get();
  const helm::TargetProfile &target = *opts.compile.target;
  os << (opts.emit == Emit::Plan ? helm::planTable(module, target, *config)
                                 : helm::planJson(module, target, *config));
  if (!opts.planSvgPath.empty()) {
    std::error_code ec;
    ToolOutputFile svg(opts.planSvgPath, ec, sys::fs::OF_None);
    if (ec)
      return createStringError(opts.planSvgPath + ": cannot write: " + ec.message());
    svg.os() << helm::planSvg(module, target, *config);
    svg.keep();
  }
  return text;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM initLLVM(argc, argv);
  sys::SetInterruptFunction(onInterrupt);
  auto parsed = helm::helmc::parseCommandLine(argc, argv);
  if (!parsed)
    return fail(parsed.takeError());
  helm::helmc::Options &opts = *parsed;
  if (opts.request == helm::helmc::Request::Help) {
    outs() << helm::helmc::kUsage;
    return 0;
  }
  if (opts.request == helm::helmc::Request::Version) {
    outs() << "helmc (HELM) 0.1.0, MLIR " << LLVM_VERSION_STRING << "\n";
    return 0;
  }
  if (opts.listTargets) {
    printCatalogue(outs());
    return 0;
  }
  if (opts.planning()) {
    if (opts.targetSpec == "host")
      errs() << "helmc: profiling this machine for --target=host (a few seconds)...\n";
    auto resolved = helm::resolveTarget(opts.targetSpec);
    if (!resolved)
      return fail(resolved.takeError());
    opts.compile.target = std::move(*resolved);
  }

  // Quantizing weights (--quantize) is split over every core this process may use.
  helm::kernels::setThreads(helm::kernels::availableCores());

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  mlir::MLIRContext ctx(registry);
  ctx.printOpOnDiagnostic(false);

  helm::CompileHooks hooks;
  if (opts.packaging() && !opts.quiet)
    hooks.progress = [](StringRef line) { errs() << "helmc: " << line << "\n"; };
  hooks.warning = [](StringRef line) { errs() << "helmc: warning: " << line << "\n"; };
  auto compilation = helm::compile(ctx, opts.compile, opts.stopAfter(), hooks);
  if (!compilation)
    return fail(compilation.takeError());
  if (opts.packaging())
    return 0;
  auto text = render(opts, *compilation);
  if (!text)
    return fail(text.takeError());

  // Written only once everything succeeded, through a temporary file: a failed run leaves no
  // partial output behind.
  std::error_code ec;
  ToolOutputFile out(opts.compile.outputPath, ec, sys::fs::OF_None);
  if (ec)
    return fail(opts.compile.outputPath + ": cannot write: " + ec.message());
  out.os() << *text;
  out.keep();
  return 0;
}
