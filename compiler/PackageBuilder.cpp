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

#include "compiler/package/PackageWriter.h"
#include "passes/UnitCosts.h"
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

bool buildPackage(mlir::ModuleOp module, const WeightSource &weights, const ModelConfig &config,
                  const PackageOptions &options, PackageReport &report, std::string &error,
                  const std::function<void(llvm::StringRef)> &progress) {
  auto say = [&](llvm::StringRef s) {
    if (progress)
      progress(s);
  };
  if (options.maxContext < 2) {
    error = "--max-context must be at least 2";
    return false;
  }

  // Tokenizer first: a bad file should fail before minutes of code generation.
  std::string tokenizerText;
  llvm::json::Object tokenizerManifest;
  if (!options.tokenizerPath.empty()) {
    auto buffer = llvm::MemoryBuffer::getFile(options.tokenizerPath);
    if (!buffer) {
      error = options.tokenizerPath + ": cannot read: " + buffer.getError().message();
      return false;
    }
    tokenizerText = (*buffer)->getBuffer().str();
    auto tok = tok::Tokenizer::fromJson(tokenizerText, options.tokenizerPath);
    if (!tok) {
      error = llvm::toString(tok.takeError());
      return false;
    }
    if (int64_t((*tok)->vocabSize()) > config.vocabSize) {
      error = llvm::formatv("{0}: tokenizer has {1} tokens but the model's vocabulary is {2}",
                            options.tokenizerPath, (*tok)->vocabSize(), config.vocabSize);
      return false;
    }
    tokenizerManifest["section"] = "tokenizer";
    if (auto bos = (*tok)->bosId())
      tokenizerManifest["bos_id"] = int64_t(*bos);
    llvm::json::Array eos;
    for (int32_t id : (*tok)->eosIds())
      eos.push_back(int64_t(id));
    tokenizerManifest["eos_ids"] = std::move(eos);
  }

  // The GPU stage's code: host code compiled for the emulated GPU ("host"), or host code that
  // only launches the device's kernels ("kernels": what a CUDA GPU runs; emu runs it with host
  // implementations of the kernels). A plan for a real GPU needs the CUDA kernels' fatbin, which
  // the package carries; both are checked before any code is generated.
  bool emuTarget = options.target && llvm::StringRef(options.target->name).starts_with("emu:");
  llvm::SmallVector<UnitOp> units = unitsOf(module);
  auto onGpu = [](UnitOp unit) {
    auto device = unit->getAttrOfType<DeviceAttr>("helm.device");
    return device && device.getValue() == Device::gpu;
  };
  bool hasGpuStage = llvm::any_of(units, onGpu);
  bool gpuKernels = options.gpuCode == "kernels" || (options.gpuCode == "auto" && !emuTarget);
  if (hasGpuStage && !emuTarget) {
    if (!gpuKernels) {
      error = llvm::formatv("{0}: --gpu-code=host compiles the GPU stage for the host, which only "
                            "the emulated GPU runs; the target '{1}' is a CUDA GPU",
                            options.modelPath, options.target ? options.target->name : "?")
                  .str();
      return false;
    }
    if (options.cudaKernels.empty()) {
      auto first = llvm::find_if(units, onGpu);
      error = llvm::formatv("{0}: the plan puts units {1}..{2} on the GPU of '{3}', and this helmc "
                            "was built without CUDA (HELM_ENABLE_CUDA=OFF or no nvcc), so it has no "
                            "CUDA kernels to package; compile for --target=emu:{3} (the emulated "
                            "GPU) or keep everything on the CPU with --force-split={4}",
                            options.modelPath, first->getIndex(), units.back().getIndex(),
                            options.target ? options.target->name : std::string("?"), units.size())
                  .str();
      return false;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<CpuStage> stages;
  if (!compileHostStages(module, options.cpu, stages, error, progress, gpuKernels)) {
    error = options.modelPath + ": " + error;
    return false;
  }
  report.codegenSeconds = secondsSince(t0);

  auto t1 = std::chrono::steady_clock::now();
  say("writing " + options.outputPath);
  pkg::PackageWriter writer(options.outputPath);
  llvm::json::Array tensorTable, stageTable;
  std::vector<char> storage;
  for (size_t index = 0; index < stages.size(); ++index) {
    const CpuStage &stage = stages[index];
    bool gpu = stage.device == "gpu";
    std::string weightsSection = gpu ? "gpu_weights" : "cpu_weights";
    std::string codeSection = gpu ? "gpu_code" : "cpu_code";
    writer.beginSection(gpu ? pkg::SectionKind::GpuWeights : pkg::SectionKind::CpuWeights,
                        weightsSection);
    for (const StageTensor &t : stage.tensors) {
      llvm::ArrayRef<char> bytes;
      if (!weightBytes(weights, t.onnxName, storage, bytes)) {
        error = options.modelPath + ": cannot read the data of weight '" + t.onnxName + "'";
        return false;
      }
      if (int64_t(bytes.size()) != t.bytes) {
        error = llvm::formatv("{0}: weight '{1}' has {2} bytes of data, its type needs {3}",
                              options.modelPath, t.onnxName, bytes.size(), t.bytes);
        return false;
      }
      uint64_t offset = writer.append(bytes);
      report.weightBytes += bytes.size();
      if (gpu)
        report.gpuWeightBytes += bytes.size();
      llvm::json::Array shape;
      for (int64_t d : t.shape)
        shape.push_back(d);
      tensorTable.push_back(llvm::json::Object{{"stage", int64_t(index)},
                                               {"id", t.id},
                                               {"name", t.symbol},
                                               {"onnx_name", t.onnxName},
                                               {"dtype", t.dtype},
                                               {"shape", std::move(shape)},
                                               {"section", weightsSection},
                                               {"offset", int64_t(offset)},
                                               {"bytes", t.bytes}});
    }
    writer.endSection();
    writer.addSection(gpu ? pkg::SectionKind::GpuCode : pkg::SectionKind::CpuCode, codeSection,
                      llvm::ArrayRef<char>(stage.sharedObject.data(), stage.sharedObject.size()));
    report.codeBytes += stage.sharedObject.size();
    llvm::json::Object entry{{"device", stage.device},
                             {"entry", stage.entry},
                             {"code_section", codeSection},
                             {"code_format", stage.deviceCalls ? "device-calls"
                                                               : "host-shared-object"},
                             {"weights_section", weightsSection},
                             {"kv_layers", stage.kvLayers},
                             {"units", llvm::json::Array{stage.firstUnit, stage.lastUnit}},
                             {"input", stage.takesIds ? "token_ids" : "activation"},
                             {"output", stage.returnsLogits ? "logits" : "activation"}};
    // A CUDA GPU stage launches kernels/cuda's kernels: their fatbin travels with the package.
    if (stage.deviceCalls && !emuTarget) {
      writer.addSection(pkg::SectionKind::GpuCode, "gpu_kernels", options.cudaKernels);
      report.codeBytes += options.cudaKernels.size();
      entry["kernels_section"] = "gpu_kernels";
      entry["kernels_format"] = "cuda-fatbin";
    }
    stageTable.push_back(std::move(entry));
  }
  if (!tokenizerText.empty())
    writer.addSection(pkg::SectionKind::Tokenizer, "tokenizer",
                      llvm::ArrayRef<char>(tokenizerText.data(), tokenizerText.size()));

  llvm::json::Object manifest;
  manifest["producer"] = "helmc 0.1.0";
  manifest["model"] =
      llvm::json::Object{{"source", options.modelPath}, {"config", modelConfigJson(config)}};
  llvm::json::Object target{{"name", options.target ? options.target->name : std::string("cpu")},
                            {"cpu", options.cpu.cpu},
                            {"features", options.cpu.features}};
  // What the runtime needs to stand up the device of a GPU stage: its memory budget and link.
  if (options.target && options.target->gpu) {
    const GpuProfile &gpu = *options.target->gpu;
    double reserve = options.vramReserve >= 0 ? options.vramReserve : gpu.reservedBytes;
    target["gpu"] = llvm::json::Object{{"name", gpu.name},
                                       {"vram_bytes", int64_t(gpu.vramBytes)},
                                       {"reserved_bytes", int64_t(reserve)}};
    target["link"] = llvm::json::Object{{"bw_gbs", options.target->link.bwGbs},
                                        {"latency_us", options.target->link.latencyUs}};
    target["device"] = emuTarget ? "emu" : "cuda";
  }
  manifest["target"] = std::move(target);
  if (!options.planJson.empty()) {
    auto plan = llvm::json::parse(options.planJson);
    if (plan)
      manifest["plan"] = std::move(*plan);
    else
      llvm::consumeError(plan.takeError());
  }
  manifest["limits"] = llvm::json::Object{{"max_context", options.maxContext}};
  manifest["stages"] = std::move(stageTable);
  int64_t kvLayers = 0;
  for (const CpuStage &stage : stages)
    kvLayers += stage.kvLayers;
  for (const CpuStage &stage : stages)
    if (!stage.returnsLogits)
      manifest["boundary"] = llvm::json::Object{{"dtype", stage.activationDtype},
                                                {"width", stage.activationWidth}};
  manifest["kv"] = llvm::json::Object{{"layers", kvLayers},
                                      {"kv_heads", config.numKeyValueHeads},
                                      {"head_dim", config.headDim}};
  manifest["logits"] = llvm::json::Object{{"vocab", config.vocabSize}};
  manifest["tensors"] = std::move(tensorTable);
  if (!tokenizerText.empty())
    manifest["tokenizer"] = std::move(tokenizerManifest);
  std::string manifestText = llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  writer.addSection(pkg::SectionKind::Manifest, "manifest",
                    llvm::ArrayRef<char>(manifestText.data(), manifestText.size()));
  if (llvm::Error e = writer.finish()) {
    error = llvm::toString(std::move(e));
    return false;
  }
  report.writeSeconds = secondsSince(t1);
  return true;
}

} // namespace helm
