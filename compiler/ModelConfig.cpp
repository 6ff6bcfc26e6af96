//===- ModelConfig.cpp - the model configuration recovered from raised HELM IR --===//
#include "compiler/ModelConfig.h"

#include "contract/manifest_schema.h"

#include "dialects/helm/HelmDialect.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace helm {

namespace {
std::string dtypeName(Type t) {
  if (t.isF32()) return "float32";
  if (t.isF16()) return "float16";
  if (t.isBF16()) return "bfloat16";
  if (t.isF64()) return "float64";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}
} // namespace

llvm::Expected<ModelConfig> extractModelConfig(ModuleOp module) {
  ModelConfig config;
  EmbedOp embed;
  LmHeadOp head;
  AttentionOp firstAttention;
  RopeOp firstRope;
  bool fusedProjections = false, qkvBias = false, headNorm = false, slidingWindow = false, gelu = false,
       softcap = false;
  module.walk([&](Operation *op) {
    if (auto unit = dyn_cast<UnitOp>(op)) {
      ++config.numUnits;
      config.numLayers += unit.getKind() == UnitKind::block;
    } else if (auto e = dyn_cast<EmbedOp>(op)) {
      embed = embed ? embed : e;
    } else if (auto h = dyn_cast<LmHeadOp>(op)) {
      head = h;
    } else if (auto a = dyn_cast<AttentionOp>(op)) {
      firstAttention = firstAttention ? firstAttention : a;
      slidingWindow |= a.getSlidingWindow().has_value();
    } else if (auto r = dyn_cast<RopeOp>(op)) {
      firstRope = firstRope ? firstRope : r;
    } else if (auto s = dyn_cast<SplitOp>(op)) {
      fusedProjections = true;
    } else if (isa<SoftcapOp>(op)) {
      softcap = true;
    } else if (isa<SwigluOp, GegluOp>(op)) {
      gelu |= isa<GegluOp>(op);
      if (!config.intermediateSize)
        config.intermediateSize = cast<RankedTensorType>(op->getResult(0).getType()).getShape().back();
    } else if (auto n = dyn_cast<RmsNormOp>(op)) {
      if (config.rmsNormEps == 0)
        config.rmsNormEps = n.getEpsilon().convertToDouble();
    }
  });
  if (!embed || !head || !firstAttention || config.numLayers == 0) {
    return llvm::createStringError(
        "the raised graph is not a decoder: it needs an embedding, at least one transformer block "
        "and an LM head");
  }
  auto table = cast<RankedTensorType>(embed.getTable().getType());
  config.hiddenSize = table.getDimSize(1);
  config.vocabSize = cast<RankedTensorType>(head.getType()).getShape().back();
  config.numAttentionHeads = firstAttention.getNumHeads();
  config.numKeyValueHeads = firstAttention.getNumKvHeads();
  config.headDim = firstAttention.getHeadDim();
  config.tieWordEmbeddings = head.getTied();
  config.ropeTheta = firstRope && firstRope.getThetaAttr() ? firstRope.getThetaAttr().getValueAsDouble() : 0.0;
  config.dtype = dtypeName(table.getElementType());

  // Per-head RMSNorm on q/k (Qwen3), fused qkv/gate_up projections (Phi-3), q/k/v bias (Qwen2) and
  // sliding-window attention (Mistral) tell the families apart in the graph. A Mistral model without
  // a window is a Llama model and is reported as one.
  module.walk([&](RmsNormOp n) {
    if (cast<RankedTensorType>(n.getGamma().getType()).getDimSize(0) == config.headDim &&
        config.headDim != config.hiddenSize)
      headNorm = true;
  });
  module.walk([&](LinearOp l) {
    if (l.getBias() && l.getResult().hasOneUse() && isa<RopeOp>(*l.getResult().user_begin()))
      qkvBias = true;
  });
  // Gemma's GELU-gated MLP tells it apart: Gemma 3 with per-head q/k norms, Gemma 2 soft-caps its
  // logits.
  config.architecture = gelu               ? (headNorm ? "gemma3" : softcap ? "gemma2" : "gemma")
                        : headNorm         ? "qwen3"
                        : fusedProjections ? "phi3"
                        : qkvBias          ? "qwen2"
                        : slidingWindow    ? "mistral"
                                           : "llama";
  return config;
}

llvm::json::Object modelConfigJson(const ModelConfig &c) {
  return llvm::json::Object{
      {HELM_MANIFEST_CONFIG_ARCHITECTURE, c.architecture},
      {"num_layers", c.numLayers},
      {"hidden_size", c.hiddenSize},
      {"num_attention_heads", c.numAttentionHeads},
      {"num_key_value_heads", c.numKeyValueHeads},
      {"head_dim", c.headDim},
      {"intermediate_size", c.intermediateSize},
      {"vocab_size", c.vocabSize},
      // null when the import was shape-only and the rotary frequencies were not read
      {"rope_theta", c.ropeTheta > 0 ? llvm::json::Value(c.ropeTheta) : llvm::json::Value(nullptr)},
      {"rms_norm_eps", c.rmsNormEps},
      {"tie_word_embeddings", c.tieWordEmbeddings},
      {HELM_MANIFEST_CONFIG_DTYPE, c.dtype},
      {"num_units", c.numUnits},
  };
}

std::string modelConfigToJson(const ModelConfig &c) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", llvm::json::Value(modelConfigJson(c)));
  return s;
}

} // namespace helm
