//===- OnnxMatchers.cpp - use-def matching helpers over generic ONNX nodes -------===//
#include "passes/OnnxMatchers.h"

#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;

namespace helm {

OnnxNodeOp producer(Value v, llvm::StringRef opType, llvm::StringRef domain) {
  auto op = v ? v.getDefiningOp<OnnxNodeOp>() : OnnxNodeOp();
  if (op && op.getOpType() == opType && op.getDomain() == domain)
    return op;
  return {};
}

OnnxNodeOp anyProducer(Value v) { return v ? v.getDefiningOp<OnnxNodeOp>() : OnnxNodeOp(); }

std::optional<SmallVector<double>> constantValues(Value v) {
  while (auto op = anyProducer(v)) {
    llvm::StringRef t = op.getOpType();
    if (op.getDomain().empty() && (t == "Cast" || t == "Identity" || t == "Unsqueeze" ||
                                   t == "Reshape" || t == "Squeeze" || t == "CastLike"))
      v = op.getInputs()[0];
    else
      break;
  }
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  SmallVector<double> out;
  Type element = attr.getElementType();
  if (isa<FloatType>(element)) {
    for (APFloat f : attr.getValues<APFloat>()) {
      bool lost = false;
      f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      out.push_back(f.convertToDouble());
    }
  } else if (element.isInteger(1)) {
    for (bool b : attr.getValues<bool>())
      out.push_back(b ? 1.0 : 0.0);
  } else if (auto it = dyn_cast<IntegerType>(element)) {
    for (APInt i : attr.getValues<APInt>())
      out.push_back(it.isUnsigned() ? double(i.getZExtValue()) : double(i.getSExtValue()));
  } else {
    return std::nullopt;
  }
  return out;
}

std::optional<double> constantScalar(Value v) {
  auto values = constantValues(v);
  if (!values || values->empty())
    return std::nullopt;
  for (double x : *values)
    if (x != (*values)[0])
      return std::nullopt;
  return (*values)[0];
}

bool isConstant(Value v, double expected) {
  auto s = constantScalar(v);
  return s && std::fabs(*s - expected) <= 1e-6 * std::max(1.0, std::fabs(expected));
}

Value skipCasts(Value v) {
  while (auto op = anyProducer(v)) {
    if (op.getDomain().empty() && (op.getOpType() == "Cast" || op.getOpType() == "Identity"))
      v = op.getInputs()[0];
    else
      break;
  }
  return v;
}

Value skipLayout(Value v) {
  while (auto op = anyProducer(v)) {
    llvm::StringRef t = op.getOpType();
    if (op.getDomain().empty() &&
        (t == "Cast" || t == "Identity" || t == "Reshape" || t == "Transpose" || t == "Squeeze" ||
         t == "Unsqueeze" || t == "Expand" || t == "Flatten" ||
         (t == "Concat" && op.getInputs().size() == 1))) // TorchScript's one-input Concat
      v = op.getInputs()[0];
    else
      break;
  }
  return v;
}

WeightOp traceWeight(Value v, bool *transposed) {
  bool flip = false;
  while (auto op = anyProducer(v)) {
    llvm::StringRef t = op.getOpType();
    if (!op.getDomain().empty())
      break;
    if (t == "Cast" || t == "Identity") {
      v = op.getInputs()[0];
    } else if (t == "Transpose") {
      auto perm = dyn_cast_or_null<DenseI64ArrayAttr>(op.getAttrs().get("perm"));
      if (perm && !(perm.size() == 2 && perm[0] == 1 && perm[1] == 0))
        break;
      flip = !flip;
      v = op.getInputs()[0];
    } else {
      break;
    }
  }
  auto w = v ? v.getDefiningOp<WeightOp>() : WeightOp();
  if (w && transposed)
    *transposed = flip;
  return w;
}

ArrayRef<int64_t> shapeOf(Value v) {
  if (auto t = dyn_cast<RankedTensorType>(v.getType()))
    return t.getShape();
  return {};
}

RankedTensorType activationType(Type element, int64_t n) {
  return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic, n}, element);
}

Type elementTypeOf(Value v) {
  if (auto t = dyn_cast<ShapedType>(v.getType()))
    return t.getElementType();
  return {};
}

LogicalResult nodeError(OnnxNodeOp op, const llvm::Twine &msg) {
  return op.emitError() << "node '" << op.getNode() << "' (" << op.getOpType() << "): " << msg;
}

} // namespace helm

namespace helm {
void replaceValue(Value from, Value to, Operation *after) {
  bool returned = llvm::any_of(from.getUsers(), [](Operation *u) { return isa<func::ReturnOp>(u); });
  if (after)
    from.replaceUsesWithIf(to, [&](OpOperand &use) {
      Operation *owner = use.getOwner();
      return owner->getBlock() == after->getBlock() && after->isBeforeInBlock(owner);
    });
  else
    from.replaceAllUsesWith(to);
  if (!returned)
    return;
  auto func = to.getParentRegion()->getParentOfType<func::FuncOp>();
  auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 ret.getOperandTypes()));
}
} // namespace helm

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace helm {

std::optional<SmallVector<double>> weightValues(WeightOp weight, int64_t maxElements) {
  auto decl = SymbolTable::lookupNearestSymbolFrom<WeightDeclOp>(weight, weight.getNameAttr());
  if (!decl)
    return std::nullopt;
  auto type = cast<RankedTensorType>(decl.getType());
  std::vector<char> bytes;
  auto *dialect = weight->getContext()->getLoadedDialect<HelmDialect>();
  bool ok = false;
  if (dialect && dialect->getWeightReader()) {
    ok = dialect->getWeightReader()(decl, bytes);
  } else if (!decl.getLocation().empty()) {
    auto module = weight->getParentOfType<ModuleOp>();
    auto source = module ? module->getAttrOfType<StringAttr>("helm.source") : StringAttr();
    if (source) {
      llvm::SmallString<256> path(source.getValue());
      llvm::sys::path::remove_filename(path);
      llvm::sys::path::append(path, decl.getLocation());
      auto buffer = llvm::MemoryBuffer::getFileSlice(path, decl.getLengthAttr().getInt(),
                                                     decl.getOffsetAttr().getInt());
      if (buffer) {
        bytes.assign((*buffer)->getBufferStart(), (*buffer)->getBufferEnd());
        ok = true;
      }
    }
  }
  int64_t width = (type.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  if (!ok || int64_t(bytes.size()) != type.getNumElements() * width)
    return std::nullopt;
  auto attr = DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(bytes));
  SmallVector<double> out;
  int64_t n = std::min<int64_t>(maxElements, type.getNumElements());
  if (isa<FloatType>(type.getElementType())) {
    auto values = attr.getValues<APFloat>();
    for (int64_t i = 0; i < n; ++i) {
      APFloat f = values[i];
      bool lost = false;
      f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      out.push_back(f.convertToDouble());
    }
  } else {
    auto values = attr.getValues<APInt>();
    for (int64_t i = 0; i < n; ++i)
      out.push_back(double(values[i].getSExtValue()));
  }
  return out;
}

std::optional<int64_t> evalIndex(Value v, Value x, int64_t lastDim) {
  if (auto c = constantScalar(v)) // Slice ends are often INT64_MAX/MIN ("to the end").
    return *c >= 9.2e18 ? INT64_MAX : *c <= -9.2e18 ? INT64_MIN : int64_t(*c);
  OnnxNodeOp op = anyProducer(v);
  if (!op || !op.getDomain().empty())
    return std::nullopt;
  llvm::StringRef t = op.getOpType();
  if (t == "Cast" || t == "Unsqueeze" || t == "Squeeze" || t == "Identity")
    return evalIndex(op.getInputs()[0], x, lastDim);
  if (t == "Gather") {
    OnnxNodeOp shape = producer(op.getInputs()[0], "Shape");
    auto idx = constantScalar(op.getInputs()[1]);
    if (!shape || !idx || skipCasts(shape.getInputs()[0]) != skipCasts(x) || shape.getIntAttr("start", 0))
      return std::nullopt;
    int64_t rank = int64_t(shapeOf(x).size());
    bool ranked = isa<RankedTensorType>(x.getType());
    // Unranked: the [batch, heads, seq, head_dim] layout every exporter uses around rotary.
    if (*idx == -1 || (ranked && *idx == double(rank - 1)) || (!ranked && *idx == 3))
      return lastDim;
    return std::nullopt;
  }
  if (t == "Div" || t == "Mul" || t == "Add" || t == "Sub") {
    auto a = evalIndex(op.getInputs()[0], x, lastDim), b = evalIndex(op.getInputs()[1], x, lastDim);
    if (!a || !b)
      return std::nullopt;
    if (t == "Div")
      return *b ? std::optional<int64_t>(*a / *b) : std::nullopt;
    return t == "Mul" ? *a * *b : t == "Add" ? *a + *b : *a - *b;
  }
  return std::nullopt;
}

} // namespace helm

namespace helm {
void refineTypes(func::FuncOp func) {
  func.walk([](Operation *op) {
    if (!isa<RmsNormOp, RopeOp>(op))
      return;
    Type in = op->getOperand(0).getType();
    if (isa<RankedTensorType>(in) && !isa<RankedTensorType>(op->getResult(0).getType()))
      op->getResult(0).setType(in);
  });
  auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(), ret.getOperandTypes()));
}
} // namespace helm
