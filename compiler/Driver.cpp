//===- Driver.cpp - the compiler's one entry: typed options, phases, compile() ---===//
#include "compiler/Driver.h"

#include "compiler/PlanReport.h"
#include "compiler/gguf/GgufImporter.h"
#include "compiler/onnx/OnnxImporter.h"
#include "dialects/helm/HelmDialect.h"
#include "runtime/chat/ChatTemplate.h"
#include "contract/format/JsonDepth.h"
#if HELM_HAVE_CUDA
#include "kernels/cuda/CudaKernels.h"
#endif

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace helm {

namespace {

/// A chat template and where it came from (for messages).
struct ChatTemplateSource {
  std::string text, origin;
};

/// An ONNX model's chat template, as Hugging Face keeps it beside the tokenizer: chat_template.jinja,
/// or tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"} of which
/// the one named "default"), in the tokenizer's folder, then the model's. None found: empty text.
Expected<ChatTemplateSource> findChatTemplate(StringRef modelPath, StringRef tokenizerPath,
                                              const CompileHooks &hooks) {
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
    if (jsonDepth(text, 64) > 64)
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
      if (hooks.warning)
        hooks.warning((config.str() + ": chat_template lists named templates but none named 'default'; the "
                                      "package gets no chat template")
                          .str());
      return ChatTemplateSource{};
    }
    return createStringError(config.str() + ": chat_template is neither a string nor a list of named templates");
  }
  return ChatTemplateSource{};
}

/// What the front end hands the package phase besides the module: the tokenizer, chat template
/// and end-of-sequence ids the model file carries.
struct ModelAssets {
  std::string tokenizerJson;
  ChatTemplateSource chatTemplate;
  std::vector<int32_t> eosIds;
};

/// The import phase: either front end, and (for a package) the assets the package carries, with
/// the chat template checked against the Jinja subset helm-rt renders.
Error importModel(mlir::MLIRContext &ctx, const CompileOptions &options, CompilePhase stopAfter,
                  const CompileHooks &hooks, Compilation &out, ModelAssets &assets) {
  const bool packaging = stopAfter == CompilePhase::Package;
  out.fromGguf = isGgufFile(options.inputPath);
  if (out.fromGguf) {
    if (stopAfter == CompilePhase::Import)
      return createStringError(options.inputPath +
                               ": --emit=onnx-mlir shows an ONNX graph; this is a GGUF file (use --emit=helm)");
    auto imported = importGgufFile(ctx, options.inputPath, options.maxContext);
    if (!imported)
      return imported.takeError();
    out.model = std::move(imported->model);
    assets.tokenizerJson = std::move(imported->tokenizerJson);
    assets.chatTemplate = {std::move(imported->chatTemplate), options.inputPath + " (tokenizer.chat_template)"};
    assets.eosIds = std::move(imported->eosIds);
    if (packaging && options.tokenizerPath.empty() && !imported->tokenizerError.empty() && hooks.warning)
      hooks.warning(imported->tokenizerError +
                    "; the package gets no tokenizer (pass --tokenizer=tokenizer.json, or give helm-rt token ids)");
  } else {
    ImportOptions importOptions;
    // Planning reads shapes only: a model whose external weight files are absent still plans.
    importOptions.requireWeightData = stopAfter != CompilePhase::Plan;
    auto imported = importOnnxFile(ctx, options.inputPath, importOptions);
    if (!imported)
      return imported.takeError();
    out.model = std::move(*imported);
    // A package's chat template rides with its tokenizer (the manifest keeps it there).
    if (packaging && options.chatTemplate && !options.tokenizerPath.empty()) {
      auto found = findChatTemplate(options.inputPath, options.tokenizerPath, hooks);
      if (!found)
        return found.takeError();
      assets.chatTemplate = std::move(*found);
    }
  }
  if (!options.chatTemplate)
    assets.chatTemplate = {};
  // helm-rt serve renders the template with runtime/chat: one outside the subset it renders is
  // refused now, in one line naming the file and the construct, rather than at serving time.
  if (packaging && !assets.chatTemplate.text.empty())
    if (auto parsed = chat::ChatTemplate::parse(assets.chatTemplate.text); !parsed)
      return createStringError(assets.chatTemplate.origin + ": chat template: " + toString(parsed.takeError()) +
                               " (--no-chat-template compiles without it)");
  return Error::success();
}

/// The package phase: the stage split, code generation and the package file, then what was
/// written, as progress lines.
Error packageModel(const CompileOptions &options, const ModelConfig &config, ModelAssets assets,
                   const CompileHooks &hooks, Compilation &out) {
  PackageOptions package;
  package.outputPath = options.outputPath;
  package.modelPath = options.inputPath;
  package.tokenizerPath = options.tokenizerPath;
  package.tokenizerJson = std::move(assets.tokenizerJson);
  package.chatTemplate = std::move(assets.chatTemplate.text);
  package.eosIds = std::move(assets.eosIds);
  package.maxContext = options.maxContext;
  // A GGUF user compares with llama.cpp, whose cache is f16; a float16 model's keys and values
  // are f16 values already. Everything else keeps f32 rows (ONNX Runtime's bits).
  package.kvHostDtype = out.fromGguf || config.dtype == "float16" ? "f16" : "f32";
  package.gpuCode = options.gpuCode;
  package.vramReserve = options.plan.vramReserve;
#if HELM_HAVE_CUDA
  package.cudaKernels = kernels::cudaKernelImage();
#endif
  // The CPU stage runs on this machine unless a catalogued (cross-compiled) target says
  // otherwise; an emu target runs both stages here.
  if (!options.target || options.target->name == "host" || options.target->emulated())
    package.cpu = CpuCodegenTarget::host();
  auto progress = [&](StringRef line) {
    if (hooks.progress)
      hooks.progress(line);
  };
  PackageReport &report = out.report;
  if (Error e = buildPackage(*out.model.module, *out.model.weights, config, package, report, progress))
    return e;
  std::string onGpu =
      report.gpuWeightBytes ? formatv(" ({0:f1} MiB for the GPU stage)", report.gpuWeightBytes / 1048576.0).str()
                            : std::string();
  if (report.prepackedTensors)
    progress(formatv("copied {0} weights in their GGUF blocks unchanged", report.prepackedTensors).str());
  if (report.repackedTensors)
    progress(formatv("repacked {0} weights from ONNX blocked integers (MatMulNBits, GatherBlockQuantized, "
                     "DequantizeLinear) into block formats",
                     report.repackedTensors)
                 .str());
  if (report.dequantizedTensors)
    progress(formatv("dequantized {0} weights from ONNX blocked integers whose rows are not whole blocks of 32 "
                     "(stored in their scales' dtype)",
                     report.dequantizedTensors)
                 .str());
  if (report.quantizedTensors)
    progress(formatv("quantized {0} weights to {1}: {2:f1} MiB -> {3:f1} MiB", report.quantizedTensors,
                     options.quantize, report.quantizedSourceBytes / 1048576.0, report.quantizedBytes / 1048576.0)
                 .str());
  if (!report.blockTensors.empty()) {
    std::string formats;
    for (const auto &[dtype, count] : report.blockTensors)
      formats += (formats.empty() ? "" : ", ") + std::to_string(count) + " " + dtype;
    progress(formatv("weights in blocks: {0} of {1} tensors; {2:f2} bits per weight", formats, report.tensors,
                     report.weightElements ? 8.0 * double(report.weightBytes) / double(report.weightElements) : 0.0)
                 .str());
  }
  progress(formatv("wrote {0}: {1:f1} MiB of weights{5}, {2:f1} KiB of code, codegen {3:f2} s, write {4:f2} s",
                   options.outputPath, report.weightBytes / 1048576.0, report.codeBytes / 1024.0,
                   report.codegenSeconds, report.writeSeconds, onGpu)
               .str());
  return Error::success();
}

} // namespace

Expected<ModelConfig> modelConfigOf(const Compilation &compilation, StringRef inputPath) {
  if (compilation.config)
    return *compilation.config;
  auto config = extractModelConfig(*compilation.model.module);
  if (!config)
    return createStringError(inputPath + ": " + toString(config.takeError()));
  return config;
}

Expected<Compilation> compile(mlir::MLIRContext &ctx, const CompileOptions &options, CompilePhase stopAfter,
                              const CompileHooks &hooks) {
  // Checked before any work: the plan phase has nothing to plan for.
  if (stopAfter == CompilePhase::Plan && !options.target)
    return createStringError(options.inputPath + ": planning needs a target (--target; see --list-targets)");
  ctx.loadDialect<HelmDialect, mlir::func::FuncDialect>();
  Compilation out;
  ModelAssets assets;
  if (Error e = importModel(ctx, options, stopAfter, hooks, out, assets))
    return std::move(e);
  if (stopAfter == CompilePhase::Import)
    return std::move(out);

  mlir::ModuleOp module = *out.model.module;
  PhasePipelineOptions phases;
  phases.blockLevelInput = out.fromGguf;
  phases.quantize = options.quantize;
  phases.plan = options.plan;
  if (Error e = runPhase(module, CompilePhase::Raise, phases, options.inputPath))
    return std::move(e);
  if (stopAfter == CompilePhase::Raise)
    return std::move(out);

  auto config = modelConfigOf(out, options.inputPath);
  if (!config)
    return config.takeError();
  out.config = *config;
  if (options.target) {
    if (hooks.progress)
      hooks.progress("planning for " + options.target->name);
    module->setAttr(HelmDialect::TargetAttrHelper::getNameStr(), targetToAttr(&ctx, *options.target));
    if (Error e = runPhase(module, CompilePhase::Plan, phases, options.inputPath))
      return std::move(e);
  }
  if (stopAfter == CompilePhase::Plan)
    return std::move(out);

  if (Error e = packageModel(options, *config, std::move(assets), hooks, out))
    return std::move(e);
  return std::move(out);
}

} // namespace helm
