// RUN: helm-opt %s --split-input-file --verify-diagnostics

func.func @heads(%q: tensor<?x?x96xf32>, %k: tensor<?x?x64xf32>) {
  // expected-error @+1 {{num_heads 6 is not a multiple of num_kv_heads 4}}
  %a = helm.attention %q, %k, %k {num_heads = 6 : i64, num_kv_heads = 4 : i64, head_dim = 16 : i64, scale = 0.25 : f64}
      : (tensor<?x?x96xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x96xf32>
  return
}

// -----

func.func @kv_width(%q: tensor<?x?x64xf32>, %k: tensor<?x?x48xf32>) {
  // expected-error @+1 {{k/v last dimension 48 != num_kv_heads * head_dim = 32}}
  %a = helm.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64}
      : (tensor<?x?x64xf32>, tensor<?x?x48xf32>, tensor<?x?x48xf32>) -> tensor<?x?x64xf32>
  return
}

// -----

func.func @cache_shape(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %p: tensor<?x4x?x16xf32>) {
  // expected-error @+1 {{cache tensors must be [batch, 2, seq, 16]}}
  %a, %pk, %pv = helm.attention %q, %k, %k cache(%p, %p) {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>)
      -> (tensor<?x?x64xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>)
  return
}

// -----

func.func @window(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>) {
  // expected-error @+1 {{sliding_window must be positive, got 0}}
  %a = helm.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64, sliding_window = 0 : i64}
      : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  return
}

// -----

func.func @linear(%x: tensor<?x?x64xf32>, %w: tensor<32x48xf32>) {
  // expected-error @+1 {{input features 64 differ from the weight's 32}}
  %y = helm.linear %x, %w {transpose_weight = false} : (tensor<?x?x64xf32>, tensor<32x48xf32>) -> tensor<?x?x48xf32>
  return
}

// -----

func.func @bias(%x: tensor<?x?x32xf32>, %w: tensor<32x48xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{bias must be [48], got 'tensor<32xf32>'}}
  %y = helm.linear %x, %w bias %b {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x48xf32>, tensor<32xf32>) -> tensor<?x?x48xf32>
  return
}

// -----

func.func @norm(%x: tensor<?x?x64xf32>, %g: tensor<48xf32>) {
  // expected-error @+1 {{last dimension 64 is not a multiple of gamma size 48}}
  %y = helm.rms_norm %x, %g {epsilon = 1.0e-6 : f64} : (tensor<?x?x64xf32>, tensor<48xf32>) -> tensor<?x?x64xf32>
  return
}

// -----

func.func @rope(%x: tensor<?x?x64xf32>) {
  // expected-error @+1 {{rotary_dim 32 must be even and in (0, 16]}}
  %y = helm.rope %x {head_dim = 16 : i64, rotary_dim = 32 : i64, style = #helm.rope_style<half>, theta = 1.0e4 : f64} : (tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return
}

// -----

func.func @rope_factors(%x: tensor<?x?x64xf32>) {
  // expected-error @+1 {{freq_factors has 3 values, rotary_dim / 2 is 8}}
  %y = helm.rope %x {freq_factors = array<f32: 1.0, 2.0, 4.0>, head_dim = 16 : i64, rotary_dim = 16 : i64, style = #helm.rope_style<half>, theta = 1.0e4 : f64} : (tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return
}

// -----

func.func @rope_factor_zero(%x: tensor<?x?x64xf32>) {
  // expected-error @+1 {{freq_factors must be positive and finite, got 0}}
  %y = helm.rope %x {freq_factors = array<f32: 1.0, 0.0>, head_dim = 16 : i64, rotary_dim = 4 : i64, style = #helm.rope_style<half>, theta = 1.0e4 : f64} : (tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return
}

// -----

func.func @embed(%ids: tensor<?x?xi64>, %t: tensor<256x64xf32>) {
  // expected-error @+1 {{result hidden size 32 differs from the table's 64}}
  %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<256x64xf32>) -> tensor<?x?x32xf32>
  return
}

// -----

func.func @split(%x: tensor<?x?x64xf32>) {
  // expected-error @+1 {{sizes add up to 48, input last dimension is 64}}
  %a:2 = helm.split %x {sizes = array<i64: 32, 16>} : tensor<?x?x64xf32> -> tensor<?x?x32xf32>, tensor<?x?x16xf32>
  return
}

// -----

func.func @head(%x: tensor<?x?x64xf32>, %w: tensor<256x64xf32>) {
  // expected-error @+1 {{result must end in the vocabulary size 256}}
  %l = helm.lm_head %x, %w {transpose_weight = true, tied = false} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x128xf32>
  return
}

// -----

func.func @transfer(%x: tensor<?x?x64xf32>) {
  // expected-error @+1 {{transfer from a device to itself}}
  %y = helm.transfer %x cpu -> cpu : tensor<?x?x64xf32>
  return
}

// -----

// expected-error @+1 {{length 100 does not match 'tensor<4x4xf32>' (64 bytes)}}
helm.weight_decl @w : tensor<4x4xf32> {onnx_name = "w", location = "", offset = -1, length = 100}

// -----

helm.weight_decl @w : tensor<4x4xf32> {onnx_name = "w", location = "", offset = -1, length = 64}
func.func @weight_type() {
  // expected-error @+1 {{type 'tensor<4x8xf32>' differs from the declaration's 'tensor<4x4xf32>'}}
  %w = helm.weight @w : tensor<4x8xf32>
  return
}

// -----

func.func @unknown_weight() {
  // expected-error @+1 {{refers to unknown weight @nope}}
  %w = helm.weight @nope : tensor<4x4xf32>
  return
}

// -----

func.func @unit() {
  // expected-error @+1 {{yielded types differ from the unit's result types}}
  %u = helm.unit block[1] : tensor<4xf32> {
    helm.yield
  }
  return
}

// -----

// A weight in blocks is 2-D float and its rows hold whole blocks.
// expected-error @+1 {{'helm.weight_decl' op blocks of 32 (q8_0) do not divide the 48 columns of 'tensor<16x48xf32>'}}
helm.weight_decl @w : tensor<16x48xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 0>, length = 3072 : i64, location = "", offset = -1 : i64, onnx_name = "w"}

// -----

// expected-error @+1 {{only a 2-D float weight can be stored in blocks}}
helm.weight_decl @g : tensor<64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "g"}

// -----

// expected-error @+1 {{blocks row_dim must be 0 or 1, got 2}}
helm.weight_decl @w2 : tensor<32x32xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 2>, length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "w2"}

// -----

// A weight from ONNX blocks (MatMulNBits): the attribute's own rules.
// expected-error @+1 {{onnx_blocks bits must be 4 or 8, got 3}}
helm.weight_decl @n1 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 3, block_size = 32, codes = "B", code_type = ui8, scales = "S", scale_type = f32>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// expected-error @+1 {{onnx_blocks block_size must be a power of 2 or a multiple of 32, from 16 to 2^30, got 48}}
helm.weight_decl @n2 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 48, codes = "B", code_type = ui8, scales = "S", scale_type = f32>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// expected-error @+1 {{onnx_blocks scale_type must be f32 or f16, got 'bf16'}}
helm.weight_decl @n3 : tensor<8x64xbf16> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 32, codes = "B", code_type = ui8, scales = "S", scale_type = bf16>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// The declaration's format must be the one that holds the same codes, and its length the codes'.
// expected-error @+1 {{'helm.weight_decl' op ONNX blocks of 4-bit 'ui8' codes with zero points are stored as q4_1, not q4_0}}
helm.weight_decl @n4 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 32, codes = "B", code_type = ui8, scales = "S", scale_type = f32, zero_points = "Z", zero_point_type = ui8>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// expected-error @+1 {{'helm.weight_decl' op length 300 is not the 256 bytes of the codes of 'tensor<8x64xf32>' in 4-bit blocks of 32}}
helm.weight_decl @n5 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 32, codes = "B", code_type = ui8, scales = "S", scale_type = f32>, length = 300 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// expected-error @+1 {{onnx_blocks i8 codes are 8-bit, got bits = 4}}
helm.weight_decl @n8 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 32, codes = "B", code_type = i8, scales = "S", scale_type = f32>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// A DequantizeLinear's K-major codes are element-typed, never MatMulNBits' bytes.
// expected-error @+1 {{onnx_blocks K-major codes are element-typed (i4, ui4 or i8), got ui8}}
helm.weight_decl @n9 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 32, codes = "B", code_type = ui8, scales = "S", scale_type = f32, k_major = true>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// Element-typed codes along rows are N x K values, so the rows must be whole blocks (K-major ones
// may end in a partial block: 8 x 96 int4 in blocks of 64 is 384 bytes).
// expected-error @+1 {{'helm.weight_decl' op element-typed ONNX blocks along rows need whole blocks: K 96 is not a multiple of block_size 64}}
helm.weight_decl @n10 : tensor<8x96xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 64, codes = "B", code_type = i4, scales = "S", scale_type = f32>, length = 384 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// expected-error @+1 {{'helm.weight_decl' op length 400 is not the 384 bytes of the codes of 'tensor<8x96xf32>' in 4-bit blocks of 64}}
helm.weight_decl @n11 : tensor<8x96xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 64, codes = "B", code_type = i4, scales = "S", scale_type = f32, k_major = true>, length = 400 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// expected-error @+1 {{'helm.weight_decl' op 8-bit ONNX blocks with zero points have no block format}}
helm.weight_decl @n6 : tensor<8x64xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 8, block_size = 32, codes = "B", code_type = ui8, scales = "S", scale_type = f32, zero_points = "Z", zero_point_type = ui8>, length = 512 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// expected-error @+1 {{'helm.weight_decl' op a weight from ONNX blocks has its scales' element type 'f16', got 'tensor<8x64xf32>'}}
helm.weight_decl @n7 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 32, codes = "B", code_type = ui8, scales = "S", scale_type = f16>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// expected-error @+1 {{onnx_blocks 8-bit codes must be ui8 or i8, got 'i4'}}
helm.weight_decl @n8 : tensor<8x64xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 8, block_size = 32, codes = "B", code_type = i4, scales = "S", scale_type = f32>, length = 512 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// A uint4 code's default zero point is 0, which only q4_1 (a minimum per block) holds.
// expected-error @+1 {{'helm.weight_decl' op ONNX blocks of 4-bit 'ui4' codes without zero points are stored as q4_1, not q4_0}}
helm.weight_decl @n9 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 32, codes = "B", code_type = ui4, scales = "S", scale_type = f32>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// N x K beyond 2^30: sizes computed from them could overflow int64.
// expected-error @+1 {{'helm.weight_decl' op a weight from ONNX blocks is at most 2^30 x 2^30, got 'tensor<2147483648x64xf32>'}}
helm.weight_decl @n10 : tensor<2147483648x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 32, codes = "B", code_type = ui8, scales = "S", scale_type = f32>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B"}

// -----

// A prepacked weight (a GGUF tensor): its bytes are already the blocks, [N, K] along rows.
// expected-error @+1 {{'helm.weight_decl' op a prepacked weight must be [N, K] with blocks along its rows (row_dim 0)}}
helm.weight_decl @p1 : tensor<8x64xf32> {length = 2048 : i64, location = "m.gguf", offset = 64 : i64, onnx_name = "blk.0.attn_q.weight", prepacked}

// -----

// expected-error @+1 {{'helm.weight_decl' op a prepacked weight must be [N, K] with blocks along its rows (row_dim 0)}}
helm.weight_decl @p2 : tensor<64x8xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 1>, length = 288 : i64, location = "m.gguf", offset = 64 : i64, onnx_name = "w", prepacked}

// -----

// 8 rows of two q4_0 blocks (18 bytes each) are 288 bytes.
// expected-error @+1 {{'helm.weight_decl' op length 256 is not the 288 bytes of 'tensor<8x64xf32>' in q4_0 blocks}}
helm.weight_decl @p3 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, length = 256 : i64, location = "m.gguf", offset = 64 : i64, onnx_name = "w", prepacked}

// -----

// expected-error @+1 {{'helm.weight_decl' op blocks of 256 (q4_k) do not divide the 64 columns of 'tensor<8x64xf32>'}}
helm.weight_decl @p4 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_k, row_dim = 0>, length = 288 : i64, location = "m.gguf", offset = 64 : i64, onnx_name = "w", prepacked}

// -----

// expected-error @+1 {{'helm.weight_decl' op a weight is either prepacked blocks or ONNX blocks, not both}}
helm.weight_decl @p5 : tensor<8x64xf32> {blocks = #helm.blocks<format = q4_0, row_dim = 0>, onnx_blocks = #helm.onnx_blocks<bits = 4, block_size = 32, codes = "B", code_type = ui8, scales = "S", scale_type = f32>, length = 256 : i64, location = "", offset = -1 : i64, onnx_name = "B", prepacked}

// -----

// An embedding widens a 16-bit table to f32 activations, never narrows.
func.func @embed_narrowing(%ids: tensor<2x3xi64>, %t: tensor<8x4xf32>) -> tensor<2x3x4xf16> {
  // expected-error @+1 {{result element type must match the table's, or be f32 from an f16 or bf16 table}}
  %0 = helm.embed %ids, %t : (tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<2x3x4xf16>
  return %0 : tensor<2x3x4xf16>
}

// -----

// The argument attributes of a unit function (helm-stage-split) say what each argument is.
// expected-error @+1 {{'helm.kv_layer_base' must be a unit attribute on an i64 argument}}
func.func private @unit_base(%layer: i32 {helm.kv_layer_base}) attributes {helm.unit_function}

// -----

// expected-error @+1 {{'helm.weight_blocks' must be a #helm.blocks on a static rank-2 tensor argument}}
func.func private @unit_blocks(%w: tensor<?x64xf32> {helm.weight_blocks = #helm.blocks<format = q4_0, row_dim = 0>})

// -----

// expected-error @+1 {{unknown HELM argument attribute 'helm.kv_layer'}}
func.func private @unit_unknown(%layer: i64 {helm.kv_layer = 0 : i64})

// -----

// expected-error @+1 {{'helm.unit_function' must be a unit attribute on a function}}
helm.weight_decl @u : tensor<8xf32> {helm.unit_function, length = 32 : i64, location = "", offset = -1 : i64, onnx_name = "u"}

// -----

// expected-error @+1 {{'helm.kv_layer_base' belongs on a function argument}}
func.func private @unit_misplaced() attributes {helm.kv_layer_base}

// -----

func.func @scale(%x: tensor<?x?x64xf32>) {
  // expected-error @+1 {{factor must be a finite f32 value, got 1.000000e+40}}
  %y = helm.scale %x {factor = 1.0e40 : f64} : tensor<?x?x64xf32>
  return
}

// -----

func.func @softcap(%x: tensor<?x?x64xf32>) {
  // expected-error @+1 {{cap must be a positive finite f32 value, got 0.000000e+00}}
  %y = helm.softcap %x {cap = 0.0 : f64} : tensor<?x?x64xf32>
  return
}

// -----

func.func @geglu(%g: tensor<?x?x64xf32>, %u: tensor<?x?x32xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "helm.geglu"(%g, %u) : (tensor<?x?x64xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  return
}
