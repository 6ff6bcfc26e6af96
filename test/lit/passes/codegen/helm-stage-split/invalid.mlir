// RUN: helm-opt %s --split-input-file --helm-stage-split --verify-diagnostics

// A plan is a CPU prefix and a GPU suffix; a CPU unit after a GPU unit has no single boundary.
module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @main(%ids: tensor<?x?xi64> {helm.name = "input_ids"}) -> tensor<?x?x32xf32> {
    %0 = helm.unit embedding[0] : tensor<?x?x16xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
      helm.yield %e : tensor<?x?x16xf32>
    } {helm.device = 1 : i32}
    // expected-error @+1 {{unit head is placed on the CPU after unit embedding on the GPU; a plan is one CPU prefix and one GPU suffix}}
    %1 = helm.unit head[1] : tensor<?x?x32xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %l = helm.lm_head %0, %t {tied = true, transpose_weight = true} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x32xf32>
      helm.yield %l : tensor<?x?x32xf32>
    } {helm.device = 0 : i32}
    return %1 : tensor<?x?x32xf32>
  }
}

// -----

// Two activations would cross the boundary (the CPU unit hands the head two tensors).
module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @main(%ids: tensor<?x?xi64> {helm.name = "input_ids"}) -> tensor<?x?x32xf32> {
    %0:2 = helm.unit embedding[0] : tensor<?x?x16xf32>, tensor<?x?x16xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
      %f = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
      helm.yield %e, %f : tensor<?x?x16xf32>, tensor<?x?x16xf32>
    } {helm.device = 0 : i32}
    // expected-error @+1 {{the boundary before unit head carries 2 activations; a split point must carry exactly one}}
    %1 = helm.unit head[1] : tensor<?x?x32xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %s = helm.add %0#0, %0#1 : tensor<?x?x16xf32>
      %l = helm.lm_head %s, %t {tied = true, transpose_weight = true} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x32xf32>
      helm.yield %l : tensor<?x?x32xf32>
    } {helm.device = 1 : i32}
    return %1 : tensor<?x?x32xf32>
  }
}

// -----

module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  // expected-error @+1 {{@main has no 'input_ids' argument}}
  func.func @main(%ids: tensor<?x?xi64> {helm.name = "tokens"}) -> tensor<?x?x32xf32> {
    %0 = helm.unit embedding[0] : tensor<?x?x16xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
      helm.yield %e : tensor<?x?x16xf32>
    }
    %1 = helm.unit head[1] : tensor<?x?x32xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %l = helm.lm_head %0, %t {tied = true, transpose_weight = true} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x32xf32>
      helm.yield %l : tensor<?x?x32xf32>
    }
    return %1 : tensor<?x?x32xf32>
  }
}
