//===- StageAbi.h - the C signature and ABI record every lowered stage gets -------===//
//
// Both lowerings of a stage function (helm-lower-to-linalg for code that runs on the host,
// helm-lower-to-device-calls for a device stage that calls device kernels) end the same way: the
// stage gets the flat C signature `(ctx, in*, positions*, out*, B, S)` and exports `<stage>_abi`,
// which the runtime checks against the package's manifest.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_CODEGEN_STAGEABI_H
#define HELM_PASSES_CODEGEN_STAGEABI_H

#include "contract/helm_contract.h"
#include "dialects/helm/HelmDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"

namespace helm {

/// The contract's element type code (helm_dtype) of `t`; -1 for a type the contract lacks.
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

/// The `helm.tensor_id`s weight declarations of `module` already carry (a re-run, or a writer that
/// numbered them).
llvm::DenseMap<mlir::StringAttr, int64_t> existingTensorIds(mlir::ModuleOp module);

/// What both stage lowerings share: the builder state for one stage function and the small
/// builders for constants, pointers, runtime calls and weights.
class StageLoweringBase {
protected:
  StageLoweringBase(mlir::func::FuncOp stage, llvm::DenseMap<mlir::StringAttr, int64_t> &tensorIds);

  mlir::Value i64(int64_t v);
  mlir::Value i32(int64_t v);
  mlir::Value toI64(mlir::Value index);
  /// The private declaration of runtime function `name` (made once per module).
  mlir::func::FuncOp declare(llvm::StringRef name, mlir::TypeRange inputs,
                             mlir::TypeRange results);
  /// The aligned address of `memref`'s buffer as an !llvm.ptr.
  mlir::Value pointerOf(mlir::Value memref);
  /// `memref` seen as a tensor (restrict: nothing else aliases it).
  mlir::Value asTensor(mlir::Value memref, bool writable);
  /// A weight as a tensor view of `helm_rt_weight(ctx, id)`, numbering its declaration's
  /// `helm.tensor_id` at first use (ids are dense per module: the stage's weight table).
  mlir::Value lowerWeight(WeightOp w);
  /// The helm_dtype code a kernel call passes for `value`: the block format of a lowered weight
  /// stored in blocks, else the element type's code (-1 for none).
  int32_t dtypeCodeOf(mlir::Value value);
  /// The KV-cache layer an attention reads, as an i64: its `helm.kv_layer`, plus the first-layer
  /// argument in a unit function. Null (after an error on `attention`) when it has none.
  mlir::Value kvLayerOf(mlir::Operation *attention);
  /// Whether the function is a unit function (helm.unit_function): it keeps its signature.
  bool isUnitFunction() const { return unitFunction; }

  mlir::func::FuncOp stage;
  mlir::ModuleOp module;
  mlir::OpBuilder b;
  mlir::Location loc;
  llvm::DenseMap<mlir::StringAttr, int64_t> &tensorIds;
  /// The lowered weights that are stored in blocks, with their format.
  llvm::DenseMap<mlir::Value, BlockFormat> blockWeights;
  mlir::Type ptrType;
  mlir::Value ctx; // the stage's context argument
  bool unitFunction;
  mlir::Value kvLayerBase; // a unit function's first-layer argument (helm.kv_layer_base)
};

/// The unit functions (helm.unit_function) that `stage` calls, in order of first call.
llvm::SmallVector<mlir::func::FuncOp> unitFunctionsCalledBy(mlir::func::FuncOp stage);

/// Rewrites the lowered stage `stage(ctx, input, positions) -> result` to the C signature
/// `(ctx, in*, positions*, out*, B, S) -> ()`: the input and positions become tensor views of
/// the pointers, `writeResult` stores the result, and `<stage>_abi` is exported (see
/// LowerToLinalg's description in Passes.td).
mlir::LogicalResult rewriteStageSignature(mlir::func::FuncOp stage,
                                          StageResultWriter writeResult);

} // namespace helm

#endif
