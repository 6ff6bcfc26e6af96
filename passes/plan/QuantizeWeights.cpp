//===- QuantizeWeights.cpp - the block format each weight is stored in -----------===//
#include "passes/plan/Passes.h"

#include "contract/helm_contract.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "mlir/IR/SymbolTable.h"

#include <limits>
#include <vector>

namespace helm {
#define GEN_PASS_DEF_QUANTIZEWEIGHTS
#include "passes/plan/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
/// The dimension of `weight` that holds the rows when `user` reads it as a matrix of rows of
/// blocks: the output features of a linear or LM head ([N, K] when transposed, else [K, N]), the
/// tokens of an embedding table. -1 for any other use (a norm weight, a bias), which keeps the
/// weight in its source dtype.
int64_t rowDimOfUse(Operation *user, Value weight) {
  if (auto linear = dyn_cast<LinearOp>(user); linear && linear.getWeight() == weight)
    return linear.getTransposeWeight() ? 0 : 1;
  if (auto head = dyn_cast<LmHeadOp>(user); head && head.getWeight() == weight)
    return head.getTransposeWeight() ? 0 : 1;
  if (auto embed = dyn_cast<EmbedOp>(user); embed && embed.getTable() == weight)
    return 0;
  return -1;
}

/// What a weight is to the mixed recipes.
enum class Role { other, head, attentionV, fusedQkv, attentionOutput, ffnDown };

/// llama.cpp's mixed recipes (llama-quantize's Q2_K, Q3_K_M, Q4_K_M, Q5_K_M).
enum class Recipe { q2_k, q3_k_m, q4_k_m, q5_k_m };

/// The projection behind attention's V after raising: a helm.linear, or one piece (helm.split) of
/// a fused one (`split` is then set). helm-raise-attention already traced V through the
/// exporter's reshapes and transposes, so nothing else stands between them.
LinearOp producingLinear(Value value, bool &split) {
  if (auto piece = value.getDefiningOp<SplitOp>()) {
    split = true;
    value = piece.getInput();
  }
  return value.getDefiningOp<LinearOp>();
}

/// Roles by weight symbol, and each weight's transformer block (the position of the `helm.unit
/// block` that reads it among the block units: unit indices count the embedding unit too), from
/// the raised function.
struct Roles {
  llvm::DenseMap<StringAttr, Role> role;
  llvm::DenseMap<StringAttr, int64_t> block;
  int64_t blocks = 0;
  /// Query heads per KV head (llama.cpp's n_gqa), the largest of the attentions.
  int64_t gqa = 1;
};

StringAttr weightSymbol(Value weight) {
  if (auto op = weight.getDefiningOp<WeightOp>())
    return op.getNameAttr().getAttr();
  return {};
}

Roles findRoles(ModuleOp module) {
  Roles roles;
  int64_t firstBlock = std::numeric_limits<int64_t>::max();
  module.walk([&](UnitOp unit) {
    if (unit.getKind() == UnitKind::block) {
      roles.blocks += 1;
      firstBlock = std::min(firstBlock, int64_t(unit.getIndex()));
    }
  });
  module.walk([&](Operation *op) {
    auto mark = [&](Value weight, Role role) {
      if (StringAttr name = weightSymbol(weight)) {
        Role &r = roles.role[name];
        if (r == Role::other || role == Role::head) // the head wins over an embedding use
          r = role;
      }
    };
    if (auto head = dyn_cast<LmHeadOp>(op)) {
      mark(head.getWeight(), Role::head);
    } else if (auto attention = dyn_cast<AttentionOp>(op)) {
      if (attention.getNumKvHeads() > 0)
        roles.gqa = std::max<int64_t>(roles.gqa, attention.getNumHeads() / attention.getNumKvHeads());
      bool split = false;
      if (LinearOp v = producingLinear(attention.getV(), split))
        mark(v.getWeight(), split ? Role::fusedQkv : Role::attentionV);
    } else if (auto linear = dyn_cast<LinearOp>(op)) {
      if (linear.getInput().getDefiningOp<SwigluOp>() || linear.getInput().getDefiningOp<GegluOp>())
        mark(linear.getWeight(), Role::ffnDown);
      else if (linear.getInput().getDefiningOp<AttentionOp>())
        mark(linear.getWeight(), Role::attentionOutput);
    }
    if (auto weight = dyn_cast<WeightOp>(op))
      if (auto unit = op->getParentOfType<UnitOp>(); unit && unit.getKind() == UnitKind::block)
        roles.block[weight.getNameAttr().getAttr()] = int64_t(unit.getIndex()) - firstBlock;
  });
  return roles;
}

/// llama.cpp's choice of the blocks that get more bits in its _M recipes: the first and last
/// eighth, and every third block between.
bool moreBitsInBlock(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/// The format a row of `rowLength` weights takes instead of `format` when it is not a whole number
/// of `format`'s blocks (llama.cpp's llama-quantize rule: q2_k and q3_k -> q4_0, q4_k -> q5_0,
/// q5_k -> q5_1, q6_k -> q8_0), or nullopt when no format fits.
std::optional<BlockFormat> fitFormat(BlockFormat format, int64_t rowLength) {
  auto weightsOf = [](BlockFormat f) { return helm_dtype_block_weights(int32_t(f)); };
  if (rowLength % weightsOf(format) == 0)
    return format;
  BlockFormat fallback = format == BlockFormat::q4_k   ? BlockFormat::q5_0
                         : format == BlockFormat::q5_k ? BlockFormat::q5_1
                         : format == BlockFormat::q2_k || format == BlockFormat::q3_k ? BlockFormat::q4_0
                                                       : BlockFormat::q8_0;
  if (rowLength % weightsOf(fallback) == 0)
    return fallback;
  return std::nullopt;
}

struct QuantizeWeightsPass : helm::impl::QuantizeWeightsBase<QuantizeWeightsPass> {
  using QuantizeWeightsBase::QuantizeWeightsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // llama.cpp's mixed recipes: a base k-quant with more bits where they pay. q2_k is llama.cpp's
    // Q2_K mix under llama-quantize's name for it (every weight in q2_k blocks, the head included,
    // is not offered: it loses too much).
    const bool mixed = format == "q2_k" || format == "q3_k_m" || format == "q4_k_m" || format == "q5_k_m";
    const Recipe recipe = format == "q2_k"     ? Recipe::q2_k
                          : format == "q3_k_m" ? Recipe::q3_k_m
                          : format == "q5_k_m" ? Recipe::q5_k_m
                                               : Recipe::q4_k_m;
    std::optional<BlockFormat> single = mixed ? std::nullopt : symbolizeBlockFormat(format);
    if (!llvm::is_contained(quantizationSchemes(), llvm::StringRef(format))) {
      if (single)
        module.emitError() << "block format '" << format << "' is read from GGUF files only; helmc quantizes to "
                           << llvm::join(quantizationSchemes(), ", ");
      else
        module.emitError() << "unknown quantization format '" << format << "' (known: "
                           << llvm::join(quantizationSchemes(), ", ") << ")";
      return signalPassFailure();
    }
    Roles roles;
    if (mixed)
      roles = findRoles(module);
    MLIRContext *ctx = module.getContext();
    for (WeightDeclOp decl : module.getOps<WeightDeclOp>()) {
      auto type = cast<RankedTensorType>(decl.getType());
      // ONNX blocks stored dequantized keep their codes' precision: never quantized again.
      if (type.getRank() != 2 || !isa<FloatType>(type.getElementType()) || decl.getBlocksAttr() ||
          decl.getOnnxBlocksAttr())
        continue;
      int64_t rowDim = -1;
      bool storable = true;
      auto uses = SymbolTable::getSymbolUses(decl.getSymNameAttr(), module);
      for (const SymbolTable::SymbolUse &use : uses ? *uses : SymbolTable::UseRange({})) {
        auto weight = dyn_cast<WeightOp>(use.getUser());
        if (!weight) {
          storable = false;
          break;
        }
        for (Operation *user : weight.getResult().getUsers()) {
          int64_t dim = rowDimOfUse(user, weight.getResult());
          if (dim < 0 || (rowDim >= 0 && dim != rowDim))
            storable = false;
          rowDim = dim;
        }
      }
      if (!storable || rowDim < 0)
        continue;
      BlockFormat wanted = single ? *single : recipeFormat(roles, decl.getSymNameAttr(), recipe);
      if (std::optional<BlockFormat> fitted = fitFormat(wanted, type.getDimSize(1 - rowDim)))
        decl.setBlocksAttr(BlocksAttr::get(ctx, *fitted, rowDim));
    }
  }

  /// The format of one weight in `recipe`, as llama-quantize picks it for models that are not
  /// mixtures of experts (except its 70B rule, which bumps an 80-layer Llama's V projections). q4_k_m and q5_k_m: q6_k for the output head; one step above the base
  /// (q4_k, q5_k) for a fused QKV projection; q6_k for the attention V and FFN down projections of
  /// the blocks that get more bits; the base for everything else. q3_k_m: q6_k for the head; q5_k
  /// for the V projections of the first two blocks and the down projections of the first
  /// sixteenth, q4_k for the other V and down projections, the attention output and a fused QKV
  /// projection; q3_k for everything else. q2_k: q6_k for the head; the V projections q4_k where
  /// four or more query heads share a KV head, else q3_k; q3_k for the attention output and FFN down
  /// projections; q2_k for everything else.
  static BlockFormat recipeFormat(const Roles &roles, StringAttr name, Recipe recipe) {
    auto role = roles.role.find(name);
    auto block = roles.block.find(name);
    const int64_t index = block == roles.block.end() ? -1 : block->second;
    const Role r = role == roles.role.end() ? Role::other : role->second;
    if (r == Role::head)
      return BlockFormat::q6_k;
    if (recipe == Recipe::q2_k) {
      switch (r) {
      case Role::attentionV: return roles.gqa >= 4 ? BlockFormat::q4_k : BlockFormat::q3_k;
      case Role::ffnDown:
      case Role::attentionOutput: return BlockFormat::q3_k;
      case Role::fusedQkv:
      case Role::head:
      case Role::other: break;
      }
      return BlockFormat::q2_k;
    }
    if (recipe == Recipe::q3_k_m) {
      switch (r) {
      case Role::attentionV: return index >= 0 && index < 2 ? BlockFormat::q5_k : BlockFormat::q4_k;
      case Role::ffnDown: return index >= 0 && index < roles.blocks / 16 ? BlockFormat::q5_k : BlockFormat::q4_k;
      case Role::attentionOutput:
      case Role::fusedQkv: return BlockFormat::q4_k;
      case Role::head:
      case Role::other: break;
      }
      return BlockFormat::q3_k;
    }
    const BlockFormat base = recipe == Recipe::q4_k_m ? BlockFormat::q4_k : BlockFormat::q5_k;
    switch (r) {
    case Role::fusedQkv: return base == BlockFormat::q4_k ? BlockFormat::q5_k : BlockFormat::q6_k;
    case Role::attentionV:
    case Role::ffnDown:
      return index >= 0 && moreBitsInBlock(index, roles.blocks) ? BlockFormat::q6_k : base;
    case Role::head:
    case Role::attentionOutput:
    case Role::other: break;
    }
    return base;
  }
};
} // namespace

llvm::ArrayRef<llvm::StringLiteral> helm::quantizationSchemes() {
  // Every block format of the contract's table that helmc quantizes to, then llama.cpp's mixed
  // recipes.
  static const std::vector<llvm::StringLiteral> kSchemes = [] {
    std::vector<llvm::StringLiteral> schemes;
#define HELM_SCHEME_NAME(NAME, CODE, name, ggml, weights, bytes, quantizable)                                   \
  if (quantizable)                                                                                             \
    schemes.push_back(name);
    HELM_BLOCK_FORMATS(HELM_SCHEME_NAME)
#undef HELM_SCHEME_NAME
    schemes.push_back("q3_k_m");
    schemes.push_back("q4_k_m");
    schemes.push_back("q5_k_m");
    return schemes;
  }();
  return kSchemes;
}
