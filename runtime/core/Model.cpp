//===- Model.cpp - load a .helmpkg ---------------------------------------------------===//
#include "runtime/core/Model.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
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
llvm::Expected<void *> loadFromMemory(llvm::StringRef file, llvm::ArrayRef<char> bytes) {
  int fd = memfd_create("helm-cpu-stage", MFD_CLOEXEC);
  if (fd < 0)
    return fail(file, "cannot create an in-memory file for the CPU stage");
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) {
      ::close(fd);
      return fail(file, "cannot write the CPU stage to memory");
    }
    written += size_t(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ::close(fd);
  if (!handle)
    return fail(file, llvm::Twine("cannot load the CPU stage: ") + dlerror());
  return handle;
}

} // namespace

LoadedModel::~LoadedModel() {
  if (library_)
    dlclose(library_);
}

llvm::Expected<std::unique_ptr<LoadedModel>> LoadedModel::load(llvm::StringRef path) {
  auto start = std::chrono::steady_clock::now();
  (void)stageAbiSymbols();
  auto pkgOrErr = pkg::Package::open(path, pkg::Package::Verify::All);
  if (!pkgOrErr)
    return pkgOrErr.takeError();
  auto model = std::unique_ptr<LoadedModel>(new LoadedModel());
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

  // Stage code.
  const llvm::json::Array *stages = root->getArray("stages");
  if (!stages || stages->empty())
    return fail(path, "manifest: no stages");
  const llvm::json::Object *stage = (*stages)[0].getAsObject();
  if (!stage)
    return fail(path, "manifest: stage 0 is not an object");
  auto device = stage->getString("device");
  if (!device || *device != "cpu")
    return fail(path, "package has a '" + (device ? device->str() : std::string("?")) +
                          "' stage; this runtime runs CPU stages only");
  auto entry = stage->getString("entry");
  auto codeSection = stage->getString("code_section");
  if (!entry || !codeSection)
    return fail(path, "manifest: stage 0 needs 'entry' and 'code_section'");
  const pkg::Package::Section *code = package.find(pkg::SectionKind::CpuCode, *codeSection);
  if (!code)
    return fail(path, "missing CPU code section '" + *codeSection + "'");
  auto handle = loadFromMemory(path, code->bytes);
  if (!handle)
    return handle.takeError();
  model->library_ = *handle;
  model->stage_ = reinterpret_cast<StageFn>(dlsym(model->library_, entry->str().c_str()));
  if (!model->stage_)
    return fail(path, "CPU stage has no entry point '" + *entry + "'");

  // Tensor table: every weight must lie inside its section.
  const llvm::json::Array *tensors = root->getArray("tensors");
  if (!tensors)
    return fail(path, "manifest: missing 'tensors'");
  model->weights_.assign(tensors->size(), nullptr);
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
    const llvm::json::Array *shape = t->getArray("shape");
    if (!id || !offset || !bytes || !section || !dtype || !shape || !name)
      return fail(path, "manifest: tensor entry needs id, name, dtype, shape, section, offset, bytes");
    if (*id < 0 || size_t(*id) >= model->weights_.size() || model->weights_[size_t(*id)])
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
    const pkg::Package::Section *sec = package.find(pkg::SectionKind::CpuWeights, *section);
    if (!sec)
      return fail(path, "tensor '" + *name + "' is in missing section '" + *section + "'");
    if (*offset < 0 || uint64_t(*offset) > sec->size || uint64_t(*bytes) > sec->size - uint64_t(*offset))
      return fail(path, "tensor '" + *name + "' lies outside section '" + *section + "'");
    model->weights_[size_t(*id)] = sec->bytes.data() + *offset;
    info.weightBytes += *bytes;
  }
  info.numTensors = int64_t(tensors->size());

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

llvm::Error LoadedModel::run(StageContext &ctx, const int64_t *ids, const int64_t *positions,
                             float *logits, int64_t batch, int64_t seq) const {
  ctx.weights = weights_.data();
  ctx.numWeights = int64_t(weights_.size());
  ctx.error = nullptr;
  stage_(&ctx, ids, positions, logits, batch, seq);
  if (ctx.error)
    return fail(package_->name(), ctx.error);
  return llvm::Error::success();
}

} // namespace helm::rt
