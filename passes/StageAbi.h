//===- StageAbi.h - the C signature and ABI record every lowered stage gets -------===//
//
// Both lowerings of a stage function (helm-lower-to-linalg for code that runs on the host,
// helm-lower-to-device-calls for a device stage that calls device kernels) end the same way: the
// stage gets the flat C signature `(ctx, in*, positions*, out*, B, S)` and exports `<stage>_abi`,
// which the runtime checks against the package's manifest.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_STAGEABI_H
#define HELM_PASSES_STAGEABI_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace helm {

/// Element type code of the kernel ABIs (kernels/cpu/helm_kernels.h): 0 f32, 1 f16, 2 bf16;
/// -1 for anything else.
int32_t kernelDtypeCode(mlir::Type t);

/// A memref of `type` over the raw pointer `ptr` (identity layout, offset 0); dynamic sizes as i64
/// values in order.
mlir::Value memrefFromPointer(mlir::OpBuilder &b, mlir::Location loc, mlir::Value ptr,
                              mlir::MemRefType type, llvm::ArrayRef<mlir::Value> dynamicSizesI64);

/// Writes the stage's result to the caller's buffer. `result` is logits [B, 1, V] (any float
/// type; the buffer is f32 [B, 1, V]) or the boundary activation [B, S, H] (the buffer has the
/// activation's type); `out` is the buffer as a memref of that type.
using StageResultWriter = llvm::function_ref<mlir::LogicalResult(
    mlir::OpBuilder &b, mlir::Location loc, mlir::Value result, mlir::Value out,
    bool returnsLogits)>;

/// Rewrites the lowered stage `stage(ctx, input, positions) -> result` to the C signature
/// `(ctx, in*, positions*, out*, B, S) -> ()`: the input and positions become tensor views of
/// the pointers, `writeResult` stores the result, and `<stage>_abi` is exported (see
/// LowerToLinalg's description in Passes.td).
mlir::LogicalResult rewriteStageSignature(mlir::func::FuncOp stage,
                                          StageResultWriter writeResult);

} // namespace helm

#endif
