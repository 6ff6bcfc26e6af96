//===- Model.cpp - load a .helmpkg, size its sessions, run its stages -------------------===//
//
// LoadedModel::load is a list of steps (LoadedModel::Loader below), each reading one part of the
// manifest (contract/manifest_schema.h names every key) and failing with one line that names the
// package file.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Model.h"

#include "contract/helm_contract.h"
#include "contract/manifest_schema.h"
#include "runtime/device/Backend.h"
#include "runtime/kv/PagedKvCache.h"
#include "contract/format/Checksum.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
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

/// Bytes per element of a manifest dtype: the float types of the schema, and the element names
/// helmc gives other tensors (f64, iN, uN).
int64_t dtypeBytes(llvm::StringRef dtype) {
  if (dtype == HELM_MANIFEST_DTYPE_F32 || dtype == "i32")
    return 4;
  if (dtype == HELM_MANIFEST_DTYPE_F16 || dtype == HELM_MANIFEST_DTYPE_BF16 || dtype == "i16")
    return 2;
  if (dtype == "f64" || dtype == "i64")
    return 8;
  if (dtype == "i8" || dtype == "u8" || dtype == "i1")
    return 1;
  return 0;
}

/// The helm_dtype code of a block-format manifest dtype ("q8_0", ...), or 0.
int32_t blockDtypeCode(llvm::StringRef dtype) {
#define HELM_BLOCK_CODE_OF_NAME(NAME, CODE, name, ggml, weights, bytes, quantizable)                                           \
  if (dtype == name)                                                                                             \
    return CODE;
  HELM_BLOCK_FORMATS(HELM_BLOCK_CODE_OF_NAME)
#undef HELM_BLOCK_CODE_OF_NAME
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

/// The steps of LoadedModel::load over one opened package, in the order load runs them. Each
/// fills part of the model; the first failure ends the load (the model, with whatever devices and
/// libraries it holds by then, is destroyed).
class LoadedModel::Loader {
public:
  Loader(llvm::StringRef path, LoadedModel &model, bool inspectOnly = false)
      : path(path), model(model), package(*model.package_), inspectOnly(inspectOnly),
        // The package reader has already checked that the manifest parses to an object.
        root(model.package_->manifestObject()), info(model.info_) {}

  /// model.*, kv.*, logits.*, limits.*, target.name and target.cpu into ModelInfo.
  llvm::Error readModelInfo();
  /// target.features: every instruction-set feature the stage code uses is on this CPU.
  llvm::Error checkCpuFeatures();
  /// stages[]: each stage's description, its backend (a GPU stage's device and device ops) and
  /// its code, loaded and its entry point found.
  llvm::Error readStages();
  /// boundary.*: the activation a split package moves between its stages.
  llvm::Error readBoundary();
  /// Each stage's `<entry>_abi` record agrees with the buffers the manifest sizes.
  llvm::Error checkAbiRecords();
  /// The stages' kv_layers add up to kv.layers.
  llvm::Error checkKvLayers();
  /// tensors[]: each weight's address inside its stage's weights section.
  llvm::Error bindTensors();
  /// The GPU stage's weights into its device (checksummed on the way); every other GPU-weights
  /// section verified.
  llvm::Error streamGpuWeights();
  /// The stages' descriptions (what stages() returns), once their tensors are bound.
  llvm::Error describeStages();

  using Step = llvm::Error (Loader::*)();
  /// Runs `steps` in order (the first failure ends the run), then records the time since `start`
  /// as the model's load time.
  llvm::Error run(std::chrono::steady_clock::time_point start, std::initializer_list<Step> steps) {
    for (Step step : steps)
      if (llvm::Error e = (this->*step)())
        return e;
    model.loadSeconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return llvm::Error::success();
  }
  /// tokenizer.*: the tokenizer.json section, BOS and EOS ids.
  llvm::Error loadTokenizer();

private:
  /// One stage's manifest entry (stage `index` of `count`) into `loaded.info`.
  llvm::Error readStage(const llvm::json::Object &stage, size_t index, size_t count,
                        Stage &loaded);
  /// A GPU stage's target (target.device, target.gpu, target.link) read and checked into `kind`
  /// and ModelInfo.
  llvm::Error readStageTarget(const Stage &loaded, DeviceKind &kind);
  /// A GPU stage's backend (the device readStageTarget named) into the model's device_ and
  /// deviceOps_.
  llvm::Error createStageBackend(const llvm::json::Object &stage, Stage &loaded, DeviceKind kind);
  /// The stage's code section loaded from memory and its entry point looked up; the stage joins
  /// the model's stages.
  llvm::Error loadStageCode(const llvm::json::Object &stage, size_t index, Stage loaded);

  llvm::Error fail(const llvm::Twine &message) const { return rt::fail(path, message); }

  llvm::StringRef path;
  LoadedModel &model;
  const pkg::Package &package;
  /// inspect(): no device, no code loaded.
  bool inspectOnly;
  const llvm::json::Object &root;
  ModelInfo &info;
  /// The section holding each stage's tensors (bindTensors), null for a stage without any.
  std::vector<const pkg::Package::Section *> weightSections;
};

llvm::Expected<std::unique_ptr<LoadedModel>> LoadedModel::load(llvm::StringRef path,
                                                               const LoadOptions &options) {
  auto start = std::chrono::steady_clock::now();
  (void)stageAbiSymbols();
  (void)deviceAbiSymbols();
  // GPU weights are checksummed while they stream to the device (streamGpuWeights), so they are
  // read once.
  auto pkgOrErr = pkg::Package::open(path, pkg::Package::Verify::AllButGpuWeights);
  if (!pkgOrErr)
    return pkgOrErr.takeError();
  auto model = std::unique_ptr<LoadedModel>(new LoadedModel());
  model->options_ = options;
  model->package_ = std::move(*pkgOrErr);

  Loader loader(path, *model);
  if (llvm::Error e = loader.run(start, {&Loader::readModelInfo, &Loader::checkCpuFeatures,
                                         &Loader::readStages, &Loader::readBoundary,
                                         &Loader::checkAbiRecords, &Loader::checkKvLayers,
                                         &Loader::bindTensors, &Loader::streamGpuWeights,
                                         &Loader::describeStages, &Loader::loadTokenizer}))
    return std::move(e);
  return model;
}

llvm::Expected<std::unique_ptr<LoadedModel>> LoadedModel::inspect(llvm::StringRef path,
                                                                  pkg::Package::Verify verify) {
  auto pkgOrErr = pkg::Package::open(path, verify);
  if (!pkgOrErr)
    return pkgOrErr.takeError();
  return inspect(std::move(*pkgOrErr));
}

llvm::Expected<std::unique_ptr<LoadedModel>>
LoadedModel::inspect(std::unique_ptr<pkg::Package> package) {
  auto start = std::chrono::steady_clock::now();
  std::string path = package->name().str();
  auto model = std::unique_ptr<LoadedModel>(new LoadedModel());
  model->inspectOnly_ = true;
  model->package_ = std::move(package);
  Loader loader(path, *model, /*inspectOnly=*/true);
  if (llvm::Error e = loader.run(start, {&Loader::readModelInfo, &Loader::readStages,
                                         &Loader::readBoundary, &Loader::checkKvLayers,
                                         &Loader::bindTensors, &Loader::describeStages,
                                         &Loader::loadTokenizer}))
    return std::move(e);
  return model;
}

llvm::Error LoadedModel::Loader::describeStages() {
  for (Stage &st : model.stages_)
    model.stageInfo_.push_back(st.info);
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::readModelInfo() {
  auto need = [&](const llvm::json::Object *o, llvm::StringRef key,
                  llvm::StringRef where) -> llvm::Expected<int64_t> {
    auto v = o ? o->getInteger(key) : std::nullopt;
    if (!v)
      return fail("manifest: missing integer '" + where + "." + key + "'");
    return *v;
  };
  const llvm::json::Object *modelObj = root.getObject(HELM_MANIFEST_MODEL);
  const llvm::json::Object *config =
      modelObj ? modelObj->getObject(HELM_MANIFEST_MODEL_CONFIG) : nullptr;
  if (!config)
    return fail("manifest: missing 'model.config'");
  if (auto s = config->getString(HELM_MANIFEST_CONFIG_ARCHITECTURE))
    info.architecture = s->str();
  if (auto s = config->getString(HELM_MANIFEST_CONFIG_DTYPE))
    info.dtype = s->str();
  if (auto s = modelObj->getString(HELM_MANIFEST_MODEL_SOURCE))
    info.source = s->str();
  const llvm::json::Object *kv = root.getObject(HELM_MANIFEST_KV);
  const llvm::json::Object *logits = root.getObject(HELM_MANIFEST_LOGITS);
  const llvm::json::Object *limits = root.getObject(HELM_MANIFEST_LIMITS);
  for (auto [dst, obj, key, where] :
       {std::tuple{&info.kvLayers, kv, HELM_MANIFEST_KV_LAYERS, HELM_MANIFEST_KV},
        std::tuple{&info.kvHeads, kv, HELM_MANIFEST_KV_HEADS, HELM_MANIFEST_KV},
        std::tuple{&info.headDim, kv, HELM_MANIFEST_KV_HEAD_DIM, HELM_MANIFEST_KV},
        std::tuple{&info.vocab, logits, HELM_MANIFEST_LOGITS_VOCAB, HELM_MANIFEST_LOGITS},
        std::tuple{&info.maxContext, limits, HELM_MANIFEST_LIMITS_MAX_CONTEXT,
                   HELM_MANIFEST_LIMITS}}) {
    auto v = need(obj, key, where);
    if (!v)
      return v.takeError();
    if (*v < 0 || *v > (int64_t(1) << 40))
      return fail(llvm::Twine("manifest: '") + where + "." + key + "' out of range");
    *dst = *v;
  }
  if (info.vocab <= 0 || info.maxContext <= 0 ||
      (info.kvLayers > 0 && (info.kvHeads <= 0 || info.headDim <= 0)))
    return fail("manifest: vocabulary, context and KV sizes must be positive");
  if (const llvm::json::Value *hostDtype = kv->get(HELM_MANIFEST_KV_HOST_DTYPE)) {
    auto s = hostDtype->getAsString();
    if (!s || (*s != "f32" && *s != "f16"))
      return fail("manifest: 'kv.host_dtype' must be \"f32\" or \"f16\"");
    info.kvHostDtype = s->str();
  }
  if (const llvm::json::Object *target = root.getObject(HELM_MANIFEST_TARGET)) {
    if (auto s = target->getString(HELM_MANIFEST_TARGET_NAME))
      info.targetName = s->str();
    if (auto s = target->getString(HELM_MANIFEST_TARGET_CPU))
      info.targetCpu = s->str();
    if (auto s = target->getString(HELM_MANIFEST_TARGET_FEATURES))
      info.targetFeatures = s->str();
  }
  return llvm::Error::success();
}

std::vector<std::string> missingCpuFeatures(const ModelInfo &info) {
  std::vector<std::string> missing;
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  if (host.empty())
    return missing; // unknown: the load goes ahead, as it always has
  llvm::SmallVector<llvm::StringRef> list;
  llvm::StringRef(info.targetFeatures).split(list, ',', -1, false);
  for (llvm::StringRef f : list) {
    if (!f.consume_front("+"))
      continue;
    auto it = host.find(f);
    if (it == host.end() || !it->second)
      missing.push_back(f.str());
  }
  return missing;
}

llvm::Error LoadedModel::Loader::checkCpuFeatures() {
  // The stage uses these instruction-set features; running it elsewhere would fault.
  std::vector<std::string> missing = missingCpuFeatures(info);
  if (!missing.empty())
    return fail("compiled for CPU '" + info.targetCpu + "' which has '" + missing.front() +
                "'; this CPU lacks it (recompile with --target=host)");
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::readStages() {
  // Stages, in pipeline order: a CPU stage, a GPU stage, or a CPU stage followed by a GPU stage.
  const llvm::json::Array *stages = root.getArray(HELM_MANIFEST_STAGES);
  if (!stages || stages->empty() || stages->size() > 2)
    return fail("manifest: 'stages' must list one or two stages");
  for (size_t index = 0; index < stages->size(); ++index) {
    const llvm::json::Object *stage = (*stages)[index].getAsObject();
    if (!stage)
      return fail("manifest: stage " + llvm::Twine(index) + " is not an object");
    Stage loaded;
    if (llvm::Error e = readStage(*stage, index, stages->size(), loaded))
      return e;
    if (loaded.info.onGpu) {
      DeviceKind kind = HELM_DEVICE_CPU;
      if (llvm::Error e = readStageTarget(loaded, kind))
        return e;
      if (!inspectOnly)
        if (llvm::Error e = createStageBackend(*stage, loaded, kind))
          return e;
    }
    if (llvm::Error e = loadStageCode(*stage, index, std::move(loaded)))
      return e;
  }
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::readStage(const llvm::json::Object &stage, size_t index,
                                           size_t count, Stage &loaded) {
  StageInfo &si = loaded.info;
  auto device = stage.getString(HELM_MANIFEST_STAGE_DEVICE);
  auto entry = stage.getString(HELM_MANIFEST_STAGE_ENTRY);
  auto codeSection = stage.getString(HELM_MANIFEST_STAGE_CODE_SECTION);
  auto format = stage.getString(HELM_MANIFEST_STAGE_CODE_FORMAT);
  auto input = stage.getString(HELM_MANIFEST_STAGE_INPUT);
  auto output = stage.getString(HELM_MANIFEST_STAGE_OUTPUT);
  if (!device || !entry || !codeSection)
    return fail("manifest: stage " + llvm::Twine(index) +
                " needs 'device', 'entry' and 'code_section'");
  const char *cpu = helm_stage_side_name(HELM_STAGE_CPU), *gpu = helm_stage_side_name(HELM_STAGE_GPU);
  if (*device != cpu && *device != gpu)
    return fail("manifest: stage " + llvm::Twine(index) + " has unknown device '" + *device + "'");
  // One stage on either side, or the CPU stage followed by the GPU stage: run() moves the
  // activation from the first to the second across the link.
  if (count == 2 && (*device == cpu) != (index == 0))
    return fail("manifest: a split package is a CPU stage followed by a GPU stage; stage " +
                llvm::Twine(index) + " is on the " + *device);
  si.onGpu = *device == gpu;
  si.entry = entry->str();
  si.kvLayers =
      stage.getInteger(HELM_MANIFEST_STAGE_KV_LAYERS).value_or(index == 0 ? info.kvLayers : 0);
  si.takesIds = !input || *input == HELM_MANIFEST_IO_TOKEN_IDS;
  si.returnsLogits = !output || *output == HELM_MANIFEST_IO_LOGITS;
  if (const llvm::json::Array *units = stage.getArray(HELM_MANIFEST_STAGE_UNITS);
      units && units->size() == 2) {
    si.firstUnit = (*units)[0].getAsInteger().value_or(0);
    si.lastUnit = (*units)[1].getAsInteger().value_or(0);
  }
  if (si.kvLayers < 0 || si.kvLayers > info.kvLayers)
    return fail("manifest: stage " + llvm::Twine(index) + " has more KV layers than 'kv.layers'");
  // A pipeline is ids -> (activation -> activation) -> logits.
  bool last = index + 1 == count;
  if (si.takesIds != (index == 0) || si.returnsLogits != last)
    return fail("manifest: stage " + llvm::Twine(index) +
                " does not fit the pipeline (the first stage takes token ids, the last "
                "returns logits, a split hands over one activation)");
  // "host-shared-object": host code that reads its buffers (the CPU stage; an emu GPU stage
  // compiled for the host). "device-calls": a GPU stage whose host code only launches the
  // device's kernels (helm_dev_*), the form a CUDA GPU runs.
  loaded.deviceCalls = format && *format == HELM_MANIFEST_CODE_DEVICE_CALLS;
  si.deviceCalls = loaded.deviceCalls;
  si.codeSection = codeSection->str();
  if (format && *format != HELM_MANIFEST_CODE_HOST_SHARED_OBJECT &&
      !(si.onGpu && loaded.deviceCalls))
    return fail("stage " + llvm::Twine(index) + " has code format '" + *format +
                "', which this runtime cannot load");
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::readStageTarget(const Stage &loaded, DeviceKind &kindOut) {
  const llvm::json::Object *target = root.getObject(HELM_MANIFEST_TARGET);
  auto name = target ? target->getString(HELM_MANIFEST_TARGET_DEVICE) : std::nullopt;
  std::optional<DeviceKind> kind = name ? parseTargetDevice(*name) : std::nullopt;
  const llvm::json::Object *gpuObj = target ? target->getObject(HELM_MANIFEST_TARGET_GPU) : nullptr;
  const llvm::json::Object *link = target ? target->getObject(HELM_MANIFEST_TARGET_LINK) : nullptr;
  if (!kind || !gpuObj || !link)
    return fail("package has a GPU stage for device '" + (name ? name->str() : std::string("?")) +
                "'; this runtime runs GPU stages on 'cuda' or 'emu' devices");
  if (*kind == HELM_DEVICE_CUDA && !loaded.deviceCalls)
    return fail("the package's GPU stage is host code, which a CUDA GPU cannot run "
                "(recompile the model)");
  auto vram = gpuObj->getInteger(HELM_MANIFEST_GPU_VRAM_BYTES);
  auto reserved = gpuObj->getInteger(HELM_MANIFEST_GPU_RESERVED_BYTES);
  auto bw = link->getNumber(HELM_MANIFEST_LINK_BW_GBS);
  auto latency = link->getNumber(HELM_MANIFEST_LINK_LATENCY_US);
  if (!vram || !reserved || !bw || !latency || *vram <= 0 || *reserved < 0 || !(*bw > 0) ||
      !(*latency >= 0))
    return fail("manifest: 'target.gpu' needs vram_bytes > 0, reserved_bytes >= 0 and "
                "'target.link' bw_gbs > 0, latency_us >= 0");
  if (*reserved >= *vram)
    return fail(llvm::formatv("the target's GPU reserve ({0} bytes) leaves none of its "
                              "{1} bytes of VRAM for the GPU stage",
                              *reserved, *vram)
                    .str());
  kindOut = *kind;
  info.gpuDevice = *kind;
  info.gpuVramBytes = *vram;
  info.gpuReservedBytes = *reserved;
  info.linkGbs = *bw;
  info.linkLatencyUs = *latency;
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::createStageBackend(const llvm::json::Object &stage,
                                                    Stage &loaded, DeviceKind kind) {
  const LoadOptions &options = model.options_;
  BackendOptions backend;
  backend.targetName = info.targetName;
  backend.deviceOps = loaded.deviceCalls;
  backend.vramBytes = uint64_t(info.gpuVramBytes);
  backend.reservedBytes = uint64_t(info.gpuReservedBytes);
  backend.memoryBytes = options.gpuMemoryBytes;
  backend.linkGbs = info.linkGbs;
  backend.linkLatencyUs = info.linkLatencyUs;
  backend.throttleLink = options.emuThrottle;
  // The CUDA kernels a kernel-form stage launches ship in the package, next to its host code.
  auto cudaKernels = [&]() -> llvm::Expected<llvm::ArrayRef<char>> {
    auto kernels = stage.getString(HELM_MANIFEST_STAGE_KERNELS_SECTION);
    const pkg::Package::Section *image =
        kernels ? package.find(pkg::SectionKind::GpuCode, *kernels) : nullptr;
    if (!image)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "manifest: the CUDA stage names no GPU-kernels section "
                                     "('kernels_section'), or it is missing");
    return image->bytes;
  };
  auto created = rt::createStageBackend(kind, backend, cudaKernels);
  if (!created)
    return fail(llvm::toString(created.takeError()));
  model.device_ = std::move(created->device);
  model.deviceOps_ = std::move(created->ops);
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::loadStageCode(const llvm::json::Object &stage, size_t index,
                                               Stage loaded) {
  llvm::StringRef codeSection = *stage.getString(HELM_MANIFEST_STAGE_CODE_SECTION);
  const pkg::Package::Section *code = package.find(
      loaded.info.onGpu ? pkg::SectionKind::GpuCode : pkg::SectionKind::CpuCode, codeSection);
  if (!code)
    return fail("missing " + llvm::Twine(loaded.info.onGpu ? "GPU" : "CPU") + " code section '" +
                codeSection + "'");
  loaded.code = code->bytes;
  if (inspectOnly) {
    model.stages_.push_back(std::move(loaded));
    return llvm::Error::success();
  }
  auto handle = loadFromMemory(path, code->bytes, loaded.codeFd);
  if (!handle)
    return handle.takeError();
  loaded.library = *handle;
  loaded.fn = reinterpret_cast<StageFn>(dlsym(loaded.library, loaded.info.entry.c_str()));
  // The model owns the library from here (its destructor closes it), found entry point or not.
  model.stages_.push_back(std::move(loaded));
  if (!model.stages_.back().fn)
    return fail("stage " + llvm::Twine(index) + " has no entry point '" +
                model.stages_.back().info.entry + "'");
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::readBoundary() {
  if (model.stages_.size() != 2)
    return llvm::Error::success();
  const llvm::json::Object *boundary = root.getObject(HELM_MANIFEST_BOUNDARY);
  auto dtype = boundary ? boundary->getString(HELM_MANIFEST_BOUNDARY_DTYPE) : std::nullopt;
  auto width = boundary ? boundary->getInteger(HELM_MANIFEST_BOUNDARY_WIDTH) : std::nullopt;
  if (!dtype || !width || dtypeBytes(*dtype) == 0 || *width <= 0 || *width > (1 << 24))
    return fail("manifest: a split package needs 'boundary' with a dtype and a width");
  info.boundaryDtype = dtype->str();
  info.boundaryWidth = *width;
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::checkAbiRecords() {
  // The runtime sizes the buffers it hands each stage from the manifest; the code's own record of
  // what it reads and writes must agree (a foreign manifest must not make the code write past them).
  for (size_t index = 0; index < model.stages_.size(); ++index) {
    const Stage &st = model.stages_[index];
    std::string symbol = st.info.entry + HELM_STAGE_ABI_SUFFIX;
    auto *record = static_cast<const int64_t *>(dlsym(st.library, symbol.c_str()));
    if (!record || record[HELM_STAGE_ABI_VERSION] != HELM_STAGE_ABI_RECORD_VERSION)
      return fail("stage " + llvm::Twine(index) + " has no ABI record '" + symbol +
                  "' (compiled by another helmc; recompile the model)");
    std::string mismatch = abiRecordMismatch(index, record, st.info, info);
    if (!mismatch.empty())
      return fail(mismatch);
  }
  return llvm::Error::success();
}

std::string abiRecordMismatch(size_t index, const int64_t *record, const StageInfo &stage,
                              const ModelInfo &info) {
  if (record[HELM_STAGE_ABI_VERSION] != HELM_STAGE_ABI_RECORD_VERSION)
    return llvm::formatv("stage {0}'s ABI record is version {1}, this runtime reads version {2} "
                         "(compiled by another helmc; recompile the model)",
                         index, record[HELM_STAGE_ABI_VERSION], HELM_STAGE_ABI_RECORD_VERSION)
        .str();
  int64_t elementBytes = info.boundaryWidth ? dtypeBytes(info.boundaryDtype) : 0;
  int64_t want[3] = {stage.takesIds ? 0 : info.boundaryWidth,
                     stage.returnsLogits ? info.vocab : info.boundaryWidth, elementBytes};
  int64_t inputWidth = record[HELM_STAGE_ABI_INPUT_WIDTH];
  int64_t outputWidth = record[HELM_STAGE_ABI_OUTPUT_WIDTH];
  int64_t recordBytes = record[HELM_STAGE_ABI_ELEMENT_BYTES];
  if (inputWidth != want[0] || outputWidth != want[1] || recordBytes != want[2])
    return llvm::formatv("stage {0}'s code reads {1} and writes {2} values per token "
                         "({3}-byte activations); the manifest says {4} and {5} ({6}-byte)",
                         index, inputWidth, outputWidth, recordBytes, want[0], want[1], want[2])
        .str();
  return "";
}

llvm::Error LoadedModel::Loader::checkKvLayers() {
  int64_t stageLayers = 0;
  for (const Stage &st : model.stages_)
    stageLayers += st.info.kvLayers;
  if (stageLayers != info.kvLayers)
    return fail("manifest: the stages' KV layers add up to " + llvm::Twine(stageLayers) +
                ", 'kv.layers' says " + llvm::Twine(info.kvLayers));
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::bindTensors() {
  // Tensor table: every weight must lie inside its stage's section.
  const llvm::json::Array *tensors = root.getArray(HELM_MANIFEST_TENSORS);
  if (!tensors)
    return fail("manifest: missing 'tensors'");
  std::vector<Stage> &stages = model.stages_;
  for (const llvm::json::Value &value : *tensors) {
    const llvm::json::Object *t = value.getAsObject();
    int64_t stageIndex = t ? t->getInteger(HELM_MANIFEST_TENSOR_STAGE).value_or(0) : 0;
    if (t && stageIndex >= 0 && size_t(stageIndex) < stages.size())
      stages[size_t(stageIndex)].weights.push_back(nullptr);
  }
  weightSections.assign(stages.size(), nullptr);
  for (const llvm::json::Value &value : *tensors) {
    const llvm::json::Object *t = value.getAsObject();
    if (!t)
      return fail("manifest: tensor entry is not an object");
    auto id = t->getInteger(HELM_MANIFEST_TENSOR_ID);
    auto offset = t->getInteger(HELM_MANIFEST_TENSOR_OFFSET);
    auto bytes = t->getInteger(HELM_MANIFEST_TENSOR_BYTES);
    auto section = t->getString(HELM_MANIFEST_TENSOR_SECTION);
    auto dtype = t->getString(HELM_MANIFEST_TENSOR_DTYPE);
    auto name = t->getString(HELM_MANIFEST_TENSOR_NAME);
    int64_t stageIndex = t->getInteger(HELM_MANIFEST_TENSOR_STAGE).value_or(0);
    const llvm::json::Array *shape = t->getArray(HELM_MANIFEST_TENSOR_SHAPE);
    if (!id || !offset || !bytes || !section || !dtype || !shape || !name)
      return fail("manifest: tensor entry needs id, name, dtype, shape, section, offset, bytes");
    if (stageIndex < 0 || size_t(stageIndex) >= stages.size())
      return fail("manifest: tensor '" + *name + "' belongs to a stage that does not exist");
    Stage &st = stages[size_t(stageIndex)];
    if (*id < 0 || size_t(*id) >= st.weights.size() || st.weights[size_t(*id)])
      return fail("manifest: tensor '" + *name + "' has a bad or duplicate id");
    int64_t elements = 1;
    for (const llvm::json::Value &d : *shape) {
      auto dim = d.getAsInteger();
      if (!dim || *dim < 0 || (*dim > 0 && elements > (int64_t(1) << 40) / *dim))
        return fail("manifest: tensor '" + *name + "' has a bad shape");
      elements *= *dim;
    }
    // A weight in blocks is [rows, row length]: rows of whole blocks (docs/package-format.md).
    int64_t expected = elements * dtypeBytes(*dtype);
    if (int32_t block = blockDtypeCode(*dtype)) {
      int64_t columns = shape->size() == 2 ? shape->back().getAsInteger().value_or(0) : 0;
      if (columns <= 0 || columns % helm_dtype_block_weights(block) != 0)
        return fail("manifest: tensor '" + *name + "' of " + *dtype + " needs a [rows, columns] shape "
                    "with columns a multiple of " + llvm::Twine(helm_dtype_block_weights(block)));
      expected = elements / helm_dtype_block_weights(block) * helm_dtype_block_bytes(block);
    }
    if (expected == 0 || expected != *bytes)
      return fail("manifest: tensor '" + *name + "' is " + std::to_string(*bytes) +
                  " bytes, its shape and dtype say " + std::to_string(expected));
    const pkg::Package::Section *sec = package.find(
        st.info.onGpu ? pkg::SectionKind::GpuWeights : pkg::SectionKind::CpuWeights, *section);
    if (!sec)
      return fail("tensor '" + *name + "' is in missing section '" + *section + "'");
    if (weightSections[size_t(stageIndex)] && weightSections[size_t(stageIndex)] != sec)
      return fail("manifest: the tensors of stage " + llvm::Twine(stageIndex) +
                  " lie in more than one section");
    weightSections[size_t(stageIndex)] = sec;
    if (*offset < 0 || uint64_t(*offset) > sec->size ||
        uint64_t(*bytes) > sec->size - uint64_t(*offset))
      return fail("tensor '" + *name + "' lies outside section '" + *section + "'");
    st.weights[size_t(*id)] = sec->bytes.data() + *offset;
    st.info.numTensors += 1;
    st.info.weightBytes += uint64_t(*bytes);
    info.weightBytes += *bytes;
    info.weightElements += elements;
    WeightDtypeCount &count = info.weightsByDtype[dtype->str()];
    count.tensors += 1;
    count.bytes += *bytes;
    WeightTensorInfo &listed = info.tensors.emplace_back();
    listed.name = name->str();
    listed.onnxName = t->getString(HELM_MANIFEST_TENSOR_ONNX_NAME).value_or("").str();
    listed.dtype = dtype->str();
    for (const llvm::json::Value &d : *shape)
      listed.shape.push_back(*d.getAsInteger());
    listed.stage = stageIndex;
    listed.bytes = *bytes;
    listed.elements = elements;
  }
  info.numTensors = int64_t(tensors->size());
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::streamGpuWeights() {
  // The GPU stage's weights move into its device once, in chunks, checksummed on the way (the
  // package was opened without reading them), so the host never holds a second copy; each copied
  // range of the package is dropped from this process.
  std::vector<const pkg::Package::Section *> streamed;
  Device *device = model.device_.get();
  for (size_t i = 0; i < model.stages_.size(); ++i) {
    Stage &st = model.stages_[i];
    const pkg::Package::Section *sec = weightSections[i];
    if (!st.info.onGpu || !sec)
      continue;
    auto block = device->allocate(
        sec->size, llvm::formatv("the weights of the GPU stage (units {0}..{1})", st.info.firstUnit,
                                 st.info.lastUnit)
                       .str());
    if (!block)
      return fail(llvm::toString(block.takeError()) +
                  " (recompile with a split that puts fewer units on the GPU)");
    st.deviceWeights = *block;
    DeviceCounters before = device->counters();
    pkg::Checksum64 digest;
    constexpr uint64_t kChunk = uint64_t(64) << 20;
    for (uint64_t at = 0; at < sec->size; at += kChunk) {
      uint64_t n = std::min(kChunk, sec->size - at);
      digest.update(sec->bytes.data() + at, n);
      if (llvm::Error e = device->copyToDevice(static_cast<char *>(*block) + at,
                                               sec->bytes.data() + at, n, Stream::copy,
                                               /*async=*/false))
        return fail(llvm::toString(std::move(e)));
      dropPages(sec->bytes.data() + at, n);
    }
    if (llvm::Error e = package.verifySectionDigest(*sec, digest.digest()))
      return e;
    streamed.push_back(sec);
    model.loadTraffic_ = device->counters() - before;
    for (const void *&w : st.weights)
      if (w)
        w = static_cast<const char *>(*block) + (static_cast<const char *>(w) - sec->bytes.data());
  }
  // GPU-weights sections no stage streamed are checked like every other section.
  for (const pkg::Package::Section &sec : package.sections())
    if (sec.kind == pkg::SectionKind::GpuWeights && !llvm::is_contained(streamed, &sec))
      if (llvm::Error e = package.verifySection(sec))
        return e;
  return llvm::Error::success();
}

llvm::Error LoadedModel::Loader::loadTokenizer() {
  const llvm::json::Object *tok = root.getObject(HELM_MANIFEST_TOKENIZER);
  if (!tok)
    return llvm::Error::success();
  auto section = tok->getString(HELM_MANIFEST_TOKENIZER_SECTION);
  const pkg::Package::Section *sec =
      section ? package.find(pkg::SectionKind::Tokenizer, *section) : nullptr;
  if (!sec)
    return fail("manifest names a tokenizer section that is missing");
  model.tokenizer_.assign(sec->bytes.data(), sec->bytes.size());
  info.hasTokenizer = true;
  if (auto bos = tok->getInteger(HELM_MANIFEST_TOKENIZER_BOS_ID))
    info.bosId = int32_t(*bos);
  if (const llvm::json::Array *eos = tok->getArray(HELM_MANIFEST_TOKENIZER_EOS_IDS))
    for (const llvm::json::Value &e : *eos)
      if (auto id = e.getAsInteger())
        info.eosIds.push_back(int32_t(*id));
  if (auto chat = tok->getString(HELM_MANIFEST_TOKENIZER_CHAT_TEMPLATE))
    info.chatTemplate = chat->str();
  return llvm::Error::success();
}

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

int64_t LoadedModel::kvPageTokens(int32_t sequences) const {
  const Stage *gpu = nullptr;
  for (const Stage &st : stages_)
    if (st.info.onGpu && st.info.kvLayers > 0)
      gpu = &st;
  if (!gpu)
    return 0;
  if (options_.kvPageTokens > 0)
    return options_.kvPageTokens;
  // Automatic: 512 positions, or half as many until the device's KV budget holds two pages (one
  // per sequence for larger batches) and the two staging buffers (a plan with KV offload leaves
  // the GPU little room beyond its weights).
  const int64_t width = info_.kvHeads * info_.headDim;
  uint64_t free = device_->availableBytes();
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

llvm::Expected<LoadedModel::KvPlan> LoadedModel::planKv(int32_t sequences,
                                                      int64_t maxTokens) const {
  if (inspectOnly_)
    return fail(package_->name(), "the package was opened to be described, not run");
  if (sequences < 1)
    return fail(package_->name(), "a session needs at least one sequence");
  const int64_t width = info_.kvHeads * info_.headDim;
  if (options_.kvPageTokens < 0 || options_.kvPageTokens > (int64_t(1) << 20))
    return fail(package_->name(), "--kv-page must be 1 .. 1048576 tokens, not " +
                                      llvm::Twine(options_.kvPageTokens));
  if (!(options_.kvWatermark > 0 && options_.kvWatermark <= 1))
    return fail(package_->name(), llvm::formatv("--kv-watermark must be in (0, 1], not {0}",
                                                options_.kvWatermark)
                                      .str());
  KvPlan plan;
  plan.pageTokens = kvPageTokens(sequences);
  const uint64_t seqs = uint64_t(sequences);
  const uint64_t tokens = uint64_t(std::max<int64_t>(maxTokens, 0));
  // KV bytes the host must hold for sequences of maxTokens: the CPU stage's layers, and the GPU
  // stage's pages that do not stay on the device. Saturating: a hostile batch or manifest must
  // not wrap around to a size that fits.
  uint64_t cpuNeed = 0, evictedNeed = 0;
  for (const Stage &st : stages_) {
    if (st.info.onGpu && st.info.kvLayers > 0) {
      uint64_t page = PagedKvCache::pageBytes(st.info.kvLayers, width, plan.pageTokens);
      uint64_t free = device_->availableBytes();
      uint64_t budget = uint64_t(double(free) * options_.kvWatermark);
      uint64_t staging = 2 * (page / uint64_t(st.info.kvLayers));
      plan.devicePages = int64_t((budget - std::min(budget, staging)) / page);
      // Every sequence's tail page (the one being written) stays on the device.
      if (plan.devicePages < std::max<int64_t>(1, sequences))
        return fail(package_->name(),
                    llvm::formatv("the device memory left after the weights ({0}) holds {1} KV "
                                  "page(s) at --kv-watermark {2}, and {3} sequence(s) need one "
                                  "each: a page of {4} tokens for {5} layers is {6} (plus two "
                                  "staging buffers of {7}); lower --kv-page or the batch, or put "
                                  "fewer units on the GPU",
                                  formatBytes(free), plan.devicePages, options_.kvWatermark,
                                  sequences, plan.pageTokens, st.info.kvLayers, formatBytes(page),
                                  formatBytes(staging / 2))
                        .str());
      if (maxTokens > 0) {
        uint64_t pages = llvm::SaturatingMultiply(
            seqs, uint64_t((maxTokens + plan.pageTokens - 1) / plan.pageTokens));
        if (pages > uint64_t(plan.devicePages)) {
          if (!options_.kvOffload)
            return fail(package_->name(),
                        llvm::formatv("{0} sequence(s) of {1} tokens need {2} KV pages of {3} "
                                      "tokens on the device, which holds {4} ({5} each) with "
                                      "KV offload off; use --kv-offload=on, fewer tokens or a "
                                      "larger device",
                                      sequences, maxTokens, pages, plan.pageTokens,
                                      plan.devicePages, formatBytes(page))
                            .str());
          evictedNeed = llvm::SaturatingAdd(
              evictedNeed,
              llvm::SaturatingMultiply(pages - uint64_t(plan.devicePages), page));
        }
      }
    } else if (!st.info.onGpu) {
      // The CPU stage's KV in host memory (a GPU stage without attention layers has none).
      const uint64_t elementBytes = uint64_t(kernels::dtypeBytes(hostKvType(options_.kvType, info_)));
      cpuNeed = llvm::SaturatingAdd(
          cpuNeed, llvm::SaturatingMultiply(kvCacheBytes(st.info.kvLayers, width, tokens, elementBytes),
                                            seqs));
    }
  }
  const uint64_t kvNeed = llvm::SaturatingAdd(cpuNeed, evictedNeed);
  // One decode step of the whole batch also holds its logits (f32 rows) and, for a split
  // package, the boundary activation on the host.
  const uint64_t stepNeed = llvm::SaturatingMultiply(
      seqs, uint64_t(info_.vocab) * 4 +
                uint64_t(info_.boundaryWidth) * uint64_t(std::max<int64_t>(
                                                    dtypeBytes(info_.boundaryDtype), 0)));
  // A context the host RAM cannot hold is refused now, not by the OOM killer mid-generation.
  if (uint64_t available = availableHostBytes();
      available && llvm::SaturatingAdd(kvNeed, stepNeed) > available)
    return fail(package_->name(),
                llvm::formatv("{0} sequence(s) of {1} tokens need {2} of KV cache in host RAM "
                              "({3} for the CPU stage's layers, {4} of GPU pages evicted to the "
                              "host), plus {5} for a decode step's logits and activations; {6} "
                              "is available (MemAvailable): lower the batch or -n",
                              sequences, maxTokens, formatBytes(kvNeed), formatBytes(cpuNeed),
                              formatBytes(evictedNeed), formatBytes(stepNeed),
                              formatBytes(available))
                    .str());
  return plan;
}

kernels::DType hostKvType(KvRowType requested, const ModelInfo &info) {
  switch (requested) {
  case KvRowType::f32: return kernels::DType::f32;
  case KvRowType::f16: return kernels::DType::f16;
  case KvRowType::automatic: break;
  }
  return info.kvHostDtype == "f16" ? kernels::DType::f16 : kernels::DType::f32;
}

llvm::Error LoadedModel::checkSessionFits(int32_t sequences, int64_t maxTokens) const {
  auto plan = planKv(sequences, maxTokens);
  return plan ? llvm::Error::success() : plan.takeError();
}

llvm::Expected<std::unique_ptr<LoadedModel::Session>>
LoadedModel::newSession(int32_t sequences, int64_t maxTokens) const {
  // Everything is sized and checked before the first cache exists.
  auto plan = planKv(sequences, maxTokens);
  if (!plan)
    return plan.takeError();
  auto session = std::make_unique<Session>();
  session->device = device_.get();
  const int64_t width = info_.kvHeads * info_.headDim;
  for (const Stage &st : stages_) {
    if (st.info.onGpu && st.info.kvLayers > 0) {
      PagedKvOptions kv;
      kv.pageTokens = plan->pageTokens;
      kv.devicePages = plan->devicePages;
      kv.offload = options_.kvOffload;
      auto cache = PagedKvCache::create(*device_, st.info.kvLayers, sequences, width, kv);
      if (!cache)
        return fail(package_->name(), llvm::toString(cache.takeError()));
      session->caches.push_back(std::move(*cache));
    } else {
      // Each sequence's rows grow to at most maxTokens positions (what planKv counted).
      // Head-major (each kv head's rows together): attention reads each head as one stream.
      session->caches.push_back(std::make_unique<ContiguousKvCache>(
          st.info.kvLayers, sequences, width, std::max<int64_t>(maxTokens, 0),
          hostKvType(options_.kvType, info_), info_.kvHeads));
    }
  }
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
    if (ctx.failed())
      return llvm::createStringError(ctx.message);
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
  // A kernel-form stage only enqueues work after the input's copy on the same stream: the step's
  // one host wait is the logits' copy below (where a kernel's fault surfaces too).
  Device::StageCode code = stages_[last].deviceCalls ? Device::StageCode::enqueuesKernels
                                                     : Device::StageCode::touchesBuffers;
  if (llvm::Error e = device_->runHostStage(
          code, [&] { return callStage(last, session.deviceInput, session.deviceLogits); }))
    return fail(package_->name(), llvm::toString(std::move(e)));
  if (llvm::Error e = device_->copyToHost(logits, session.deviceLogits, logitsBytes,
                                          Stream::compute, /*async=*/false))
    return fail(package_->name(), llvm::toString(std::move(e)));
  return llvm::Error::success();
}

} // namespace helm::rt
