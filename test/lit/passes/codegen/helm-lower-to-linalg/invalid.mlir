// RUN: helm-opt %s --split-input-file --helm-lower-to-linalg --verify-diagnostics

// expected-error @+1 {{no stage functions to lower; run helm-stage-split first}}
module {
  func.func @main() {
    return
  }
}

// -----

module {
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x16xf32> attributes {helm.stage = "cpu"} {
    %x = helm.constant dense<1.0> : tensor<1x1x16xf32>
    %c = tensor.cast %x : tensor<1x1x16xf32> to tensor<?x?x16xf32>
    // expected-error @+1 {{attention has no helm.kv_layer (run helm-stage-split first)}}
    %a = helm.attention %c, %c, %c {head_dim = 8 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    %r = tensor.cast %a : tensor<?x?x16xf32> to tensor<?x1x16xf32>
    return %r : tensor<?x1x16xf32>
  }
}

// -----

module {
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x16xf32> attributes {helm.stage = "cpu"} {
    %x = helm.constant dense<1.0> : tensor<1x1x16xf32>
    %c = tensor.cast %x : tensor<1x1x16xf32> to tensor<?x?x16xf32>
    // expected-error @+1 {{rope: theta unknown (the model was imported without weight data)}}
    %r = helm.rope %c positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %o = tensor.cast %r : tensor<?x?x16xf32> to tensor<?x1x16xf32>
    return %o : tensor<?x1x16xf32>
  }
}

// -----

// A unit function must say which argument is its first KV layer: its attention's layer is an
// offset from it (without it the layer would silently be the offset alone).
module {
  func.func private @helm_cpu_stage_unit0(%ctx: !llvm.ptr, %pos: tensor<?x?xi64>, %layer: i64, %x: tensor<?x?x16xf32>) -> tensor<?x?x16xf32> attributes {helm.unit_function} {
    // expected-error @+1 {{attention in a unit function without a helm.kv_layer_base argument}}
    %a = helm.attention %x, %x, %x {head_dim = 8 : i64, helm.kv_layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.35 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    return %a : tensor<?x?x16xf32>
  }
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x16xf32> attributes {helm.stage = "cpu"} {
    %x = helm.constant dense<1.0> : tensor<1x1x16xf32>
    %c = tensor.cast %x : tensor<1x1x16xf32> to tensor<?x?x16xf32>
    %l = arith.constant 0 : i64
    %a = call @helm_cpu_stage_unit0(%ctx, %pos, %l, %c) : (!llvm.ptr, tensor<?x?xi64>, i64, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    %r = tensor.cast %a : tensor<?x?x16xf32> to tensor<?x1x16xf32>
    return %r : tensor<?x1x16xf32>
  }
}
