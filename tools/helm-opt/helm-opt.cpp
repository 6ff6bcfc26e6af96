//===- helm-opt.cpp - mlir-opt for the HELM dialect and passes -------------------===//
//
// Registers every upstream dialect, extension and pass as well as HELM's passes and pipelines by
// phase (passes/Passes.h) and the compiler's own front half (`helm-compile`, compiler/Pipeline.h),
// so lit tests can run any step of helmc's pipeline, or all of it, in isolation.
//
//===----------------------------------------------------------------------===//
#include "compiler/Pipeline.h"
#include "dialects/helm/HelmDialect.h"
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
  helm::registerHelmPasses();
  helm::registerCompilerPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "HELM optimizer driver\n", registry));
}
