//===- CpuCodegen.cpp - CPU stage to a native shared object -----------------------===//
//
// helm ops -> linalg on tensors + kernel calls (helm-lower-to-linalg) -> one-shot bufferization ->
// early frees -> loops -> LLVM dialect -> LLVM IR -> O3 for the target CPU -> object -> shared
// object (linked by lld or the system linker). The .so leaves the runtime's symbols (kernels,
// weights, attention, malloc, libm) undefined: the runtime provides them when it loads the stage.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/CpuCodegen.h"

#include "dialects/helm/HelmDialect.h"
#include "compiler/Pipeline.h"
#include "contract/manifest_schema.h"
#include "passes/codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"


using namespace mlir;

namespace helm {

CpuCodegenTarget CpuCodegenTarget::host() {
  CpuCodegenTarget t;
  t.cpu = llvm::sys::getHostCPUName().str();
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  std::string list;
  for (auto &f : features)
    list += std::string(list.empty() ? "" : ",") + (f.second ? "+" : "-") + f.first().str();
  t.features = list;
  return t;
}

namespace {

std::string elementName(Type t) {
  if (t.isF32()) return "f32";
  if (t.isF16()) return "f16";
  if (t.isBF16()) return "bf16";
  if (t.isF64()) return "f64";
  if (auto i = dyn_cast<IntegerType>(t))
    return (i.isUnsigned() ? "u" : "i") + std::to_string(i.getWidth());
  return "unknown";
}

llvm::Error linkSharedObject(llvm::ArrayRef<char> object, std::string &so) {
  llvm::SmallString<128> dir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("helmc-link", dir)) {
    return llvm::createStringError("cannot create a temporary directory: " + ec.message());
  }
  llvm::scope_exit cleanup([&] { llvm::sys::fs::remove_directories(dir); });
  llvm::SmallString<128> objPath(dir), soPath(dir);
  llvm::sys::path::append(objPath, "stage.o");
  llvm::sys::path::append(soPath, "stage.so");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objPath, ec);
    if (ec) {
      return llvm::createStringError("cannot write " + objPath.str().str() + ": " + ec.message());
    }
    os.write(object.data(), object.size());
  }
  std::string linker;
  for (const char *name : {"ld.lld-22", "ld.lld", "ld"})
    if (auto found = llvm::sys::findProgramByName(name)) {
      linker = *found;
      break;
    }
  if (linker.empty()) {
    return llvm::createStringError("no linker found (ld.lld or ld); install lld or binutils");
  }
  llvm::SmallVector<llvm::StringRef> args{linker,  "-shared",     "--hash-style=gnu", "-z",
                                          "now",   "-o",          soPath,             objPath};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(linker, args, std::nullopt, {}, 120, 0, &message);
  if (rc != 0) {
    return llvm::createStringError("linking the CPU stage with " + linker + " failed" +
            (message.empty() ? "" : ": " + message));
  }
  auto buffer = llvm::MemoryBuffer::getFile(soPath);
  if (!buffer) {
    return llvm::createStringError("cannot read the linked CPU stage: " + buffer.getError().message());
  }
  so = (*buffer)->getBuffer().str();
  return llvm::Error::success();
}

} // namespace

namespace {
/// Compiles a module holding exactly one stage function (already split) into `stage`.
llvm::Error compileOneStage(ModuleOp module, const CpuCodegenTarget &target, CpuStage &stage,
                            const std::function<void(llvm::StringRef)> &progress) {
  auto say = [&](llvm::StringRef s) {
    if (progress)
      progress(s);
  };
  MLIRContext &ctx = *module.getContext();
  std::string what = std::string(helm_stage_side_name(stage.side)) + " stage";

  say(stage.deviceCalls ? "lowering the " + what + " to device-kernel calls"
                        : "lowering the " + what + " to linalg and bufferizing");
  if (llvm::Error e = runPipeline(
          module, stage.deviceCalls ? buildDeviceCallsBufferizePipeline : buildCpuBufferizePipeline,
          what + " lowering"))
    return e;
  if (stage.deviceCalls) {
    // The kernel-form stage must never touch its buffers on the host: they are device memory.
    Operation *hostAccess = nullptr;
    module.walk([&](Operation *op) {
      if (isa<memref::CopyOp, memref::LoadOp, memref::StoreOp>(op) ||
          isa<linalg::LinalgDialect, vector::VectorDialect>(op->getDialect())) {
        hostAccess = op;
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (hostAccess) {
      return llvm::createStringError("internal error: the kernel-form " + what + " accesses device memory on the host (" +
              hostAccess->getName().getStringRef().str() + ")");
    }
  }

  // The tensor table: every weight the generated code fetches, by id.
  std::vector<StageTensor> tensors;
  SmallVector<Operation *> decls;
  for (auto decl : module.getOps<WeightDeclOp>()) {
    decls.push_back(decl);
    auto id = decl->getAttrOfType<IntegerAttr>(HelmDialect::TensorIdAttrHelper::getNameStr());
    if (!id)
      continue;
    StageTensor t;
    t.id = id.getInt();
    t.symbol = decl.getSymName().str();
    t.onnxName = decl.getOnnxName().str();
    auto type = cast<RankedTensorType>(decl.getType());
    t.dtype = elementName(type.getElementType());
    t.shape.assign(type.getShape().begin(), type.getShape().end());
    t.bytes = decl.getLength();
    if (BlocksAttr blocks = decl.getBlocksAttr()) {
      t.blockDtype = int32_t(blocks.getFormat());
      t.sourceDtype = t.dtype;
      t.sourceShape = t.shape;
      t.sourceBytes = t.bytes;
      t.rowDim = blocks.getRowDim();
      t.dtype = helm_dtype_name(t.blockDtype);
      t.shape = {type.getDimSize(t.rowDim), type.getDimSize(1 - t.rowDim)};
      t.bytes = decl.getStoredBytes();
      t.prepacked = decl.getPrepacked();
    }
    if (OnnxBlocksAttr onnx = decl.getOnnxBlocksAttr()) {
      // The source is the codes' bytes; without `blocks` the package stores the weight
      // dequantized, as its declared type.
      t.sourceBytes = decl.getLength();
      t.bytes = decl.getStoredBytes();
      t.onnxBlocks.bits = onnx.getBits();
      t.onnxBlocks.blockSize = onnx.getBlockSize();
      t.onnxBlocks.kMajor = onnx.getKMajor();
      t.onnxBlocks.codeDtype = elementName(onnx.getCodeType());
      t.onnxBlocks.scales = onnx.getScales().str();
      t.onnxBlocks.scaleDtype = elementName(onnx.getScaleType());
      t.onnxBlocks.zeroPoints = onnx.getZeroPoints().str();
      if (onnx.getZeroPointType())
        t.onnxBlocks.zeroPointDtype = elementName(onnx.getZeroPointType());
    }
    tensors.push_back(std::move(t));
  }
  llvm::sort(tensors, [](const StageTensor &a, const StageTensor &b) { return a.id < b.id; });
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].id != int64_t(i)) {
      return llvm::createStringError("internal error: weight ids are not dense");
    }
  for (auto f : module.getOps<func::FuncOp>())
    if (auto layers = f->getAttrOfType<IntegerAttr>(HelmDialect::KvLayersAttrHelper::getNameStr()))
      stage.kvLayers = layers.getInt();
  for (Operation *decl : decls)
    decl->erase();
  stage.tensors = std::move(tensors);

  say("lowering the " + what + " to the LLVM dialect");
  bool deviceBuffers = stage.side != HELM_STAGE_CPU;
  if (llvm::Error e = runPipeline(
          module, [&](OpPassManager &pm) { buildCpuToLlvmPipeline(pm, deviceBuffers); },
          "lowering the " + what + " to LLVM"))
    return e;

  say("generating native code for the " + what + " (" + target.cpu + ")");
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  ctx.appendDialectRegistry(registry);
  llvm::LLVMContext llvmCtx;
  FirstErrorCapture diagnostics(ctx);
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(module, llvmCtx, stage.entry);
  if (!llvmModule) {
    return llvm::createStringError(diagnostics.messageOr("translation of the " + what + " to LLVM IR failed"));
  }

  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  std::string lookupError;
  const llvm::Target *llvmTarget = llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!llvmTarget) {
    return llvm::createStringError("no LLVM target for " + triple.str() + ": " + lookupError);
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(llvmTarget->createTargetMachine(
      triple, target.cpu, target.features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm) {
    return llvm::createStringError("cannot create a target machine for CPU '" + target.cpu + "'");
  }
  llvmModule->setDataLayout(tm->createDataLayout());
  llvmModule->setTargetTriple(triple);
  if (llvm::verifyModule(*llvmModule, &llvm::errs())) {
    return llvm::createStringError("internal error: generated LLVM IR does not verify");
  }
  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(*llvmModule, mam);
  }
  llvm::SmallVector<char, 0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager codegen;
    if (tm->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
      return llvm::createStringError("the target machine cannot emit object files");
    }
    codegen.run(*llvmModule);
  }

  say("linking the " + what);
  return linkSharedObject(object, stage.sharedObject);
}
} // namespace

llvm::Expected<std::vector<CpuStage>> compileHostStages(ModuleOp module, const CpuCodegenTarget &target,
                       const std::function<void(llvm::StringRef)> &progress, bool gpuDeviceCalls) {
  SmallVector<func::FuncOp> functions;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(HelmDialect::StageAttrHelper::getNameStr()))
      functions.push_back(f);
  std::vector<CpuStage> stages;
  for (func::FuncOp f : functions) {
    CpuStage stage;
    stage.side = f->getAttrOfType<StringAttr>(HelmDialect::StageAttrHelper::getNameStr()).getValue() == helm_stage_side_name(HELM_STAGE_GPU)
                     ? HELM_STAGE_GPU
                     : HELM_STAGE_CPU;
    stage.entry = f.getName().str();
    stage.deviceCalls = gpuDeviceCalls && stage.side == HELM_STAGE_GPU;
    if (auto layers = f->getAttrOfType<IntegerAttr>(HelmDialect::KvLayersAttrHelper::getNameStr()))
      stage.kvLayers = layers.getInt();
    if (auto units = f->getAttrOfType<DenseI64ArrayAttr>(HelmDialect::UnitsAttrHelper::getNameStr()); units && units.size() == 2) {
      stage.firstUnit = units[0];
      stage.lastUnit = units[1];
    }
    auto input = cast<RankedTensorType>(f.getArgumentTypes()[1]);
    auto output = cast<RankedTensorType>(f.getResultTypes()[0]);
    stage.takesIds = input.getRank() == 2;
    stage.returnsLogits = output.getDimSize(1) == 1;
    RankedTensorType activation = !stage.takesIds ? input : !stage.returnsLogits ? output : nullptr;
    if (activation) {
      stage.activationDtype = elementName(activation.getElementType());
      stage.activationWidth = activation.getDimSize(2);
    }
    stages.push_back(std::move(stage));
  }
  // Each stage from its own copy of the module, so each gets its own dense weight ids (a weight
  // both stages use, such as a tied embedding, is in both tables: it lives on both devices).
  if (stages.size() == 1) {
    if (llvm::Error e = compileOneStage(module, target, stages[0], progress))
      return std::move(e);
    return stages;
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    OwningOpRef<ModuleOp> copy = module.clone();
    for (auto f : llvm::make_early_inc_range(copy->getOps<func::FuncOp>()))
      if (f->hasAttr(HelmDialect::StageAttrHelper::getNameStr()) && f.getName() != stages[i].entry)
        f.erase();
    // The other stage's unit functions go with it.
    for (auto f : llvm::make_early_inc_range(copy->getOps<func::FuncOp>()))
      if (f->hasAttr(HelmDialect::UnitFunctionAttrHelper::getNameStr()) &&
          SymbolTable::symbolKnownUseEmpty(f, *copy))
        f.erase();
    if (llvm::Error e = compileOneStage(*copy, target, stages[i], progress))
      return std::move(e);
  }
  return stages;
}

} // namespace helm
