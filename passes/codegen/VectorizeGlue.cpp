//===- VectorizeGlue.cpp - tile and vectorize the stage's linalg.generic glue ------===//
//
// Every glue op (norms, rope tables, SwiGLU, residuals, bias) is tiled to one row and up to
// `vector-width` elements of its innermost loop (the widest width that divides the static row, so
// no tile needs a mask), and the tile is vectorized; a reduction over a static group becomes one
// vector reduction. Ops with gathers in their body (`tensor.extract` / `memref.load`: the
// embedding lookup and rope's partner lane) are left as scalar loops. Works on tensors or buffers;
// the CPU pipeline runs it after bufferization, because One-Shot Bufferize's analysis of the many
// tiled loops on tensors can take minutes on a 30-block model.
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Passes.h"

#include <algorithm>

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

namespace helm {
#define GEN_PASS_DEF_VECTORIZEGLUE
#include "passes/codegen/Passes.h.inc"
} // namespace helm

using namespace mlir;

namespace {

struct VectorizeGluePass : helm::impl::VectorizeGlueBase<VectorizeGluePass> {
  using VectorizeGlueBase::VectorizeGlueBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (vectorWidth < 1) {
      func.emitError() << "helm-vectorize-glue: vector-width must be >= 1";
      return signalPassFailure();
    }
    SmallVector<linalg::GenericOp> generics;
    func.walk([&](linalg::GenericOp op) {
      // Gathers (embedding rows, rope's partner lane) stay scalar loops: MLIR 22's masked
      // vectorization of n-D tensor.extract builds ill-typed index arithmetic.
      bool gathers = !op.getRegion().getOps<tensor::ExtractOp>().empty() ||
                     !op.getRegion().getOps<memref::LoadOp>().empty();
      if ((op.hasPureTensorSemantics() || op.hasPureBufferSemantics()) && !gathers)
        generics.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : generics) {
      unsigned loops = op.getNumLoops();
      if (loops == 0)
        continue;
      // Parallel loops: one element each, the innermost `vector-width` at a time. Reduction loops
      // (the RMSNorm sum over a static group) are not tiled: the whole static range is one vector.
      SmallVector<int64_t> tile(loops, 1);
      SmallVector<int64_t> ranges = op.getStaticLoopRanges();
      SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
      bool ok = true;
      for (unsigned i = 0; i < loops; ++i) {
        if (iters[i] == utils::IteratorType::reduction) {
          if (ShapedType::isDynamic(ranges[i])) {
            ok = false;
            break;
          }
          tile[i] = 0;
        } else if (i + 1 == loops) {
          // A static row: the largest width <= vector-width that divides it, so every tile has a
          // static shape and needs no mask. A dynamic innermost loop is left scalar: MLIR 22's
          // masked vectorization of such tiles does not verify (stage glue rows are always static).
          if (ShapedType::isDynamic(ranges[i])) {
            ok = false;
            break;
          }
          int64_t width = std::min<int64_t>(vectorWidth, ranges[i]);
          while (ranges[i] % width != 0)
            --width;
          tile[i] = width;
        }
      }
      if (!ok)
        continue;
      scf::SCFTilingOptions options;
      options.setTileSizes(getAsIndexOpFoldResult(&getContext(), tile));
      rewriter.setInsertionPoint(op);
      FailureOr<scf::SCFTilingResult> tiled =
          scf::tileUsingSCF(rewriter, cast<TilingInterface>(op.getOperation()), options);
      if (failed(tiled)) {
        op.emitError() << "helm-vectorize-glue: cannot tile";
        return signalPassFailure();
      }
      if (op->getNumResults() == 0)
        rewriter.eraseOp(op);
      else
        rewriter.replaceOp(op, tiled->replacements);
      for (Operation *t : tiled->tiledOps) {
        rewriter.setInsertionPoint(t);
        // Every tile has a static shape: vectorize without masks (MLIR 22's masking of
        // multi-result ops and of multi_reduction does not verify).
        FailureOr<linalg::VectorizationResult> vectorized = linalg::vectorize(rewriter, t);
        if (failed(vectorized)) {
          t->emitError() << "helm-vectorize-glue: cannot vectorize";
          return signalPassFailure();
        }
        if (!vectorized->replacements.empty())
          rewriter.replaceOp(t, vectorized->replacements);
        else
          rewriter.eraseOp(t);
      }
    }
  }
};

} // namespace
