//===- RaiseQuantizedGather.cpp - quantized token tables to helm.embed on blocks -------===//
#include "passes/raise/OnnxBlocks.h"
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <sstream>
#include "mlir/IR/BuiltinOps.h"

namespace helm {
#define GEN_PASS_DEF_RAISEQUANTIZEDGATHER
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {

struct RaiseQuantizedGatherPass : helm::impl::RaiseQuantizedGatherBase<RaiseQuantizedGatherPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> gathers, dequantized;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("GatherBlockQuantized", "com.microsoft"))
        gathers.push_back(op);
      else if (op.is("Gather") && op.getInputs().size() == 2 && traceDequantizeLinear(op.getInputs()[0]))
        dequantized.push_back(op);
    });
    if (gathers.empty() && dequantized.empty())
      return;
    SymbolTable symbols(getOperation());
    for (OnnxNodeOp op : gathers)
      if (failed(raise(op, symbols)))
        return signalPassFailure();
    for (OnnxNodeOp op : dequantized)
      if (failed(raiseDequantized(op, symbols)))
        return signalPassFailure();
  }

  /// Gather(DequantizeLinear(codes, scales, zero points?), ids) on axis 0: a token table stored as
  /// blocks along each row (the DequantizeLinear's axis 1; axis 0 of a transposed table).
  LogicalResult raiseDequantized(OnnxNodeOp op, SymbolTable &symbols) {
    if (int64_t axis = op.getIntAttr("axis", 0); axis != 0)
      return nodeError(op, "gathers a dequantized weight on axis " + Twine(axis) +
                               " (0: rows of an embedding table)");
    bool transposed = false;
    OnnxNodeOp dq = traceDequantizeLinear(op.getInputs()[0], &transposed);
    FailureOr<WeightDeclOp> decl = declareDequantizedWeight(dq, symbols, /*kMajor=*/transposed);
    if (failed(decl))
      return failure();
    return replaceWithEmbed(op, op.getInputs()[1], *decl);
  }

  /// GatherBlockQuantized(data, indices, scales, zero_points?) with gather_axis 0 and quantize_axis
  /// 1: rows of a [rows, cols] table quantized in blocks along each row, gathered by token id.
  LogicalResult raise(OnnxNodeOp op, SymbolTable &symbols) {
    auto inputs = op.getInputs();
    if (inputs.size() < 3)
      return nodeError(op, "needs the inputs data, indices and scales");
    int64_t bits = op.getIntAttr("bits", 4), bs = op.getIntAttr("block_size", 128);
    if (op.getIntAttr("gather_axis", 0) != 0)
      return nodeError(op, "gather_axis " + Twine(op.getIntAttr("gather_axis", 0)) +
                               " is not supported (0: rows of an embedding table)");
    int64_t quantizeAxis = op.getIntAttr("quantize_axis", 1);
    if (quantizeAxis != 1 && quantizeAxis != -1)
      return nodeError(op, "quantize_axis " + Twine(quantizeAxis) + " is not supported (1: blocks along each row)");
    // The data, scales and zero points may be another weight's bytes through a Reshape: ONNX
    // Runtime GenAI's tied models gather from the LM head's MatMulNBits initializers. The table's
    // shape is then the Reshape's.
    WeightOp codes = traceReshapedWeight(inputs[0]), scales = traceReshapedWeight(inputs[2]);
    if (!codes)
      return nodeError(op, "the quantized data must be an initializer (or a Reshape of one)");
    auto weightType = cast<RankedTensorType>(codes.getType());
    auto dataType = dyn_cast<RankedTensorType>(inputs[0].getType());
    if (!dataType || !dataType.hasStaticShape()) {
      // A Reshape the importer left without a static type: its shape input (constant, one -1 at
      // most) over the weight's elements.
      OnnxNodeOp reshape = producer(inputs[0], "Reshape");
      std::optional<SmallVector<double>> dims =
          reshape && reshape.getInputs().size() == 2 ? constantValues(reshape.getInputs()[1]) : std::nullopt;
      if (!dims || dims->size() != 2)
        return nodeError(op, "the quantized data's shape is not known");
      // Sizes are checked against the weight's element count before they are converted or
      // multiplied, so neither can overflow.
      const int64_t elements = weightType.getNumElements();
      int64_t known = 1, inferred = -1;
      SmallVector<int64_t> shape;
      for (double d : *dims) {
        if (d == -1 && inferred < 0) {
          inferred = int64_t(shape.size());
          shape.push_back(1);
        } else if (d >= 1 && d <= double(elements) && d == std::floor(d) && known <= elements / int64_t(d)) {
          shape.push_back(int64_t(d));
          known *= int64_t(d);
        } else {
          std::ostringstream sizes; // shortest form: a size may be any double
          sizes << (*dims)[0] << ", " << (*dims)[1];
          return nodeError(op, "the quantized data's Reshape to [" + Twine(sizes.str()) +
                                   "] does not hold its initializer's " + Twine(elements) + " elements");
        }
      }
      if (inferred >= 0)
        shape[size_t(inferred)] = elements / known;
      dataType = RankedTensorType::get(shape, weightType.getElementType());
    }
    if (dataType.getNumElements() != weightType.getNumElements() ||
        dataType.getElementType() != weightType.getElementType())
      return nodeError(op, "the quantized data is not its initializer's elements in another shape");
    if (dataType.getRank() != 2)
      return nodeError(op, "the quantized data must be 2-D, got rank " + Twine(dataType.getRank()));
    // uint8 data packs 8 / bits values per byte; int4 / uint4 data has one element per value. The
    // bits are checked here, before they divide.
    if (bits != 4 && bits != 8)
      return nodeError(op, "bits " + Twine(bits) + " is not supported (4 or 8)");
    const bool bytes = dataType.getElementType().isUnsignedInteger(8);
    if (!bytes && bits != 4)
      return nodeError(op, "bits " + Twine(bits) + " with 4-bit data");
    const int64_t rows = dataType.getDimSize(0), cols = bytes ? dataType.getDimSize(1) * 8 / bits : dataType.getDimSize(1);
    if (bs > 0 && cols % bs != 0)
      return nodeError(op, "the row length " + Twine(cols) + " is not a multiple of block_size " + Twine(bs));
    const bool hasZeroPoints = inputs.size() > 3 && !isa<NoneType>(inputs[3].getType());
    WeightOp zeroPoints = hasZeroPoints ? traceReshapedWeight(inputs[3]) : WeightOp();
    if (hasZeroPoints && !zeroPoints)
      return nodeError(op, "zero_points must be an initializer");
    FailureOr<WeightDeclOp> decl =
        declareOnnxBlockedWeight(op, symbols, {rows, cols, bits, bs, codes, scales, zeroPoints});
    if (failed(decl))
      return failure();

    return replaceWithEmbed(op, inputs[1], *decl);
  }

  /// Replaces the gather `op` by helm.embed of `ids` on the table `decl`.
  LogicalResult replaceWithEmbed(OnnxNodeOp op, Value ids, WeightDeclOp decl) {
    auto idsType = dyn_cast<TensorType>(ids.getType());
    if (!idsType || !isa<IntegerType>(idsType.getElementType()))
      return nodeError(op, "indices must be integers");
    auto tableType = cast<RankedTensorType>(decl.getType());
    const int64_t cols = tableType.getDimSize(1);
    OpBuilder b(op);
    auto table = WeightOp::create(b, op.getLoc(), tableType, FlatSymbolRefAttr::get(decl.getSymNameAttr()));
    RankedTensorType resultType;
    if (auto ranked = dyn_cast<RankedTensorType>(ids.getType())) {
      SmallVector<int64_t> shape(ranked.getShape());
      shape.push_back(cols);
      resultType = RankedTensorType::get(shape, tableType.getElementType());
    } else {
      resultType = activationType(tableType.getElementType(), cols);
    }
    auto embed = EmbedOp::create(b, op.getLoc(), resultType, ids, table.getResult());
    replaceValue(op.getResult(0), embed.getResult());
    op.erase();
    return success();
  }
};
} // namespace
