//===- helmc.cpp - the HELM compiler driver --------------------------------------===//
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
//===----------------------------------------------------------------------===//
#include "compiler/ModelConfig.h"
#include "compiler/gguf/GgufImporter.h"
#include "tools/helmc/Options.h"
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
#include "runtime/chat/ChatTemplate.h"
#include "runtime/support/ByteSize.h"
#include "runtime/support/JsonDepth.h"

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
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {
using helm::helmc::Emit;

int fail(const std::string &msg) {
  errs() << "helmc: error: " << msg << "\n";
  return 1;
}
int fail(Error error) { return fail(toString(std::move(error))); }

/// A chat template and where it came from (for messages).
struct ChatTemplateSource {
  std::string text, origin;
};

/// An ONNX model's chat template, as Hugging Face keeps it beside the tokenizer: chat_template.jinja,
/// or tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"} of which
/// the one named "default"), in the tokenizer's folder, then the model's. None found: empty text.
Expected<ChatTemplateSource> findChatTemplate(StringRef modelPath, StringRef tokenizerPath) {
  SmallVector<std::string, 2> folders;
  for (StringRef file : {tokenizerPath, modelPath}) {
    if (file.empty())
      continue;
    StringRef parent = sys::path::parent_path(file);
    std::string folder = parent.empty() ? std::string(".") : parent.str();
    if (!is_contained(folders, folder))
      folders.push_back(folder);
  }
  for (const std::string &folder : folders) {
    SmallString<256> jinja(folder), config(folder);
    sys::path::append(jinja, "chat_template.jinja");
    sys::path::append(config, "tokenizer_config.json");
    if (sys::fs::exists(jinja)) {
      auto buffer = MemoryBuffer::getFile(jinja, /*IsText=*/false, /*RequiresNullTerminator=*/false);
      if (!buffer)
        return createStringError(jinja.str() + ": cannot read: " + buffer.getError().message());
      return ChatTemplateSource{(*buffer)->getBuffer().str(), jinja.str().str()};
    }
    if (!sys::fs::exists(config))
      continue;
    auto buffer = MemoryBuffer::getFile(config, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (!buffer)
      return createStringError(config.str() + ": cannot read: " + buffer.getError().message());
    StringRef text = (*buffer)->getBuffer();
    if (helm::jsonDepth(text, 64) > 64)
      return createStringError(config.str() + ": invalid JSON: nested deeper than 64 levels");
    auto json = json::parse(text);
    if (!json)
      return createStringError(config.str() + ": invalid JSON: " + toString(json.takeError()));
    const json::Object *object = json->getAsObject();
    const json::Value *field = object ? object->get("chat_template") : nullptr;
    if (!field || field->kind() == json::Value::Null)
      continue;
    if (auto single = field->getAsString())
      return ChatTemplateSource{single->str(), config.str().str()};
    if (const json::Array *named = field->getAsArray()) {
      for (const json::Value &entry : *named) {
        const json::Object *e = entry.getAsObject();
        if (e && e->getString("name") == StringRef("default") && e->getString("template"))
          return ChatTemplateSource{e->getString("template")->str(), config.str().str()};
      }
      errs() << "helmc: warning: " << config << ": chat_template lists named templates but none named "
             << "'default'; the package gets no chat template\n";
      return ChatTemplateSource{};
    }
    return createStringError(config.str() + ": chat_template is neither a string nor a list of named templates");
  }
  return ChatTemplateSource{};
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
} // namespace

int main(int argc, char **argv) {
  InitLLVM initLLVM(argc, argv);
  helm::helmc::hideUnrelatedOptions();
  cl::SetVersionPrinter([](raw_ostream &os) { os << "helmc (HELM) 0.1.0, MLIR " << LLVM_VERSION_STRING << "\n"; });
  auto parsed = helm::helmc::parseCommandLine(argc, argv, errs());
  if (!parsed) {
    std::string message = toString(parsed.takeError());
    return message.empty() ? 1 : fail(message); // llvm::cl printed its own syntax errors
  }
  const helm::helmc::Options &opts = *parsed;
  if (opts.listTargets) {
    printCatalogue(outs());
    return 0;
  }
  const std::string &inputPath = opts.inputPath, &targetSpec = opts.targetSpec,
                    &outputPath = opts.outputPath, &tokenizerPath = opts.tokenizerPath,
                    &planSvgPath = opts.planSvgPath, &gpuCode = opts.gpuCode;
  const Emit emit = opts.emit;
  const bool packaging = opts.packaging, planning = opts.planning, quietProgress = opts.quiet;
  const int64_t maxContext = opts.maxContext;
  helm::PlanOptions planOptions = opts.plan;
  helm::TargetProfile target;
  if (planning) {
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
  // Two front ends: a GGUF file arrives as block-level ops already (its tokenizer with it), an
  // ONNX graph is raised to them.
  const bool gguf = helm::isGgufFile(inputPath);
  helm::ImportedModel model;
  std::string ggufTokenizer;
  ChatTemplateSource chatTemplate;
  std::vector<int32_t> fileEosIds;
  if (gguf) {
    if (emit == Emit::OnnxMlir)
      return fail(inputPath + ": --emit=onnx-mlir shows an ONNX graph; this is a GGUF file (use --emit=helm)");
    auto imported = helm::importGgufFile(ctx, inputPath);
    if (!imported)
      return fail(imported.takeError());
    model = std::move(imported->model);
    ggufTokenizer = std::move(imported->tokenizerJson);
    chatTemplate = {std::move(imported->chatTemplate), inputPath + " (tokenizer.chat_template)"};
    fileEosIds = std::move(imported->eosIds);
    if (packaging && tokenizerPath.empty() && !imported->tokenizerError.empty())
      errs() << "helmc: warning: " << imported->tokenizerError
             << "; the package gets no tokenizer (pass --tokenizer=tokenizer.json, or give helm-rt token ids)\n";
  } else {
    auto imported = helm::importOnnxFile(ctx, inputPath, importOptions);
    if (!imported)
      return fail(imported.takeError());
    model = std::move(*imported);
    // A package's chat template rides with its tokenizer (the manifest keeps it there).
    if (packaging && !opts.noChatTemplate && !tokenizerPath.empty()) {
      auto found = findChatTemplate(inputPath, tokenizerPath);
      if (!found)
        return fail(found.takeError());
      chatTemplate = std::move(*found);
    }
  }
  // helm-rt serve renders the template with runtime/chat: one outside the subset it renders is
  // refused now, in one line naming the file and the construct, rather than at serving time.
  if (opts.noChatTemplate)
    chatTemplate = {};
  if (packaging && !chatTemplate.text.empty())
    if (auto parsed = helm::chat::ChatTemplate::parse(chatTemplate.text); !parsed)
      return fail(chatTemplate.origin + ": chat template: " + toString(parsed.takeError()) +
                  " (--no-chat-template compiles without it)");

  std::string text;
  raw_string_ostream os(text);
  if (emit == Emit::OnnxMlir) {
    model.module->print(os);
  } else {
    if (Error e = gguf ? helm::formUnits(*model.module, inputPath) : helm::raiseModule(*model.module, inputPath))
      return fail(std::move(e));
    if (!opts.quantize.empty())
      if (Error e = helm::quantizeWeights(*model.module, opts.quantize, inputPath))
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
      options.tokenizerJson = std::move(ggufTokenizer);
      options.chatTemplate = std::move(chatTemplate.text);
      options.eosIds = std::move(fileEosIds);
      options.maxContext = maxContext;
      // A GGUF user compares with llama.cpp, whose cache is f16; a float16 model's keys and values
      // are f16 values already. Everything else keeps f32 rows (ONNX Runtime's bits).
      options.kvHostDtype = gguf || config.dtype == "float16" ? "f16" : "f32";
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
      if (report.prepackedTensors)
        progress(formatv("copied {0} weights in their GGUF blocks unchanged", report.prepackedTensors).str());
      if (report.repackedTensors)
        progress(formatv("repacked {0} weights from ONNX blocked integers (MatMulNBits, GatherBlockQuantized, DequantizeLinear) into block formats",
                         report.repackedTensors)
                     .str());
      if (report.quantizedTensors)
        progress(formatv("quantized {0} weights to {1}: {2:f1} MiB -> {3:f1} MiB",
                         report.quantizedTensors, opts.quantize, report.quantizedSourceBytes / 1048576.0,
                         report.quantizedBytes / 1048576.0)
                     .str());
      if (!report.blockTensors.empty()) {
        std::string formats;
        for (const auto &[dtype, count] : report.blockTensors)
          formats += (formats.empty() ? "" : ", ") + std::to_string(count) + " " + dtype;
        progress(formatv("weights in blocks: {0} of {1} tensors; {2:f2} bits per weight",
                         formats, report.tensors,
                         report.weightElements ? 8.0 * double(report.weightBytes) / double(report.weightElements) : 0.0)
                     .str());
      }
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
