// libFuzzer target: arbitrary bytes through the ONNX importer and the raise pipeline. Any input must
// produce either a module or a one-line error, never a crash, hang or sanitizer report.
#include "compiler/Pipeline.h"
#include "compiler/onnx/OnnxImporter.h"
#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<helm::HelmDialect, mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  helm::ImportOptions options;
  options.requireWeightData = false; // never touch the file system for external data
  std::string error;
  helm::ImportedModel model =
      helm::importOnnxBytes(ctx, data, size, "fuzz.onnx", "/nonexistent", options, error);
  if (!model.module) {
    if (error.empty()) // a failed import must say why
      __builtin_trap();
    return 0;
  }
  (void)helm::raiseModule(*model.module, "fuzz.onnx", error);
  return 0;
}
