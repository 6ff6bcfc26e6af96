//===- GgufImporter.cpp - a GGUF model straight into the raised helm dialect -------===//
#include "compiler/gguf/GgufImporter.h"

#include "contract/helm_contract.h"

#include "compiler/gguf/GgufFile.h"
#include "compiler/gguf/GgufTokenizer.h"
#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace helm {

namespace {

/// Rows of a fused GGUF tensor the importer declared as a weight of their own ("name#part"): the
/// tensor and the byte range.
struct TensorPart {
  std::string tensor;
  uint64_t offset = 0, bytes = 0;
};

/// The GGUF tensors' bytes: views of the mapped file.
class GgufWeightSource : public WeightSource {
public:
  explicit GgufWeightSource(std::unique_ptr<gguf::File> file) : file(std::move(file)) {}
  const gguf::File &gguf() const { return *file; }
  llvm::StringMap<TensorPart> &parts() { return tensorParts; }

  llvm::Expected<llvm::ArrayRef<char>> bytes(llvm::StringRef name, std::vector<char> &) const override {
    auto part = tensorParts.find(name);
    const gguf::TensorInfo *tensor = file->findTensor(part == tensorParts.end() ? name : part->second.tensor);
    if (!tensor)
      return llvm::createStringError("no tensor named '" + name + "'");
    llvm::ArrayRef<uint8_t> data = tensor->data;
    if (part != tensorParts.end())
      data = data.slice(part->second.offset, part->second.bytes);
    return llvm::ArrayRef<char>(reinterpret_cast<const char *>(data.data()), data.size());
  }
  void release(llvm::StringRef name) const override {
    // A part's tensor is given back with its last part (the rows are written in order; a tensor
    // read again faults its pages back in).
    auto part = tensorParts.find(name);
    if (const gguf::TensorInfo *tensor = file->findTensor(part == tensorParts.end() ? name : part->second.tensor))
      file->releasePages(*tensor);
  }

private:
  std::unique_ptr<gguf::File> file;
  llvm::StringMap<TensorPart> tensorParts;
};

/// What differs between the architectures HELM imports: all are Llama-shaped decoders (RMSNorm,
/// grouped-query attention with rotary positions, gated MLP). Phi-3 fuses q/k/v into attn_qkv and
/// gate/up into ffn_up; the importer declares their rows as separate weights. Gemma scales the
/// embedding rows, gates its MLP with GELU and (2, 3) normalises each sublayer's output again.
struct Architecture {
  llvm::StringRef name;
  /// llama.cpp's converter permutes the q/k rows of `llama` so that its rope pairs adjacent
  /// channels (LLAMA_ROPE_TYPE_NORM); Qwen keeps Hugging Face's halves (NEOX). HELM matches the
  /// file with the rope form instead of undoing the permutation.
  RopeStyle rope;
  /// Qwen3, Gemma 3: RMSNorm of every q and k head (attn_q_norm / attn_k_norm), required.
  bool headNorm;
  /// Gemma: embedding rows times sqrt(embedding_length), a GELU(tanh)-gated MLP, and the head tied
  /// to the embedding unless output.weight is present.
  bool gemma = false;
  /// Gemma 2, 3: RMSNorm of the attention and MLP outputs before their residual adds
  /// (post_attention_norm, post_ffw_norm).
  bool postNorms = false;
  /// Gemma 2, 3: with a sliding window, layer i uses it when i % pattern < pattern - 1 (the
  /// default of attention.sliding_window_pattern) and rotates with rope.freq_base_swa; the other
  /// layers are global. 0: every layer alike.
  int64_t slidingPattern = 0;
  /// The local layers' rope base when rope.freq_base_swa is absent (0: rope.freq_base), and whether
  /// they take the file's rope scaling too (llama.cpp's rope_freq_*_train_swa).
  double localRopeBase = 0;
  bool localRopeScaled = true;
  /// The window when attention.sliding_window is absent (Gemma 2: 4096); 0: none.
  int64_t defaultWindow = 0;
  /// The block count at which llama.cpp scales the queries by 1/sqrt(embedding_length / heads)
  /// instead of 1/sqrt(head size) (the 27B files, from the reference's query_pre_attn_scalar); 0: never.
  int64_t hiddenScaledLayers = 0;
  /// Gemma 2: the attention scores' and the logits' soft caps when attn_logit_softcapping /
  /// final_logit_softcapping are absent (llama.cpp's defaults); 0: none unless the key is set
  /// (the logits' cap of Gemma 3), and the attention cap key is not read.
  double attentionSoftcap = 0, logitSoftcap = 0;
  /// Mistral 3 (llama.cpp's mistral3 loader): yarn's rope.scaling.yarn_beta_fast / yarn_beta_slow /
  /// yarn_log_multiplier are read rather than defaulted, and attention.temperature_scale (Llama 4's
  /// query scaling by position) is understood.
  bool mistralKeys = false;
};

constexpr Architecture kArchitectures[] = {
    {"llama", RopeStyle::interleaved, false},
    {"qwen2", RopeStyle::half, false},
    {"qwen3", RopeStyle::half, true},
    {"phi3", RopeStyle::half, false},
    {"gemma", RopeStyle::half, false, /*gemma=*/true},
    {"gemma2", RopeStyle::half, false, /*gemma=*/true, /*postNorms=*/true, /*slidingPattern=*/2,
     /*localRopeBase=*/0, /*localRopeScaled=*/true, /*defaultWindow=*/4096, /*hiddenScaledLayers=*/46,
     /*attentionSoftcap=*/50.0, /*logitSoftcap=*/30.0},
    {"gemma3", RopeStyle::half, true, /*gemma=*/true, /*postNorms=*/true, /*slidingPattern=*/6,
     /*localRopeBase=*/10000.0, /*localRopeScaled=*/false, /*defaultWindow=*/0, /*hiddenScaledLayers=*/62},
    // Mistral Small 3.x and Ministral 3, text: llama's graph and tensors (the converter permutes
    // q/k as for llama).
    {"mistral3", RopeStyle::interleaved, false, /*gemma=*/false, /*postNorms=*/false, /*slidingPattern=*/0,
     /*localRopeBase=*/0, /*localRopeScaled=*/true, /*defaultWindow=*/0, /*hiddenScaledLayers=*/0,
     /*attentionSoftcap=*/0, /*logitSoftcap=*/0, /*mistralKeys=*/true},
};

/// "llama, qwen2, ...": the architectures HELM imports, for messages.
std::string architectureNames() {
  std::string names;
  for (const Architecture &a : kArchitectures)
    names += (names.empty() ? "" : ", ") + a.name.str();
  return names;
}

/// The block format of a ggml tensor type HELM computes with (the contract's HELM_BLOCK_FORMATS),
/// or nullopt.
std::optional<BlockFormat> blockFormatOf(uint32_t ggmlType) {
#define HELM_GGML_BLOCK_CASE(NAME, CODE, name, ggml, weights, bytes, quantizable)                                             \
  case ggml:                                                                                                     \
    return BlockFormat(CODE);
  switch (ggmlType) {
    HELM_BLOCK_FORMATS(HELM_GGML_BLOCK_CASE)
  default:
    return std::nullopt;
  }
#undef HELM_GGML_BLOCK_CASE
}

/// "F32, F16, BF16, Q8_0, ...": the tensor types HELM computes with, as llama.cpp spells them.
std::string supportedTypes() {
  std::string names = "F32, F16, BF16";
#define HELM_GGML_BLOCK_NAME(NAME, CODE, name, ggml, weights, bytes, quantizable) names += std::string(", ") + #NAME;
  HELM_BLOCK_FORMATS(HELM_GGML_BLOCK_NAME)
#undef HELM_GGML_BLOCK_NAME
  return names;
}

class Importer {
public:
  Importer(MLIRContext &ctx, const gguf::File &file, llvm::StringMap<TensorPart> &parts, int64_t maxContext)
      : ctx(ctx), file(file), parts(parts), b(&ctx), maxContext(maxContext) {}

  llvm::Error run(ModuleOp module);

private:
  llvm::Error fail(const llvm::Twine &message) const {
    return llvm::createStringError(file.name() + ": " + message);
  }

  /// The metadata `<arch>.<key>`, or nullptr.
  const gguf::Value *archFind(llvm::StringRef key) const { return file.find(archKey(key)); }
  std::string archKey(llvm::StringRef key) const { return (arch->name + "." + key).str(); }
  /// `<arch>.<key>` as `convert` reads it (given the value and the full key, for messages);
  /// `fallback` when absent, an error when absent without one.
  template <typename T, typename Convert>
  llvm::Expected<T> archNumber(llvm::StringRef key, std::optional<T> fallback, Convert convert) const {
    const gguf::Value *value = archFind(key);
    if (value)
      return convert(*value, archKey(key));
    if (fallback)
      return *fallback;
    return fail("the required key '" + archKey(key) + "' is missing");
  }
  /// `<arch>.<key>` as a positive integer; `fallback` when absent and not required.
  llvm::Expected<int64_t> intKey(llvm::StringRef key, std::optional<int64_t> fallback = std::nullopt);
  llvm::Expected<double> floatKey(llvm::StringRef key, std::optional<double> fallback = std::nullopt);
  /// The context the model's positions were trained for (llama.cpp's n_ctx_orig_yarn):
  /// rope.scaling.original_context_length, else context_length. Yarn's ramp, the LongRoPE choice and
  /// Mistral 3's attention temperature read it.
  llvm::Expected<int64_t> originalContext() {
    return intKey(archFind("rope.scaling.original_context_length") ? "rope.scaling.original_context_length"
                                                                  : "context_length");
  }
  /// How the file scales its rotary positions: per-pair frequency divisors (RopeOp's
  /// freq_factors; null for none) and, for yarn, the factor its magnitude scaling multiplies every
  /// attention score by (mscale^2, folded into the attention scale).
  struct RopeScaling {
    DenseF32ArrayAttr factors;
    double scoreScale = 1.0;
    /// The part of scoreScale an unscaled rope keeps too (rope.scaling.attn_factor squared):
    /// Gemma 3's local layers.
    double unscaledScoreScale = 1.0;
  };
  llvm::Expected<RopeScaling> ropeScaling(int64_t rotaryDim, int64_t headDim, double theta);
  /// Which layers use the sliding window (Gemma 3's pattern): `layers` flags.
  llvm::Expected<std::vector<bool>> slidingLayers(int64_t layers);

  /// Declares tensor `name` (GGUF dims reversed: [rows, row length]) after checking its shape is
  /// `shape` and its type one HELM computes with; returns a `helm.weight` of it at the builder.
  /// The weight `name` of `shape` ([rows, columns]; a norm's [n]). With `rows`, the rows
  /// [rows->first, rows->first + rows->count) of it only, declared as a weight of their own
  /// (source name "name#part") over their bytes in the file: a fused tensor split at import.
  struct Rows {
    int64_t first, count;
    llvm::StringRef part;
  };
  llvm::Expected<Value> weight(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                               std::optional<Rows> rows = std::nullopt);
  /// The same for an optional tensor: a null Value when absent.
  llvm::Expected<Value> optionalWeight(llvm::StringRef name, llvm::ArrayRef<int64_t> shape) {
    if (!file.findTensor(name))
      return Value();
    return weight(name, shape);
  }

  MLIRContext &ctx;
  const gguf::File &file;
  llvm::StringMap<TensorPart> &parts; // the weight source's: the fused tensors' rows declared apart
  OpBuilder b;
  const Architecture *arch = nullptr;
  Block *declarations = nullptr;
  llvm::StringMap<Value> weights; // per GGUF tensor (or part of one), the helm.weight made for it
  llvm::StringSet<> used;
  int64_t maxContext; // the package's longest sequence (chooses a LongRoPE table)
};

llvm::Expected<int64_t> Importer::intKey(llvm::StringRef key, std::optional<int64_t> fallback) {
  return archNumber<int64_t>(key, fallback, [&](const gguf::Value &value, const std::string &full) -> llvm::Expected<int64_t> {
    if (value.type == gguf::ValueType::Array)
      return fail("'" + full + "' is an array (per-layer values), which HELM does not support");
    std::optional<int64_t> v = value.type == gguf::ValueType::Bool ? std::nullopt : value.asInt();
    if (!v)
      return fail("'" + full + "' is a " + gguf::valueTypeName(value.type) + ", not an integer");
    if (*v <= 0 || *v > (int64_t(1) << 30))
      return fail(llvm::formatv("'{0}' is {1}, outside 1..2^30", full, *v).str());
    return *v;
  });
}

/// The rope's frequency divisors (RopeOp's freq_factors), or a null attribute for plain rotary
/// positions: Llama 3's `rope_freqs.weight` (one F32 divisor per rotary pair), or Phi-3's LongRoPE
/// tables (`rope_factors_short.weight` / `rope_factors_long.weight`, the same form: llama.cpp takes
/// the long one when the context per sequence exceeds rope.scaling.original_context_length, and
/// rope_freqs over both), times the factor of
/// linear position scaling (`rope.scaling.type` linear) or yarn's blend of interpolated and
/// extrapolated frequencies. Other scaling types are refused.
///
/// Yarn, as llama.cpp computes it (ggml's rope_yarn): with s = 1 / factor, pair i's angle is
/// p·θ_i·(s·(1 − r_i) + r_i), r_i = ramp_i · ext_factor, ramp_i = 1 − clamp((i − lo) / max(0.001,
/// hi − lo), 0, 1) between the correction dims lo = floor(c(beta_fast)), hi = ceil(c(beta_slow)),
/// c(b) = d · ln(n_orig / (2πb)) / (2 ln θ) (clamped to [0, d − 1]); so the divisor is
/// 1 / (s·(1 − r_i) + r_i). Its magnitude scaling multiplies cos and sin by
/// m = (1 + 0.1 ln factor) · attn_factor, which scales q and k alike, so every score by m²: the
/// attention scale takes it (only when the whole head rotates; partial rotary is refused). ext_factor
/// 1, beta_fast 32, beta_slow 1 (llama.cpp's defaults for these architectures).
llvm::Expected<Importer::RopeScaling> Importer::ropeScaling(int64_t rotaryDim, int64_t headDim, double theta) {
  const int64_t pairs = rotaryDim / 2;
  std::vector<float> factors;
  // A table of divisors (marked used): F32, one positive finite value per rotary pair.
  auto readFactors = [&](const gguf::TensorInfo &t) -> llvm::Expected<std::vector<float>> {
    used.insert(t.name);
    if (t.type != 0 || t.dims.size() != 1 || t.elements != uint64_t(pairs) ||
        t.data.size() != size_t(pairs) * sizeof(float))
      return fail(llvm::formatv("tensor {0} must be F32 with {1} values (rope.dimension_count / 2)",
                                gguf::quoted(t.name), pairs)
                      .str());
    std::vector<float> table(static_cast<size_t>(pairs));
    std::memcpy(table.data(), t.data.data(), t.data.size());
    for (size_t i = 0; i < table.size(); ++i)
      if (!(table[i] > 0.0f) || !std::isfinite(table[i]))
        return fail(llvm::formatv("tensor {0} value {1} is {2}, not a positive finite number", gguf::quoted(t.name),
                                  i, table[i])
                        .str());
    return table;
  };
  const gguf::TensorInfo *longTable = file.findTensor("rope_factors_long.weight");
  const gguf::TensorInfo *shortTable = file.findTensor("rope_factors_short.weight");
  if (bool(longTable) != bool(shortTable))
    return fail(llvm::formatv("tensor {0} (LongRoPE) comes without {1}",
                              gguf::quoted(longTable ? "rope_factors_long.weight" : "rope_factors_short.weight"),
                              gguf::quoted(longTable ? "rope_factors_short.weight" : "rope_factors_long.weight"))
                    .str());
  if (const gguf::TensorInfo *t = file.findTensor("rope_freqs.weight")) {
    auto table = readFactors(*t);
    if (!table)
      return table.takeError();
    factors = std::move(*table);
    if (longTable) // llama.cpp's choice too: rope_freqs over the LongRoPE tables
      used.insert(longTable->name), used.insert(shortTable->name);
  } else if (longTable) {
    auto original = originalContext();
    if (!original)
      return original.takeError();
    // Both tables are checked; the one the package's context needs is kept.
    auto longFactors = readFactors(*longTable);
    if (!longFactors)
      return longFactors.takeError();
    auto shortFactors = readFactors(*shortTable);
    if (!shortFactors)
      return shortFactors.takeError();
    factors = std::move(maxContext > *original ? *longFactors : *shortFactors);
  }
  // The rotation's magnitude: yarn's, times rope.scaling.attn_factor (which llama.cpp applies to
  // every rope, scaled or not).
  double magnitude = 1.0;
  if (const gguf::Value *scaling = archFind("rope.scaling.type")) {
    llvm::StringRef kind = scaling->asString().value_or("?");
    double factor = 1.0;
    if (const gguf::Value *f = archFind("rope.scaling.factor"))
      factor = f->asFloat().value_or(0.0);
    if (kind == "linear" && factor != 1.0) {
      if (!(factor > 0.0) || !std::isfinite(factor))
        return fail(llvm::formatv("rope.scaling.factor {0} is not a positive finite number", factor).str());
      // llama.cpp scales the positions by 1 / factor: the same as every divisor times factor.
      if (factors.empty())
        factors.assign(size_t(pairs), 1.0f);
      for (float &f : factors)
        f = float(double(f) * factor);
    } else if (kind == "yarn" && factor != 1.0) {
      if (!(factor > 1.0) || !std::isfinite(factor))
        return fail(llvm::formatv("rope.scaling.factor {0} of yarn scaling must be above 1", factor).str());
      // The context the frequencies were trained for (llama.cpp: context_length unless the key
      // says otherwise).
      auto original = originalContext();
      if (!original)
        return original.takeError();
      // llama.cpp reads yarn_beta_fast, yarn_beta_slow and yarn_log_multiplier for some
      // architectures only (of HELM's, mistral3): for the others it uses the defaults, whatever the
      // file says, and so does HELM. yarn_ext_factor it reads for none of them.
      const double extFactor = 1.0;
      double betaFast = 32.0, betaSlow = 1.0, logMultiplier = 0.0;
      if (arch->mistralKeys) {
        for (auto [key, value] : {std::pair{"rope.scaling.yarn_beta_fast", &betaFast},
                                  std::pair{"rope.scaling.yarn_beta_slow", &betaSlow},
                                  std::pair{"rope.scaling.yarn_log_multiplier", &logMultiplier}}) {
          const gguf::Value *raw = archFind(key);
          if (value == &logMultiplier && raw && raw->asFloat() == std::optional<double>(0.0))
            continue; // 0: none, as llama.cpp reads it
          auto v = floatKey(key, *value);
          if (!v)
            return v.takeError();
          *value = *v;
        }
      }
      // f32 throughout, as ggml computes them.
      const float dims = float(rotaryDim), base = float(theta), orig = float(*original);
      auto corrDim = [&](double beta) {
        return dims * std::log(orig / (float(beta) * 2.0f * float(M_PI))) / (2.0f * std::log(base));
      };
      const float lo = std::max(0.0f, std::floor(corrDim(betaFast)));
      const float hi = std::min(dims - 1.0f, std::ceil(corrDim(betaSlow)));
      const float scale = float(1.0 / factor);
      if (factors.empty())
        factors.assign(size_t(pairs), 1.0f);
      for (int64_t i = 0; i < pairs; ++i) {
        const float y = (float(i) - lo) / std::max(0.001f, hi - lo);
        const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * float(extFactor);
        factors[size_t(i)] = float(double(factors[size_t(i)]) / (double(scale) * (1.0 - mix) + double(mix)));
      }
      magnitude = 1.0 + 0.1 * std::log(factor);
      // llama.cpp's yarn_attn_factor with a log multiplier m: mscale(1) / mscale(m), the kernel's
      // own mscale(1) cancelled (llama-context.cpp), so the rotation keeps 1 / mscale(m) of it.
      if (logMultiplier != 0.0)
        magnitude /= 1.0 + 0.1 * logMultiplier * std::log(factor);
    } else if (kind != "none" && kind != "linear" && factor != 1.0) {
      return fail("rope scaling " + gguf::quoted(kind) +
                  " is not supported (unscaled, linear and yarn positions are, with or without Llama 3 rope_freqs or Phi-3 LongRoPE tables)");
    }
  }
  double attnFactor = 1.0;
  if (const gguf::Value *attn = archFind("rope.scaling.attn_factor")) {
    std::optional<double> x = attn->type == gguf::ValueType::Array ? std::nullopt : attn->asFloat();
    if (!x || !std::isfinite(*x) || *x <= 0)
      return fail("'" + archKey("rope.scaling.attn_factor") + "' is not a positive number");
    attnFactor = *x;
    magnitude *= attnFactor;
  }
  if (magnitude != 1.0 && rotaryDim != headDim)
    return fail(llvm::formatv("a rope magnitude scaling (yarn, rope.scaling.attn_factor) over {0} of {1} channels "
                              "per head is not supported (it is folded into the attention scale)",
                              rotaryDim, headDim)
                    .str());
  return RopeScaling{factors.empty() ? DenseF32ArrayAttr() : DenseF32ArrayAttr::get(&ctx, factors),
                     magnitude * magnitude, attnFactor * attnFactor};
}

llvm::Expected<std::vector<bool>> Importer::slidingLayers(int64_t layers) {
  std::vector<bool> sliding(size_t(layers), true);
  if (!arch->slidingPattern)
    return sliding;
  if (const gguf::Value *pattern = archFind("attention.sliding_window_pattern");
      pattern && pattern->type == gguf::ValueType::Array) {
    // One flag per layer (llama.cpp writes bools; integers are read as flags too).
    if (pattern->count != uint64_t(layers))
      return fail(llvm::formatv("'{0}' has {1} values, block_count is {2}", archKey("attention.sliding_window_pattern"),
                                pattern->count, layers)
                      .str());
    for (int64_t i = 0; i < layers; ++i) {
      std::optional<int64_t> flag = pattern->intAt(uint64_t(i));
      if (!flag)
        return fail("'" + archKey("attention.sliding_window_pattern") + "' is not an array of flags");
      sliding[size_t(i)] = *flag != 0;
    }
    return sliding;
  }
  auto period = intKey("attention.sliding_window_pattern", arch->slidingPattern);
  if (!period)
    return period.takeError();
  for (int64_t i = 0; i < layers; ++i)
    sliding[size_t(i)] = i % *period < *period - 1;
  return sliding;
}

llvm::Expected<double> Importer::floatKey(llvm::StringRef key, std::optional<double> fallback) {
  return archNumber<double>(key, fallback, [&](const gguf::Value &value, const std::string &full) -> llvm::Expected<double> {
    std::optional<double> v = value.type == gguf::ValueType::Array ? std::nullopt : value.asFloat();
    if (!v)
      return fail("'" + full + "' is a " + gguf::valueTypeName(value.type) + ", not a number");
    if (!std::isfinite(*v) || *v <= 0)
      return fail(llvm::formatv("'{0}' is {1}, not a positive number", full, *v).str());
    return *v;
  });
}

llvm::Expected<Value> Importer::weight(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                                       std::optional<Rows> rows) {
  const std::string key = rows ? (name + "#" + rows->part).str() : name.str();
  auto known = weights.find(key);
  const gguf::TensorInfo *tensor = file.findTensor(name);
  if (!tensor)
    return fail("the required tensor '" + name + "' is missing");
  // GGUF lists dimensions innermost first: ne0 is the row length.
  llvm::SmallVector<int64_t> dims;
  for (uint64_t d : llvm::reverse(tensor->dims))
    dims.push_back(int64_t(d));
  auto shapeText = [](llvm::ArrayRef<int64_t> s) {
    std::string text = "[";
    for (int64_t d : llvm::reverse(s)) // printed in GGUF's order, as helm-gguf-dump does
      text += (text.size() > 1 ? ", " : "") + std::to_string(d);
    return text + "]";
  };
  if (llvm::ArrayRef<int64_t>(dims) != shape)
    return fail("tensor '" + name + "' has shape " + shapeText(dims) + ", the configuration needs " +
                shapeText(shape));
  if (known != weights.end())
    return known->second;

  llvm::StringRef typeName = tensor->typeInfo->name;
  Type element;
  BlocksAttr blocks;
  if (typeName == "F32") {
    element = b.getF32Type();
  } else if ((typeName == "F16" || typeName == "BF16") && shape.size() == 2) {
    element = typeName == "F16" ? Type(b.getF16Type()) : Type(b.getBF16Type());
  } else if (std::optional<BlockFormat> format = blockFormatOf(tensor->typeInfo->id); format && shape.size() == 2) {
    element = b.getF32Type(); // what the kernels compute with
    blocks = BlocksAttr::get(&ctx, *format, 0);
  } else if (shape.size() == 1) {
    return fail("tensor '" + name + "' is " + typeName + "; HELM reads 1-D tensors (norms, biases) as F32 only");
  } else {
    return fail("tensor '" + name + "' has type " + typeName + ", which HELM does not compute with (" +
                supportedTypes() + ")");
  }

  std::string symbol;
  for (char c : key)
    symbol += llvm::isAlnum(c) ? c : '_';
  llvm::SmallVector<int64_t> declared(shape);
  int64_t offset = int64_t(tensor->fileOffset), bytes = int64_t(tensor->bytes);
  if (rows) {
    // Rows are contiguous in every type (a row of blocks, or of elements): a byte range.
    const int64_t rowBytes = bytes / shape[0];
    declared[0] = rows->count;
    offset += rows->first * rowBytes;
    bytes = rows->count * rowBytes;
    parts[key] = TensorPart{name.str(), uint64_t(rows->first * rowBytes), uint64_t(bytes)};
  }
  auto type = RankedTensorType::get(declared, element);
  OpBuilder declBuilder = OpBuilder::atBlockEnd(declarations);
  WeightDeclOp::create(declBuilder, b.getUnknownLoc(), symbol, type, key, llvm::sys::path::filename(file.name()),
                       offset, bytes, blocks, OnnxBlocksAttr(), bool(blocks));
  Value value = WeightOp::create(b, b.getUnknownLoc(), type, FlatSymbolRefAttr::get(&ctx, symbol));
  weights[key] = value;
  used.insert(name);
  return value;
}

llvm::Error Importer::run(ModuleOp module) {
  const gguf::Value *archValue = file.find("general.architecture");
  if (!archValue)
    return fail("the required key 'general.architecture' is missing");
  std::optional<llvm::StringRef> archName = archValue->asString();
  if (!archName)
    return fail("'general.architecture' is a " + gguf::valueTypeName(archValue->type) + ", not a string");
  for (const Architecture &a : kArchitectures)
    if (a.name == *archName)
      arch = &a;
  if (!arch)
    return fail("architecture " + gguf::quoted(*archName) + " is not supported (" + architectureNames() + ")");

  // The configuration: llama.cpp's keys and defaults (llama-model.cpp).
  auto layers = intKey("block_count");
  auto hidden = layers ? intKey("embedding_length") : layers.takeError();
  auto ffn = hidden ? intKey("feed_forward_length") : hidden.takeError();
  auto heads = ffn ? intKey("attention.head_count") : ffn.takeError();
  if (!heads)
    return heads.takeError();
  auto kvHeads = intKey("attention.head_count_kv", *heads);
  if (!kvHeads)
    return kvHeads.takeError();
  if (*hidden % *heads != 0 && !archFind("attention.key_length"))
    return fail(llvm::formatv("embedding_length {0} is not a multiple of head_count {1}", *hidden, *heads).str());
  auto headDim = intKey("attention.key_length", *hidden / *heads);
  if (!headDim)
    return headDim.takeError();
  auto valueDim = intKey("attention.value_length", *headDim);
  if (!valueDim)
    return valueDim.takeError();
  if (*valueDim != *headDim)
    return fail(llvm::formatv("attention.value_length {0} differs from key_length {1}", *valueDim, *headDim).str());
  if (*heads % *kvHeads != 0)
    return fail(llvm::formatv("head_count {0} is not a multiple of head_count_kv {1}", *heads, *kvHeads).str());
  auto rotaryDim = intKey("rope.dimension_count", *headDim);
  if (!rotaryDim)
    return rotaryDim.takeError();
  if (*rotaryDim > *headDim || *rotaryDim % 2 != 0)
    return fail(llvm::formatv("rope.dimension_count {0} must be even and at most the head size {1}", *rotaryDim,
                              *headDim)
                    .str());
  auto theta = floatKey("rope.freq_base", 10000.0);
  if (!theta)
    return theta.takeError();
  auto epsilon = floatKey("attention.layer_norm_rms_epsilon");
  if (!epsilon)
    return epsilon.takeError();
  if (const gguf::Value *experts = archFind("expert_count"))
    if (experts->asInt().value_or(1) > 0)
      return fail("'" + archKey("expert_count") + "' is set: mixture-of-experts models are not supported");
  auto scaling = ropeScaling(*rotaryDim, *headDim, *theta);
  if (!scaling)
    return scaling.takeError();
  // Mistral 3's attention temperature (Llama 4's): llama.cpp multiplies the queries at position p
  // by 1 + scale * ln(floor(p / n) + 1), n the original context; below n that is 1, so a package
  // whose context stays within n computes exactly what llama.cpp does, and a longer one is refused.
  if (const gguf::Value *t = arch->mistralKeys ? archFind("attention.temperature_scale") : nullptr) {
    std::optional<double> scale = t->type == gguf::ValueType::Array ? std::nullopt : t->asFloat();
    if (!scale || !std::isfinite(*scale))
      return fail("'" + archKey("attention.temperature_scale") + "' is a " + gguf::valueTypeName(t->type) +
                  ", not a finite number");
    if (*scale != 0.0) {
      auto original = originalContext();
      if (!original)
        return original.takeError();
      if (maxContext > *original)
        return fail(llvm::formatv("'{0}' scales the queries from position {1} on, which HELM does not compute: "
                                  "compile with --max-context {1} or less",
                                  archKey("attention.temperature_scale"), *original)
                        .str());
    }
  }
  // A sliding window over the keys (Phi-3, Gemma 3's local layers; llama.cpp's loader also
  // accepts it on llama files).
  IntegerAttr slidingWindow;
  if (const gguf::Value *w = archFind("attention.sliding_window"); w && w->asInt() != std::optional<int64_t>(0)) {
    auto window = intKey("attention.sliding_window");
    if (!window)
      return window.takeError();
    if (*window > 0)
      slidingWindow = b.getI64IntegerAttr(*window);
  } else if (!w && arch->defaultWindow) {
    slidingWindow = b.getI64IntegerAttr(arch->defaultWindow);
  }
  auto sliding = slidingLayers(*layers);
  if (!sliding)
    return sliding.takeError();
  // The local layers' rope base (Gemma 3: 10000 and unscaled; Gemma 2: the global one).
  double slidingTheta = *theta;
  if (arch->slidingPattern) {
    auto local = floatKey("rope.freq_base_swa", arch->localRopeBase ? arch->localRopeBase : *theta);
    if (!local)
      return local.takeError();
    slidingTheta = *local;
  }
  // Gemma's soft caps: the logits' (Gemma 2 always, 30 by default; Gemma 3 when the key is set)
  // and the attention scores' (Gemma 2, 50 by default). A cap of 0 is none, as in llama.cpp.
  auto softcapKey = [&](llvm::StringRef key, double fallback) -> llvm::Expected<std::optional<double>> {
    const gguf::Value *cap = archFind(key);
    if (cap ? cap->asFloat() == std::optional<double>(0.0) : fallback == 0)
      return std::nullopt;
    auto value = floatKey(key, fallback);
    if (!value)
      return value.takeError();
    return std::optional<double>(*value);
  };
  auto finalSoftcap = arch->gemma ? softcapKey("final_logit_softcapping", arch->logitSoftcap)
                                  : llvm::Expected<std::optional<double>>(std::nullopt);
  if (!finalSoftcap)
    return finalSoftcap.takeError();
  auto attentionSoftcap = arch->attentionSoftcap ? softcapKey("attn_logit_softcapping", arch->attentionSoftcap)
                                                 : llvm::Expected<std::optional<double>>(std::nullopt);
  if (!attentionSoftcap)
    return attentionSoftcap.takeError();

  const int64_t H = *hidden, F = *ffn, hd = *headDim, nh = *heads, nkv = *kvHeads;
  const int64_t qWidth = nh * hd, kvWidth = nkv * hd;

  const gguf::TensorInfo *embedInfo = file.findTensor("token_embd.weight");
  if (!embedInfo)
    return fail("the required tensor 'token_embd.weight' is missing");
  if (embedInfo->dims.size() != 2 || embedInfo->dims[1] > (uint64_t(1) << 30))
    return fail("tensor 'token_embd.weight' must be 2-D [embedding_length, vocabulary]");
  const int64_t vocab = int64_t(embedInfo->dims[1]);

  module->setAttr(HelmDialect::SourceAttrHelper::getNameStr(), b.getStringAttr(file.name()));
  std::string producer = "GGUF v" + std::to_string(file.version());
  if (const gguf::Value *name = file.find("general.name"))
    if (std::optional<llvm::StringRef> s = name->asString())
      producer += ": " + s->take_front(80).str();
  module->setAttr(HelmDialect::ProducerAttrHelper::getNameStr(), b.getStringAttr(producer));

  declarations = module.getBody();
  auto i64 = b.getI64Type();
  auto ids = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, i64);
  auto act = [&](int64_t width) {
    return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic, width}, b.getF32Type());
  };
  OpBuilder moduleBuilder = OpBuilder::atBlockBegin(module.getBody());
  auto func = func::FuncOp::create(moduleBuilder, b.getUnknownLoc(), "main",
                                   b.getFunctionType({ids, ids}, {act(vocab)}));
  auto nameAttr = HelmDialect::NameAttrHelper::getNameStr();
  func.setArgAttr(0, nameAttr, b.getStringAttr("input_ids"));
  func.setArgAttr(1, nameAttr, b.getStringAttr("position_ids"));
  func.setResultAttr(0, nameAttr, b.getStringAttr("logits"));
  Block *body = func.addEntryBlock();
  b.setInsertionPointToEnd(body);
  Value inputIds = body->getArgument(0), positions = body->getArgument(1);
  Location loc = b.getUnknownLoc();
  auto eps = b.getF64FloatAttr(*epsilon);

  auto table = weight("token_embd.weight", {vocab, H});
  if (!table)
    return table.takeError();
  Value h = EmbedOp::create(b, loc, act(H), inputIds, *table);
  if (arch->gemma) // llama.cpp: ggml_scale by sqrtf(n_embd), in f32
    h = ScaleOp::create(b, loc, h, b.getF64FloatAttr(double(std::sqrt(float(H)))));

  auto linear = [&](Value x, llvm::StringRef name, int64_t in, int64_t out) -> llvm::Expected<Value> {
    auto w = weight((name + ".weight").str(), {out, in});
    if (!w)
      return w.takeError();
    auto bias = optionalWeight((name + ".bias").str(), {out});
    if (!bias)
      return bias.takeError();
    return LinearOp::create(b, loc, act(out), x, *w, *bias, b.getBoolAttr(true)).getResult();
  };
  // Rows [first, first + out) of a fused [total, in] projection (Phi-3's attn_qkv, its gate-up
  // ffn_up), as a linear of their own; fused tensors have no biases.
  auto linearRows = [&](Value x, llvm::StringRef name, int64_t in, int64_t total, int64_t first, int64_t out,
                        llvm::StringRef part) -> llvm::Expected<Value> {
    auto w = weight((name + ".weight").str(), {total, in}, Rows{first, out, part});
    if (!w)
      return w.takeError();
    return LinearOp::create(b, loc, act(out), x, *w, Value(), b.getBoolAttr(true)).getResult();
  };
  auto norm = [&](Value x, llvm::StringRef name, int64_t size) -> llvm::Expected<Value> {
    auto gamma = weight((name + ".weight").str(), {size});
    if (!gamma)
      return gamma.takeError();
    return RmsNormOp::create(b, loc, x.getType(), x, *gamma, eps).getResult();
  };
  // A sublayer's output as it joins the residual stream: normalised again by `name` (Gemma 2,
  // 3's post_attention_norm / post_ffw_norm), or as it is.
  auto postNorm = [&](Value x, const std::string &name) -> llvm::Expected<Value> {
    return arch->postNorms ? norm(x, name, H) : llvm::Expected<Value>(x);
  };
  // llama.cpp scales the scores by 1/sqrt(head size) computed in f32 (Gemma 3 27B: by
  // 1/sqrt(embedding_length / heads)).
  const bool hiddenScaled = arch->hiddenScaledLayers && *layers == arch->hiddenScaledLayers;
  double scale = double(1.0f / std::sqrt(float(hiddenScaled ? H / nh : hd)));
  auto style = RopeStyleAttr::get(&ctx, arch->rope);

  for (int64_t layer = 0; layer < *layers; ++layer) {
    std::string p = "blk." + std::to_string(layer) + ".";
    auto x = norm(h, p + "attn_norm", H);
    if (!x)
      return x.takeError();
    // q, k and v: three tensors, or the rows of one fused attn_qkv (Phi-3).
    const bool fusedQkv = file.findTensor(p + "attn_qkv.weight") != nullptr;
    const int64_t qkv = qWidth + 2 * kvWidth;
    auto q = fusedQkv ? linearRows(*x, p + "attn_qkv", H, qkv, 0, qWidth, "q") : linear(*x, p + "attn_q", H, qWidth);
    auto k = !q        ? q.takeError()
             : fusedQkv ? linearRows(*x, p + "attn_qkv", H, qkv, qWidth, kvWidth, "k")
                        : linear(*x, p + "attn_k", H, kvWidth);
    auto v = !k        ? k.takeError()
             : fusedQkv ? linearRows(*x, p + "attn_qkv", H, qkv, qWidth + kvWidth, kvWidth, "v")
                        : linear(*x, p + "attn_v", H, kvWidth);
    if (!v)
      return v.takeError();
    Value qv = *q, kv = *k;
    if (arch->headNorm) {
      auto qn = norm(qv, p + "attn_q_norm", hd);
      auto kn = qn ? norm(kv, p + "attn_k_norm", hd) : qn.takeError();
      if (!kn)
        return kn.takeError();
      qv = *qn;
      kv = *kn;
    }
    // A layer of Gemma 3's sliding pattern: windowed, with the local rope base and no scaling.
    const bool local = arch->slidingPattern && slidingWindow && (*sliding)[size_t(layer)];
    const bool global = arch->slidingPattern && !local;
    FloatAttr layerTheta = b.getF64FloatAttr(local ? slidingTheta : *theta);
    const bool scaled = !(local && !arch->localRopeScaled);
    DenseF32ArrayAttr layerFactors = scaled ? scaling->factors : DenseF32ArrayAttr();
    qv = RopeOp::create(b, loc, qv.getType(), qv, positions, b.getI64IntegerAttr(hd),
                        b.getI64IntegerAttr(*rotaryDim), layerTheta, style, layerFactors);
    kv = RopeOp::create(b, loc, kv.getType(), kv, positions, b.getI64IntegerAttr(hd),
                        b.getI64IntegerAttr(*rotaryDim), layerTheta, style, layerFactors);
    auto attention = AttentionOp::create(b, loc, act(qWidth), TypeRange(), qv, kv, *v, Value(), Value(),
                                         b.getI64IntegerAttr(nh), b.getI64IntegerAttr(nkv),
                                         b.getI64IntegerAttr(hd),
                                         b.getF64FloatAttr(scale * (scaled ? scaling->scoreScale
                                                                           : scaling->unscaledScoreScale)),
                                         global ? IntegerAttr() : slidingWindow,
                                         *attentionSoftcap ? b.getF64FloatAttr(**attentionSoftcap) : FloatAttr());
    auto o = linear(attention.getResult(), p + "attn_output", qWidth, H);
    if (!o)
      return o.takeError();
    auto attended = postNorm(*o, p + "post_attention_norm");
    if (!attended)
      return attended.takeError();
    h = AddOp::create(b, loc, h, *attended);
    auto y = norm(h, p + "ffn_norm", H);
    if (!y)
      return y.takeError();
    // Gate and up: two tensors, or Phi-3's ffn_up holding the gate's rows, then the up rows.
    const bool fusedGateUp = arch->name == "phi3";
    auto gate = fusedGateUp ? linearRows(*y, p + "ffn_up", H, 2 * F, 0, F, "gate") : linear(*y, p + "ffn_gate", H, F);
    auto up = !gate         ? gate.takeError()
              : fusedGateUp ? linearRows(*y, p + "ffn_up", H, 2 * F, F, F, "up")
                            : linear(*y, p + "ffn_up", H, F);
    if (!up)
      return up.takeError();
    Value s = arch->gemma ? GegluOp::create(b, loc, *gate, *up).getResult()
                          : SwigluOp::create(b, loc, *gate, *up).getResult();
    auto down = linear(s, p + "ffn_down", F, H);
    if (!down)
      return down.takeError();
    auto mlp = postNorm(*down, p + "post_ffw_norm");
    if (!mlp)
      return mlp.takeError();
    h = AddOp::create(b, loc, h, *mlp);
  }
  auto last = norm(h, "output_norm", H);
  if (!last)
    return last.takeError();
  bool tied = !file.findTensor("output.weight");
  Value headWeight = *table;
  if (!tied) {
    auto head = weight("output.weight", {vocab, H});
    if (!head)
      return head.takeError();
    headWeight = *head;
  }
  Value logits = LmHeadOp::create(b, loc, act(vocab), *last, headWeight, b.getBoolAttr(true), b.getBoolAttr(tied));
  if (*finalSoftcap)
    logits = SoftcapOp::create(b, loc, logits, b.getF64FloatAttr(**finalSoftcap));
  func::ReturnOp::create(b, loc, logits);

  // Every tensor must have a role: one HELM would ignore (a bias of a kind it does not apply, a
  // scaling table) would silently change the model.
  for (const gguf::TensorInfo &t : file.tensors())
    if (!used.contains(t.name))
      return fail("tensor " + gguf::quoted(t.name) + " has no place in a " + arch->name +
                  " model as HELM builds it (is the file a different architecture?)");
  return llvm::Error::success();
}

} // namespace

bool isGgufFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFileSlice(path, 4, 0);
  return buffer && (*buffer)->getBufferSize() == 4 && std::memcmp((*buffer)->getBufferStart(), "GGUF", 4) == 0;
}

namespace {
llvm::Expected<GgufImport> importOpened(MLIRContext &ctx, llvm::Expected<std::unique_ptr<gguf::File>> opened,
                                        int64_t maxContext) {
  if (!opened)
    return opened.takeError();
  const std::string path = (*opened)->name().str();
  auto source = std::make_shared<GgufWeightSource>(std::move(*opened));
  const gguf::File &file = source->gguf();
  ctx.getOrLoadDialect<HelmDialect>();
  ctx.getOrLoadDialect<func::FuncDialect>();

  GgufImport result;
  result.model.module = ModuleOp::create(UnknownLoc::get(&ctx));
  Importer importer(ctx, file, source->parts(), maxContext);
  if (llvm::Error e = importer.run(*result.model.module))
    return std::move(e);
  {
    std::string first;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
      if (first.empty())
        first = diag.str();
      return success();
    });
    if (failed(mlir::verify(*result.model.module)))
      return llvm::createStringError(path + ": the imported model does not verify: " + first);
  }
  result.model.weights = source;

  if (const gguf::Value *tmpl = file.find("tokenizer.chat_template"))
    result.chatTemplate = tmpl->asString().value_or("").str();
  for (const char *key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const gguf::Value *id = file.find(key))
      if (std::optional<int64_t> v = id->asInt(); v && *v >= 0 && *v < (int64_t(1) << 31))
        result.eosIds.push_back(int32_t(*v));
  if (file.find("tokenizer.ggml.model")) {
    auto json = tokenizerJsonFromGguf(file);
    if (json)
      result.tokenizerJson = std::move(*json);
    else
      result.tokenizerError = llvm::toString(json.takeError());
  }
  return result;
}
} // namespace

llvm::Expected<GgufImport> importGgufFile(MLIRContext &ctx, const std::string &path, int64_t maxContext) {
  return importOpened(ctx, gguf::File::open(path), maxContext);
}

llvm::Expected<GgufImport> importGgufBuffer(MLIRContext &ctx, std::unique_ptr<llvm::MemoryBuffer> buffer,
                                            llvm::StringRef name, int64_t maxContext) {
  return importOpened(ctx, gguf::File::parse(std::move(buffer), name), maxContext);
}

} // namespace helm
