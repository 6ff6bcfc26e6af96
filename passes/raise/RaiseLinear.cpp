//===- RaiseLinear.cpp - MatMul/Gemm with a weight to helm.linear ----------------===//
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
      raise(op);
    for (OnnxNodeOp op : nbits)
      if (failed(raiseNBits(op)))
        return signalPassFailure();
  }

  /// The declaration behind a weight op.
  static WeightDeclOp declOf(WeightOp weight) {
    return SymbolTable::lookupNearestSymbolFrom<WeightDeclOp>(weight, weight.getNameAttr());
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
    if (K <= 0 || N <= 0 || bs <= 0)
      return nodeError(op, "needs positive K, N and block_size attributes");
    if (bits != 4 && bits != 8)
      return nodeError(op, "bits " + Twine(bits) + " is not supported (4 or 8)");
    if (bs < 16 || (bs & (bs - 1)) != 0)
      return nodeError(op, "block_size " + Twine(bs) + " is not a power of 2 of at least 16");
    if (bs < 32)
      return nodeError(op, "block_size " + Twine(bs) +
                               " is not supported: HELM stores blocks of 32 weights with one scale each, so an "
                               "ONNX block must hold at least 32");
    if (K % 32 != 0)
      return nodeError(op, "K = " + Twine(K) + " is not a multiple of 32, the block HELM stores");
    if (present(4))
      return nodeError(op, "g_idx (act-order, a permuted block index) is not supported");
    if (inputs.size() < 3)
      return nodeError(op, "needs the inputs A, B and scales");
    WeightOp codes = traceWeight(inputs[1]), scales = traceWeight(inputs[2]);
    if (!codes || !scales)
      return nodeError(op, "B and scales must be initializers");
    WeightOp zeroPoints = present(3) ? traceWeight(inputs[3]) : WeightOp();
    if (present(3) && !zeroPoints)
      return nodeError(op, "zero_points must be an initializer");
    if (bits == 8 && zeroPoints)
      return nodeError(op, "8-bit weights with zero points are not supported (8-bit symmetric, and 4-bit with or "
                           "without zero points, are)");
    WeightDeclOp codesDecl = declOf(codes), scalesDecl = declOf(scales);
    WeightDeclOp zpDecl = zeroPoints ? declOf(zeroPoints) : WeightDeclOp();
    if (!codesDecl || !scalesDecl || (zeroPoints && !zpDecl))
      return nodeError(op, "an input's weight declaration is missing");

    // Shapes: B [N, blocks, blob] of uint8; scales N * blocks of f32 / f16; zero points uint8
    // N * ceil(blocks * bits / 8) or the scales' type with N * blocks.
    int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8;
    auto codesType = cast<RankedTensorType>(codesDecl.getType());
    if (!codesType.getElementType().isUnsignedInteger(8) || codesType.getNumElements() != N * blocks * blob)
      return nodeError(op, "B of " + Twine(codesDecl.getOnnxName()) + " is not uint8 [" + Twine(N) + ", " +
                               Twine(blocks) + ", " + Twine(blob) + "] for K " + Twine(K) + ", " + Twine(bits) +
                               "-bit blocks of " + Twine(bs));
    auto scalesType = cast<RankedTensorType>(scalesDecl.getType());
    Type scaleElement = scalesType.getElementType();
    if (!(scaleElement.isF32() || scaleElement.isF16()))
      return nodeError(op, "scales " + Twine(scalesDecl.getOnnxName()) + " must be float or float16");
    if (scalesType.getNumElements() != N * blocks)
      return nodeError(op, "scales " + Twine(scalesDecl.getOnnxName()) + " have " +
                               Twine(scalesType.getNumElements()) + " values, " + Twine(N * blocks) +
                               " expected (N " + Twine(N) + " x " + Twine(blocks) + " blocks)");
    Type zpElement;
    if (zpDecl) {
      auto zpType = cast<RankedTensorType>(zpDecl.getType());
      zpElement = zpType.getElementType();
      int64_t expected = zpElement.isUnsignedInteger(8) ? N * ((blocks * bits + 7) / 8)
                         : zpElement == scaleElement      ? N * blocks
                                                          : -1;
      if (expected < 0)
        return nodeError(op, "zero_points " + Twine(zpDecl.getOnnxName()) + " must be uint8 or the scales' type");
      if (zpType.getNumElements() != expected)
        return nodeError(op, "zero_points " + Twine(zpDecl.getOnnxName()) + " have " +
                                 Twine(zpType.getNumElements()) + " values, " + Twine(expected) + " expected");
    }
    Value x = inputs[0];
    auto xType = dyn_cast<RankedTensorType>(x.getType());
    if (xType && (xType.getRank() < 2 || (!xType.isDynamicDim(xType.getRank() - 1) && xType.getShape().back() != K)))
      return nodeError(op, "A's last dimension is not K = " + Twine(K));
    Value bias;
    if (present(5) && !(bias = parameterVector(inputs[5], N)))
      return nodeError(op, "bias must be an initializer of N = " + Twine(N) + " values");

    // The [N, K] declaration, next to the codes'.
    MLIRContext *ctx = op.getContext();
    BlockFormat format = bits == 8 ? BlockFormat::q8_0 : zpDecl ? BlockFormat::q4_1 : BlockFormat::q4_0;
    auto source = OnnxBlocksAttr::get(ctx, bits, bs, codesDecl.getOnnxName(), scalesDecl.getOnnxName(), scaleElement,
                                      zpDecl ? zpDecl.getOnnxName() : StringRef(), zpElement);
    auto type = RankedTensorType::get({N, K}, scaleElement);
    OpBuilder detached(ctx);
    auto decl = WeightDeclOp::create(detached, codesDecl.getLoc(), (codesDecl.getSymName() + "_blocks").str(), type,
                                     codesDecl.getOnnxName(), codesDecl.getLocation(), codesDecl.getOffset(),
                                     codesDecl.getLength(), BlocksAttr::get(ctx, format, 0), source);
    symbols().insert(decl, std::next(Block::iterator(codesDecl))); // renamed on a clash
    OpBuilder b(op);
    auto weight = WeightOp::create(b, op.getLoc(), type, FlatSymbolRefAttr::get(decl.getSymNameAttr()));
    RankedTensorType resultType;
    Type element = elementTypeOf(x);
    if (xType) {
      SmallVector<int64_t> shape(xType.getShape());
      shape.back() = N;
      resultType = RankedTensorType::get(shape, element);
    } else {
      resultType = activationType(element, N);
    }
    auto linear = LinearOp::create(b, op.getLoc(), resultType, x, weight.getResult(), bias, b.getBoolAttr(true));
    replaceValue(op.getResult(0), linear.getResult());
    return success();
  }

  void raise(OnnxNodeOp op) {
    bool gemm = op.is("Gemm");
    if (gemm && (op.getIntAttr("transA", 0) != 0 || op.getFloatAttr("alpha", 1.0) != 1.0 ||
                 op.getFloatAttr("beta", 1.0) != 1.0))
      return;
    Value x = op.getInputs()[0];
    bool transposed = false;
    WeightOp weight = traceWeight(op.getInputs()[1], &transposed);
    if (!weight || shapeOf(weight).size() != 2)
      return;
    if (gemm && op.getIntAttr("transB", 0))
      transposed = !transposed;
    auto wShape = shapeOf(weight);
    int64_t inFeatures = transposed ? wShape[1] : wShape[0];
    int64_t outFeatures = transposed ? wShape[0] : wShape[1];
    auto xType = dyn_cast<RankedTensorType>(x.getType());
    if (xType && (xType.getRank() < 2 || xType.getShape().back() != inFeatures))
      return;

    Value bias;
    Operation *replaced = op;
    if (gemm && op.getInputs().size() > 2 && !isa<NoneType>(op.getInputs()[2].getType())) {
      bias = parameterVector(op.getInputs()[2], outFeatures);
      if (!bias)
        return;
    } else if (op.getResult(0).hasOneUse()) {
      auto add = dyn_cast<OnnxNodeOp>(*op.getResult(0).user_begin());
      if (add && add.is("Add")) {
        Value other = add.getInputs()[0] == op.getResult(0) ? add.getInputs()[1] : add.getInputs()[0];
        if ((bias = parameterVector(other, outFeatures)))
          replaced = add;
      }
    }

    RankedTensorType resultType;
    Type element = elementTypeOf(x);
    if (xType) {
      SmallVector<int64_t> shape(xType.getShape());
      shape.back() = outFeatures;
      resultType = RankedTensorType::get(shape, element);
    } else {
      resultType = activationType(element, outFeatures);
    }
    OpBuilder b(replaced);
    auto linear = LinearOp::create(b, op.getLoc(), resultType, x, weight.getResult(), bias,
                                     b.getBoolAttr(transposed));
    replaceValue(replaced->getResult(0), linear.getResult());
  }
};
} // namespace
