//===- FreeBuffers.cpp - free stage-local buffers after their last use ----------===//
//
// Stage functions are straight-line code after bufferization, so liveness is a position in the
// entry block. Anything the buffer's address flows into (views, pointer extraction, kernel calls,
// ops in nested regions) counts as a use; an address that reaches a return keeps its buffer alive.
// Its sizes (memref.dim) are not its address: what they compute is not followed.
// A unit function's result that is a buffer it allocated belongs to the caller, which frees it
// like its own allocations (a module pass: the callers look at their callees' bodies).
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Passes.h"

#include "mlir/IR/Builders.h"

namespace helm {
#define GEN_PASS_DEF_FREEBUFFERS
#include "passes/codegen/Passes.h.inc"
} // namespace helm

using namespace mlir;

namespace {

/// For each result of `function`: whether it returns a buffer the function allocated itself
/// (a `memref.alloc` of its entry block, through casts only), which no other result returns.
SmallVector<bool> freshResults(func::FuncOp function) {
  if (function.isExternal() || !function.getBody().hasOneBlock())
    return SmallVector<bool>(function.getNumResults(), false);
  auto ret = dyn_cast<func::ReturnOp>(function.getBody().front().getTerminator());
  SmallVector<bool> fresh(function.getNumResults(), false);
  if (!ret)
    return fresh;
  SmallVector<Operation *> allocs;
  for (Value v : ret.getOperands()) {
    while (auto cast = v.getDefiningOp<memref::CastOp>())
      v = cast.getSource();
    auto alloc = v.getDefiningOp<memref::AllocOp>();
    allocs.push_back(alloc && alloc->getBlock() == &function.getBody().front() ? alloc : nullptr);
  }
  for (size_t i = 0; i < allocs.size(); ++i)
    fresh[i] = allocs[i] && llvm::count(allocs, allocs[i]) == 1;
  return fresh;
}

/// Whether `result` of `user`, an op the buffer's address flows into, may carry that address
/// (and so must be followed as an alias). Sizes and ranks read from the buffer's descriptor do
/// not: they size the next buffers of a layer, and followed they made every buffer shaped like
/// this one an alias of it, so the buffer the function returns kept them all alive. Nor does a
/// buffer the op allocates (sized by the buffer, or by something loaded from it): it is new.
bool mayCarryAddress(Operation *user, OpResult result) {
  if (isa<memref::DimOp, memref::RankOp>(user))
    return false;
  if (auto metadata = dyn_cast<memref::ExtractStridedMetadataOp>(user))
    return result == metadata.getBaseBuffer();
  return !hasEffect<MemoryEffects::Allocate>(user, result);
}

/// Frees each buffer `func` owns (its allocations, and the fresh results of the unit functions it
/// calls) after the last use of any of its aliases, unless an alias escapes.
void freeOwnedBuffers(func::FuncOp func,
                      const llvm::DenseMap<Operation *, SmallVector<bool>> &freshByCallee,
                      SymbolTable &symbols) {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return;
  Block &entry = func.getBody().front();
  SmallVector<Value> owned;
  for (Operation &op : entry) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      owned.push_back(alloc.getResult());
      continue;
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto it = freshByCallee.find(symbols.lookup(call.getCallee()));
      if (it == freshByCallee.end())
        continue;
      for (auto [result, fresh] : llvm::zip(call.getResults(), it->second))
        if (fresh)
          owned.push_back(result);
    }
  }
  OpBuilder b(func.getContext());
  for (Value buffer : owned) {
    Operation *last = buffer.getDefiningOp();
    bool escapes = false;
    SmallVector<Value> worklist{buffer};
    llvm::DenseSet<Value> seen{buffer};
    while (!worklist.empty() && !escapes) {
      Value v = worklist.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (isa<func::ReturnOp, memref::DeallocOp>(user)) {
          escapes = true;
          break;
        }
        Operation *top = entry.findAncestorOpInBlock(*user);
        if (!top) {
          escapes = true;
          break;
        }
        if (last->isBeforeInBlock(top))
          last = top;
        // A unit function's fresh result is a new buffer, not a view of its arguments.
        const SmallVector<bool> *fresh = nullptr;
        if (auto call = dyn_cast<func::CallOp>(user))
          if (auto it = freshByCallee.find(symbols.lookup(call.getCallee())); it != freshByCallee.end())
            fresh = &it->second;
        for (auto [i, r] : llvm::enumerate(user->getResults()))
          if (!(fresh && (*fresh)[i]) && mayCarryAddress(user, r) && seen.insert(r).second)
            worklist.push_back(r);
      }
    }
    if (escapes)
      continue;
    // `last` is never the terminator (a returned alias escapes), so this is before the return.
    b.setInsertionPointAfter(last);
    memref::DeallocOp::create(b, buffer.getLoc(), buffer);
  }
}

struct FreeBuffersPass : helm::impl::FreeBuffersBase<FreeBuffersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    // Before any function gets its frees: a returned buffer is recognised by its allocation.
    llvm::DenseMap<Operation *, SmallVector<bool>> freshByCallee;
    for (auto function : module.getOps<func::FuncOp>())
      if (function->hasAttr(helm::HelmDialect::UnitFunctionAttrHelper::getNameStr()))
        freshByCallee[function] = freshResults(function);
    for (auto function : module.getOps<func::FuncOp>())
      freeOwnedBuffers(function, freshByCallee, symbols);
  }
};

} // namespace
