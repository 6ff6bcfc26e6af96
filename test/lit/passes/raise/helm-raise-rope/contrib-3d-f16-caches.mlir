// RUN: helm-opt %s --helm-raise-rope | FileCheck %s

// com.microsoft RotaryEmbedding as ONNX Runtime GenAI's fp16 models write it: a 3-D [batch, seq,
// heads x head_dim] input without num_heads (the op then rotates whole heads of twice the cache's
// width: 8 here, so 32 / 8 = 4 heads), and float16 cos/sin caches (theta 10000, 4 frequencies,
// rounded to float16: the frequencies recovered from them are 3e-4 off, inv_freq[0] included).
// CHECK-LABEL: func.func @genai_fp16_rotary
// CHECK: helm.rope %arg0 positions %arg1 {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.000000e+04 : f64}
func.func @genai_fp16_rotary(%x: tensor<?x?x32xf16>, %pos: tensor<?x?xi64>) -> tensor<?x?x32xf16> {
  %cos = helm.constant dense<[[1.000000000e+00, 1.000000000e+00, 1.000000000e+00, 1.000000000e+00], [5.405273438e-01, 9.951171875e-01, 1.000000000e+00, 1.000000000e+00], [-4.162597656e-01, 9.799804688e-01, 1.000000000e+00, 1.000000000e+00]]> : tensor<3x4xf16>
  %sin = helm.constant dense<[[0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00], [8.413085938e-01, 9.985351562e-02, 1.000213623e-02, 1.000404358e-03], [9.091796875e-01, 1.986083984e-01, 2.000427246e-02, 2.000808716e-03]]> : tensor<3x4xf16>
  %r = helm.onnx "RotaryEmbedding"(%x, %pos, %cos, %sin) {attrs = {interleaved = 0 : i64, num_heads = 0 : i64, rotary_embedding_dim = 0 : i64}, domain = "com.microsoft", node = "q_rotary"}
      : (tensor<?x?x32xf16>, tensor<?x?xi64>, tensor<3x4xf16>, tensor<3x4xf16>) -> tensor<?x?x32xf16>
  return %r : tensor<?x?x32xf16>
}
