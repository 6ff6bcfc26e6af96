// The block terms against LIA's Table 1 (seed 003, decode rows, for OPT's decoder layer in bf16:
// d_m = 64 here, 4 heads of 16, MHA, FC1 d_m -> 4 d_m, FC2 back; no norms so the bytes are the
// GEMMs' alone). Per decode step at batch B:
//   QKV 6 d_m^2 B of weights and 6 B d_m^2 FLOP, out-projection 2 d_m^2 / 2 B d_m^2, FC1 and FC2
//   8 d_m^2 / 8 B d_m^2 each: 24 d_m^2 = 98304 bytes and 24 B d_m^2 = 98304 B FLOP;
//   Q.K^T and S.V 2 B L d_m FLOP each at L cached tokens: 4 B d_m = 256 B FLOP per token;
//   K and V 2 B L d_m bytes each: 4 d_m = 256 bytes per token and sequence;
//   with the attention on the other device, the q down and the output up (2 B d_m each, Table 1's
//   D_X of Q.K^T and of the out-projection) and the new K and V (4 B d_m): 8 B d_m = 512 B bytes.
// RUN: helm-opt %s --helm-annotate-costs="batch=1 context=100 prompt-len=1" | FileCheck %s --check-prefix=B1
// RUN: helm-opt %s --helm-annotate-costs="batch=2 context=100 prompt-len=1" | FileCheck %s --check-prefix=B2
// B1: helm.cost = #helm.unit_cost<param_bytes = 98304, resident_bytes = 98304, act_bytes = 128, kv_bytes_per_token = 256,
// B1-SAME: proj_flops_decode = 98304.0, attn_flops_per_token = 256.0,
// B1-SAME: attn_io_bytes = 512, kv_elems_per_token = 128>
// B2: helm.cost = #helm.unit_cost<param_bytes = 98304, resident_bytes = 98304, act_bytes = 256, kv_bytes_per_token = 256,
// B2-SAME: proj_flops_decode = 196608.0, attn_flops_per_token = 512.0,
// B2-SAME: attn_io_bytes = 1024, kv_elems_per_token = 128>
module {
  helm.weight_decl @wq : tensor<64x64xbf16> {length = 8192 : i64, location = "", offset = -1 : i64, onnx_name = "wq"}
  helm.weight_decl @wk : tensor<64x64xbf16> {length = 8192 : i64, location = "", offset = -1 : i64, onnx_name = "wk"}
  helm.weight_decl @wv : tensor<64x64xbf16> {length = 8192 : i64, location = "", offset = -1 : i64, onnx_name = "wv"}
  helm.weight_decl @wo : tensor<64x64xbf16> {length = 8192 : i64, location = "", offset = -1 : i64, onnx_name = "wo"}
  helm.weight_decl @fc1 : tensor<64x256xbf16> {length = 32768 : i64, location = "", offset = -1 : i64, onnx_name = "fc1"}
  helm.weight_decl @fc2 : tensor<256x64xbf16> {length = 32768 : i64, location = "", offset = -1 : i64, onnx_name = "fc2"}
  func.func @main(%x: tensor<?x?x64xbf16>) -> tensor<?x?x64xbf16> {
    %out = helm.unit block [1] : tensor<?x?x64xbf16> {
      %wq = helm.weight @wq : tensor<64x64xbf16>
      %wk = helm.weight @wk : tensor<64x64xbf16>
      %wv = helm.weight @wv : tensor<64x64xbf16>
      %wo = helm.weight @wo : tensor<64x64xbf16>
      %w1 = helm.weight @fc1 : tensor<64x256xbf16>
      %w2 = helm.weight @fc2 : tensor<256x64xbf16>
      %q = helm.linear %x, %wq {transpose_weight = false} : (tensor<?x?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x?x64xbf16>
      %k = helm.linear %x, %wk {transpose_weight = false} : (tensor<?x?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x?x64xbf16>
      %v = helm.linear %x, %wv {transpose_weight = false} : (tensor<?x?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x?x64xbf16>
      %a = helm.attention %q, %k, %v {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xbf16>, tensor<?x?x64xbf16>, tensor<?x?x64xbf16>) -> tensor<?x?x64xbf16>
      %o = helm.linear %a, %wo {transpose_weight = false} : (tensor<?x?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x?x64xbf16>
      %h = helm.add %x, %o : tensor<?x?x64xbf16>
      %f1 = helm.linear %h, %w1 {transpose_weight = false} : (tensor<?x?x64xbf16>, tensor<64x256xbf16>) -> tensor<?x?x256xbf16>
      %f2 = helm.linear %f1, %w2 {transpose_weight = false} : (tensor<?x?x256xbf16>, tensor<256x64xbf16>) -> tensor<?x?x64xbf16>
      %r = helm.add %h, %f2 : tensor<?x?x64xbf16>
      helm.yield %r : tensor<?x?x64xbf16>
    }
    return %out : tensor<?x?x64xbf16>
  }
}
