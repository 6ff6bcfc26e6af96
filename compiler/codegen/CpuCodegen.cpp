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
#include "passes/Passes.h"

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

void buildCpuBufferizePipeline(OpPassManager &pm, bool splitStages) {
  if (splitStages)
    pm.addPass(createStageSplit());
  pm.addPass(createLowerToLinalg());
  std::string error;
  llvm::raw_string_ostream os(error);
  // Upstream passes by their registered names keep this list identical to the lit tests' RUN lines.
  if (failed(parsePassPipeline(
          "canonicalize,cse,one-shot-bufferize{bufferize-function-boundaries "
          "function-boundary-type-conversion=identity-layout-map "
          "unknown-type-conversion=identity-layout-map},canonicalize",
          pm, os)))
    llvm::report_fatal_error(llvm::Twine("helm-cpu-bufferize pipeline: ") + error);
  pm.addNestedPass<func::FuncOp>(createStridedCopiesToLinalg());
  pm.addNestedPass<func::FuncOp>(createFreeBuffers());
  // After bufferization: on tensors, the analysis of hundreds of tiled loops is superlinear.
  pm.addNestedPass<func::FuncOp>(createVectorizeGlue());
  pm.addPass(createCanonicalizerPass());
}

void buildDeviceCallsBufferizePipeline(OpPassManager &pm) {
  LowerToDeviceCallsOptions options;
  options.stageDevice = "gpu";
  pm.addPass(createLowerToDeviceCalls(options));
  std::string error;
  llvm::raw_string_ostream os(error);
  if (failed(parsePassPipeline(
          "canonicalize,cse,one-shot-bufferize{bufferize-function-boundaries "
          "function-boundary-type-conversion=identity-layout-map "
          "unknown-type-conversion=identity-layout-map},canonicalize",
          pm, os)))
    llvm::report_fatal_error(llvm::Twine("helm-device-calls-bufferize pipeline: ") + error);
  pm.addNestedPass<func::FuncOp>(createFreeBuffers());
  pm.addPass(createCanonicalizerPass());
}

void buildCpuToLlvmPipeline(OpPassManager &pm, bool deviceBuffers) {
  std::string error;
  llvm::raw_string_ostream os(error);
  std::string memrefToLlvm = deviceBuffers ? "finalize-memref-to-llvm{use-generic-functions=true}"
                                           : "finalize-memref-to-llvm";
  if (failed(parsePassPipeline(
          "func.func(convert-linalg-to-loops),canonicalize,"
          "func.func(lower-vector-mask,lower-vector-multi-reduction,convert-vector-to-scf{full-unroll=true lower-tensors=false}),"
          "expand-strided-metadata,lower-affine,convert-scf-to-cf,convert-vector-to-llvm,"
          "convert-math-to-llvm," + memrefToLlvm + ",convert-to-llvm,"
          "reconcile-unrealized-casts,canonicalize",
          pm, os)))
    llvm::report_fatal_error(llvm::Twine("helm-cpu-to-llvm pipeline: ") + error);
}

void registerCpuCodegenPipelines() {
  PassPipelineRegistration<>("helm-cpu-bufferize",
                             "Stage split, HELM to linalg + kernel calls, bufferization, early frees",
                             [](OpPassManager &pm) { buildCpuBufferizePipeline(pm); });
  PassPipelineRegistration<>(
      "helm-device-calls-bufferize",
      "A split GPU stage to device-kernel calls (helm_dev_*), bufferization, early frees",
      [](OpPassManager &pm) { buildDeviceCallsBufferizePipeline(pm); });
  PassPipelineRegistration<>("helm-cpu-to-llvm", "Bufferized stage code to the LLVM dialect",
                             [](OpPassManager &pm) { buildCpuToLlvmPipeline(pm); });
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

/// First diagnostic of a failed pass run, as one line.
struct DiagnosticCapture {
  explicit DiagnosticCapture(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &d) {
          if (d.getSeverity() == DiagnosticSeverity::Error && message.empty())
            message = d.str();
          return success();
        }) {}
  std::string message;
  ScopedDiagnosticHandler handler;
};

bool linkSharedObject(llvm::ArrayRef<char> object, std::string &so, std::string &error) {
  llvm::SmallString<128> dir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("helmc-link", dir)) {
    error = "cannot create a temporary directory: " + ec.message();
    return false;
  }
  auto cleanup = llvm::make_scope_exit([&] { llvm::sys::fs::remove_directories(dir); });
  llvm::SmallString<128> objPath(dir), soPath(dir);
  llvm::sys::path::append(objPath, "stage.o");
  llvm::sys::path::append(soPath, "stage.so");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objPath, ec);
    if (ec) {
      error = "cannot write " + objPath.str().str() + ": " + ec.message();
      return false;
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
    error = "no linker found (ld.lld or ld); install lld or binutils";
    return false;
  }
  llvm::SmallVector<llvm::StringRef> args{linker,  "-shared",     "--hash-style=gnu", "-z",
                                          "now",   "-o",          soPath,             objPath};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(linker, args, std::nullopt, {}, 120, 0, &message);
  if (rc != 0) {
    error = "linking the CPU stage with " + linker + " failed" +
            (message.empty() ? "" : ": " + message);
    return false;
  }
  auto buffer = llvm::MemoryBuffer::getFile(soPath);
  if (!buffer) {
    error = "cannot read the linked CPU stage: " + buffer.getError().message();
    return false;
  }
  so = (*buffer)->getBuffer().str();
  return true;
}

} // namespace

namespace {
/// Compiles a module holding exactly one stage function (already split) into `stage`.
bool compileOneStage(ModuleOp module, const CpuCodegenTarget &target, CpuStage &stage,
                     std::string &error, const std::function<void(llvm::StringRef)> &progress) {
  auto say = [&](llvm::StringRef s) {
    if (progress)
      progress(s);
  };
  MLIRContext &ctx = *module.getContext();
  DiagnosticCapture diags(ctx);
  std::string what = stage.device + " stage";

  PassManager bufferize(&ctx);
  if (stage.deviceCalls) {
    say("lowering the " + what + " to device-kernel calls");
    buildDeviceCallsBufferizePipeline(bufferize);
  } else {
    say("lowering the " + what + " to linalg and bufferizing");
    buildCpuBufferizePipeline(bufferize, /*splitStages=*/false);
  }
  if (failed(bufferize.run(module))) {
    error = diags.message.empty() ? what + " lowering failed" : diags.message;
    return false;
  }
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
      error = "internal error: the kernel-form " + what + " accesses device memory on the host (" +
              hostAccess->getName().getStringRef().str() + ")";
      return false;
    }
  }

  // The tensor table: every weight the generated code fetches, by id.
  std::vector<StageTensor> tensors;
  SmallVector<Operation *> decls;
  for (auto decl : module.getOps<WeightDeclOp>()) {
    decls.push_back(decl);
    auto id = decl->getAttrOfType<IntegerAttr>("helm.tensor_id");
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
    tensors.push_back(std::move(t));
  }
  llvm::sort(tensors, [](const StageTensor &a, const StageTensor &b) { return a.id < b.id; });
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].id != int64_t(i)) {
      error = "internal error: weight ids are not dense";
      return false;
    }
  for (auto f : module.getOps<func::FuncOp>())
    if (auto layers = f->getAttrOfType<IntegerAttr>("helm.kv_layers"))
      stage.kvLayers = layers.getInt();
  for (Operation *decl : decls)
    decl->erase();
  stage.tensors = std::move(tensors);

  say("lowering the " + what + " to the LLVM dialect");
  PassManager toLlvm(&ctx);
  buildCpuToLlvmPipeline(toLlvm, /*deviceBuffers=*/stage.device != "cpu");
  if (failed(toLlvm.run(module))) {
    error = diags.message.empty() ? "lowering the " + what + " to LLVM failed" : diags.message;
    return false;
  }

  say("generating native code for the " + what + " (" + target.cpu + ")");
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  ctx.appendDialectRegistry(registry);
  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(module, llvmCtx, stage.entry);
  if (!llvmModule) {
    error = diags.message.empty() ? "translation of the " + what + " to LLVM IR failed"
                                  : diags.message;
    return false;
  }

  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  std::string lookupError;
  const llvm::Target *llvmTarget = llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!llvmTarget) {
    error = "no LLVM target for " + triple.str() + ": " + lookupError;
    return false;
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(llvmTarget->createTargetMachine(
      triple, target.cpu, target.features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm) {
    error = "cannot create a target machine for CPU '" + target.cpu + "'";
    return false;
  }
  llvmModule->setDataLayout(tm->createDataLayout());
  llvmModule->setTargetTriple(triple);
  if (llvm::verifyModule(*llvmModule, &llvm::errs())) {
    error = "internal error: generated LLVM IR does not verify";
    return false;
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
      error = "the target machine cannot emit object files";
      return false;
    }
    codegen.run(*llvmModule);
  }

  say("linking the " + what);
  if (!linkSharedObject(object, stage.sharedObject, error))
    return false;
  return true;
}
} // namespace

bool compileHostStages(ModuleOp module, const CpuCodegenTarget &target,
                       std::vector<CpuStage> &stages, std::string &error,
                       const std::function<void(llvm::StringRef)> &progress, bool gpuDeviceCalls) {
  MLIRContext &ctx = *module.getContext();
  {
    DiagnosticCapture diags(ctx);
    PassManager split(&ctx);
    split.addPass(createStageSplit());
    if (failed(split.run(module))) {
      error = diags.message.empty() ? "stage split failed" : diags.message;
      return false;
    }
  }
  SmallVector<func::FuncOp> functions;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr("helm.stage"))
      functions.push_back(f);
  stages.clear();
  for (func::FuncOp f : functions) {
    CpuStage stage;
    stage.device = f->getAttrOfType<StringAttr>("helm.stage").getValue().str();
    stage.entry = f.getName().str();
    stage.deviceCalls = gpuDeviceCalls && stage.device == "gpu";
    if (auto layers = f->getAttrOfType<IntegerAttr>("helm.kv_layers"))
      stage.kvLayers = layers.getInt();
    if (auto units = f->getAttrOfType<DenseI64ArrayAttr>("helm.units"); units && units.size() == 2) {
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
  if (stages.size() == 1)
    return compileOneStage(module, target, stages[0], error, progress);
  for (size_t i = 0; i < stages.size(); ++i) {
    OwningOpRef<ModuleOp> copy = module.clone();
    for (auto f : llvm::make_early_inc_range(copy->getOps<func::FuncOp>()))
      if (f.getName() != stages[i].entry)
        f.erase();
    if (!compileOneStage(*copy, target, stages[i], error, progress))
      return false;
  }
  return true;
}

} // namespace helm
