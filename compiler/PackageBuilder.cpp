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

namespace {
double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
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
  if (options.maxContext < 2) {
    return llvm::createStringError("--max-context must be at least 2");
  }

  // Tokenizer first: a bad file should fail before minutes of code generation.
  std::string tokenizerText;
  llvm::json::Object tokenizerManifest;
  std::string tokenizerName = options.tokenizerPath;
  if (!options.tokenizerPath.empty()) {
    auto buffer = llvm::MemoryBuffer::getFile(options.tokenizerPath);
    if (!buffer) {
      return llvm::createStringError(options.tokenizerPath + ": cannot read: " + buffer.getError().message());
    }
    tokenizerText = (*buffer)->getBuffer().str();
  } else if (!options.tokenizerJson.empty()) {
    tokenizerText = options.tokenizerJson;
    tokenizerName = options.modelPath + " (its tokenizer metadata)";
  }
  if (!tokenizerText.empty()) {
    auto tok = tok::Tokenizer::fromJson(tokenizerText, tokenizerName);
    if (!tok) {
      return tok.takeError();
    }
    if (int64_t((*tok)->vocabSize()) > config.vocabSize) {
      return llvm::createStringError(llvm::formatv("{0}: tokenizer has {1} tokens but the model's vocabulary is {2}",
                            tokenizerName, (*tok)->vocabSize(), config.vocabSize));
    }
    tokenizerManifest[HELM_MANIFEST_TOKENIZER_SECTION] = "tokenizer";
    if (auto bos = (*tok)->bosId())
      tokenizerManifest[HELM_MANIFEST_TOKENIZER_BOS_ID] = int64_t(*bos);
    std::vector<int32_t> eosIds = (*tok)->eosIds();
    for (int32_t id : options.eosIds)
      if (id >= 0 && size_t(id) < (*tok)->vocabSize() && !llvm::is_contained(eosIds, id))
        eosIds.push_back(id);
    llvm::sort(eosIds);
    llvm::json::Array eos;
    for (int32_t id : eosIds)
      eos.push_back(int64_t(id));
    tokenizerManifest[HELM_MANIFEST_TOKENIZER_EOS_IDS] = std::move(eos);
    if (!options.chatTemplate.empty())
      tokenizerManifest[HELM_MANIFEST_TOKENIZER_CHAT_TEMPLATE] = llvm::json::fixUTF8(options.chatTemplate);
  }

  // The GPU stage's code: host code compiled for the emulated GPU ("host"), or host code that
  // only launches the device's kernels ("kernels": what a CUDA GPU runs; emu runs it with host
  // implementations of the kernels). A plan for a real GPU needs the CUDA kernels' fatbin, which
  // the package carries; both are checked before any code is generated.
  bool emuTarget = options.target && options.target->emulated();
  llvm::SmallVector<UnitOp> units = unitsOf(module);
  auto onGpu = [](UnitOp unit) {
    auto device = unit->getAttrOfType<DeviceAttr>(HelmDialect::DeviceAttrHelper::getNameStr());
    return device && device.getValue() == Device::gpu;
  };
  bool hasGpuStage = llvm::any_of(units, onGpu);
  bool gpuKernels = options.gpuCode == "kernels" || (options.gpuCode == "auto" && !emuTarget);
  if (hasGpuStage && !emuTarget) {
    if (!gpuKernels) {
      return llvm::createStringError(llvm::formatv("{0}: --gpu-code=host compiles the GPU stage for the host, which only "
                            "the emulated GPU runs; the target '{1}' is a CUDA GPU",
                            options.modelPath, options.target ? options.target->name : "?")
                  .str());
    }
    if (options.cudaKernels.empty()) {
      auto first = llvm::find_if(units, onGpu);
      return llvm::createStringError(llvm::formatv("{0}: the plan puts units {1}..{2} on the GPU of '{3}', and this helmc "
                            "was built without CUDA (HELM_ENABLE_CUDA=OFF or no nvcc), so it has no "
                            "CUDA kernels to package; compile for --target=emu:{3} (the emulated "
                            "GPU) or keep everything on the CPU with --force-split={4}",
                            options.modelPath, first->getIndex(), units.back().getIndex(),
                            options.target ? options.target->name : std::string("?"), units.size())
                  .str());
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  if (llvm::Error e = splitStages(module, options.modelPath))
    return e;
  auto compiled = compileHostStages(module, options.cpu, progress, gpuKernels);
  if (!compiled)
    return llvm::createStringError(options.modelPath + ": " + llvm::toString(compiled.takeError()));
  std::vector<CpuStage> stages = std::move(*compiled);
  report.codegenSeconds = secondsSince(t0);

  auto t1 = std::chrono::steady_clock::now();
  say("writing " + options.outputPath);
  pkg::PackageWriter writer(options.outputPath);
  llvm::json::Array tensorTable, stageTable;
  std::vector<char> storage, quantized, scaleStorage, zeroPointStorage;
  for (size_t index = 0; index < stages.size(); ++index) {
    const CpuStage &stage = stages[index];
    bool gpu = stage.side == HELM_STAGE_GPU;
    std::string weightsSection = gpu ? "gpu_weights" : "cpu_weights";
    std::string codeSection = gpu ? "gpu_code" : "cpu_code";
    writer.beginSection(gpu ? pkg::SectionKind::GpuWeights : pkg::SectionKind::CpuWeights,
                        weightsSection);
    for (const StageTensor &t : stage.tensors) {
      auto read = weightBytes(weights, t.onnxName, storage);
      if (!read)
        return llvm::createStringError(options.modelPath + ": cannot read the data of weight '" +
                                       t.onnxName + "': " + llvm::toString(read.takeError()));
      llvm::ArrayRef<char> bytes = *read;
      int64_t sourceBytes = t.blockDtype ? t.sourceBytes : t.bytes;
      if (int64_t(bytes.size()) != sourceBytes) {
        return llvm::createStringError(llvm::formatv("{0}: weight '{1}' has {2} bytes of data, its type needs {3}",
                              options.modelPath, t.onnxName, bytes.size(), sourceBytes));
      }
      if (t.onnxBlocks.bits) {
        // ONNX blocked integers: the codes (read above), scales and zero points repacked into the
        // block format with the same codes.
        auto readOther = [&](const std::string &onnxName, std::vector<char> &into) -> llvm::Expected<llvm::ArrayRef<char>> {
          if (onnxName.empty())
            return llvm::ArrayRef<char>();
          auto other = weightBytes(weights, onnxName, into);
          if (!other)
            return llvm::createStringError(options.modelPath + ": cannot read the data of weight '" + onnxName +
                                           "': " + llvm::toString(other.takeError()));
          return *other;
        };
        auto scales = readOther(t.onnxBlocks.scales, scaleStorage);
        if (!scales)
          return scales.takeError();
        auto zeroPoints = readOther(t.onnxBlocks.zeroPoints, zeroPointStorage);
        if (!zeroPoints)
          return zeroPoints.takeError();
        OnnxBlockedSource source;
        source.N = t.shape[0];
        source.K = t.shape[1];
        source.bits = t.onnxBlocks.bits;
        source.blockSize = t.onnxBlocks.blockSize;
        source.kMajor = t.onnxBlocks.kMajor;
        source.codes = bytes;
        source.codeDtype = t.onnxBlocks.codeDtype;
        source.scales = *scales;
        source.scaleDtype = t.onnxBlocks.scaleDtype;
        source.zeroPoints = *zeroPoints;
        source.zeroPointDtype = t.onnxBlocks.zeroPointDtype;
        if (llvm::Error e = repackOnnxBlocks(t.onnxName, source, t.blockDtype, quantized))
          return llvm::createStringError(options.modelPath + ": " + llvm::toString(std::move(e)));
        bytes = llvm::ArrayRef<char>(quantized.data(), quantized.size());
        report.repackedTensors += 1;
      } else if (t.prepacked) {
        // Already the blocks the kernels read (a GGUF tensor): the file's bytes, unchanged.
        report.prepackedTensors += 1;
      } else if (t.blockDtype) {
        // Quantized here, one tensor at a time: the peak is one tensor's blocks, not the model's.
        if (llvm::Error e = quantizeWeight(t.onnxName, bytes, t.sourceDtype, t.sourceShape, t.rowDim,
                                           t.blockDtype, quantized))
          return llvm::createStringError(options.modelPath + ": " + llvm::toString(std::move(e)));
        bytes = llvm::ArrayRef<char>(quantized.data(), quantized.size());
        report.quantizedTensors += 1;
        report.quantizedSourceBytes += t.sourceBytes;
        report.quantizedBytes += quantized.size();
      }
      uint64_t offset = writer.append(bytes);
      weights.release(t.onnxName);
      report.weightBytes += bytes.size();
      report.tensors += 1;
      uint64_t elements = 1;
      for (int64_t d : t.shape)
        elements *= uint64_t(d);
      report.weightElements += elements;
      if (t.blockDtype)
        report.blockTensors[t.dtype] += 1;
      if (gpu)
        report.gpuWeightBytes += bytes.size();
      llvm::json::Array shape;
      for (int64_t d : t.shape)
        shape.push_back(d);
      tensorTable.push_back(llvm::json::Object{{HELM_MANIFEST_TENSOR_STAGE, int64_t(index)},
                                               {HELM_MANIFEST_TENSOR_ID, t.id},
                                               {HELM_MANIFEST_TENSOR_NAME, t.symbol},
                                               {HELM_MANIFEST_TENSOR_ONNX_NAME, t.onnxName},
                                               {HELM_MANIFEST_TENSOR_DTYPE, t.dtype},
                                               {HELM_MANIFEST_TENSOR_SHAPE, std::move(shape)},
                                               {HELM_MANIFEST_TENSOR_SECTION, weightsSection},
                                               {HELM_MANIFEST_TENSOR_OFFSET, int64_t(offset)},
                                               {HELM_MANIFEST_TENSOR_BYTES, t.bytes}});
    }
    writer.endSection();
    writer.addSection(gpu ? pkg::SectionKind::GpuCode : pkg::SectionKind::CpuCode, codeSection,
                      llvm::ArrayRef<char>(stage.sharedObject.data(), stage.sharedObject.size()));
    report.codeBytes += stage.sharedObject.size();
    llvm::json::Object entry{
        {HELM_MANIFEST_STAGE_DEVICE, helm_stage_side_name(stage.side)},
        {HELM_MANIFEST_STAGE_ENTRY, stage.entry},
        {HELM_MANIFEST_STAGE_CODE_SECTION, codeSection},
        {HELM_MANIFEST_STAGE_CODE_FORMAT, stage.deviceCalls ? HELM_MANIFEST_CODE_DEVICE_CALLS
                                                            : HELM_MANIFEST_CODE_HOST_SHARED_OBJECT},
        {HELM_MANIFEST_STAGE_WEIGHTS_SECTION, weightsSection},
        {HELM_MANIFEST_STAGE_KV_LAYERS, stage.kvLayers},
        {HELM_MANIFEST_STAGE_UNITS, llvm::json::Array{stage.firstUnit, stage.lastUnit}},
        {HELM_MANIFEST_STAGE_INPUT,
         stage.takesIds ? HELM_MANIFEST_IO_TOKEN_IDS : HELM_MANIFEST_IO_ACTIVATION},
        {HELM_MANIFEST_STAGE_OUTPUT,
         stage.returnsLogits ? HELM_MANIFEST_IO_LOGITS : HELM_MANIFEST_IO_ACTIVATION}};
    // A CUDA GPU stage launches kernels/cuda's kernels: their fatbin travels with the package.
    if (stage.deviceCalls && !emuTarget) {
      writer.addSection(pkg::SectionKind::GpuCode, "gpu_kernels", options.cudaKernels);
      report.codeBytes += options.cudaKernels.size();
      entry[HELM_MANIFEST_STAGE_KERNELS_SECTION] = "gpu_kernels";
      entry[HELM_MANIFEST_STAGE_KERNELS_FORMAT] = HELM_MANIFEST_KERNELS_CUDA_FATBIN;
    }
    stageTable.push_back(std::move(entry));
  }
  if (!tokenizerText.empty())
    writer.addSection(pkg::SectionKind::Tokenizer, "tokenizer",
                      llvm::ArrayRef<char>(tokenizerText.data(), tokenizerText.size()));

  llvm::json::Object manifest;
  manifest[HELM_MANIFEST_PRODUCER] = "helmc 0.1.0";
  manifest[HELM_MANIFEST_MODEL] =
      llvm::json::Object{{HELM_MANIFEST_MODEL_SOURCE, options.modelPath},
                         {HELM_MANIFEST_MODEL_CONFIG, modelConfigJson(config)}};
  llvm::json::Object target{
      {HELM_MANIFEST_TARGET_NAME, options.target ? options.target->name : std::string("cpu")},
      {HELM_MANIFEST_TARGET_CPU, options.cpu.cpu},
      {HELM_MANIFEST_TARGET_FEATURES, options.cpu.features}};
  // What the runtime needs to stand up the device of a GPU stage: its memory budget and link.
  if (options.target && options.target->gpu) {
    const GpuProfile &gpu = *options.target->gpu;
    double reserve = options.vramReserve >= 0 ? options.vramReserve : gpu.reservedBytes;
    target[HELM_MANIFEST_TARGET_GPU] =
        llvm::json::Object{{HELM_MANIFEST_GPU_NAME, gpu.name},
                           {HELM_MANIFEST_GPU_VRAM_BYTES, int64_t(gpu.vramBytes)},
                           {HELM_MANIFEST_GPU_RESERVED_BYTES, int64_t(reserve)}};
    target[HELM_MANIFEST_TARGET_LINK] =
        llvm::json::Object{{HELM_MANIFEST_LINK_BW_GBS, options.target->link.bwGbs},
                           {HELM_MANIFEST_LINK_LATENCY_US, options.target->link.latencyUs}};
    target[HELM_MANIFEST_TARGET_DEVICE] =
        helm_device_kind_name(options.target->gpuDevice);
  }
  manifest[HELM_MANIFEST_TARGET] = std::move(target);
  if (!options.planJson.empty()) {
    auto plan = llvm::json::parse(options.planJson);
    if (plan)
      manifest[HELM_MANIFEST_PLAN] = std::move(*plan);
    else
      llvm::consumeError(plan.takeError());
  }
  manifest[HELM_MANIFEST_LIMITS] =
      llvm::json::Object{{HELM_MANIFEST_LIMITS_MAX_CONTEXT, options.maxContext}};
  manifest[HELM_MANIFEST_STAGES] = std::move(stageTable);
  int64_t kvLayers = 0;
  for (const CpuStage &stage : stages)
    kvLayers += stage.kvLayers;
  for (const CpuStage &stage : stages)
    if (!stage.returnsLogits)
      manifest[HELM_MANIFEST_BOUNDARY] =
          llvm::json::Object{{HELM_MANIFEST_BOUNDARY_DTYPE, stage.activationDtype},
                             {HELM_MANIFEST_BOUNDARY_WIDTH, stage.activationWidth}};
  manifest[HELM_MANIFEST_KV] = llvm::json::Object{{HELM_MANIFEST_KV_LAYERS, kvLayers},
                                                  {HELM_MANIFEST_KV_HEADS, config.numKeyValueHeads},
                                                  {HELM_MANIFEST_KV_HEAD_DIM, config.headDim},
                                                  {HELM_MANIFEST_KV_HOST_DTYPE, options.kvHostDtype}};
  manifest[HELM_MANIFEST_LOGITS] = llvm::json::Object{{HELM_MANIFEST_LOGITS_VOCAB, config.vocabSize}};
  manifest[HELM_MANIFEST_TENSORS] = std::move(tensorTable);
  if (!tokenizerText.empty())
    manifest[HELM_MANIFEST_TOKENIZER] = std::move(tokenizerManifest);
  std::string manifestText = llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  writer.addSection(pkg::SectionKind::Manifest, "manifest",
                    llvm::ArrayRef<char>(manifestText.data(), manifestText.size()));
  if (llvm::Error e = writer.finish())
    return e;
  report.writeSeconds = secondsSince(t1);
  return llvm::Error::success();
}

} // namespace helm
