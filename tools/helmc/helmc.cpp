//===- helmc.cpp - the HELM compiler driver --------------------------------------===//
//
//   helmc model.onnx --emit=helm      raised HELM IR, one unit per block + embedding + head
//   helmc model.onnx --emit=config    model configuration recovered from the graph (JSON)
//   helmc model.onnx --emit=onnx-mlir the imported graph before raising
//   helmc model.onnx --target=rtx3090 --emit=plan|plan-json [--plan-svg=plan.svg]
//   helmc model.onnx [--target=host] [--tokenizer tokenizer.json] -o model.helmpkg
//   helmc --list-targets
//
//===----------------------------------------------------------------------===//
#include "compiler/ModelConfig.h"
#include "compiler/Pipeline.h"
#include "compiler/PackageBuilder.h"
#if HELM_HAVE_CUDA
#include "kernels/cuda/CudaKernels.h"
#endif
#include "compiler/PlanReport.h"
#include "compiler/codegen/CpuCodegen.h"
#include "passes/plan/TargetProfile.h"
#include "compiler/onnx/OnnxImporter.h"
#include "dialects/helm/HelmDialect.h"
#include "passes/Passes.h"
#include "runtime/support/ByteSize.h"

#include "mlir/IR/AsmState.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {
enum class Emit { OnnxMlir, Helm, Config, Plan, PlanJson, Package };

cl::OptionCategory helmcCategory("helmc options");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"), cl::cat(helmcCategory));
cl::opt<Emit> emit("emit", cl::desc("What to produce"), cl::init(Emit::Helm),
                   cl::values(clEnumValN(Emit::OnnxMlir, "onnx-mlir",
                                         "the imported graph: one generic helm.onnx op per node"),
                              clEnumValN(Emit::Helm, "helm",
                                         "HELM dialect: block-level ops grouped into partition units"),
                              clEnumValN(Emit::Config, "config",
                                         "JSON model configuration recovered from the graph"),
                              clEnumValN(Emit::Plan, "plan",
                                         "table of every CPU/GPU split (needs --target)"),
                              clEnumValN(Emit::PlanJson, "plan-json",
                                         "the partition plan as JSON (needs --target)"),
                              clEnumValN(Emit::Package, "package",
                                         "a runnable .helmpkg (default when -o ends in .helmpkg)")),
                   cl::cat(helmcCategory));
cl::opt<std::string> targetSpec("target",
                                cl::desc("Machine to plan for: a catalogue name (--list-targets), "
                                         "emu:<name>, host (measured now) or a profile .json"),
                                cl::value_desc("name"), cl::cat(helmcCategory));
cl::opt<bool> listTargets("list-targets", cl::desc("Print the built-in target catalogue and exit"),
                          cl::cat(helmcCategory));
cl::opt<std::string> planSvgPath("plan-svg", cl::desc("Also write the T_plan-vs-k chart as SVG"),
                                 cl::value_desc("file"), cl::cat(helmcCategory));
cl::opt<std::string> objective("objective", cl::desc("Plan for decode (default) or prefill"),
                               cl::init("decode"), cl::cat(helmcCategory));
cl::opt<int64_t> batch("batch", cl::desc("Sequences decoded together"), cl::init(1),
                       cl::cat(helmcCategory));
cl::opt<int64_t> context("context", cl::desc("KV-cache length the decode step is costed at"),
                         cl::init(4096), cl::cat(helmcCategory));
cl::opt<int64_t> promptLen("prompt-len", cl::desc("Prompt length for the prefill objective"),
                           cl::init(128), cl::cat(helmcCategory));
cl::opt<std::string> kvOffload("kv-offload",
                               cl::desc("on: KV pages may spill to host RAM (default); off: the "
                                        "GPU must hold its blocks' KV for --context x --batch"),
                               cl::init("on"), cl::cat(helmcCategory));
cl::opt<std::string> vramReserve("vram-reserve",
                                 cl::desc("VRAM kept free, bytes or with a KiB/MiB/GiB suffix "
                                          "(default: the target's)"),
                                 cl::cat(helmcCategory));
cl::opt<int64_t> forceSplit("force-split", cl::desc("Put units [0, k) on the CPU instead of the "
                                                    "cheapest split"),
                            cl::init(-1), cl::cat(helmcCategory));
cl::opt<std::string> tokenizerPath("tokenizer",
                                   cl::desc("Hugging Face tokenizer.json to bundle into the package"),
                                   cl::value_desc("file"), cl::cat(helmcCategory));
cl::opt<int64_t> maxContext("max-context",
                            cl::desc("Longest sequence (prompt + generated) the package accepts "
                                     "(default 4096)"),
                            cl::init(4096), cl::cat(helmcCategory));
cl::opt<std::string> gpuCode(
    "gpu-code",
    cl::desc("Form of the GPU stage's code: auto (default: kernels for a CUDA GPU, host for emu), "
             "host (compiled to run on the host: emu only) or kernels (host code launching the "
             "device's kernels, what a CUDA GPU runs; emu runs it with host kernels)"),
    cl::init("auto"), cl::cat(helmcCategory));
cl::opt<bool> quietProgress("q", cl::desc("No progress messages"), cl::cat(helmcCategory));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: standard output)"),
                                cl::value_desc("file"), cl::init("-"), cl::cat(helmcCategory));

int fail(const std::string &msg) {
  errs() << "helmc: error: " << msg << "\n";
  return 1;
}
int fail(Error error) { return fail(toString(std::move(error))); }

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
} // namespace

int main(int argc, char **argv) {
  InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(helmcCategory);
  cl::SetVersionPrinter([](raw_ostream &os) { os << "helmc (HELM) 0.1.0, MLIR " << LLVM_VERSION_STRING << "\n"; });
  cl::ParseCommandLineOptions(argc, argv,
                              "helmc: ahead-of-time compiler for decoder-only LLMs in ONNX\n");

  if (listTargets) {
    printCatalogue(outs());
    return 0;
  }
  if (inputPath.empty())
    return fail("no input model (usage: helmc model.onnx [options]; see --help)");
  if (emit.getNumOccurrences() == 0 && StringRef(outputPath).ends_with(".helmpkg"))
    emit = Emit::Package;
  bool packaging = emit == Emit::Package;
  if (packaging && (outputPath.empty() || outputPath == "-"))
    return fail("--emit=package needs an output file (-o model.helmpkg)");
  if (!packaging && !tokenizerPath.empty())
    return fail("--tokenizer goes with a package output (-o model.helmpkg)");
  bool planning = emit == Emit::Plan || emit == Emit::PlanJson || (packaging && !targetSpec.empty());
  if (planning && targetSpec.empty())
    return fail("--emit=plan and --emit=plan-json need --target (see --list-targets)");
  if (!planSvgPath.empty() && (!planning || packaging))
    return fail("--plan-svg goes with --emit=plan or --emit=plan-json");

  helm::PlanOptions planOptions;
  helm::TargetProfile target;
  if (planning) {
    if (objective != "decode" && objective != "prefill")
      return fail("--objective must be decode or prefill, got '" + objective + "'");
    if (kvOffload != "on" && kvOffload != "off")
      return fail("--kv-offload must be on or off, got '" + kvOffload + "'");
    if (batch < 1 || context < 0 || promptLen < 1)
      return fail("--batch and --prompt-len must be >= 1 and --context >= 0");
    planOptions.objective = objective == "prefill" ? helm::Objective::prefill : helm::Objective::decode;
    planOptions.batch = batch;
    planOptions.context = context;
    planOptions.promptLen = promptLen;
    planOptions.kvOffload = kvOffload == "on";
    if (!vramReserve.empty()) {
      auto bytes = helm::parseByteSize(vramReserve);
      if (!bytes)
        return fail("--vram-reserve '" + vramReserve + "' is not a byte count (e.g. 1GiB, 512MiB)");
      planOptions.vramReserve = *bytes;
    }
    if (forceSplit != -1) {
      if (forceSplit < 0)
        return fail("--force-split must be >= 0, got " + std::to_string(forceSplit));
      planOptions.forceSplit = forceSplit;
    }
    if (targetSpec == "host")
      errs() << "helmc: profiling this machine for --target=host (a few seconds)...\n";
    auto resolved = helm::resolveTarget(targetSpec);
    if (!resolved)
      return fail(resolved.takeError());
    target = std::move(*resolved);
  }

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  mlir::MLIRContext ctx(registry);
  ctx.loadDialect<helm::HelmDialect, mlir::func::FuncDialect>();
  ctx.printOpOnDiagnostic(false);

  helm::ImportOptions importOptions;
  // Planning reads shapes only: a model whose external weight files are absent still plans.
  importOptions.requireWeightData = !planning || packaging;
  auto imported = helm::importOnnxFile(ctx, inputPath, importOptions);
  if (!imported)
    return fail(imported.takeError());
  helm::ImportedModel model = std::move(*imported);

  std::string text;
  raw_string_ostream os(text);
  if (emit == Emit::OnnxMlir) {
    model.module->print(os);
  } else {
    if (Error e = helm::raiseModule(*model.module, inputPath))
      return fail(std::move(e));
    if (emit == Emit::Helm) {
      model.module->print(os);
    } else if (packaging) {
      auto progress = [&](StringRef step) {
        if (!quietProgress)
          errs() << "helmc: " << step << "\n";
      };
      auto extracted = helm::extractModelConfig(*model.module);
      if (!extracted)
        return fail(inputPath + ": " + toString(extracted.takeError()));
      const helm::ModelConfig &config = *extracted;
      helm::PackageOptions options;
      options.outputPath = outputPath;
      options.modelPath = inputPath;
      options.tokenizerPath = tokenizerPath;
      options.maxContext = maxContext;
      if (gpuCode != "auto" && gpuCode != "host" && gpuCode != "kernels")
        return fail("--gpu-code must be auto, host or kernels, not '" + gpuCode + "'");
      options.gpuCode = gpuCode;
#if HELM_HAVE_CUDA
      options.cudaKernels = helm::kernels::cudaKernelImage();
#endif
      if (planning) {
        progress("planning for " + target.name);
        if (Error e = helm::planModule(*model.module, target, planOptions, inputPath))
          return fail(std::move(e));
        options.target = target;
        options.planJson = helm::planJson(*model.module, target, config);
        options.vramReserve = planOptions.vramReserve.value_or(-1);
      }
      // The CPU stage runs on this machine unless a catalogued (cross-compiled) target says
      // otherwise; an emu target runs both stages here.
      if (!planning || target.name == "host" || target.emulated())
        options.cpu = helm::CpuCodegenTarget::host();
      helm::PackageReport report;
      if (Error e = helm::buildPackage(*model.module, *model.weights, config, options, report,
                                       progress))
        return fail(std::move(e));
      std::string onGpu = report.gpuWeightBytes
                              ? formatv(" ({0:f1} MiB for the GPU stage)",
                                        report.gpuWeightBytes / 1048576.0)
                                    .str()
                              : std::string();
      progress(formatv("wrote {0}: {1:f1} MiB of weights{5}, {2:f1} KiB of code, codegen {3:f2} "
                       "s, write {4:f2} s",
                       outputPath, report.weightBytes / 1048576.0, report.codeBytes / 1024.0,
                       report.codegenSeconds, report.writeSeconds, onGpu)
                   .str());
      return 0;
    } else if (planning) {
      auto extracted = helm::extractModelConfig(*model.module);
      if (!extracted)
        return fail(inputPath + ": " + toString(extracted.takeError()));
      const helm::ModelConfig &config = *extracted;
      if (Error e = helm::planModule(*model.module, target, planOptions, inputPath))
        return fail(std::move(e));
      os << (emit == Emit::Plan ? helm::planTable(*model.module, target, config)
                                : helm::planJson(*model.module, target, config));
      if (!planSvgPath.empty()) {
        std::error_code ec;
        ToolOutputFile svg(planSvgPath, ec, sys::fs::OF_None);
        if (ec)
          return fail(planSvgPath + ": cannot write: " + ec.message());
        svg.os() << helm::planSvg(*model.module, target, config);
        svg.keep();
      }
    } else {
      auto extracted = helm::extractModelConfig(*model.module);
      if (!extracted)
        return fail(inputPath + ": " + toString(extracted.takeError()));
      os << helm::modelConfigToJson(*extracted) << "\n";
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
