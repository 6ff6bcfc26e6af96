//===- PackageBuilder.cpp - compile the stages and write the .helmpkg ---------------===//
//
// Section layout: "manifest" (JSON, docs/package-format.md "Manifest keys"); per stage its weights
// ("cpu_weights" / "gpu_weights": every tensor the stage fetches, 64-byte aligned, in id order) and
// its code ("cpu_code" / "gpu_code": the stage's shared object; a GPU stage is host code for the
// emu device); "tokenizer" (tokenizer.json verbatim). Weights go to the file straight from the parsed model's
// inline data, or one tensor at a time from external data, so nothing holds a second copy of the
// model.
//
//===----------------------------------------------------------------------===//
#include "compiler/PackageBuilder.h"

#include "compiler/PlanReport.h"

#include "compiler/Pipeline.h"
#include "compiler/WeightQuantizer.h"
#include "compiler/package/PackageWriter.h"
#include "contract/helm_contract.h"
#include "contract/manifest_schema.h"
#include "passes/plan/UnitCosts.h"
#include "runtime/tokenizer/Tokenizer.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <chrono>

namespace helm {

std::optional<GpuCodeForm> parseGpuCodeForm(llvm::StringRef name) {
  // In GpuCodeForm's order.
  static constexpr llvm::StringLiteral kNames[] = {"auto", "host", "kernels"};
  const llvm::StringLiteral *found = llvm::find(kNames, name);
  if (found == std::end(kNames))
    return std::nullopt;
  return GpuCodeForm(found - std::begin(kNames));
}

namespace {
double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// The tokenizer section's text and its manifest entry (empty when the package has none).
struct TokenizerPart {
  std::string text;
  llvm::json::Object manifest;
};

/// Reads and checks the tokenizer (--tokenizer, else the model file's own) against the model's
/// vocabulary, with the end-of-sequence ids and the chat template its manifest entry carries.
llvm::Expected<TokenizerPart> readTokenizer(const PackageOptions &options, const ModelConfig &config) {
  TokenizerPart part;
  std::string name = options.tokenizerPath;
  if (!options.tokenizerPath.empty()) {
    auto buffer = llvm::MemoryBuffer::getFile(options.tokenizerPath);
    if (!buffer)
      return llvm::createStringError(options.tokenizerPath + ": cannot read: " + buffer.getError().message());
    part.text = (*buffer)->getBuffer().str();
  } else if (!options.tokenizerJson.empty()) {
    part.text = options.tokenizerJson;
    name = options.modelPath + " (its tokenizer metadata)";
  }
  if (part.text.empty())
    return part;
  auto tok = tok::Tokenizer::fromJson(part.text, name);
  if (!tok)
    return tok.takeError();
  if (int64_t((*tok)->vocabSize()) > config.vocabSize)
    return llvm::createStringError(llvm::formatv("{0}: tokenizer has {1} tokens but the model's vocabulary is {2}",
                                                 name, (*tok)->vocabSize(), config.vocabSize));
  part.manifest[HELM_MANIFEST_TOKENIZER_SECTION] = "tokenizer";
  if (auto bos = (*tok)->bosId())
    part.manifest[HELM_MANIFEST_TOKENIZER_BOS_ID] = int64_t(*bos);
  std::vector<int32_t> eosIds = (*tok)->eosIds();
  for (int32_t id : options.eosIds)
    if (id >= 0 && size_t(id) < (*tok)->vocabSize() && !llvm::is_contained(eosIds, id))
      eosIds.push_back(id);
  llvm::sort(eosIds);
  llvm::json::Array eos;
  for (int32_t id : eosIds)
    eos.push_back(int64_t(id));
  part.manifest[HELM_MANIFEST_TOKENIZER_EOS_IDS] = std::move(eos);
  if (!options.chatTemplate.empty())
    part.manifest[HELM_MANIFEST_TOKENIZER_CHAT_TEMPLATE] = llvm::json::fixUTF8(options.chatTemplate);
  return part;
}

/// Whether the GPU stage's code is kernel launches ("kernels": what a CUDA GPU runs; emu runs it
/// with host implementations of the kernels) rather than host code for the emulated GPU
/// ("host"). A plan for a real GPU needs kernel launches and the CUDA kernels' fatbin, which the
/// package carries; both are checked before any code is generated.
llvm::Expected<bool> gpuStageAsKernels(mlir::ModuleOp module, const std::optional<TargetProfile> &target,
                                       const PackageOptions &options) {
  bool emuTarget = target && target->emulated();
  bool kernels = options.gpuCode == GpuCodeForm::Kernels || (options.gpuCode == GpuCodeForm::Auto && !emuTarget);
  llvm::SmallVector<UnitOp> units = unitsOf(module);
  auto onGpu = [](UnitOp unit) {
    auto device = unit->getAttrOfType<DeviceAttr>(HelmDialect::DeviceAttrHelper::getNameStr());
    return device && device.getValue() == Device::gpu;
  };
  if (!llvm::any_of(units, onGpu) || emuTarget)
    return kernels;
  std::string targetName = target ? target->name : std::string("?");
  if (!kernels)
    return llvm::createStringError(llvm::formatv("{0}: --gpu-code=host compiles the GPU stage for the host, which only "
                                                 "the emulated GPU runs; the target '{1}' is a CUDA GPU",
                                                 options.modelPath, targetName)
                                       .str());
  if (options.cudaKernels.empty()) {
    auto first = llvm::find_if(units, onGpu);
    return llvm::createStringError(llvm::formatv("{0}: the plan puts units {1}..{2} on the GPU of '{3}', and this helmc "
                                                 "was built without CUDA (HELM_ENABLE_CUDA=OFF or no nvcc), so it has no "
                                                 "CUDA kernels to package; compile for --target=emu:{3} (the emulated "
                                                 "GPU) or keep everything on the CPU with --force-split={4}",
                                                 options.modelPath, first->getIndex(), units.back().getIndex(),
                                                 targetName, units.size())
                                       .str());
  }
  return kernels;
}

/// Turns each stage tensor's source bytes into the bytes the package stores: as they are, the
/// GGUF blocks unchanged, ONNX blocked integers repacked, or quantized here (one tensor at a
/// time: the peak is one tensor's blocks, not the model's).
class TensorBytes {
public:
  TensorBytes(const WeightSource &weights, const PackageOptions &options, PackageReport &report)
      : weights(weights), options(options), report(report) {}

  llvm::Expected<llvm::ArrayRef<char>> stored(const StageTensor &t) {
    auto read = source(t.onnxName, storage);
    if (!read)
      return read.takeError();
    llvm::ArrayRef<char> bytes = *read;
    int64_t sourceBytes = t.blockDtype || t.onnxBlocks.bits ? t.sourceBytes : t.bytes;
    if (int64_t(bytes.size()) != sourceBytes)
      return llvm::createStringError(llvm::formatv("{0}: weight '{1}' has {2} bytes of data, its type needs {3}",
                                                   options.modelPath, t.onnxName, bytes.size(), sourceBytes));
    if (t.onnxBlocks.bits)
      return repacked(t, bytes);
    if (t.prepacked) {
      report.prepackedTensors += 1;
      return bytes;
    }
    if (!t.blockDtype)
      return bytes;
    if (llvm::Error e = quantizeWeight(t.onnxName, bytes, t.sourceDtype, t.sourceShape, t.rowDim, t.blockDtype,
                                       converted))
      return prefixed(std::move(e));
    report.quantizedTensors += 1;
    report.quantizedSourceBytes += t.sourceBytes;
    report.quantizedBytes += converted.size();
    return llvm::ArrayRef<char>(converted.data(), converted.size());
  }

private:
  llvm::Error prefixed(llvm::Error e) const {
    return llvm::createStringError(options.modelPath + ": " + llvm::toString(std::move(e)));
  }

  /// A source initializer's bytes (none for an empty name).
  llvm::Expected<llvm::ArrayRef<char>> source(const std::string &onnxName, std::vector<char> &into) {
    if (onnxName.empty())
      return llvm::ArrayRef<char>();
    auto bytes = weightBytes(weights, onnxName, into);
    if (!bytes)
      return llvm::createStringError(options.modelPath + ": cannot read the data of weight '" + onnxName +
                                     "': " + llvm::toString(bytes.takeError()));
    return *bytes;
  }

  /// ONNX blocked integers: the codes, scales and zero points repacked into the block format with
  /// the same codes, or (a weight declared without one: rows that are not whole blocks of 32)
  /// dequantized into the scales' dtype.
  llvm::Expected<llvm::ArrayRef<char>> repacked(const StageTensor &t, llvm::ArrayRef<char> codes) {
    auto scales = source(t.onnxBlocks.scales, scaleStorage);
    if (!scales)
      return scales.takeError();
    auto zeroPoints = source(t.onnxBlocks.zeroPoints, zeroPointStorage);
    if (!zeroPoints)
      return zeroPoints.takeError();
    OnnxBlockedSource blocked;
    blocked.N = t.shape[0];
    blocked.K = t.shape[1];
    blocked.bits = t.onnxBlocks.bits;
    blocked.blockSize = t.onnxBlocks.blockSize;
    blocked.kMajor = t.onnxBlocks.kMajor;
    blocked.codes = codes;
    blocked.codeDtype = t.onnxBlocks.codeDtype;
    blocked.scales = *scales;
    blocked.scaleDtype = t.onnxBlocks.scaleDtype;
    blocked.zeroPoints = *zeroPoints;
    blocked.zeroPointDtype = t.onnxBlocks.zeroPointDtype;
    if (!t.blockDtype) {
      if (llvm::Error e = dequantizeOnnxBlocks(t.onnxName, blocked, converted))
        return prefixed(std::move(e));
      report.dequantizedTensors += 1;
      return llvm::ArrayRef<char>(converted.data(), converted.size());
    }
    if (llvm::Error e = repackOnnxBlocks(t.onnxName, blocked, t.blockDtype, converted))
      return prefixed(std::move(e));
    report.repackedTensors += 1;
    return llvm::ArrayRef<char>(converted.data(), converted.size());
  }

  const WeightSource &weights;
  const PackageOptions &options;
  PackageReport &report;
  std::vector<char> storage, converted, scaleStorage, zeroPointStorage;
};

// The entries copy their strings: a json::Value made from a StringRef keeps the reference.
llvm::json::Object tensorEntry(const StageTensor &t, size_t stageIndex, const std::string &section, uint64_t offset) {
  llvm::json::Array shape;
  for (int64_t d : t.shape)
    shape.push_back(d);
  return llvm::json::Object{{HELM_MANIFEST_TENSOR_STAGE, int64_t(stageIndex)},
                            {HELM_MANIFEST_TENSOR_ID, t.id},
                            {HELM_MANIFEST_TENSOR_NAME, t.symbol},
                            {HELM_MANIFEST_TENSOR_ONNX_NAME, t.onnxName},
                            {HELM_MANIFEST_TENSOR_DTYPE, t.dtype},
                            {HELM_MANIFEST_TENSOR_SHAPE, std::move(shape)},
                            {HELM_MANIFEST_TENSOR_SECTION, section},
                            {HELM_MANIFEST_TENSOR_OFFSET, int64_t(offset)},
                            {HELM_MANIFEST_TENSOR_BYTES, t.bytes}};
}

llvm::json::Object stageEntry(const CpuStage &stage, const std::string &codeSection, const std::string &weightsSection) {
  return llvm::json::Object{
      {HELM_MANIFEST_STAGE_DEVICE, helm_stage_side_name(stage.side)},
      {HELM_MANIFEST_STAGE_ENTRY, stage.entry},
      {HELM_MANIFEST_STAGE_CODE_SECTION, codeSection},
      {HELM_MANIFEST_STAGE_CODE_FORMAT,
       stage.deviceCalls ? HELM_MANIFEST_CODE_DEVICE_CALLS : HELM_MANIFEST_CODE_HOST_SHARED_OBJECT},
      {HELM_MANIFEST_STAGE_WEIGHTS_SECTION, weightsSection},
      {HELM_MANIFEST_STAGE_KV_LAYERS, stage.kvLayers},
      {HELM_MANIFEST_STAGE_UNITS, llvm::json::Array{stage.firstUnit, stage.lastUnit}},
      {HELM_MANIFEST_STAGE_INPUT, stage.takesIds ? HELM_MANIFEST_IO_TOKEN_IDS : HELM_MANIFEST_IO_ACTIVATION},
      {HELM_MANIFEST_STAGE_OUTPUT, stage.returnsLogits ? HELM_MANIFEST_IO_LOGITS : HELM_MANIFEST_IO_ACTIVATION}};
}

/// The manifest's target: the CPU the code is for and, with a GPU, what the runtime needs to
/// stand up its device (memory budget, link, backend).
llvm::json::Object targetEntry(const std::optional<TargetProfile> &target, const PackageOptions &options) {
  llvm::json::Object entry{{HELM_MANIFEST_TARGET_NAME, target ? target->name : std::string("cpu")},
                           {HELM_MANIFEST_TARGET_CPU, options.cpu.cpu},
                           {HELM_MANIFEST_TARGET_FEATURES, options.cpu.features}};
  if (!target || !target->gpu)
    return entry;
  const GpuProfile &gpu = *target->gpu;
  double reserve = options.vramReserve.value_or(gpu.reservedBytes);
  entry[HELM_MANIFEST_TARGET_GPU] = llvm::json::Object{{HELM_MANIFEST_GPU_NAME, gpu.name},
                                                       {HELM_MANIFEST_GPU_VRAM_BYTES, int64_t(gpu.vramBytes)},
                                                       {HELM_MANIFEST_GPU_RESERVED_BYTES, int64_t(reserve)}};
  entry[HELM_MANIFEST_TARGET_LINK] = llvm::json::Object{{HELM_MANIFEST_LINK_BW_GBS, target->link.bwGbs},
                                                        {HELM_MANIFEST_LINK_LATENCY_US, target->link.latencyUs}};
  entry[HELM_MANIFEST_TARGET_DEVICE] = helm_device_kind_name(target->gpuDevice);
  return entry;
}

/// The target planning attached to the module (`helm.target`), if it was planned.
std::optional<TargetProfile> plannedTarget(mlir::ModuleOp module) {
  TargetAttr attr = HelmDialect::TargetAttrHelper(module.getContext()).getAttr(module);
  if (!attr)
    return std::nullopt;
  // Only a null attribute makes targetFromAttr fail; the attribute's verifier checked the rest.
  return llvm::cantFail(targetFromAttr(attr));
}
} // namespace

llvm::Error buildPackage(mlir::ModuleOp module, const WeightSource &weights,
                         const ModelConfig &config, const PackageOptions &options,
                         PackageReport &report,
                         const std::function<void(llvm::StringRef)> &progress) {
  auto say = [&](llvm::StringRef s) {
    if (progress)
      progress(s);
  };
  if (options.maxContext < 2)
    return llvm::createStringError("--max-context must be at least 2");
  const std::optional<TargetProfile> target = plannedTarget(module);
  // The plan as --emit=plan-json prints it, read before the stage split consumes the units.
  std::optional<llvm::json::Value> plan;
  if (target && HelmDialect::PlanAttrHelper(module.getContext()).getAttr(module))
    plan = planJsonValue(module, *target, config);

  // Tokenizer first: a bad file should fail before minutes of code generation.
  auto tokenizer = readTokenizer(options, config);
  if (!tokenizer)
    return tokenizer.takeError();
  auto gpuKernels = gpuStageAsKernels(module, target, options);
  if (!gpuKernels)
    return gpuKernels.takeError();
  bool emuTarget = target && target->emulated();

  auto t0 = std::chrono::steady_clock::now();
  if (llvm::Error e = runPhase(module, CompilePhase::Package, {}, options.modelPath))
    return e;
  auto compiled = compileHostStages(module, options.cpu, progress, *gpuKernels);
  if (!compiled)
    return llvm::createStringError(options.modelPath + ": " + llvm::toString(compiled.takeError()));
  std::vector<CpuStage> stages = std::move(*compiled);
  report.codegenSeconds = secondsSince(t0);

  auto t1 = std::chrono::steady_clock::now();
  say("writing " + options.outputPath);
  pkg::PackageWriter writer(options.outputPath);
  TensorBytes tensorBytes(weights, options, report);
  llvm::json::Array tensorTable, stageTable;
  for (size_t index = 0; index < stages.size(); ++index) {
    const CpuStage &stage = stages[index];
    bool gpu = stage.side == HELM_STAGE_GPU;
    std::string weightsSection = gpu ? "gpu_weights" : "cpu_weights";
    std::string codeSection = gpu ? "gpu_code" : "cpu_code";
    writer.beginSection(gpu ? pkg::SectionKind::GpuWeights : pkg::SectionKind::CpuWeights, weightsSection);
    for (const StageTensor &t : stage.tensors) {
      auto bytes = tensorBytes.stored(t);
      if (!bytes)
        return bytes.takeError();
      uint64_t offset = writer.append(*bytes);
      weights.release(t.onnxName);
      report.weightBytes += bytes->size();
      report.tensors += 1;
      uint64_t elements = 1;
      for (int64_t d : t.shape)
        elements *= uint64_t(d);
      report.weightElements += elements;
      if (t.blockDtype)
        report.blockTensors[t.dtype] += 1;
      if (gpu)
        report.gpuWeightBytes += bytes->size();
      tensorTable.push_back(tensorEntry(t, index, weightsSection, offset));
    }
    writer.endSection();
    writer.addSection(gpu ? pkg::SectionKind::GpuCode : pkg::SectionKind::CpuCode, codeSection,
                      llvm::ArrayRef<char>(stage.sharedObject.data(), stage.sharedObject.size()));
    report.codeBytes += stage.sharedObject.size();
    llvm::json::Object entry = stageEntry(stage, codeSection, weightsSection);
    // A CUDA GPU stage launches kernels/cuda's kernels: their fatbin travels with the package.
    if (stage.deviceCalls && !emuTarget) {
      writer.addSection(pkg::SectionKind::GpuCode, "gpu_kernels", options.cudaKernels);
      report.codeBytes += options.cudaKernels.size();
      entry[HELM_MANIFEST_STAGE_KERNELS_SECTION] = "gpu_kernels";
      entry[HELM_MANIFEST_STAGE_KERNELS_FORMAT] = HELM_MANIFEST_KERNELS_CUDA_FATBIN;
    }
    stageTable.push_back(std::move(entry));
  }
  if (!tokenizer->text.empty())
    writer.addSection(pkg::SectionKind::Tokenizer, "tokenizer",
                      llvm::ArrayRef<char>(tokenizer->text.data(), tokenizer->text.size()));

  llvm::json::Object manifest;
  manifest[HELM_MANIFEST_PRODUCER] = "helmc 0.1.0";
  manifest[HELM_MANIFEST_MODEL] = llvm::json::Object{{HELM_MANIFEST_MODEL_SOURCE, options.modelPath},
                                                     {HELM_MANIFEST_MODEL_CONFIG, modelConfigJson(config)}};
  manifest[HELM_MANIFEST_TARGET] = targetEntry(target, options);
  if (plan)
    manifest[HELM_MANIFEST_PLAN] = std::move(*plan);
  manifest[HELM_MANIFEST_LIMITS] = llvm::json::Object{{HELM_MANIFEST_LIMITS_MAX_CONTEXT, options.maxContext}};
  manifest[HELM_MANIFEST_STAGES] = std::move(stageTable);
  int64_t kvLayers = 0;
  for (const CpuStage &stage : stages)
    kvLayers += stage.kvLayers;
  for (const CpuStage &stage : stages)
    if (!stage.returnsLogits)
      manifest[HELM_MANIFEST_BOUNDARY] = llvm::json::Object{{HELM_MANIFEST_BOUNDARY_DTYPE, stage.activationDtype},
                                                            {HELM_MANIFEST_BOUNDARY_WIDTH, stage.activationWidth}};
  manifest[HELM_MANIFEST_KV] = llvm::json::Object{{HELM_MANIFEST_KV_LAYERS, kvLayers},
                                                  {HELM_MANIFEST_KV_HEADS, config.numKeyValueHeads},
                                                  {HELM_MANIFEST_KV_HEAD_DIM, config.headDim},
                                                  {HELM_MANIFEST_KV_HOST_DTYPE, options.kvHostDtype}};
  manifest[HELM_MANIFEST_LOGITS] = llvm::json::Object{{HELM_MANIFEST_LOGITS_VOCAB, config.vocabSize}};
  manifest[HELM_MANIFEST_TENSORS] = std::move(tensorTable);
  if (!tokenizer->text.empty())
    manifest[HELM_MANIFEST_TOKENIZER] = std::move(tokenizer->manifest);
  std::string manifestText = llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  writer.addSection(pkg::SectionKind::Manifest, "manifest",
                    llvm::ArrayRef<char>(manifestText.data(), manifestText.size()));
  if (llvm::Error e = writer.finish())
    return e;
  report.writeSeconds = secondsSince(t1);
  return llvm::Error::success();
}

} // namespace helm
