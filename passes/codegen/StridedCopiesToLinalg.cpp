//===- StridedCopiesToLinalg.cpp - memref.copy of strided views to linalg.copy ----===//
//
// memref.copy between contiguous buffers lowers to a memcpy, but a copy from a strided view (a
// slice of a fused projection, say) lowers to a call into MLIR's C runner library, which a stage
// must not depend on. Such copies become linalg.copy, i.e. generated loops.
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace helm {
#define GEN_PASS_DEF_STRIDEDCOPIESTOLINALG
#include "passes/codegen/Passes.h.inc"
} // namespace helm

using namespace mlir;

namespace {

struct StridedCopiesToLinalgPass
    : helm::impl::StridedCopiesToLinalgBase<StridedCopiesToLinalgPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) {
      auto source = dyn_cast<MemRefType>(copy.getSource().getType());
      auto target = dyn_cast<MemRefType>(copy.getTarget().getType());
      if (source && target && (!source.getLayout().isIdentity() || !target.getLayout().isIdentity()))
        copies.push_back(copy);
    });
    IRRewriter rewriter(&getContext());
    for (memref::CopyOp copy : copies) {
      rewriter.setInsertionPoint(copy);
      linalg::CopyOp::create(rewriter, copy.getLoc(), copy.getSource(), copy.getTarget());
      rewriter.eraseOp(copy);
    }
  }
};

} // namespace
