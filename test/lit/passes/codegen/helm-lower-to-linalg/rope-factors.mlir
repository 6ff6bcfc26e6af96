// RUN: helm-opt %s --helm-lower-to-linalg --cse | FileCheck %s

// A rope's frequency divisors (Llama 3's rope_freqs): inv_freq[j] = 1 / (theta^(2j/rotary) * f_j).
// theta 1e4 and rotary 4: theta^(2/4) = 100, so with divisors [1, 4] the table is [1, 1/400]. The
// rope without divisors has its own tables ([1, 1/100]): two pairs of cos and sin.
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK: arith.constant dense<[1.000000e+00, 2.500000e-03]> : tensor<2xf32>
// CHECK: math.cos
// CHECK: arith.constant dense<[1.000000e+00, 0.00999999977]> : tensor<2xf32>
// CHECK: math.cos
// CHECK-NOT: math.cos
// CHECK: call @helm_rt_attention
module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf32> attributes {helm.stage = "cpu"} {
    %t = helm.weight @embed : tensor<32x16xf32>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
    %qr = helm.rope %h positions %pos {freq_factors = array<f32: 1.0, 4.0>, head_dim = 8 : i64, rotary_dim = 4 : i64, style = #helm.rope_style<interleaved>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %kr = helm.rope %h positions %pos {head_dim = 8 : i64, rotary_dim = 4 : i64, style = #helm.rope_style<interleaved>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %a = helm.attention %qr, %kr, %h {head_dim = 8 : i64, helm.kv_layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    %c0 = arith.constant 0 : index
    %bsz = tensor.dim %a, %c0 : tensor<?x?x16xf32>
    %last = tensor.extract_slice %a[0, 0, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf32> to tensor<?x1x16xf32>
    %logits = helm.lm_head %last, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf32>, tensor<32x16xf32>) -> tensor<?x1x32xf32>
    return %logits : tensor<?x1x32xf32>
  }
}
