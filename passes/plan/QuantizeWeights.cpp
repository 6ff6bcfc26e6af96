//===- QuantizeWeights.cpp - the block format each weight is stored in -----------===//
#include "passes/plan/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

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

struct QuantizeWeightsPass : helm::impl::QuantizeWeightsBase<QuantizeWeightsPass> {
  using QuantizeWeightsBase::QuantizeWeightsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<BlockFormat> parsed = symbolizeBlockFormat(format);
    // The kernels read these formats today; the k-quants are stored and decoded by the block
    // library but have no GEMV yet.
    if (!parsed || (*parsed != BlockFormat::q8_0 && *parsed != BlockFormat::q4_0 &&
                    *parsed != BlockFormat::q4_1)) {
      module.emitError() << "unknown quantization format '" << format << "' (known: q8_0, q4_0, q4_1)";
      return signalPassFailure();
    }
    MLIRContext *ctx = module.getContext();
    auto blocks = [&](int64_t rowDim) { return BlocksAttr::get(ctx, *parsed, rowDim); };
    int64_t blockWeights = blocks(0).getBlockWeights();
    for (WeightDeclOp decl : module.getOps<WeightDeclOp>()) {
      auto type = cast<RankedTensorType>(decl.getType());
      if (type.getRank() != 2 || !isa<FloatType>(type.getElementType()) || decl.getBlocksAttr())
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
      if (!storable || rowDim < 0 || type.getDimSize(1 - rowDim) % blockWeights != 0)
        continue;
      decl.setBlocksAttr(blocks(rowDim));
    }
  }
};
} // namespace
