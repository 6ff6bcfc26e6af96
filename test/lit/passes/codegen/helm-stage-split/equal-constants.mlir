// Units are the same only when their code is: blocks 1 and 3 (same rms_norm constant) share a
// function, block 2 (one constant element differs) stays inline. The printer's options must not
// decide it: with large constants elided from printed IR, blocks 1 and 2 would print alike.
// RUN: helm-opt %s --helm-stage-split | FileCheck %s
// RUN: helm-opt %s --helm-stage-split --mlir-elide-elementsattrs-if-larger=4 | FileCheck %s
// CHECK: func.func private @helm_cpu_stage_unit0(
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @helm_cpu_stage(
// CHECK: helm.weight @w1
// CHECK-NEXT: call @helm_cpu_stage_unit0(
// CHECK: helm.rms_norm
// CHECK: helm.weight @w3
// CHECK-NEXT: call @helm_cpu_stage_unit0(
// CHECK-NOT: call @helm_cpu_stage_unit0(
module {
  helm.weight_decl @embed : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  helm.weight_decl @w1 : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "w1"}
  helm.weight_decl @w2 : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "w2"}
  helm.weight_decl @w3 : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "w3"}
  func.func @main(%ids: tensor<?x?xi64> {helm.name = "input_ids"}, %pos: tensor<?x?xi64> {helm.name = "position_ids"}) -> tensor<?x?x32xf32> {
    %0 = helm.unit embedding[0] : tensor<?x?x32xf32> {
      %t = helm.weight @embed : tensor<32x32xf32>
      %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      helm.yield %e : tensor<?x?x32xf32>
    }
    %1 = helm.unit block[1] : tensor<?x?x32xf32> {
      %g = helm.constant dense<[1.000, 1.125, 1.250, 1.375, 1.500, 1.625, 1.750, 1.875, 2.000, 2.125, 2.250, 2.375, 2.500, 2.625, 2.750, 2.875, 3.000, 3.125, 3.250, 3.375, 3.500, 3.625, 3.750, 3.875, 4.000, 4.125, 4.250, 4.375, 4.500, 4.625, 4.750, 4.875]> : tensor<32xf32>
      %n = helm.rms_norm %0, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
      %w = helm.weight @w1 : tensor<32x32xf32>
      %o = helm.linear %n, %w {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %r = helm.add %0, %o : tensor<?x?x32xf32>
      helm.yield %r : tensor<?x?x32xf32>
    }
    %2 = helm.unit block[2] : tensor<?x?x32xf32> {
      %g = helm.constant dense<[1.000, 1.125, 1.250, 1.375, 1.500, 1.625, 1.750, 1.875, 2.000, 2.125, 2.250, 2.375, 2.500, 2.625, 2.750, 2.875, 3.000, 3.125, 3.250, 3.375, 3.500, 3.625, 3.750, 3.875, 4.000, 4.125, 4.250, 4.375, 4.500, 4.625, 4.750, 9.000]> : tensor<32xf32>
      %n = helm.rms_norm %1, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
      %w = helm.weight @w2 : tensor<32x32xf32>
      %o = helm.linear %n, %w {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %r = helm.add %1, %o : tensor<?x?x32xf32>
      helm.yield %r : tensor<?x?x32xf32>
    }
    %3 = helm.unit block[3] : tensor<?x?x32xf32> {
      %g = helm.constant dense<[1.000, 1.125, 1.250, 1.375, 1.500, 1.625, 1.750, 1.875, 2.000, 2.125, 2.250, 2.375, 2.500, 2.625, 2.750, 2.875, 3.000, 3.125, 3.250, 3.375, 3.500, 3.625, 3.750, 3.875, 4.000, 4.125, 4.250, 4.375, 4.500, 4.625, 4.750, 4.875]> : tensor<32xf32>
      %n = helm.rms_norm %2, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
      %w = helm.weight @w3 : tensor<32x32xf32>
      %o = helm.linear %n, %w {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %r = helm.add %2, %o : tensor<?x?x32xf32>
      helm.yield %r : tensor<?x?x32xf32>
    }
    %4 = helm.unit head[4] : tensor<?x?x32xf32> {
      %t = helm.weight @embed : tensor<32x32xf32>
      %l = helm.lm_head %3, %t {tied = true, transpose_weight = true} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      helm.yield %l : tensor<?x?x32xf32>
    }
    return %4 : tensor<?x?x32xf32>
  }
}
