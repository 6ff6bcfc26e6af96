//===- Model.cpp - load a .helmpkg ---------------------------------------------------===//
#include "runtime/core/Model.h"
#include "runtime/core/PagedKvCache.h"
#include "runtime/device/CudaDevice.h"
#include "runtime/package/Checksum.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/TargetParser/Host.h"

#include <chrono>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

namespace helm::rt {

namespace {

llvm::Error fail(llvm::StringRef file, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), (file + ": " + message).str());
}

int64_t dtypeBytes(llvm::StringRef dtype) {
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "f16" || dtype == "bf16" || dtype == "i16")
    return 2;
  if (dtype == "f64" || dtype == "i64")
    return 8;
  if (dtype == "i8" || dtype == "u8" || dtype == "i1")
    return 1;
  return 0;
}

/// Loads shared-object bytes through an anonymous memory file: nothing touches the file system.
/// The file stays open while the library is loaded: dlopen knows a library by its path, and a
/// closed descriptor's number (its /proc/self/fd path) would be reused by the next stage.
llvm::Expected<void *> loadFromMemory(llvm::StringRef file, llvm::ArrayRef<char> bytes, int &fdOut) {
  int fd = memfd_create("helm-stage", MFD_CLOEXEC);
  if (fd < 0)
    return fail(file, "cannot create an in-memory file for the stage code");
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) {
      ::close(fd);
      return fail(file, "cannot write the stage code to memory");
    }
    written += size_t(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    ::close(fd);
    return fail(file, llvm::Twine("cannot load the stage code: ") + dlerror());
  }
  fdOut = fd;
  return handle;
}

} // namespace

/// Tells the kernel this process no longer needs the pages of a read-only file mapping (they are
/// read again from the file if touched): keeps host RSS from holding weights that moved to a device.
static void dropPages(const char *begin, uint64_t bytes) {
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t from = (uintptr_t(begin) + page - 1) / page * page;
  uintptr_t to = (uintptr_t(begin) + bytes) / page * page;
  if (to > from)
    madvise(reinterpret_cast<void *>(from), to - from, MADV_DONTNEED);
}

LoadedModel::~LoadedModel() {
  for (Stage &st : stages_) {
    if (st.deviceWeights && device_)
      device_->free(st.deviceWeights);
    if (st.library)
      dlclose(st.library);
    if (st.codeFd >= 0)
      ::close(st.codeFd);
  }
}

llvm::Expected<std::unique_ptr<LoadedModel>> LoadedModel::load(llvm::StringRef path,
                                                               const LoadOptions &options) {
  auto start = std::chrono::steady_clock::now();
  (void)stageAbiSymbols();
  (void)deviceAbiSymbols();
  // GPU weights are checksummed while they stream to the device (below), so they are read once.
  auto pkgOrErr = pkg::Package::open(path, pkg::Package::Verify::AllButGpuWeights);
  if (!pkgOrErr)
    return pkgOrErr.takeError();
  auto model = std::unique_ptr<LoadedModel>(new LoadedModel());
  model->options_ = options;
  model->package_ = std::move(*pkgOrErr);
  const pkg::Package &package = *model->package_;

  // The package reader has already checked that the manifest parses to an object.
  const llvm::json::Object *root = &package.manifestObject();
  ModelInfo &info = model->info_;
  auto need = [&](const llvm::json::Object *o, llvm::StringRef key,
                  llvm::StringRef where) -> llvm::Expected<int64_t> {
    auto v = o ? o->getInteger(key) : std::nullopt;
    if (!v)
      return fail(path, "manifest: missing integer '" + where + "." + key + "'");
    return *v;
  };
  const llvm::json::Object *modelObj = root->getObject("model");
  const llvm::json::Object *config = modelObj ? modelObj->getObject("config") : nullptr;
  if (!config)
    return fail(path, "manifest: missing 'model.config'");
  if (auto s = config->getString("architecture"))
    info.architecture = s->str();
  if (auto s = config->getString("dtype"))
    info.dtype = s->str();
  if (auto s = modelObj->getString("source"))
    info.source = s->str();
  const llvm::json::Object *kv = root->getObject("kv");
  const llvm::json::Object *logits = root->getObject("logits");
  const llvm::json::Object *limits = root->getObject("limits");
  for (auto [dst, obj, key, where] :
       {std::tuple{&info.kvLayers, kv, "layers", "kv"}, std::tuple{&info.kvHeads, kv, "kv_heads", "kv"},
        std::tuple{&info.headDim, kv, "head_dim", "kv"},
        std::tuple{&info.vocab, logits, "vocab", "logits"},
        std::tuple{&info.maxContext, limits, "max_context", "limits"}}) {
    auto v = need(obj, key, where);
    if (!v)
      return v.takeError();
    if (*v < 0 || *v > (int64_t(1) << 40))
      return fail(path, llvm::Twine("manifest: '") + where + "." + key + "' out of range");
    *dst = *v;
  }
  if (info.vocab <= 0 || info.maxContext <= 0 || (info.kvLayers > 0 && (info.kvHeads <= 0 || info.headDim <= 0)))
    return fail(path, "manifest: vocabulary, context and KV sizes must be positive");
  if (const llvm::json::Object *target = root->getObject("target")) {
    if (auto s = target->getString("name"))
      info.targetName = s->str();
    if (auto s = target->getString("cpu"))
      info.targetCpu = s->str();
    // The stage uses these instruction-set features; running it elsewhere would fault.
    if (auto features = target->getString("features")) {
      llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
      llvm::SmallVector<llvm::StringRef> list;
      features->split(list, ',', -1, false);
      for (llvm::StringRef f : list) {
        if (!f.consume_front("+"))
          continue;
        auto it = host.find(f);
        if (!host.empty() && (it == host.end() || !it->second))
          return fail(path, "compiled for CPU '" + info.targetCpu + "' which has '" + f +
                                "'; this CPU lacks it (recompile with --target=host)");
      }
    }
  }

  // Stages, in pipeline order: a CPU stage, a GPU stage, or a CPU stage followed by a GPU stage.
  const llvm::json::Array *stages = root->getArray("stages");
  if (!stages || stages->empty() || stages->size() > 2)
    return fail(path, "manifest: 'stages' must list one or two stages");
  for (size_t index = 0; index < stages->size(); ++index) {
    const llvm::json::Object *stage = (*stages)[index].getAsObject();
    if (!stage)
      return fail(path, "manifest: stage " + llvm::Twine(index) + " is not an object");
    Stage loaded;
    StageInfo &si = loaded.info;
    auto device = stage->getString("device");
    auto entry = stage->getString("entry");
    auto codeSection = stage->getString("code_section");
    auto format = stage->getString("code_format");
    auto input = stage->getString("input");
    auto output = stage->getString("output");
    if (!device || !entry || !codeSection)
      return fail(path, "manifest: stage " + llvm::Twine(index) + " needs 'device', 'entry' and 'code_section'");
    if (*device != "cpu" && *device != "gpu")
      return fail(path, "manifest: stage " + llvm::Twine(index) + " has unknown device '" + *device + "'");
    // One stage on either side, or the CPU stage followed by the GPU stage: run() moves the
    // activation from the first to the second across the link.
    if (stages->size() == 2 && (*device == "cpu") != (index == 0))
      return fail(path, "manifest: a split package is a CPU stage followed by a GPU stage; stage " +
                            llvm::Twine(index) + " is on the " + *device);
    si.device = device->str();
    si.entry = entry->str();
    si.kvLayers = stage->getInteger("kv_layers").value_or(index == 0 ? info.kvLayers : 0);
    si.takesIds = !input || *input == "token_ids";
    si.returnsLogits = !output || *output == "logits";
    if (const llvm::json::Array *units = stage->getArray("units"); units && units->size() == 2) {
      si.firstUnit = (*units)[0].getAsInteger().value_or(0);
      si.lastUnit = (*units)[1].getAsInteger().value_or(0);
    }
    if (si.kvLayers < 0 || si.kvLayers > info.kvLayers)
      return fail(path, "manifest: stage " + llvm::Twine(index) + " has more KV layers than 'kv.layers'");
    // A pipeline is ids -> (activation -> activation) -> logits.
    bool last = index + 1 == stages->size();
    if (si.takesIds != (index == 0) || si.returnsLogits != last)
      return fail(path, "manifest: stage " + llvm::Twine(index) +
                            " does not fit the pipeline (the first stage takes token ids, the last "
                            "returns logits, a split hands over one activation)");
    bool gpu = si.device == "gpu";
    // "host-shared-object": host code that reads its buffers (the CPU stage; an emu GPU stage
    // compiled for the host). "device-calls": a GPU stage whose host code only launches the
    // device's kernels (helm_dev_*), the form a CUDA GPU runs.
    loaded.deviceCalls = format && *format == "device-calls";
    if (format && *format != "host-shared-object" && !(gpu && loaded.deviceCalls))
      return fail(path, "stage " + llvm::Twine(index) + " has code format '" + *format +
                            "', which this runtime cannot load");
    if (gpu) {
      const llvm::json::Object *target = root->getObject("target");
      auto kind = target ? target->getString("device") : std::nullopt;
      const llvm::json::Object *gpuObj = target ? target->getObject("gpu") : nullptr;
      const llvm::json::Object *link = target ? target->getObject("link") : nullptr;
      if (!kind || (*kind != "emu" && *kind != "cuda") || !gpuObj || !link)
        return fail(path, "package has a GPU stage for device '" +
                              (kind ? kind->str() : std::string("?")) +
                              "'; this runtime runs GPU stages on 'cuda' or 'emu' devices");
      if (*kind == "cuda" && !loaded.deviceCalls)
        return fail(path, "the package's GPU stage is host code, which a CUDA GPU cannot run "
                          "(recompile the model)");
      auto vram = gpuObj->getInteger("vram_bytes");
      auto reserved = gpuObj->getInteger("reserved_bytes");
      auto bw = link->getNumber("bw_gbs");
      auto latency = link->getNumber("latency_us");
      if (!vram || !reserved || !bw || !latency || *vram <= 0 || *reserved < 0 || !(*bw > 0) ||
          !(*latency >= 0))
        return fail(path, "manifest: 'target.gpu' needs vram_bytes > 0, reserved_bytes >= 0 and "
                          "'target.link' bw_gbs > 0, latency_us >= 0");
      if (*reserved >= *vram)
        return fail(path, llvm::formatv("the target's GPU reserve ({0} bytes) leaves none of its "
                                        "{1} bytes of VRAM for the GPU stage",
                                        *reserved, *vram)
                              .str());
      if (*kind == "cuda") {
        std::string reason;
        if (!cudaAvailable(&reason))
          return fail(path, "the package's GPU stage runs on a CUDA GPU ('" + info.targetName +
                                "'), and there is none here: " + reason +
                                " (compile with --target=emu:<name> to run it on the emulated GPU)");
        CudaOptions cuda;
        cuda.reserveBytes = uint64_t(*reserved);
        auto dev = createCudaDevice(cuda);
        if (!dev)
          return fail(path, llvm::toString(dev.takeError()));
        model->device_ = std::move(*dev);
      } else {
      EmuOptions emu;
      emu.targetName = info.targetName;
      emu.arenaBytes = options.emuArenaBytes ? options.emuArenaBytes : uint64_t(*vram - *reserved);
      emu.linkGbs = *bw;
      emu.linkLatencyUs = *latency;
      emu.throttle = options.emuThrottle;
      auto dev = createEmuDevice(emu);
      if (!dev)
        return fail(path, llvm::toString(dev.takeError()));
      model->device_ = std::move(*dev);
      }
      if (loaded.deviceCalls) {
        if (*kind == "emu") {
          model->deviceOps_ = createHostDeviceOps();
        } else {
          // The CUDA kernels the stage launches ship in the package, next to its host code.
          auto kernels = stage->getString("kernels_section");
          const pkg::Package::Section *image =
              kernels ? package.find(pkg::SectionKind::GpuCode, *kernels) : nullptr;
          if (!image)
            return fail(path, "manifest: the CUDA stage names no GPU-kernels section "
                              "('kernels_section'), or it is missing");
          auto ops = createCudaDeviceOps(*static_cast<CudaDevice *>(model->device_.get()),
                                         image->bytes);
          if (!ops)
            return fail(path, llvm::toString(ops.takeError()));
          model->deviceOps_ = std::move(*ops);
        }
      }
    }
    const pkg::Package::Section *code =
        package.find(gpu ? pkg::SectionKind::GpuCode : pkg::SectionKind::CpuCode, *codeSection);
    if (!code)
      return fail(path, "missing " + llvm::Twine(gpu ? "GPU" : "CPU") + " code section '" +
                            *codeSection + "'");
    auto handle = loadFromMemory(path, code->bytes, loaded.codeFd);
    if (!handle)
      return handle.takeError();
    loaded.library = *handle;
    loaded.fn = reinterpret_cast<StageFn>(dlsym(loaded.library, entry->str().c_str()));
    model->stages_.push_back(std::move(loaded));
    if (!model->stages_.back().fn)
      return fail(path, "stage " + llvm::Twine(index) + " has no entry point '" + *entry + "'");
  }
  if (model->stages_.size() == 2) {
    const llvm::json::Object *boundary = root->getObject("boundary");
    auto dtype = boundary ? boundary->getString("dtype") : std::nullopt;
    auto width = boundary ? boundary->getInteger("width") : std::nullopt;
    if (!dtype || !width || dtypeBytes(*dtype) == 0 || *width <= 0 || *width > (1 << 24))
      return fail(path, "manifest: a split package needs 'boundary' with a dtype and a width");
    info.boundaryDtype = dtype->str();
    info.boundaryWidth = *width;
  }
  // The runtime sizes the buffers it hands each stage from the manifest; the code's own record of
  // what it reads and writes must agree (a foreign manifest must not make the code write past them).
  for (size_t index = 0; index < model->stages_.size(); ++index) {
    const Stage &st = model->stages_[index];
    auto *record = static_cast<const int64_t *>(dlsym(st.library, (st.info.entry + "_abi").c_str()));
    if (!record || record[0] != 1)
      return fail(path, "stage " + llvm::Twine(index) + " has no ABI record '" + st.info.entry +
                            "_abi' (compiled by another helmc; recompile the model)");
    int64_t elementBytes = info.boundaryWidth ? dtypeBytes(info.boundaryDtype) : 0;
    int64_t want[3] = {st.info.takesIds ? 0 : info.boundaryWidth,
                       st.info.returnsLogits ? info.vocab : info.boundaryWidth, elementBytes};
    if (record[1] != want[0] || record[2] != want[1] || record[3] != want[2])
      return fail(path, llvm::formatv("stage {0}'s code reads {1} and writes {2} values per token "
                                      "({3}-byte activations); the manifest says {4} and {5} ({6}-byte)",
                                      index, record[1], record[2], record[3], want[0], want[1],
                                      want[2])
                            .str());
  }
  int64_t stageLayers = 0;
  for (const Stage &st : model->stages_)
    stageLayers += st.info.kvLayers;
  if (stageLayers != info.kvLayers)
    return fail(path, "manifest: the stages' KV layers add up to " + llvm::Twine(stageLayers) +
                          ", 'kv.layers' says " + llvm::Twine(info.kvLayers));

  // Tensor table: every weight must lie inside its stage's section.
  const llvm::json::Array *tensors = root->getArray("tensors");
  if (!tensors)
    return fail(path, "manifest: missing 'tensors'");
  for (const llvm::json::Value &value : *tensors) {
    const llvm::json::Object *t = value.getAsObject();
    int64_t stageIndex = t ? t->getInteger("stage").value_or(0) : 0;
    if (t && stageIndex >= 0 && size_t(stageIndex) < model->stages_.size())
      model->stages_[size_t(stageIndex)].weights.push_back(nullptr);
  }
  std::vector<const pkg::Package::Section *> weightSections(model->stages_.size(), nullptr);
  for (const llvm::json::Value &value : *tensors) {
    const llvm::json::Object *t = value.getAsObject();
    if (!t)
      return fail(path, "manifest: tensor entry is not an object");
    auto id = t->getInteger("id");
    auto offset = t->getInteger("offset");
    auto bytes = t->getInteger("bytes");
    auto section = t->getString("section");
    auto dtype = t->getString("dtype");
    auto name = t->getString("name");
    int64_t stageIndex = t->getInteger("stage").value_or(0);
    const llvm::json::Array *shape = t->getArray("shape");
    if (!id || !offset || !bytes || !section || !dtype || !shape || !name)
      return fail(path, "manifest: tensor entry needs id, name, dtype, shape, section, offset, bytes");
    if (stageIndex < 0 || size_t(stageIndex) >= model->stages_.size())
      return fail(path, "manifest: tensor '" + *name + "' belongs to a stage that does not exist");
    Stage &st = model->stages_[size_t(stageIndex)];
    if (*id < 0 || size_t(*id) >= st.weights.size() || st.weights[size_t(*id)])
      return fail(path, "manifest: tensor '" + *name + "' has a bad or duplicate id");
    int64_t elements = 1;
    for (const llvm::json::Value &d : *shape) {
      auto dim = d.getAsInteger();
      if (!dim || *dim < 0 || (*dim > 0 && elements > (int64_t(1) << 40) / *dim))
        return fail(path, "manifest: tensor '" + *name + "' has a bad shape");
      elements *= *dim;
    }
    int64_t elemBytes = dtypeBytes(*dtype);
    if (elemBytes == 0 || elements * elemBytes != *bytes)
      return fail(path, "manifest: tensor '" + *name + "' is " + std::to_string(*bytes) +
                            " bytes, its shape and dtype say " + std::to_string(elements * elemBytes));
    bool gpu = st.info.device == "gpu";
    const pkg::Package::Section *sec =
        package.find(gpu ? pkg::SectionKind::GpuWeights : pkg::SectionKind::CpuWeights, *section);
    if (!sec)
      return fail(path, "tensor '" + *name + "' is in missing section '" + *section + "'");
    if (weightSections[size_t(stageIndex)] && weightSections[size_t(stageIndex)] != sec)
      return fail(path, "manifest: the tensors of stage " + llvm::Twine(stageIndex) +
                            " lie in more than one section");
    weightSections[size_t(stageIndex)] = sec;
    if (*offset < 0 || uint64_t(*offset) > sec->size || uint64_t(*bytes) > sec->size - uint64_t(*offset))
      return fail(path, "tensor '" + *name + "' lies outside section '" + *section + "'");
    st.weights[size_t(*id)] = sec->bytes.data() + *offset;
    st.info.numTensors += 1;
    st.info.weightBytes += uint64_t(*bytes);
    info.weightBytes += *bytes;
  }
  info.numTensors = int64_t(tensors->size());

  // The GPU stage's weights move into its device once, in chunks, checksummed on the way (the
  // package was opened without reading them), so the host never holds a second copy; each copied
  // range of the package is dropped from this process.
  std::vector<const pkg::Package::Section *> streamed;
  for (size_t i = 0; i < model->stages_.size(); ++i) {
    Stage &st = model->stages_[i];
    const pkg::Package::Section *sec = weightSections[i];
    if (st.info.device != "gpu" || !sec)
      continue;
    auto block = model->device_->allocate(
        sec->size, llvm::formatv("the weights of the GPU stage (units {0}..{1})", st.info.firstUnit,
                                 st.info.lastUnit)
                       .str());
    if (!block)
      return fail(path, llvm::toString(block.takeError()) +
                            " (recompile with a split that puts fewer units on the GPU)");
    st.deviceWeights = *block;
    LinkCounters before = model->device_->counters();
    pkg::Checksum64 digest;
    constexpr uint64_t kChunk = uint64_t(64) << 20;
    for (uint64_t at = 0; at < sec->size; at += kChunk) {
      uint64_t n = std::min(kChunk, sec->size - at);
      digest.update(sec->bytes.data() + at, n);
      if (llvm::Error e = model->device_->copyToDevice(static_cast<char *>(*block) + at,
                                                       sec->bytes.data() + at, n, Stream::copy,
                                                       /*async=*/false))
        return fail(path, llvm::toString(std::move(e)));
      dropPages(sec->bytes.data() + at, n);
    }
    if (llvm::Error e = package.verifySectionDigest(*sec, digest.digest()))
      return e;
    streamed.push_back(sec);
    model->loadTraffic_ = model->device_->counters() - before;
    for (const void *&w : st.weights)
      if (w)
        w = static_cast<const char *>(*block) + (static_cast<const char *>(w) - sec->bytes.data());
  }
  // GPU-weights sections no stage streamed are checked like every other section.
  for (const pkg::Package::Section &sec : package.sections())
    if (sec.kind == pkg::SectionKind::GpuWeights && !llvm::is_contained(streamed, &sec))
      if (llvm::Error e = package.verifySection(sec))
        return e;
  for (Stage &st : model->stages_)
    model->stageInfo_.push_back(st.info);

  if (const llvm::json::Object *tok = root->getObject("tokenizer")) {
    auto section = tok->getString("section");
    const pkg::Package::Section *sec =
        section ? package.find(pkg::SectionKind::Tokenizer, *section) : nullptr;
    if (!sec)
      return fail(path, "manifest names a tokenizer section that is missing");
    model->tokenizer_.assign(sec->bytes.data(), sec->bytes.size());
    info.hasTokenizer = true;
    if (auto bos = tok->getInteger("bos_id"))
      info.bosId = int32_t(*bos);
    if (const llvm::json::Array *eos = tok->getArray("eos_ids"))
      for (const llvm::json::Value &e : *eos)
        if (auto id = e.getAsInteger())
          info.eosIds.push_back(int32_t(*id));
  }
  model->loadSeconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return model;
}

namespace {
/// Host memory the kernel says is available now (MemAvailable), or 0 when unknown.
uint64_t availableHostBytes() {
  auto text = llvm::MemoryBuffer::getFileAsStream("/proc/meminfo");
  if (!text)
    return 0;
  for (llvm::StringRef rest = (*text)->getBuffer(); !rest.empty();) {
    auto [line, tail] = rest.split('\n');
    rest = tail;
    if (!line.consume_front("MemAvailable:"))
      continue;
    uint64_t kib = 0;
    if (!line.trim().split(' ').first.getAsInteger(10, kib))
      return kib * 1024;
  }
  return 0;
}
} // namespace

int64_t LoadedModel::kvPageTokens(int32_t sequences) const {
  const Stage *gpu = nullptr;
  for (const Stage &st : stages_)
    if (st.info.device == "gpu" && st.info.kvLayers > 0)
      gpu = &st;
  if (!gpu)
    return 0;
  if (options_.kvPageTokens > 0)
    return options_.kvPageTokens;
  // Automatic: 512 positions, or half as many until the device's KV budget holds two pages (one
  // per sequence for larger batches) and the two staging buffers (a plan with KV offload leaves
  // the GPU little room beyond its weights).
  const int64_t width = info_.kvHeads * info_.headDim;
  uint64_t free = device_->capacity() - std::min(device_->capacity(), device_->bytesInUse());
  if (!(options_.kvWatermark > 0 && options_.kvWatermark <= 1))
    return 512; // refused by newSession
  uint64_t budget = uint64_t(double(free) * options_.kvWatermark);
  int64_t tokens = 512;
  for (; tokens > 16; tokens /= 2) {
    uint64_t page = PagedKvCache::pageBytes(gpu->info.kvLayers, width, tokens);
    uint64_t pages = uint64_t(std::max<int32_t>(2, sequences));
    if (pages * page + 2 * (page / uint64_t(gpu->info.kvLayers)) <= budget)
      break;
  }
  return tokens;
}

llvm::Expected<std::unique_ptr<LoadedModel::Session>>
LoadedModel::newSession(int32_t sequences, int64_t maxTokens) const {
  auto session = std::make_unique<Session>();
  session->device = device_.get();
  const int64_t width = info_.kvHeads * info_.headDim;
  if (options_.kvPageTokens < 0 || options_.kvPageTokens > (int64_t(1) << 20))
    return fail(package_->name(), "--kv-page must be 1 .. 1048576 tokens, not " +
                                      llvm::Twine(options_.kvPageTokens));
  if (!(options_.kvWatermark > 0 && options_.kvWatermark <= 1))
    return fail(package_->name(), llvm::formatv("--kv-watermark must be in (0, 1], not {0}",
                                                options_.kvWatermark)
                                      .str());
  const int64_t pageTokens = kvPageTokens(sequences);
  // KV bytes the host must hold for sequences of maxTokens: the CPU stage's layers, and the GPU
  // stage's pages that do not stay on the device.
  uint64_t hostNeed = 0, cpuNeed = 0, evictedNeed = 0;
  for (const Stage &st : stages_) {
    uint64_t perToken = uint64_t(st.info.kvLayers) * 2 * uint64_t(width) * 4;
    if (st.info.device == "gpu" && st.info.kvLayers > 0) {
      uint64_t page = PagedKvCache::pageBytes(st.info.kvLayers, width, pageTokens);
      uint64_t free = device_->capacity() - std::min(device_->capacity(), device_->bytesInUse());
      uint64_t budget = uint64_t(double(free) * options_.kvWatermark);
      uint64_t staging = 2 * (page / uint64_t(st.info.kvLayers));
      int64_t devicePages = int64_t((budget - std::min(budget, staging)) / page);
      // Every sequence's tail page (the one being written) stays on the device.
      if (devicePages < std::max<int64_t>(1, sequences))
        return fail(package_->name(),
                    llvm::formatv("the device memory left after the weights ({0}) holds {1} KV "
                                  "page(s) at --kv-watermark {2}, and {3} sequence(s) need one "
                                  "each: a page of {4} tokens for {5} layers is {6} (plus two "
                                  "staging buffers of {7}); lower --kv-page or the batch, or put "
                                  "fewer units on the GPU",
                                  formatBytes(free), devicePages, options_.kvWatermark, sequences,
                                  pageTokens, st.info.kvLayers, formatBytes(page),
                                  formatBytes(staging / 2))
                        .str());
      if (maxTokens > 0) {
        int64_t pages = int64_t(sequences) * ((maxTokens + pageTokens - 1) / pageTokens);
        if (pages > devicePages) {
          if (!options_.kvOffload)
            return fail(package_->name(),
                        llvm::formatv("{0} sequence(s) of {1} tokens need {2} KV pages of {3} "
                                      "tokens on the device, which holds {4} ({5} each) with "
                                      "KV offload off; use --kv-offload=on, fewer tokens or a "
                                      "larger device",
                                      sequences, maxTokens, pages, pageTokens, devicePages,
                                      formatBytes(page))
                            .str());
          evictedNeed += uint64_t(pages - devicePages) * page;
        }
      }
      PagedKvOptions kv;
      kv.pageTokens = pageTokens;
      kv.devicePages = devicePages;
      kv.offload = options_.kvOffload;
      auto cache = PagedKvCache::create(*device_, st.info.kvLayers, sequences, width, kv);
      if (!cache)
        return fail(package_->name(), llvm::toString(cache.takeError()));
      session->caches.push_back(std::move(*cache));
    } else {
      // The CPU stage's KV in host memory (a GPU stage without attention layers has none).
      if (st.info.device == "cpu")
        cpuNeed += perToken * uint64_t(std::max<int64_t>(maxTokens, 0)) * uint64_t(sequences);
      session->caches.push_back(
          std::make_unique<ContiguousKvCache>(st.info.kvLayers, sequences, width));
    }
  }
  hostNeed = cpuNeed + evictedNeed;
  // A context the host RAM cannot hold is refused now, not by the OOM killer mid-generation.
  if (uint64_t available = availableHostBytes(); available && hostNeed > available)
    return fail(package_->name(),
                llvm::formatv("{0} sequence(s) of {1} tokens need {2} of KV cache in host RAM "
                              "({3} for the CPU stage's layers, {4} of GPU pages evicted to the "
                              "host); {5} is available",
                              sequences, maxTokens, formatBytes(hostNeed), formatBytes(cpuNeed),
                              formatBytes(evictedNeed), formatBytes(available))
                    .str());
  return session;
}

llvm::Error LoadedModel::run(Session &session, const int32_t *sequence, const int64_t *past,
                             const int64_t *ids, const int64_t *positions, float *logits,
                             int64_t batch, int64_t seq) const {
  auto callStage = [&](size_t index, const void *input, void *output) -> llvm::Error {
    const Stage &st = stages_[index];
    StageContext ctx;
    ctx.weights = st.weights.data();
    ctx.numWeights = int64_t(st.weights.size());
    ctx.kv = session.caches[index].get();
    ctx.sequence = sequence;
    ctx.past = past;
    const int64_t *stagePositions = positions;
    if (st.deviceCalls) {
      ctx.ops = deviceOps_.get();
      auto onDevice = deviceOps_->stagePositions(positions, batch * seq);
      if (!onDevice)
        return onDevice.takeError();
      stagePositions = *onDevice;
    }
    st.fn(&ctx, input, stagePositions, output, batch, seq);
    if (ctx.ops)
      if (llvm::Error e = ctx.ops->synchronize()) {
        if (ctx.error)
          llvm::consumeError(std::move(e));
        else
          return e;
      }
    if (ctx.error)
      return llvm::createStringError(llvm::inconvertibleErrorCode(), ctx.error);
    return llvm::Error::success();
  };
  // All on the CPU.
  if (!device_) {
    if (llvm::Error e = callStage(0, ids, logits))
      return fail(package_->name(), llvm::toString(std::move(e)));
    return llvm::Error::success();
  }

  // The thesis' decode step: CPU stage -> one transfer -> device stage -> logits back. Positions
  // and cached lengths travel as launch parameters of the device stage, not as link copies.
  bool hasCpuStage = stages_.size() == 2;
  uint64_t inputBytes = hasCpuStage ? uint64_t(batch * seq * info_.boundaryWidth) *
                                          uint64_t(dtypeBytes(info_.boundaryDtype))
                                    : uint64_t(batch * seq) * sizeof(int64_t);
  uint64_t logitsBytes = uint64_t(batch * info_.vocab) * sizeof(float);
  if (llvm::Error e = session.ensure(session.deviceInput, session.deviceInputBytes, inputBytes,
                                     false, "the boundary activation"))
    return fail(package_->name(), llvm::toString(std::move(e)));
  if (llvm::Error e = session.ensure(session.deviceLogits, session.deviceLogitsBytes, logitsBytes,
                                     false, "the logits"))
    return fail(package_->name(), llvm::toString(std::move(e)));
  const void *hostInput = ids;
  if (hasCpuStage) {
    if (llvm::Error e = session.ensure(session.hostActivation, session.hostActivationBytes,
                                       inputBytes, true, "the boundary activation"))
      return fail(package_->name(), llvm::toString(std::move(e)));
    if (llvm::Error e = callStage(0, ids, session.hostActivation))
      return fail(package_->name(), llvm::toString(std::move(e)));
    hostInput = session.hostActivation;
  }
  if (llvm::Error e = device_->copyToDevice(session.deviceInput, hostInput, inputBytes,
                                            Stream::compute, /*async=*/true))
    return fail(package_->name(), llvm::toString(std::move(e)));
  size_t last = stages_.size() - 1;
  if (llvm::Error e = device_->runHostStage(
          [&] { return callStage(last, session.deviceInput, session.deviceLogits); }))
    return fail(package_->name(), llvm::toString(std::move(e)));
  if (llvm::Error e = device_->copyToHost(logits, session.deviceLogits, logitsBytes,
                                          Stream::compute, /*async=*/false))
    return fail(package_->name(), llvm::toString(std::move(e)));
  return llvm::Error::success();
}

} // namespace helm::rt
