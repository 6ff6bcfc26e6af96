// RUN: helm-opt %s --helm-lower-to-device-calls --cse | FileCheck %s

// Gemma's elementwise ops in a kernel-form GPU stage (f16, dtype code 1): one device call each,
// the scale's factor and the soft cap's cap passed as f32 constants.
// CHECK-LABEL: func.func @helm_gpu_stage
// CHECK-NOT: linalg.
// CHECK: call @helm_dev_embed(
// CHECK: %[[FACTOR:.*]] = arith.constant 1.600000e+01 : f32
// CHECK: call @helm_dev_scale(%arg0, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %[[FACTOR]])
// CHECK: call @helm_dev_geglu(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}})
// CHECK: %[[CAP:.*]] = arith.constant 3.000000e+01 : f32
// CHECK: call @helm_dev_softcap(%arg0, %{{.*}}, %{{.*}}, %c1_i32, %{{.*}}, %[[CAP]])
// CHECK: call @helm_dev_linear(
module {
  helm.weight_decl @embed : tensor<32x16xf16> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @helm_gpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf16> attributes {helm.stage = "gpu"} {
    %t = helm.weight @embed : tensor<32x16xf16>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf16>) -> tensor<?x?x16xf16>
    %s = helm.scale %h {factor = 16.0 : f64} : tensor<?x?x16xf16>
    %a = helm.geglu %s, %h : tensor<?x?x16xf16>
    %c = helm.softcap %a {cap = 30.0 : f64} : tensor<?x?x16xf16>
    %c0 = arith.constant 0 : index
    %bsz = tensor.dim %c, %c0 : tensor<?x?x16xf16>
    %last = tensor.extract_slice %c[0, 0, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf16> to tensor<?x1x16xf16>
    %logits = helm.lm_head %last, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf16>, tensor<32x16xf16>) -> tensor<?x1x32xf16>
    return %logits : tensor<?x1x32xf16>
  }
}
