//===- StageAbi.cpp - the C signature and ABI record every lowered stage gets -----===//
#include "passes/codegen/StageAbi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace helm {

int32_t kernelDtypeCode(Type t) {
  if (t.isF32())
    return HELM_DTYPE_F32;
  if (t.isF16())
    return HELM_DTYPE_F16;
  if (t.isBF16())
    return HELM_DTYPE_BF16;
  return -1;
}

Value memrefFromPointer(OpBuilder &b, Location loc, Value ptr, MemRefType type,
                        ArrayRef<Value> dynamicSizesI64) {
  MLIRContext *mctx = b.getContext();
  Type i64t = b.getI64Type();
  Type ptrType = LLVM::LLVMPointerType::get(mctx);
  auto i64 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i64t, v).getResult(); };
  int64_t rank = type.getRank();
  auto array = LLVM::LLVMArrayType::get(i64t, rank);
  auto descType = LLVM::LLVMStructType::getLiteral(mctx, {ptrType, ptrType, i64t, array, array});
  SmallVector<Value> sizes;
  unsigned dyn = 0;
  for (int64_t i = 0; i < rank; ++i)
    sizes.push_back(type.isDynamicDim(i) ? dynamicSizesI64[dyn++] : i64(type.getDimSize(i)));
  SmallVector<Value> strides(rank);
  Value stride = i64(1);
  for (int64_t i = rank - 1; i >= 0; --i) {
    strides[i] = stride;
    if (i > 0)
      stride = arith::MulIOp::create(b, loc, stride, sizes[i]);
  }
  Value desc = LLVM::PoisonOp::create(b, loc, descType);
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{0});
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{1});
  desc = LLVM::InsertValueOp::create(b, loc, desc, i64(0), ArrayRef<int64_t>{2});
  for (int64_t i = 0; i < rank; ++i) {
    desc = LLVM::InsertValueOp::create(b, loc, desc, sizes[i], ArrayRef<int64_t>{3, i});
    desc = LLVM::InsertValueOp::create(b, loc, desc, strides[i], ArrayRef<int64_t>{4, i});
  }
  return UnrealizedConversionCastOp::create(b, loc, TypeRange{type}, ValueRange{desc}).getResult(0);
}

llvm::DenseMap<StringAttr, int64_t> existingTensorIds(ModuleOp module) {
  llvm::DenseMap<StringAttr, int64_t> ids;
  for (auto decl : module.getOps<WeightDeclOp>())
    if (auto id = decl->getAttrOfType<IntegerAttr>(HelmDialect::TensorIdAttrHelper::getNameStr()))
      ids[decl.getSymNameAttr()] = id.getInt();
  return ids;
}

StageLoweringBase::StageLoweringBase(func::FuncOp stage,
                                     llvm::DenseMap<StringAttr, int64_t> &tensorIds)
    : stage(stage), module(stage->getParentOfType<ModuleOp>()), b(stage.getContext()),
      loc(stage.getLoc()), tensorIds(tensorIds),
      ptrType(LLVM::LLVMPointerType::get(stage.getContext())),
      ctx(stage.getBody().front().getArgument(0)),
      unitFunction(stage->hasAttr(HelmDialect::UnitFunctionAttrHelper::getNameStr())) {
  // A unit function's argument attributes say what the stage split knew about its arguments;
  // the lowering takes them over here (the arguments change type when they bufferize).
  if (!unitFunction)
    return;
  for (unsigned i = 0; i < stage.getNumArguments(); ++i) {
    if (stage.getArgAttr(i, HelmDialect::KvLayerBaseAttrHelper::getNameStr()))
      kvLayerBase = stage.getArgument(i);
    if (auto blocks = stage.getArgAttrOfType<BlocksAttr>(i, HelmDialect::WeightBlocksAttrHelper::getNameStr()))
      blockWeights[stage.getArgument(i)] = blocks.getFormat();
    stage.removeArgAttr(i, HelmDialect::KvLayerBaseAttrHelper::getNameStr());
    stage.removeArgAttr(i, HelmDialect::WeightBlocksAttrHelper::getNameStr());
  }
}

Value StageLoweringBase::kvLayerOf(Operation *attention) {
  auto layer = attention->getAttrOfType<IntegerAttr>(HelmDialect::KvLayerAttrHelper::getNameStr());
  if (!layer) {
    attention->emitError() << "attention has no helm.kv_layer (run helm-stage-split first)";
    return {};
  }
  if (!unitFunction)
    return i64(layer.getInt());
  if (!kvLayerBase) {
    attention->emitError() << "attention in a unit function without a helm.kv_layer_base argument";
    return {};
  }
  return arith::AddIOp::create(b, loc, kvLayerBase, i64(layer.getInt()));
}

SmallVector<func::FuncOp> unitFunctionsCalledBy(func::FuncOp stage) {
  SmallVector<func::FuncOp> functions;
  auto module = stage->getParentOfType<ModuleOp>();
  stage.walk([&](func::CallOp call) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCalleeAttr());
    if (callee && callee->hasAttr(HelmDialect::UnitFunctionAttrHelper::getNameStr()) &&
        !llvm::is_contained(functions, callee))
      functions.push_back(callee);
  });
  return functions;
}

Value StageLoweringBase::i64(int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
}
Value StageLoweringBase::i32(int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
}
Value StageLoweringBase::toI64(Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
}

func::FuncOp StageLoweringBase::declare(StringRef name, TypeRange inputs, TypeRange results) {
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  auto f = func::FuncOp::create(b, loc, name, b.getFunctionType(inputs, results));
  f.setPrivate();
  return f;
}

Value StageLoweringBase::pointerOf(Value memref) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  return LLVM::IntToPtrOp::create(b, loc, ptrType, toI64(index));
}

Value StageLoweringBase::asTensor(Value memref, bool writable) {
  auto mt = cast<MemRefType>(memref.getType());
  return bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get(mt.getShape(), mt.getElementType()), memref,
      /*restrict=*/true, writable);
}

Value StageLoweringBase::lowerWeight(WeightOp w) {
  auto decl = module.lookupSymbol<WeightDeclOp>(w.getNameAttr());
  int64_t id;
  auto it = tensorIds.find(decl.getSymNameAttr());
  if (it == tensorIds.end()) {
    id = int64_t(tensorIds.size());
    tensorIds[decl.getSymNameAttr()] = id;
    decl->setAttr(HelmDialect::TensorIdAttrHelper::getNameStr(), b.getI64IntegerAttr(id));
  } else {
    id = it->second;
  }
  func::FuncOp fetch = declare(HELM_CONTRACT_SYMBOL(helm_rt_weight), {ptrType, b.getI64Type()}, {ptrType});
  Value ptr = func::CallOp::create(b, loc, fetch, ValueRange{ctx, i64(id)}).getResult(0);
  auto type = cast<RankedTensorType>(w.getType());
  // A weight in blocks keeps its logical type here: kernels take only its address (with the
  // format's code from dtypeCodeOf), nothing indexes it as elements.
  Value view =
      memrefFromPointer(b, loc, ptr, MemRefType::get(type.getShape(), type.getElementType()), {});
  Value tensor = asTensor(view, /*writable=*/false);
  if (BlocksAttr blocks = decl.getBlocksAttr())
    blockWeights[tensor] = blocks.getFormat();
  return tensor;
}

int32_t StageLoweringBase::dtypeCodeOf(Value value) {
  auto it = blockWeights.find(value);
  if (it != blockWeights.end())
    return int32_t(it->second);
  auto shaped = dyn_cast<ShapedType>(value.getType());
  return shaped ? kernelDtypeCode(shaped.getElementType()) : -1;
}

namespace {
/// `<stage>_abi`: what the stage's code reads and writes through its raw pointers, as an
/// exported constant i64[4] = {1 (record version), input width (0: token ids), output width
/// (the vocabulary for logits, the hidden size for an activation), bytes per activation element
/// (0 when the stage has no activation)}. The runtime sizes the buffers it passes from the
/// manifest and refuses a package whose manifest disagrees with this record, so a foreign or
/// hand-edited manifest cannot make the code write past a buffer.
void emitAbiRecord(OpBuilder &b, func::FuncOp stage, RankedTensorType input,
                   RankedTensorType output, bool returnsLogits) {
  int64_t inputWidth = input.getRank() == 3 ? input.getDimSize(2) : 0;
  RankedTensorType activation = inputWidth ? input : !returnsLogits ? output : nullptr;
  int64_t elementBytes =
      activation ? int64_t(activation.getElementType().getIntOrFloatBitWidth() / 8) : 0;
  SmallVector<int64_t> record(HELM_STAGE_ABI_FIELDS);
  record[HELM_STAGE_ABI_VERSION] = HELM_STAGE_ABI_RECORD_VERSION;
  record[HELM_STAGE_ABI_INPUT_WIDTH] = inputWidth;
  record[HELM_STAGE_ABI_OUTPUT_WIDTH] = output.getDimSize(2);
  record[HELM_STAGE_ABI_ELEMENT_BYTES] = elementBytes;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(stage);
  auto arrayType = LLVM::LLVMArrayType::get(b.getI64Type(), int64_t(record.size()));
  LLVM::GlobalOp::create(b, stage.getLoc(), arrayType, /*isConstant=*/true,
                         LLVM::Linkage::External, (stage.getName() + HELM_STAGE_ABI_SUFFIX).str(),
                         b.getI64TensorAttr(record));
}
} // namespace

LogicalResult rewriteStageSignature(func::FuncOp stage, StageResultWriter writeResult) {
  OpBuilder b(stage.getContext());
  Location loc = stage.getLoc();
  Block &entry = stage.getBody().front();
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  if (entry.getNumArguments() != 3 || ret.getNumOperands() != 1)
    return stage.emitError() << "stage must take (context, input, positions) and return one result";
  auto inputType = dyn_cast<RankedTensorType>(entry.getArgument(1).getType());
  auto resultType = dyn_cast<RankedTensorType>(ret.getOperand(0).getType());
  // Input: token ids [B, S] or an activation [B, S, H]; result: logits [B, 1, V] or an
  // activation [B, S, H] for the next stage. B and S are the call's; everything else is static.
  auto batchAndSequence = [](RankedTensorType t, int64_t rank) {
    if (!t || t.getRank() != rank)
      return false;
    for (int64_t i = 2; i < rank; ++i)
      if (t.isDynamicDim(i))
        return false;
    return true;
  };
  if (!(batchAndSequence(inputType, 2) && inputType.getElementType().isInteger(64)) &&
      !batchAndSequence(inputType, 3))
    return stage.emitError() << "stage input must be token ids [B, S] or an activation [B, S, H]";
  if (!batchAndSequence(resultType, 3))
    return stage.emitError() << "stage result must be logits [B, 1, V] or an activation [B, S, H]";
  bool returnsLogits = resultType.getDimSize(1) == 1;
  Type i64t = b.getI64Type();
  Type ptrType = LLVM::LLVMPointerType::get(stage.getContext());
  BlockArgument inPtr = entry.addArgument(ptrType, loc);
  BlockArgument posPtr = entry.addArgument(ptrType, loc);
  BlockArgument outPtr = entry.addArgument(ptrType, loc);
  BlockArgument batch = entry.addArgument(i64t, loc);
  BlockArgument seq = entry.addArgument(i64t, loc);

  auto asTensor = [&](Value memref) {
    auto mt = cast<MemRefType>(memref.getType());
    return bufferization::ToTensorOp::create(
        b, loc, RankedTensorType::get(mt.getShape(), mt.getElementType()), memref,
        /*restrict=*/true, /*writable=*/false);
  };
  b.setInsertionPointToStart(&entry);
  auto idsMemref = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, i64t);
  Value input = asTensor(memrefFromPointer(
      b, loc, inPtr, MemRefType::get(inputType.getShape(), inputType.getElementType()),
      {batch, seq}));
  Value pos = asTensor(memrefFromPointer(b, loc, posPtr, idsMemref, {batch, seq}));
  entry.getArgument(1).replaceAllUsesWith(input);
  entry.getArgument(2).replaceAllUsesWith(pos);

  b.setInsertionPoint(ret);
  Value result = ret.getOperand(0);
  // Logits leave as f32 [B, 1, V] whatever the model's dtype; the boundary activation leaves in
  // the model's dtype: these are the bytes on the link.
  Type outElement = returnsLogits ? b.getF32Type() : resultType.getElementType();
  SmallVector<Value> outSizes{batch};
  if (!returnsLogits)
    outSizes.push_back(seq);
  auto outMemrefType = MemRefType::get(resultType.getShape(), outElement);
  Value outMemref = memrefFromPointer(b, loc, outPtr, outMemrefType, outSizes);
  if (failed(writeResult(b, loc, result, outMemref, returnsLogits)))
    return failure();
  ret->setOperands({});
  stage.removeArgAttrsAttr();
  entry.eraseArguments(1, 2);
  emitAbiRecord(b, stage, inputType, RankedTensorType::get(resultType.getShape(), outElement),
                returnsLogits);
  // The context stays first; the model arguments follow.
  stage.setFunctionType(b.getFunctionType({ptrType, ptrType, ptrType, ptrType, i64t, i64t}, {}));
  return success();
}

} // namespace helm
