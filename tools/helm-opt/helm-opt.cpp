//===- helm-opt.cpp - mlir-opt for the HELM dialect and passes -------------------===//
//
// Registers every upstream dialect, extension and pass as well as HELM's, so lit tests can run any
// step of the codegen pipeline (bufferization, linalg, conversion to LLVM) in isolation.
//
//===----------------------------------------------------------------------===//
#include "dialects/helm/HelmDialect.h"
#include "compiler/codegen/CpuCodegen.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<helm::HelmDialect>();
  mlir::registerAllPasses();
  helm::registerAllHelmPasses();
  helm::registerCpuCodegenPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "HELM optimizer driver\n", registry));
}
