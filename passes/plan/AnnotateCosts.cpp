//===- AnnotateCosts.cpp - per-unit costs from shapes and dtypes -----------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/plan/Passes.h"
#include "passes/plan/UnitCosts.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace helm {
#define GEN_PASS_DEF_ANNOTATECOSTS
#include "passes/plan/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
int64_t byteWidth(Type t) { return (t.getIntOrFloatBitWidth() + 7) / 8; }

int64_t lastDim(Value v) {
  auto shape = shapeOf(v);
  return shape.empty() || ShapedType::isDynamic(shape.back()) ? 0 : shape.back();
}

/// The linear ops of a block's gated FFN: those whose result (or a split piece of it) gates or is
/// gated by helm.swiglu / helm.geglu (gate and up, fused or not), and those that read the gate's
/// result (down).
llvm::SmallPtrSet<Operation *, 4> ffnLinears(UnitOp unit) {
  llvm::SmallPtrSet<Operation *, 4> linears;
  auto addSource = [&](Value v) {
    if (auto split = v.getDefiningOp<SplitOp>())
      v = split.getInput();
    if (auto linear = v.getDefiningOp<LinearOp>())
      linears.insert(linear);
  };
  unit.walk([&](Operation *op) {
    if (!isa<SwigluOp, GegluOp>(op))
      return;
    addSource(op->getOperand(0));
    addSource(op->getOperand(1));
    for (Operation *user : op->getResult(0).getUsers())
      if (auto linear = dyn_cast<LinearOp>(user); linear && linear.getInput() == op->getResult(0))
        linears.insert(linear);
  });
  return linears;
}

/// A linear's stored weight bytes: its declaration's (blocks included), or a constant's.
int64_t storedWeightBytes(LinearOp linear) {
  auto type = cast<RankedTensorType>(linear.getWeight().getType());
  if (auto w = linear.getWeight().getDefiningOp<WeightOp>())
    if (auto decl = SymbolTable::lookupNearestSymbolFrom<WeightDeclOp>(w, w.getNameAttr()))
      return decl.getStoredBytes();
  return type.getNumElements() * byteWidth(type.getElementType());
}

struct AnnotateCostsPass : helm::impl::AnnotateCostsBase<AnnotateCostsPass> {
  using AnnotateCostsBase::AnnotateCostsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (batch < 1 || context < 0 || promptLen < 1) {
      module.emitError() << "cost options must be batch >= 1, context >= 0, prompt-len >= 1";
      return signalPassFailure();
    }
    auto units = unitsOf(module);
    if (units.empty()) {
      module.emitError() << "no partition units to cost; run helm-form-units first";
      return signalPassFailure();
    }
    MLIRContext *ctx = module.getContext();
    const double B = double(batch), S = double(promptLen);
    for (UnitOp unit : units) {
      // Distinct weights (declared lengths: nothing is read) and constants, as the partitioner
      // counts them.
      int64_t resident = 0;
      for (const auto &[name, bytes] : unitTensors(unit))
        resident += bytes;
      // The unit's boundary activation: the embedding rows, the residual stream, or the logits (a
      // block also yields its KV cache).
      auto yield = cast<YieldOp>(unit.getBody().front().getTerminator());
      Value out;
      for (Value v : yield.getValues())
        if (v.getDefiningOp<EmbedOp>() || v.getDefiningOp<AddOp>() || v.getDefiningOp<LmHeadOp>()) {
          out = v;
          break;
        }
      int64_t outWidth = out ? lastDim(out) : 0;
      int64_t outBytes = out ? byteWidth(elementTypeOf(out)) : 0;

      int64_t param = resident, kvPerToken = 0, kvElems = 0, attnIo = 0;
      double linElems = 0, projDecode = 0, projPrefill = 0, attnPerToken = 0, attnPrefill = 0;
      double prefillParam = double(resident);
      unit.walk([&](LinearOp l) {
        linElems += double(cast<RankedTensorType>(l.getWeight().getType()).getNumElements());
      });
      if (unit.getKind() == UnitKind::embedding) {
        // Only the B gathered rows are read per decode step (B x S rows for a prompt), in the
        // table's stored form (a quantized row is its blocks).
        int64_t rowBytes = outWidth * outBytes;
        unit.walk([&](EmbedOp e) {
          if (auto table = e.getTable().getDefiningOp<WeightOp>())
            if (auto decl = SymbolTable::lookupNearestSymbolFrom<WeightDeclOp>(table, table.getNameAttr());
                decl && decl.getBlocksAttr())
              rowBytes = decl.getStoredBytes() / shapeOf(table)[0];
        });
        param = int64_t(B) * rowBytes;
        prefillParam = B * S * double(rowBytes);
      } else if (unit.getKind() == UnitKind::block) {
        projDecode = 2 * B * linElems;
        projPrefill = 2 * B * S * linElems;
        unit.walk([&](AttentionOp a) {
          double heads = double(a.getNumHeads()), headDim = double(a.getHeadDim());
          kvPerToken += 2 * a.getNumKvHeads() * a.getHeadDim() * byteWidth(elementTypeOf(a.getK()));
          kvElems += 2 * a.getNumKvHeads() * a.getHeadDim();
          // q goes to the attention and its output comes back (activation width each), with the
          // new k and v.
          attnIo += int64_t(B) * (2 * a.getNumHeads() * a.getHeadDim() * byteWidth(elementTypeOf(a.getQ())) +
                                  2 * a.getNumKvHeads() * a.getHeadDim() * byteWidth(elementTypeOf(a.getK())));
          attnPerToken += 4 * B * heads * headDim;
          attnPrefill += 2 * B * heads * headDim * S * (S + 1);
        });
      } else {
        // The LM head projects only the last position, in decode and in prefill.
        unit.walk([&](LmHeadOp h) {
          linElems += double(cast<RankedTensorType>(h.getWeight().getType()).getNumElements());
        });
        projDecode = projPrefill = 2 * B * linElems;
      }
      int64_t ffnBytes = 0, ffnElems = 0;
      if (unit.getKind() == UnitKind::block)
        for (Operation *op : ffnLinears(unit)) {
          auto linear = cast<LinearOp>(op);
          ffnBytes += storedWeightBytes(linear);
          ffnElems += cast<RankedTensorType>(linear.getWeight().getType()).getNumElements();
        }
      double flopsDecode = projDecode + attnPerToken * double(context);
      double flopsPrefill = projPrefill + attnPrefill;
      HelmDialect::CostAttrHelper(ctx).setAttr(
          unit, UnitCostAttr::get(ctx, param, resident, int64_t(B) * outWidth * outBytes, kvPerToken,
                                  int64_t(flopsDecode), int64_t(flopsPrefill), projDecode, attnPerToken,
                                  projPrefill, attnPrefill, int64_t(prefillParam),
                                  int64_t(B * S * double(outWidth * outBytes)), attnIo, ffnBytes,
                                  ffnElems, kvElems));
    }
    HelmDialect::CostOptionsAttrHelper(ctx).setAttr(module,
                                                    CostOptionsAttr::get(ctx, batch, context, promptLen));
  }
};
} // namespace
