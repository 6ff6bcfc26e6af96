// RUN: helm-opt %s | helm-opt | FileCheck %s
// Round trip of every block-level op through the custom assembly.

helm.weight_decl @table : tensor<256x64xf32> {onnx_name = "embed", location = "", offset = -1, length = 65536}
helm.weight_decl @wq : tensor<64x64xf32> {onnx_name = "q", location = "model.onnx.data", offset = 0, length = 16384}
helm.weight_decl @wk : tensor<32x64xf32> {onnx_name = "k", location = "model.onnx.data", offset = 16384, length = 8192}
helm.weight_decl @gamma : tensor<64xf32> {onnx_name = "g", location = "", offset = -1, length = 256}

// CHECK-LABEL: func.func @block
func.func @block(%ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>, %pk: tensor<?x2x?x16xf32>, %pv: tensor<?x2x?x16xf32>)
    -> (tensor<?x?x256xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) {
  %h:1 = helm.unit embedding [0] : tensor<?x?x64xf32> {
    // CHECK: helm.weight @table : tensor<256x64xf32>
    %t = helm.weight @table : tensor<256x64xf32>
    // CHECK: helm.embed %{{.*}}, %{{.*}} : (tensor<?x?xi64>, tensor<256x64xf32>) -> tensor<?x?x64xf32>
    %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<256x64xf32>) -> tensor<?x?x64xf32>
    helm.yield %e : tensor<?x?x64xf32>
  }
  // CHECK: helm.unit block[1]
  %r:3 = helm.unit block [1] : tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32> {
    %g = helm.weight @gamma : tensor<64xf32>
    %wq = helm.weight @wq : tensor<64x64xf32>
    %wk = helm.weight @wk : tensor<32x64xf32>
    // CHECK: helm.rms_norm {{.*}} {epsilon = 9.9999999999999995E-7 : f64}
    %n = helm.rms_norm %h#0, %g {epsilon = 1.0e-6 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    // CHECK: helm.linear {{.*}} {transpose_weight = false}
    %q = helm.linear %n, %wq {transpose_weight = false} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    // CHECK: helm.linear {{.*}} {transpose_weight = true}
    %k = helm.linear %n, %wk {transpose_weight = true} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    // CHECK: helm.rope %{{.*}} positions %{{.*}} {head_dim = 16 : i64, rotary_dim = 16 : i64, style = #helm.rope_style<interleaved>, theta = 1.000000e+06 : f64}
    %qr = helm.rope %q positions %pos {head_dim = 16 : i64, rotary_dim = 16 : i64, style = #helm.rope_style<interleaved>, theta = 1.0e6 : f64} : (tensor<?x?x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
    %kr = helm.rope %k {head_dim = 16 : i64, rotary_dim = 16 : i64, style = #helm.rope_style<half>, theta = 1.0e4 : f64} : (tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
    // CHECK: helm.attention %{{.*}}, %{{.*}}, %{{.*}} cache(%{{.*}}, %{{.*}}) {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64}
    %a, %nk, %nv = helm.attention %qr, %kr, %kr cache(%pk, %pv) {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64}
        : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
        -> (tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
    // CHECK: helm.split %{{.*}} {sizes = array<i64: 32, 32>}
    %s:2 = helm.split %a {sizes = array<i64: 32, 32>} : tensor<?x?x64xf32> -> tensor<?x?x32xf32>, tensor<?x?x32xf32>
    // CHECK: helm.swiglu
    %m = helm.swiglu %s#0, %s#1 : tensor<?x?x32xf32>
    // CHECK: helm.geglu
    %gm = helm.geglu %s#0, %s#1 : tensor<?x?x32xf32>
    // CHECK: helm.scale %{{.*}} {factor = 2.500000e+01 : f64}
    %sm = helm.scale %gm {factor = 25.0 : f64} : tensor<?x?x32xf32>
    // CHECK: helm.softcap %{{.*}} {cap = 3.000000e+01 : f64}
    %cm = helm.softcap %sm {cap = 30.0 : f64} : tensor<?x?x32xf32>
    %mm = helm.linear %m, %wk {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
    // CHECK: helm.add
    %o = helm.add %h#0, %mm : tensor<?x?x64xf32>
    helm.yield %o, %nk, %nv : tensor<?x?x64xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>
  }
  // CHECK: helm.unit head[2]
  %l:1 = helm.unit head [2] : tensor<?x?x256xf32> {
    %t = helm.weight @table : tensor<256x64xf32>
    // CHECK: helm.lm_head {{.*}} {tied = true, transpose_weight = true}
    %x = helm.lm_head %r#0, %t {transpose_weight = true, tied = true} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
    // CHECK: helm.transfer %{{.*}} cpu -> gpu
    %y = helm.transfer %x cpu -> gpu : tensor<?x?x256xf32>
    helm.yield %y : tensor<?x?x256xf32>
  }
  return %l#0, %r#1, %r#2 : tensor<?x?x256xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>
}
