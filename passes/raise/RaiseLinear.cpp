//===- RaiseLinear.cpp - MatMul/Gemm with a weight, and MatMulNBits, to helm.linear -===//
#include "passes/raise/OnnxBlocks.h"
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace helm {
#define GEN_PASS_DEF_RAISELINEAR
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {

/// A linear's result: x's shape with the last dimension `outFeatures`, in x's element type (x must
/// be a tensor: the callers check).
RankedTensorType linearResultType(Value x, int64_t outFeatures) {
  Type element = elementTypeOf(x);
  auto xType = dyn_cast<RankedTensorType>(x.getType());
  if (!xType)
    return activationType(element, outFeatures);
  SmallVector<int64_t> shape(xType.getShape());
  shape.back() = outFeatures;
  return RankedTensorType::get(shape, element);
}

struct RaiseLinearPass : helm::impl::RaiseLinearBase<RaiseLinearPass> {
  std::optional<SymbolTable> symbolTable;
  SymbolTable &symbols() {
    if (!symbolTable)
      symbolTable.emplace(getOperation());
    return *symbolTable;
  }

  void runOnOperation() override {
    symbolTable.reset();
    SmallVector<OnnxNodeOp> candidates;
    SmallVector<OnnxNodeOp> nbits;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("MatMul") || op.is("Gemm"))
        candidates.push_back(op);
      else if (op.is("MatMulNBits", "com.microsoft"))
        nbits.push_back(op);
    });
    for (OnnxNodeOp op : candidates)
      if (failed(raise(op)))
        return signalPassFailure();
    for (OnnxNodeOp op : nbits)
      if (failed(raiseNBits(op)))
        return signalPassFailure();
  }

  /// com.microsoft::MatMulNBits(A, B, scales, zero_points?, g_idx?, bias?) with K, N, bits and
  /// block_size: y = A . dequant(B)^T, B holding N rows of K codes in blocks. Raised to helm.linear
  /// on a new [N, K] weight declaration that keeps the three initializers (`onnx_blocks`) and is
  /// stored in the block format with the same codes (q4_0, q4_1 or q8_0). What HELM cannot store
  /// that way is refused naming the node.
  LogicalResult raiseNBits(OnnxNodeOp op) {
    int64_t K = op.getIntAttr("K", -1), N = op.getIntAttr("N", -1), bits = op.getIntAttr("bits", 4);
    int64_t bs = op.getIntAttr("block_size", -1);
    auto inputs = op.getInputs();
    auto present = [&](size_t i) { return inputs.size() > i && !isa<NoneType>(inputs[i].getType()); };
    if (present(4))
      return nodeError(op, "g_idx (act-order, a permuted block index) is not supported");
    if (inputs.size() < 3)
      return nodeError(op, "needs the inputs A, B and scales");
    WeightOp zeroPoints = present(3) ? traceWeight(inputs[3]) : WeightOp();
    if (present(3) && !zeroPoints)
      return nodeError(op, "zero_points must be an initializer");
    WeightOp codes = traceWeight(inputs[1]);
    if (codes && !cast<RankedTensorType>(codes.getType()).getElementType().isUnsignedInteger(8))
      return nodeError(op, "B must be uint8");
    Value x = inputs[0];
    if (!elementTypeOf(x))
      return nodeError(op, "A is not a tensor");
    auto xType = dyn_cast<RankedTensorType>(x.getType());
    if (xType && (xType.getRank() < 2 || (!xType.isDynamicDim(xType.getRank() - 1) && xType.getShape().back() != K)))
      return nodeError(op, "A's last dimension is not K = " + Twine(K));
    Value bias;
    if (present(5) && !(bias = parameterVector(inputs[5], N)))
      return nodeError(op, "bias must be an initializer of N = " + Twine(N) + " values");

    FailureOr<WeightDeclOp> decl = declareOnnxBlockedWeight(
        op, symbols(), {N, K, bits, bs, codes, traceWeight(inputs[2]), zeroPoints});
    if (failed(decl))
      return failure();
    auto type = cast<RankedTensorType>(decl->getType());
    OpBuilder b(op);
    auto weight = WeightOp::create(b, op.getLoc(), type, FlatSymbolRefAttr::get(decl->getSymNameAttr()));
    auto linear = LinearOp::create(b, op.getLoc(), linearResultType(x, N), x, weight.getResult(), bias,
                                   b.getBoolAttr(true));
    replaceValue(op.getResult(0), linear.getResult());
    return success();
  }

  /// MatMul / Gemm with a weight: a float initializer, or a block-wise DequantizeLinear of one
  /// (declareDequantizedWeight; its errors fail the pass). Anything else is left alone: attention's
  /// products of activations are raised by other passes.
  LogicalResult raise(OnnxNodeOp op) {
    bool gemm = op.is("Gemm");
    if (gemm && (op.getIntAttr("transA", 0) != 0 || op.getFloatAttr("alpha", 1.0) != 1.0 ||
                 op.getFloatAttr("beta", 1.0) != 1.0))
      return success();
    Value x = op.getInputs()[0];
    if (!elementTypeOf(x)) // not a tensor: left for helm-check-raised to name
      return success();
    bool transposed = false;
    Value w = op.getInputs()[1];
    WeightOp weight = traceWeight(w, &transposed);
    OnnxNodeOp dequantize = weight ? OnnxNodeOp() : traceDequantizeLinear(w, &transposed);
    ArrayRef<int64_t> wShape = weight ? shapeOf(weight) : dequantize ? shapeOf(dequantize.getInputs()[0]) : ArrayRef<int64_t>();
    if (wShape.size() != 2)
      return success();
    if (gemm && op.getIntAttr("transB", 0))
      transposed = !transposed;
    int64_t inFeatures = transposed ? wShape[1] : wShape[0];
    int64_t outFeatures = transposed ? wShape[0] : wShape[1];
    auto xType = dyn_cast<RankedTensorType>(x.getType());
    if (xType && (xType.getRank() < 2 || xType.getShape().back() != inFeatures))
      return success();
    Value bias;
    Operation *replaced = op;
    if (gemm && op.getInputs().size() > 2 && !isa<NoneType>(op.getInputs()[2].getType())) {
      bias = parameterVector(op.getInputs()[2], outFeatures);
      if (!bias)
        return success();
    } else if (op.getResult(0).hasOneUse()) {
      auto add = dyn_cast<OnnxNodeOp>(*op.getResult(0).user_begin());
      if (add && add.is("Add")) {
        Value other = add.getInputs()[0] == op.getResult(0) ? add.getInputs()[1] : add.getInputs()[0];
        if ((bias = parameterVector(other, outFeatures)))
          replaced = add;
      }
    }

    if (dequantize) {
      // The codes are [K, N] (K-major) when the product uses them as they are.
      FailureOr<WeightDeclOp> decl = declareDequantizedWeight(dequantize, symbols(), /*kMajor=*/!transposed);
      if (failed(decl))
        return failure();
      OpBuilder wb(op);
      weight = WeightOp::create(wb, op.getLoc(), decl->getType(), FlatSymbolRefAttr::get(decl->getSymNameAttr()));
      transposed = true;
    }

    OpBuilder b(replaced);
    auto linear = LinearOp::create(b, op.getLoc(), linearResultType(x, outFeatures), x, weight.getResult(), bias,
                                   b.getBoolAttr(transposed));
    replaceValue(replaced->getResult(0), linear.getResult());
    return success();
  }
};
} // namespace
