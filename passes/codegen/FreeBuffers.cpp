//===- FreeBuffers.cpp - free stage-local buffers after their last use ----------===//
//
// Stage functions are straight-line code after bufferization, so liveness is a position in the
// entry block. Anything the buffer's address flows into (views, pointer extraction, kernel calls,
// ops in nested regions) counts as a use; an address that reaches a return keeps its buffer alive.
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

struct FreeBuffersPass : helm::impl::FreeBuffersBase<FreeBuffersPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    Block &entry = func.getBody().front();
    SmallVector<memref::AllocOp> allocs;
    for (auto alloc : entry.getOps<memref::AllocOp>())
      allocs.push_back(alloc);
    OpBuilder b(func.getContext());
    for (memref::AllocOp alloc : allocs) {
      Operation *last = alloc;
      bool escapes = false;
      SmallVector<Value> worklist{alloc.getResult()};
      llvm::DenseSet<Value> seen{alloc.getResult()};
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
          for (Value r : user->getResults())
            if (seen.insert(r).second)
              worklist.push_back(r);
        }
      }
      if (escapes)
        continue;
      // `last` is never the terminator (a returned alias escapes), so this is before the return.
      b.setInsertionPointAfter(last);
      memref::DeallocOp::create(b, alloc.getLoc(), alloc.getResult());
    }
  }
};

} // namespace
