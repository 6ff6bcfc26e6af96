// RUN: helm-opt %s --helm-lower-to-linalg --cse | FileCheck %s

// Gemma's elementwise ops on the CPU (f16 activations): the embedding scale is one multiply in f32
// (sqrt(640) = 25.2982216); geglu is 0.5 g (1 + tanh(0.7978845608 g (1 + 0.044715 g^2))) times up,
// with the activation rounded to f16 before the product (as swiglu's); the soft cap multiplies by
// 1 / cap (cap 30: 0.0333333351 in f32), takes tanh and multiplies by cap.
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK: linalg.generic
// CHECK: arith.constant 25.2982216 : f32
// CHECK-NEXT: arith.mulf
// CHECK: linalg.generic
// CHECK: arith.constant 4.471500e-02 : f32
// CHECK: arith.constant 0.797884583 : f32
// CHECK: math.tanh
// CHECK: arith.constant 5.000000e-01 : f32
// CHECK: %[[ROUNDED:.*]] = arith.truncf %{{.*}} : f32 to f16
// CHECK-NEXT: %[[WIDE:.*]] = arith.extf %[[ROUNDED]] : f16 to f32
// CHECK-NEXT: arith.mulf %[[WIDE]]
// CHECK: linalg.generic
// CHECK: arith.constant 0.0333333351 : f32
// CHECK: arith.constant 3.000000e+01 : f32
// CHECK: math.tanh
// CHECK: call @helm_k_linear
module {
  helm.weight_decl @embed : tensor<32x16xf16> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf16> attributes {helm.stage = "cpu"} {
    %t = helm.weight @embed : tensor<32x16xf16>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf16>) -> tensor<?x?x16xf16>
    %s = helm.scale %h {factor = 25.298221588134766 : f64} : tensor<?x?x16xf16>
    %a = helm.geglu %s, %h : tensor<?x?x16xf16>
    %c = helm.softcap %a {cap = 30.0 : f64} : tensor<?x?x16xf16>
    %c0 = arith.constant 0 : index
    %bsz = tensor.dim %c, %c0 : tensor<?x?x16xf16>
    %last = tensor.extract_slice %c[0, 0, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf16> to tensor<?x1x16xf16>
    %logits = helm.lm_head %last, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf16>, tensor<32x16xf16>) -> tensor<?x1x32xf16>
    return %logits : tensor<?x1x32xf16>
  }
}
