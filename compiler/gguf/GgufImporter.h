//===- GgufImporter.h - a GGUF model straight into the raised helm dialect ---------===//
//
// llama.cpp's converter has already done what the ONNX raising passes recover from a graph: a GGUF
// file names its architecture, configuration and every tensor's role. The importer builds the
// block-level ops (embed, rms_norm, linear, rope, attention, swiglu, add, lm_head) from the
// metadata, declares each tensor where it lies in the mapped file (quantized tensors `prepacked` in
// their ggml blocks, never requantized), and carries the tokenizer the metadata describes.
// Architectures, types and keys: docs/gguf.md.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_GGUF_GGUFIMPORTER_H
#define HELM_COMPILER_GGUF_GGUFIMPORTER_H

#include "compiler/WeightSource.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>

#include <string>

namespace helm {

/// What a GGUF import yields besides the module: the tokenizer its metadata describes.
struct GgufImport {
  ImportedModel model;
  /// The tokenizer as Hugging Face tokenizer.json text (empty when the file has none), and why it
  /// could not be built when the file has one HELM cannot express (empty otherwise).
  std::string tokenizerJson, tokenizerError;
  /// `tokenizer.chat_template`, if any, and the end-of-sequence ids the metadata names
  /// (`eos_token_id`, `eot_token_id`, `eom_token_id`).
  std::string chatTemplate;
  std::vector<int32_t> eosIds;
};

/// Imports the GGUF file at `path` (mapped; only its header and tables are read). The module's
/// `@main(input_ids, position_ids) -> logits` holds the raised ops, not yet grouped into units
/// (formUnits does that). `maxContext` is the longest sequence the package will accept: Phi-3's
/// LongRoPE files carry two frequency tables and, as llama.cpp, the import takes the long one when
/// it exceeds the context the model was trained for. Errors are one line naming the file and the
/// key, tensor or type.
llvm::Expected<GgufImport> importGgufFile(mlir::MLIRContext &ctx, const std::string &path, int64_t maxContext);

/// The same on bytes in memory (the fuzz target); `name` stands for the path in errors.
llvm::Expected<GgufImport> importGgufBuffer(mlir::MLIRContext &ctx, std::unique_ptr<llvm::MemoryBuffer> buffer,
                                            llvm::StringRef name, int64_t maxContext);

/// Whether the file at `path` starts with GGUF's magic (false when it cannot be read).
bool isGgufFile(const std::string &path);

} // namespace helm

#endif
