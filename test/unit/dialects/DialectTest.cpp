// Verifiers of the block-level ops: shapes, dtypes and head divisibility.
#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

namespace {
/// Parses `body` inside a function and returns the first error message, or "" if it verifies.
std::string verify(const std::string &args, const std::string &body) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<helm::HelmDialect, mlir::func::FuncDialect>();
  std::string error;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    if (error.empty())
      error = d.str();
    return mlir::success();
  });
  std::string text = "func.func @f(" + args + ") {\n" + body + "\n  return\n}\n";
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  return module ? "" : (error.empty() ? "parse failed" : error);
}
} // namespace

TEST(Verifier, AttentionHeadsMustDivide) {
  std::string args = "%q: tensor<?x?x96xf32>, %k: tensor<?x?x64xf32>";
  EXPECT_EQ(verify(args, "%a = helm.attention %q, %k, %k {num_heads = 6 : i64, num_kv_heads = 4 : i64, "
                         "head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x?x96xf32>, "
                         "tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x96xf32>"),
            "'helm.attention' op num_heads 6 is not a multiple of num_kv_heads 4");
  EXPECT_EQ(verify(args, "%a = helm.attention %q, %k, %k {num_heads = 6 : i64, num_kv_heads = 2 : i64, "
                         "head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x?x96xf32>, "
                         "tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x96xf32>"),
            "'helm.attention' op k/v last dimension 64 != num_kv_heads * head_dim = 32");
}

TEST(Verifier, LinearShapes) {
  std::string args = "%x: tensor<?x?x64xf32>, %w: tensor<32x48xf32>";
  EXPECT_NE(verify(args, "%y = helm.linear %x, %w {transpose_weight = false} : (tensor<?x?x64xf32>, "
                         "tensor<32x48xf32>) -> tensor<?x?x48xf32>")
                .find("input features 64 differ from the weight's 32"),
            std::string::npos);
  EXPECT_EQ(verify("%x: tensor<?x?x48xf32>, %w: tensor<32x48xf32>",
                   "%y = helm.linear %x, %w {transpose_weight = true} : (tensor<?x?x48xf32>, "
                   "tensor<32x48xf32>) -> tensor<?x?x32xf32>"),
            "");
}

TEST(Verifier, RmsNormGroupAndRope) {
  EXPECT_NE(verify("%x: tensor<?x?x64xf32>, %g: tensor<48xf32>",
                   "%y = helm.rms_norm %x, %g {epsilon = 1.0e-6 : f64} : (tensor<?x?x64xf32>, "
                   "tensor<48xf32>) -> tensor<?x?x64xf32>")
                .find("not a multiple of gamma size 48"),
            std::string::npos);
  EXPECT_NE(verify("%x: tensor<?x?x64xf32>",
                   "%y = helm.rope %x {head_dim = 16 : i64, rotary_dim = 15 : i64, style = "
                   "#helm.rope_style<half>, theta = 1.0e4 : f64} : (tensor<?x?x64xf32>) -> "
                   "tensor<?x?x64xf32>")
                .find("rotary_dim 15 must be even"),
            std::string::npos);
}

TEST(Verifier, WeightDeclLength) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<helm::HelmDialect, mlir::func::FuncDialect>();
  auto ok = mlir::parseSourceString<mlir::ModuleOp>(
      "helm.weight_decl @w : tensor<4x4xf16> {onnx_name = \"w\", location = \"a.bin\", offset = 0, "
      "length = 32}",
      &ctx);
  EXPECT_TRUE(ok);
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  auto bad = mlir::parseSourceString<mlir::ModuleOp>(
      "helm.weight_decl @w : tensor<4x4xf16> {onnx_name = \"w\", location = \"a.bin\", offset = 0, "
      "length = 64}",
      &ctx);
  EXPECT_FALSE(bad);
}
