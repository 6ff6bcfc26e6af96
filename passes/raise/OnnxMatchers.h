//===- OnnxMatchers.h - use-def matching helpers over generic ONNX nodes ---------===//
//
// The raising passes recognise exporter patterns by walking use-def chains of `helm.onnx` ops. These
// helpers keep that walking short and uniform: match a producer by op type, read small constants,
// and look through ops that only change layout or precision.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_ONNXMATCHERS_H
#define HELM_PASSES_ONNXMATCHERS_H

#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace helm {

/// The `helm.onnx` op of type `opType` (default domain unless given) that defines `v`, or null.
OnnxNodeOp producer(mlir::Value v, llvm::StringRef opType, llvm::StringRef domain = "");

/// Any `helm.onnx` op that defines `v`, or null.
OnnxNodeOp anyProducer(mlir::Value v);

/// Values of a small constant as doubles (any int or float element type); nullopt if `v` is not a
/// constant. Looks through Cast, Identity and Unsqueeze/Reshape of constants.
std::optional<llvm::SmallVector<double>> constantValues(mlir::Value v);

/// A constant that holds one value (a scalar or every element equal), or nullopt.
std::optional<double> constantScalar(mlir::Value v);

/// True if `v` is a constant scalar close to `expected` (relative 1e-6).
bool isConstant(mlir::Value v, double expected);

/// Skips ops that do not change values, only precision or metadata: Cast, Identity.
mlir::Value skipCasts(mlir::Value v);

/// Skips Cast/Identity and also Reshape/Transpose/Squeeze/Unsqueeze/Expand/Flatten: ops that move or
/// broadcast elements without computing new ones. Used to trace an activation back to the op that
/// computed it, e.g. from attention scores to the q projection.
mlir::Value skipLayout(mlir::Value v);

/// The weight op behind `v` (through casts and transposes); `transposed` is set when an odd number of
/// 2-D transposes was crossed.
WeightOp traceWeight(mlir::Value v, bool *transposed = nullptr);
/// The weight behind `v` through Identity and Reshape (which keep the elements and their order), or
/// null: a weight's bytes read in another shape, as ONNX Runtime GenAI's tied models feed
/// GatherBlockQuantized the LM head's MatMulNBits codes and scales.
WeightOp traceReshapedWeight(mlir::Value v);

/// The DequantizeLinear behind `v` (through casts and 2-D transposes, like traceWeight), or null;
/// `transposed` is set when an odd number of transposes was crossed.
OnnxNodeOp traceDequantizeLinear(mlir::Value v, bool *transposed = nullptr);

/// A 1-D parameter (a weight, or a constant for tiny models) behind `v` through Casts: a norm's gamma
/// or a projection's bias. With `width` >= 0 it must have that many elements. Null when absent.
mlir::Value parameterVector(mlir::Value v, int64_t width = -1);

/// Shape of a ranked tensor value, or empty.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);

/// Rank-3 activation type [?, ?, n] of `element`.
mlir::RankedTensorType activationType(mlir::Type element, int64_t n);

/// Element type of a tensor value.
mlir::Type elementTypeOf(mlir::Value v);

/// Emits "NODE (OP): msg" on the op and returns failure.
mlir::LogicalResult nodeError(OnnxNodeOp op, const llvm::Twine &msg);

/// Replaces every use of `from` with `to` and, when `from` was returned, updates the enclosing
/// function's result types (raised values are usually more precisely typed than the imported ones).
/// With `after`, only uses in ops that come after it in the block are replaced (the rest are dead
/// remains of the raised pattern that would otherwise use a value before its definition).
void replaceValue(mlir::Value from, mlir::Value to, mlir::Operation *after = nullptr);

/// Replaces `op` (one result) with `raised` through the rewriter, which erases `op`; when the result
/// was returned, the function's result types follow, as in replaceValue.
void replaceWithRaised(mlir::PatternRewriter &rewriter, mlir::Operation *op, mlir::Value raised);

/// Applies raising patterns to `func` until none matches, with MLIR's greedy driver set to rewrite
/// only: no folding, constant CSE or region simplification, which would move constants or merge ops
/// that partition units later count. ONNX nodes a rewrite leaves dead are erased on the way. A
/// rewrite re-queues the users of what it replaced, so chains (an add of adds) raise in any order.
mlir::LogicalResult applyRaisingPatterns(mlir::func::FuncOp func, mlir::RewritePatternSet &&patterns);

/// The rotary base theta for which inv_freq[i] = theta^(-2i/rotaryDim), or nullopt when the
/// frequencies do not follow that law (scaled rotary variants).
std::optional<double> thetaFromInvFreq(llvm::ArrayRef<double> invFreq, int64_t rotaryDim,
                                       int precisionBits = 23);

/// A weight's bytes, read through the dialect's weight reader (set by the importer) or, without one,
/// from an external-data file next to the module's `helm.source`. nullopt when not available.
std::optional<std::vector<char>> weightBytes(WeightOp weight);

/// The first `maxElements` values of a weight (row-major), read through the dialect's weight reader
/// (set by the importer) or, without one, from an external-data file next to the module's
/// `helm.source`. nullopt when the bytes are not available.
std::optional<llvm::SmallVector<double>> weightValues(WeightOp weight, int64_t maxElements);

/// `v` as an int64 index: nullopt when not finite; beyond the int64 range it saturates (exporters
/// write "to the end" as INT64_MAX).
std::optional<int64_t> asIndex(double v);

/// Evaluates a small integer index computation on `x`'s shape (constants, Shape/Gather of the last
/// dimension, Div/Mul/Add/Sub, Cast/Unsqueeze/Squeeze), given the last dimension `lastDim`.
std::optional<int64_t> evalIndex(mlir::Value v, mlir::Value x, int64_t lastDim);

/// A helm.split right after `linear` that cuts its output's last axis into pieces of `sizes` (which
/// sum to its out features): a fused projection's q / k / v or gate / up.
SplitOp splitProjection(LinearOp linear, llvm::ArrayRef<int64_t> sizes);

/// Gives shape-preserving block ops (rms_norm, rope) whose input became ranked the input's type.
/// Values raised before their producer (common in graphs without value_info) start unranked.
void refineTypes(mlir::func::FuncOp func);

/// theta from rotary cos/sin caches [positions, half] (row p holds cos/sin(p * inv_freq)), after
/// checking rows 0 and 2 against the frequencies row 1 implies.
std::optional<double> thetaFromCaches(llvm::ArrayRef<double> cos, llvm::ArrayRef<double> sin,
                                      int64_t half, int precisionBits = 23);

/// Explicit mantissa bits of a float tensor value's element type (23 for non-floats).
int mantissaBits(mlir::Value v);

/// The leading `count` values of a cos/sin cache operand: a constant or a weight.
std::optional<llvm::SmallVector<double>> cacheValues(mlir::Value v, int64_t count);

} // namespace helm

#endif
