//===- FormUnits.cpp - group raised ops into partition units ---------------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace helm {
#define GEN_PASS_DEF_FORMUNITS
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {
struct FormUnitsPass : helm::impl::FormUnitsBase<FormUnitsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    int64_t numBlocks = 0;
    for (Operation &op : body)
      numBlocks += isa<AttentionOp>(op);
    if (numBlocks == 0) {
      func.emitError() << "no transformer block found (no attention was recognised)";
      return signalPassFailure();
    }

    // Unit of every computing op: 0 = embedding, 1..N = blocks, N+1 = head. Ops are visited in
    // program order, so operands are numbered first.
    llvm::DenseMap<Operation *, int64_t> residuals; // residual adds on the longest path, inclusive
    llvm::DenseMap<Operation *, int64_t> unitOf;
    SmallVector<Operation *> computing, shared;
    for (Operation &op : body) {
      if (&op == ret)
        continue;
      if (isa<WeightOp, ConstantOp, NoneOp>(op)) {
        shared.push_back(&op);
        continue;
      }
      int64_t r = 0;
      for (Value operand : op.getOperands())
        if (Operation *def = operand.getDefiningOp(); def && residuals.count(def))
          r = std::max(r, residuals[def]);
      // The embedding's own scaling (Gemma's sqrt(hidden)) stays with the embedding: what crosses
      // to block 0 is the scaled row, as in the reference.
      bool embedding = isa<EmbedOp>(op);
      if (auto scale = dyn_cast<ScaleOp>(op)) {
        auto def = unitOf.find(scale.getInput().getDefiningOp());
        embedding = def != unitOf.end() && def->second == 0;
      }
      unitOf[&op] = embedding ? 0 : std::min(r / 2, numBlocks) + 1;
      residuals[&op] = r + (isa<AddOp>(op) ? 1 : 0);
      computing.push_back(&op);
    }
    // An op that reads no residual value but feeds later ones (none today) would land in block 0;
    // the per-block check below catches any grouping that does not look like a decoder block.
    std::vector<int64_t> attentions(numBlocks + 2, 0), adds(numBlocks + 2, 0);
    for (Operation *op : computing) {
      attentions[unitOf[op]] += isa<AttentionOp>(op);
      adds[unitOf[op]] += isa<AddOp>(op);
    }
    for (int64_t u = 1; u <= numBlocks; ++u)
      if (attentions[u] != 1 || adds[u] != 2) {
        func.emitError() << "transformer block " << (u - 1) << " has " << attentions[u]
                         << " attention(s) and " << adds[u]
                         << " residual add(s); expected 1 and 2 (unsupported block structure)";
        return signalPassFailure();
      }

    OpBuilder b(ret);
    for (int64_t u = 0; u <= numBlocks + 1; ++u) {
      SmallVector<Operation *> members;
      for (Operation *op : computing)
        if (unitOf[op] == u)
          members.push_back(op);
      if (members.empty()) {
        func.emitError() << "partition unit " << u << " is empty";
        return signalPassFailure();
      }
      UnitKind kind = u == 0 ? UnitKind::embedding : u <= numBlocks ? UnitKind::block : UnitKind::head;
      llvm::SmallPtrSet<Operation *, 32> memberSet(members.begin(), members.end());
      // Results: values defined here and used outside the unit.
      SmallVector<Value> escaping;
      for (Operation *op : members)
        for (Value result : op->getResults())
          if (llvm::any_of(result.getUsers(), [&](Operation *user) { return !memberSet.contains(user); }))
            escaping.push_back(result);
      auto unit = UnitOp::create(b, members.front()->getLoc(), ValueRange(escaping).getTypes(),
                                   UnitKindAttr::get(b.getContext(), kind), b.getI64IntegerAttr(u));
      Block *unitBody = new Block();
      unit.getBody().push_back(unitBody);
      for (Operation *op : members)
        op->moveBefore(unitBody, unitBody->end());
      OpBuilder ub = OpBuilder::atBlockEnd(unitBody);
      YieldOp::create(ub, unit.getLoc(), escaping);
      for (auto [value, result] : llvm::zip(escaping, unit.getResults()))
        value.replaceUsesWithIf(result, [&](OpOperand &use) {
          return !unit->isProperAncestor(use.getOwner());
        });
      // Weights and constants: cloned into the unit at its first use (a tied embedding table lands in
      // both the embedding and the head unit).
      for (Operation *sharedOp : shared) {
        Value v = sharedOp->getResult(0);
        if (llvm::none_of(v.getUsers(), [&](Operation *user) { return unit->isProperAncestor(user); }))
          continue;
        OpBuilder cb = OpBuilder::atBlockBegin(unitBody);
        Operation *copy = cb.clone(*sharedOp);
        v.replaceUsesWithIf(copy->getResult(0), [&](OpOperand &use) {
          return unit->isProperAncestor(use.getOwner());
        });
      }
    }
    for (Operation *op : llvm::reverse(shared))
      if (op->use_empty())
        op->erase();
  }
};
} // namespace
