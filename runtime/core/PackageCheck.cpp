//===- PackageCheck.cpp ------------------------------------------------------------===//
#include "runtime/core/PackageCheck.h"

#include "runtime/core/Model.h"
#include "runtime/device/Backend.h"
#include "runtime/kv/PagedKvCache.h"

#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <cstring>

namespace helm::rt {

namespace {
llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}
} // namespace

llvm::Expected<StageSymbols> readStageSymbols(llvm::ArrayRef<char> code, llvm::StringRef entry) {
  llvm::MemoryBufferRef buffer(llvm::StringRef(code.data(), code.size()), "stage code");
  auto object = llvm::object::ObjectFile::createObjectFile(buffer);
  if (!object)
    return fail("not a shared object (" + llvm::toString(object.takeError()) + ")");
  auto *elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(object->get());
  if (!elf || elf->getEType() != llvm::ELF::ET_DYN)
    return fail("not an ELF shared object");
  llvm::Triple host(llvm::sys::getProcessTriple());
  if (elf->getArch() != host.getArch())
    return fail("code for " + llvm::Triple::getArchTypeName(elf->getArch()) +
                ", this machine is " + llvm::Triple::getArchTypeName(host.getArch()));
  StageSymbols symbols;
  const std::string abiName = (entry + HELM_STAGE_ABI_SUFFIX).str();
  for (const llvm::object::ELFSymbolRef &symbol : elf->getDynamicSymbolIterators()) {
    auto name = symbol.getName();
    auto section = symbol.getSection();
    if (!name || !section || *section == elf->section_end()) {
      if (!name)
        llvm::consumeError(name.takeError());
      if (!section)
        llvm::consumeError(section.takeError());
      continue; // unnamed, or undefined here
    }
    if (*name == entry) {
      symbols.hasEntry = true;
    } else if (*name == abiName) {
      auto address = symbol.getAddress();
      auto contents = (*section)->getContents();
      if (!address || !contents) {
        if (!address)
          llvm::consumeError(address.takeError());
        if (!contents)
          llvm::consumeError(contents.takeError());
        continue;
      }
      std::array<int64_t, HELM_STAGE_ABI_FIELDS> record{};
      uint64_t offset = *address - (*section)->getAddress();
      if (*address < (*section)->getAddress() || offset > contents->size() ||
          contents->size() - offset < sizeof(record))
        continue;
      std::memcpy(record.data(), contents->data() + offset, sizeof(record));
      symbols.abi = record;
    }
  }
  return symbols;
}

std::vector<std::string> checkPackage(llvm::StringRef path, KvRowType kvType) {
  std::vector<std::string> reasons;
  // The header, the section table and the manifest first: without them nothing else is known.
  auto package = pkg::Package::open(path, pkg::Package::Verify::HeaderOnly);
  if (!package) {
    reasons.push_back(llvm::toString(package.takeError()));
    return reasons;
  }
  std::vector<std::string> badSections;
  for (const pkg::Package::Section &section : (*package)->sections())
    if (llvm::Error e = (*package)->verifySection(section)) {
      reasons.push_back(llvm::toString(std::move(e)));
      badSections.push_back(section.name);
    }
  // The same mapping, read on as helm-rt --info reads it.
  auto inspected = LoadedModel::inspect(std::move(*package));
  if (!inspected) {
    reasons.push_back(llvm::toString(inspected.takeError()));
    return reasons;
  }
  const LoadedModel &model = **inspected;
  const ModelInfo &info = model.info();
  auto prefix = [&](const llvm::Twine &message) { return (path + ": " + message).str(); };

  // The CPU: every instruction-set feature the code was compiled for.
  std::vector<std::string> missing = missingCpuFeatures(info);
  if (!missing.empty()) {
    std::string list;
    for (const std::string &f : missing)
      list += (list.empty() ? "'" : ", '") + f + "'";
    reasons.push_back(prefix("compiled for CPU '" + info.targetCpu + "' which has " + list +
                             "; this CPU lacks " + (missing.size() == 1 ? "it" : "them") +
                             " (recompile with --target=host)"));
  }

  // The stages' code: an entry point and an ABI record that agrees with the manifest, read from
  // the shared object's dynamic symbols (nothing is loaded or run).
  for (size_t index = 0; index < model.stages().size(); ++index) {
    const StageInfo &stage = model.stages()[index];
    if (llvm::is_contained(badSections, stage.codeSection))
      continue; // its checksum is already a reason; its bytes cannot be trusted
    auto symbols = readStageSymbols(model.stageCode(index), stage.entry);
    if (!symbols) {
      reasons.push_back(prefix("stage " + llvm::Twine(index) + "'s code (section '" +
                               stage.codeSection + "'): " + llvm::toString(symbols.takeError())));
      continue;
    }
    if (!symbols->hasEntry)
      reasons.push_back(prefix("stage " + llvm::Twine(index) + " has no entry point '" +
                               stage.entry + "'"));
    if (!symbols->abi) {
      reasons.push_back(prefix("stage " + llvm::Twine(index) + " has no ABI record '" +
                               stage.entry + HELM_STAGE_ABI_SUFFIX +
                               "' (compiled by another helmc; recompile the model)"));
      continue;
    }
    std::string mismatch = abiRecordMismatch(index, symbols->abi->data(), stage, info);
    if (!mismatch.empty())
      reasons.push_back(prefix(mismatch));
  }

  // The GPU stage's device.
  // (inspect() has refused a GPU stage whose target.device is neither emu nor cuda.)
  const DeviceKind device = info.gpuDevice;
  if (std::optional<std::string> why = missingDevice(device, info.targetName))
    reasons.push_back(prefix(*why));

  // Host RAM for one sequence at the context limit: the weights that live in host memory (the
  // CPU stage's; on emu the GPU stage's too, its device memory being host memory) and the KV
  // cache the host holds (the CPU stage's layers; on emu the GPU stage's; on cuda the GPU pages
  // that do not fit the target's VRAM left after its weights at the default --kv-watermark).
  const int64_t width = info.kvHeads * info.headDim;
  const uint64_t tokens = uint64_t(info.maxContext);
  uint64_t weights = 0, kv = 0;
  // The CPU stage's rows are of the type the run would use; the GPU stage's paged cache holds f32.
  const uint64_t cpuKvElement = uint64_t(kernels::dtypeBytes(hostKvType(kvType, info)));
  for (const StageInfo &stage : model.stages()) {
    uint64_t stageKv = kvCacheBytes(stage.kvLayers, width, tokens, stage.onGpu ? HELM_DEVICE_KV_ELEMENT_BYTES : cpuKvElement);
    if (!stage.onGpu || device == HELM_DEVICE_EMU) {
      weights = llvm::SaturatingAdd(weights, stage.weightBytes);
      kv = llvm::SaturatingAdd(kv, stageKv);
    } else {
      uint64_t room = uint64_t(std::max<int64_t>(
          0, info.gpuVramBytes - info.gpuReservedBytes - int64_t(stage.weightBytes)));
      uint64_t deviceKv = uint64_t(double(room) * LoadOptions().kvWatermark);
      kv = llvm::SaturatingAdd(kv, stageKv - std::min(stageKv, deviceKv));
    }
  }
  uint64_t need = llvm::SaturatingAdd(weights, kv);
  if (uint64_t available = availableHostBytes(); available && need > available)
    reasons.push_back(prefix(llvm::formatv(
        "one sequence at the context limit ({0} tokens) needs {1} of host RAM ({2} of weights, "
        "{3} of KV cache); {4} is available (MemAvailable)",
        info.maxContext, formatBytes(need), formatBytes(weights), formatBytes(kv),
        formatBytes(available))));
  return reasons;
}

} // namespace helm::rt
