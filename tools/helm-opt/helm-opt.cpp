//===- helm-opt.cpp - mlir-opt for the HELM dialect and passes -------------------===//
#include "dialects/helm/HelmDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<helm::HelmDialect, mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  helm::registerAllHelmPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "HELM optimizer driver\n", registry));
}
