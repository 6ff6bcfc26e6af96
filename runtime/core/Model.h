//===- Model.h - a loaded .helmpkg: manifest, stages, their weights and devices ------===//
#ifndef HELM_RUNTIME_CORE_MODEL_H
#define HELM_RUNTIME_CORE_MODEL_H

#include "contract/helm_contract.h"
#include "kernels/common/Numeric.h"
#include "runtime/device/DeviceOps.h"
#include "runtime/abi/StageContext.h"
#include "runtime/device/Device.h"
#include "contract/format/Package.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <map>
#include <vector>

namespace helm::rt {

struct WeightDtypeCount {
  int64_t tensors = 0, bytes = 0;
};

/// One weight tensor of the manifest, as `helm-rt --info --tensors` lists it.
struct WeightTensorInfo {
  std::string name, onnxName, dtype; // dtype: manifest dtype ("f32", "q4_k", ...)
  std::vector<int64_t> shape;        // a block format's: [rows, row length]
  int64_t stage = 0, bytes = 0, elements = 0;
};

struct ModelInfo {
  std::string architecture, source, dtype, targetName, targetCpu;
  /// kv.host_dtype: the CPU stage's KV rows helmc chose ("f32" when the manifest does not say).
  std::string kvHostDtype = "f32";
  int64_t vocab = 0, hidden = 0, kvLayers = 0, kvHeads = 0, headDim = 0, maxContext = 0;
  int64_t numTensors = 0, weightBytes = 0, weightElements = 0;
  /// The weights by manifest dtype ("f32", "q4_0", ...): how many tensors, how many bytes.
  std::map<std::string, WeightDtypeCount> weightsByDtype;
  /// Every weight tensor, in manifest order.
  std::vector<WeightTensorInfo> tensors;
  /// Bits per weight over all weights (block formats count their scales).
  double bitsPerWeight() const { return weightElements ? 8.0 * double(weightBytes) / double(weightElements) : 0; }
  std::vector<int32_t> eosIds;
  int32_t bosId = -1; // -1: none
  bool hasTokenizer = false;
  /// The chat template the model file carried (Jinja text; empty: none).
  std::string chatTemplate;
  /// The activation a split plan moves between the stages: [B, S, boundaryWidth] boundaryDtype.
  std::string boundaryDtype;
  int64_t boundaryWidth = 0;
  /// target.features: the instruction-set features the stage code was compiled for ("+avx2,...").
  std::string targetFeatures;
  /// target.device, target.gpu and target.link of a package with a GPU stage: the device it runs
  /// on (emu or cuda; cpu when every stage runs on the CPU), its memory and the link.
  DeviceKind gpuDevice = HELM_DEVICE_CPU;
  int64_t gpuVramBytes = 0, gpuReservedBytes = 0;
  double linkGbs = 0, linkLatencyUs = 0;
};

/// One stage of the package, in pipeline order.
struct StageInfo {
  bool onGpu = false; // device is "gpu": the stage runs on the package's device (emu or cuda)
  std::string entry;
  int64_t kvLayers = 0, firstUnit = 0, lastUnit = 0;
  bool takesIds = true, returnsLogits = true;
  bool deviceCalls = false; // code format "device-calls" (kernel form), else host code
  std::string codeSection;  // the section holding the stage's shared object
  int64_t numTensors = 0;
  uint64_t weightBytes = 0;
};

/// The element type of the CPU stage's KV cache (docs/kv-cache.md). `automatic`: the manifest's
/// kv.host_dtype, which helmc sets to f16 for a GGUF file (llama.cpp's own cache is f16) or a
/// float16 model (its keys and values are f16 values already, so f16 rows are exact) and to f32
/// otherwise (ONNX Runtime's bits).
enum class KvRowType { automatic, f32, f16 };

/// The type `requested` resolves to for `info`.
kernels::DType hostKvType(KvRowType requested, const ModelInfo &info);
/// "auto", "f32" or "f16" (helm-rt --kv-type); anything else is automatic.
inline KvRowType kvRowTypeNamed(const std::string &name) {
  return name == "f32" ? KvRowType::f32 : name == "f16" ? KvRowType::f16 : KvRowType::automatic;
}

struct LoadOptions {
  bool emuThrottle = false; // emu: delay every copy to the profile's link bandwidth and latency
  // The GPU stage's device memory (0: the default). emu: the arena, instead of the target's VRAM
  // minus reserve; cuda: the budget, instead of the free memory minus the target's reserve.
  uint64_t gpuMemoryBytes = 0;
  // The GPU stage's paged KV cache (docs/kv-cache.md).
  int64_t kvPageTokens = 0;   // --kv-page: positions per page; 0: 512, halved (down to 16) until
                              // the device holds two pages
  double kvWatermark = HELM_KV_WATERMARK_DEFAULT; // --kv-watermark: share of the device memory left after the
                              // weights that KV pages may take before the oldest is evicted
  bool kvOffload = true;      // --kv-offload: evict full pages to host RAM (off: error when full)
  KvRowType kvType = KvRowType::automatic; // --kv-type: the CPU stage's KV cache rows
};

/// Signature of a generated stage (contract/helm_contract.h): input (token ids [B, S] i64 or the
/// boundary activation [B, S, H]), positions [B, S], output (logits of the last position [B, V]
/// f32, or the activation for the next stage).
using StageFn = helm_stage_fn;

class LoadedModel {
public:
  ~LoadedModel();
  /// Maps the package, verifies every checksum, checks that this machine can run it, loads each
  /// stage's code from memory (memfd; no file is written) and moves the GPU stage's weights into
  /// its device. Errors are one line naming the file.
  static llvm::Expected<std::unique_ptr<LoadedModel>> load(llvm::StringRef path,
                                                           const LoadOptions &options = {});
  /// Reads the package as load() does (its checksums as `verify` says, the manifest, the stage
  /// table, the tensor table, the tokenizer), but creates no device, loads no code and checks
  /// neither the CPU's features nor the code's ABI records: what `helm-rt --info` and `--check` need, on any machine. The model
  /// describes the package only: newSession() refuses it.
  static llvm::Expected<std::unique_ptr<LoadedModel>>
  inspect(llvm::StringRef path, pkg::Package::Verify verify = pkg::Package::Verify::All);
  /// The same over a package already opened (helm-rt --check verifies its sections first).
  static llvm::Expected<std::unique_ptr<LoadedModel>>
  inspect(std::unique_ptr<pkg::Package> package);
  /// False for a model from inspect().
  bool runnable() const { return !inspectOnly_; }

  const ModelInfo &info() const { return info_; }
  const std::vector<StageInfo> &stages() const { return stageInfo_; }
  llvm::StringRef manifest() const { return package_->manifest(); }
  llvm::StringRef tokenizerJson() const { return tokenizer_; }
  const pkg::Package &package() const { return *package_; }
  double loadSeconds() const { return loadSeconds_; }
  /// The device of the GPU stage (emu or cuda), or nullptr when every stage runs on the CPU.
  Device *device() const { return device_.get(); }
  /// Link traffic of loading (the GPU stage's weights).
  const DeviceCounters &loadTraffic() const { return loadTraffic_; }

  /// Per-generation state: each stage's KV cache (in its device's memory) and the buffers the
  /// boundary activation and the logits cross the link in.
  class Session;
  /// A session for `sequences` sequences of up to `maxTokens` positions each (prompt and
  /// generated). Fails, before any work, when their KV cache cannot fit: the device holds no KV
  /// page, or the host RAM cannot hold the CPU stage's KV plus the GPU stage's evicted pages and
  /// one decode step's logits (checkSessionFits; nothing is allocated before it passes).
  llvm::Expected<std::unique_ptr<Session>> newSession(int32_t sequences,
                                                      int64_t maxTokens = 0) const;
  /// newSession's checks without the session: whether `sequences` sequences of `maxTokens`
  /// positions fit the device's KV pages and the host RAM available now (MemAvailable: the KV
  /// cache the host holds plus one decode step's logits and activations). Allocates nothing, so a
  /// caller can refuse a batch before building anything per sequence.
  llvm::Error checkSessionFits(int32_t sequences, int64_t maxTokens) const;
  /// The shared object of stage `index` (its code section's bytes).
  llvm::ArrayRef<char> stageCode(size_t index) const { return stages_[index].code; }

  /// One step for B rows of S tokens: CPU stage -> transfer -> device stage -> logits back.
  /// Row b is sequence `sequence[b]` with `past[b]` tokens already cached. `logits`: [B, vocab].
  /// Fails when a stage's code and the manifest disagree, or a device runs out of memory.
  llvm::Error run(Session &session, const int32_t *sequence, const int64_t *past,
                  const int64_t *ids, const int64_t *positions, float *logits, int64_t batch,
                  int64_t seq) const;

private:
  /// load()'s steps, one per part of the manifest (Model.cpp).
  class Loader;
  struct Stage {
    StageInfo info;
    void *library = nullptr;
    int codeFd = -1; // the memory file the library was loaded from
    StageFn fn = nullptr;
    std::vector<const void *> weights; // by tensor id, in the stage's device memory
    void *deviceWeights = nullptr;     // the device block holding them (GPU stage)
    bool deviceCalls = false;          // code format "device-calls": runs through deviceOps_
    llvm::ArrayRef<char> code;         // the code section's bytes
  };
  /// What newSession sizes for a batch: the GPU stage's KV pages. planKv also refuses a batch
  /// that does not fit (the device's pages, offload off, host RAM).
  struct KvPlan {
    int64_t pageTokens = 0, devicePages = 0;
  };
  llvm::Expected<KvPlan> planKv(int32_t sequences, int64_t maxTokens) const;
  bool inspectOnly_ = false;
  std::unique_ptr<pkg::Package> package_;
  std::vector<Stage> stages_;
  std::vector<StageInfo> stageInfo_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<DeviceOps> deviceOps_; // the device's kernels, for a device-calls stage
  /// Positions per KV page of the GPU stage's cache for `sequences` sequences (0 when it has no
  /// KV layers): --kv-page, or 512 halved until the device memory free now holds a page per
  /// sequence (at least two) and the staging buffers.
  int64_t kvPageTokens(int32_t sequences) const;
  DeviceCounters loadTraffic_;
  std::string tokenizer_;
  ModelInfo info_;
  LoadOptions options_;
  double loadSeconds_ = 0;
};

/// Host memory the kernel says is available now (/proc/meminfo MemAvailable), or 0 when unknown.
uint64_t availableHostBytes();

/// The instruction-set features the package's code was compiled for (`info.targetFeatures`) that
/// this CPU lacks; empty when it has them all or its features cannot be read.
std::vector<std::string> missingCpuFeatures(const ModelInfo &info);

/// Empty when stage `index`'s ABI record (`<entry>_abi`: HELM_STAGE_ABI_FIELDS values, version
/// first) agrees with the buffers the manifest sizes for it; else one line saying how not.
std::string abiRecordMismatch(size_t index, const int64_t *record, const StageInfo &stage,
                              const ModelInfo &info);

class LoadedModel::Session {
public:
  ~Session() {
    if (device) {
      device->free(deviceInput);
      device->free(deviceLogits);
      if (hostActivation)
        device->freeHost(hostActivation);
    }
  }
  std::vector<std::unique_ptr<KvCache>> caches; // one per stage
  Device *device = nullptr;
  // Where the boundary activation (or, with no CPU stage, the token ids) waits on the host, and
  // the device buffers it and the logits cross the link in; grown to the largest call so far.
  void *hostActivation = nullptr, *deviceInput = nullptr, *deviceLogits = nullptr;
  uint64_t hostActivationBytes = 0, deviceInputBytes = 0, deviceLogitsBytes = 0;

  llvm::Error ensure(void *&buffer, uint64_t &have, uint64_t need, bool onHost, const char *what) {
    if (need <= have)
      return llvm::Error::success();
    if (onHost)
      device->freeHost(buffer);
    else
      device->free(buffer);
    buffer = nullptr;
    have = 0;
    auto p = onHost ? device->allocateHost(need) : device->allocate(need, what);
    if (!p)
      return p.takeError();
    buffer = *p;
    have = need;
    return llvm::Error::success();
  }
};

} // namespace helm::rt

#endif
