// RUN: helm-opt %s --helm-lower-to-device-calls --cse | FileCheck %s

// Weights in blocks on the device: a table in blocks is read through helm_dev_embed_blocks (the
// table's format code, q8_0 = 3, then the result's dtype, f16 = 1), a linear or head weight through
// helm_dev_linear with the format's code in place of an element dtype (q4_0 = 4, q8_0 = 3); the
// weight is N rows of K in blocks, and its address is all the call takes.
// CHECK-LABEL: func.func @helm_gpu_stage
// CHECK-NOT: linalg.
// CHECK: call @helm_rt_weight(%arg0, %c0_i64)
// CHECK: call @helm_dev_embed_blocks(%arg0, %{{.*}}, %{{.*}}, %c3_i32, %{{.*}}, %c1_i32, %{{.*}}, %c32_i64, %c64_i64)
// CHECK: call @helm_dev_linear(%arg0, %{{.*}}, %c1_i32, %{{.*}}, %c4_i32, %c1_i32, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %c64_i64, %c64_i64)
// CHECK: call @helm_dev_linear(%arg0, %{{.*}}, %c1_i32, %{{.*}}, %c3_i32, %c1_i32, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %c64_i64, %c32_i64)
module {
  helm.weight_decl @embed : tensor<32x64xf16> {blocks = #helm.blocks<format = q8_0, row_dim = 0>, length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  helm.weight_decl @w : tensor<64x64xf16> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, length = 8192 : i64, location = "", offset = -1 : i64, onnx_name = "w"}
  func.func @helm_gpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x?x32xf16> attributes {helm.stage = "gpu"} {
    %t = helm.weight @embed : tensor<32x64xf16>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x64xf16>) -> tensor<?x?x64xf16>
    %w = helm.weight @w : tensor<64x64xf16>
    %y = helm.linear %h, %w {transpose_weight = true} : (tensor<?x?x64xf16>, tensor<64x64xf16>) -> tensor<?x?x64xf16>
    %l = helm.lm_head %y, %t {tied = true, transpose_weight = true} : (tensor<?x?x64xf16>, tensor<32x64xf16>) -> tensor<?x?x32xf16>
    return %l : tensor<?x?x32xf16>
  }
}
